"""Where text and files may be cut without changing any result.

The safe-cut rule (:mod:`~streambpe.cutting.rule`), special-token scanning
(:mod:`~streambpe.cutting.specials`), chunk planning over bytes
(:mod:`~streambpe.cutting.chunks`), byte ranges of files
(:mod:`~streambpe.cutting.byte_ranges`) and the stream splitter
(:mod:`~streambpe.cutting.splitter`). See ``docs/design.md``, "Safe cuts".
"""

from __future__ import annotations

from streambpe.cutting.chunks import find_chunk_boundaries
from streambpe.cutting.rule import is_safe_cut, last_safe_cut, next_safe_cut
from streambpe.cutting.specials import SpecialTokenScanner, validate_special_tokens
from streambpe.cutting.splitter import StreamSplitter

__all__ = [
    "SpecialTokenScanner",
    "StreamSplitter",
    "find_chunk_boundaries",
    "is_safe_cut",
    "last_safe_cut",
    "next_safe_cut",
    "validate_special_tokens",
]
