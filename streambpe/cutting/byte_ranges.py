"""Byte ranges of an input: plan them at safe cuts, read them, decode them.

Training and file encoding share this module. A :class:`ByteRange` is a plain,
picklable description of work (a location and two offsets), so any executor
can ship it to a worker, which then reads its own bytes: through a memory map
for a local file, with a ranged read for a URL (:mod:`streambpe.sources`).

Planning needs only sizes: a task may be given nominal offsets and find the
cuts near them itself (:func:`byte_ranges_between`); neighbouring tasks agree on
their shared cut because a cut depends only on the input's bytes.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "f.txt"
>>> _ = path.write_bytes(b"one two<|endoftext|>three four")
>>> ranges = plan_byte_ranges(path, chunk_size=5, special_tokens=["<|endoftext|>"], space_cuts=True)
>>> [read_text(r) for r in ranges]
['one two', '<|endoftext|>three', ' four']
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from streambpe._support.utf8 import DecodeErrors, decode_utf8
from streambpe.cutting.chunks import cut_at_or_after, find_chunk_boundaries
from streambpe.sources.inputs import InputFile
from streambpe.sources.reading import open_buffer, read_range


@dataclass(frozen=True)
class ByteRange:
    """``path[start:end]``: bytes that can be processed on their own.

    ``path`` is an absolute local path or a URL (see :mod:`streambpe.sources`).
    """

    path: str
    start: int
    end: int

    @property
    def size(self) -> int:
        """The number of bytes in the range."""
        return self.end - self.start


def _location(source: str | os.PathLike[str] | InputFile) -> str:
    return source.location if isinstance(source, InputFile) else os.fspath(source)


def plan_byte_ranges(
    source: str | os.PathLike[str] | InputFile,
    *,
    chunk_size: int,
    special_tokens: Sequence[str],
    space_cuts: bool,
) -> list[ByteRange]:
    """Cut the input at ``source`` into ranges of about ``chunk_size`` bytes, at safe cuts only.

    Processing the ranges one by one gives the same result as processing the
    whole input. Only the bytes around each cut are read.
    """
    location = _location(source)
    with open_buffer(source if isinstance(source, InputFile) else location) as data:
        boundaries = find_chunk_boundaries(data, chunk_size, special_tokens, space_cuts=space_cuts)
    return [ByteRange(location, start, end) for start, end in pairwise(boundaries)]


def byte_ranges_between(
    source: InputFile,
    start: int,
    end: int,
    *,
    chunk_size: int,
    special_tokens: Sequence[str],
    space_cuts: bool,
) -> list[ByteRange]:
    """The ranges covering ``[start, end)`` once both ends are moved to the next safe cut.

    ``start`` and ``end`` are nominal offsets (from sizes alone); each moves to
    the first safe cut at or after it, so the spans ``[0, a)``, ``[a, b)``, ...
    of one input yield ranges that tile it exactly, whoever computes each span.
    Inside, ranges of about ``chunk_size`` bytes follow, as in :func:`plan_byte_ranges`.

    >>> import pathlib, tempfile
    >>> from streambpe.sources.inputs import resolve_inputs
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "f.txt"
    >>> _ = path.write_bytes(b"one two three four")
    >>> [source] = resolve_inputs(path)
    >>> spans = [(0, 5), (5, 18)]
    >>> [[read_text(r) for r in byte_ranges_between(source, a, b, chunk_size=100,
    ...   special_tokens=[], space_cuts=True)] for a, b in spans]
    [['one two'], [' three four']]
    """
    specials = [token.encode("utf-8") for token in special_tokens]
    ranges: list[ByteRange] = []
    with open_buffer(source) as data:
        cut = cut_at_or_after(data, start, specials, space_cuts=space_cuts)
        stop = cut_at_or_after(data, end, specials, space_cuts=space_cuts)
        while cut < stop:
            following = min(
                stop, cut_at_or_after(data, cut + chunk_size, specials, space_cuts=space_cuts)
            )
            ranges.append(ByteRange(source.location, cut, following))
            cut = following
    return ranges


def read_bytes(byte_range: ByteRange) -> bytes:
    """The bytes of ``byte_range``, read locally or with a ranged read for a URL."""
    return read_range(byte_range.path, byte_range.start, byte_range.end)


def read_text(byte_range: ByteRange, errors: DecodeErrors = "strict") -> str:
    """The text of ``byte_range``; invalid UTF-8 is named by its offset in the file."""
    return decode_utf8(
        read_bytes(byte_range), byte_range.path, offset=byte_range.start, errors=errors
    )
