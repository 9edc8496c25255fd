"""Where text and files may be cut without changing any result.

The safe-cut rule (:mod:`~streambpe.cutting.rule`), special-token scanning
(:mod:`~streambpe.cutting.specials`), chunk planning over bytes
(:mod:`~streambpe.cutting.chunks`), byte ranges of files
(:mod:`~streambpe.cutting.byte_ranges`) and the stream splitter
(:mod:`~streambpe.cutting.splitter`). See ``docs/design.md``, "Safe cuts".
"""
