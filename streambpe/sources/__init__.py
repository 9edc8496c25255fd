"""Where input bytes come from: local files, globs and fsspec URLs.

:mod:`~streambpe.sources.inputs` turns what a caller passes (a path, a list, a
glob, a URL) into an ordered list of :class:`~streambpe.sources.inputs.InputFile`;
:mod:`~streambpe.sources.reading` reads a byte range of one of them, locally or
with a ranged read. Remote locations go through fsspec, an optional extra
(``pip install 'streambpe[remote]'``), imported by :mod:`~streambpe.sources.remote`
only when a URL is seen.
"""

from __future__ import annotations

from streambpe.sources.inputs import InputFile, Inputs, resolve_inputs

__all__ = [
    "InputFile",
    "Inputs",
    "resolve_inputs",
]
