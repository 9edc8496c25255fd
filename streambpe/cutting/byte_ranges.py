"""Byte ranges of an input: plan them at safe cuts, read them, decode them.

Training and file encoding share this module. A :class:`ByteRange` is a plain,
picklable description of work (a location and two offsets), so any executor
can ship it to a worker, which then reads its own bytes: through a memory map
for a local file, with a ranged read for a URL (:mod:`streambpe.sources`).

Planning needs only sizes: a task may be given a :class:`Span`, nominal
offsets, and find the cuts near them itself (:meth:`Span.byte_ranges`);
neighbouring tasks agree on their shared cut because a cut depends only on the
input's bytes. :class:`Cuts` says where cuts may go and how far apart.

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


class _Stretch:
    """Two offsets into an input: what a byte range and a span have in common."""

    start: int
    end: int

    @property
    def size(self) -> int:
        """The number of bytes from ``start`` to ``end``."""
        return self.end - self.start


@dataclass(frozen=True)
class ByteRange(_Stretch):
    """``path[start:end]``: bytes that can be processed on their own.

    ``path`` is an absolute local path or a URL (see :mod:`streambpe.sources`).
    """

    path: str
    start: int
    end: int


@dataclass(frozen=True)
class Cuts:
    """Where an input may be cut, and how far apart: what ranges depend on besides the bytes.

    Cuts go before and after every special token, and, when ``space_cuts`` (the
    built-in patterns), at the safe cuts of :mod:`streambpe.cutting.rule`,
    about ``chunk_size`` bytes apart.
    """

    special_tokens: Sequence[str]
    space_cuts: bool
    chunk_size: int


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


@dataclass(frozen=True)
class Span(_Stretch):
    """Nominal offsets of an input, from sizes alone: a task's share before any byte is read."""

    source: InputFile
    start: int
    end: int

    def byte_ranges(self, cuts: Cuts) -> list[ByteRange]:
        """The ranges covering the span once both ends are moved to the next safe cut.

        Each end moves to the first safe cut at or after it, so the spans
        ``[0, a)``, ``[a, b)``, ... of one input yield ranges that tile it
        exactly, whoever computes each span. Inside, ranges of about
        ``cuts.chunk_size`` bytes follow, as in :func:`plan_byte_ranges`.

        >>> import pathlib, tempfile
        >>> from streambpe.sources.inputs import resolve_inputs
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "f.txt"
        >>> _ = path.write_bytes(b"one two three four")
        >>> [source] = resolve_inputs(path)
        >>> cuts = Cuts([], space_cuts=True, chunk_size=100)
        >>> [[read_text(r) for r in Span(source, a, b).byte_ranges(cuts)] for a, b in [(0, 5), (5, 18)]]
        [['one two'], [' three four']]
        """
        specials = [token.encode("utf-8") for token in cuts.special_tokens]
        space_cuts = cuts.space_cuts
        ranges: list[ByteRange] = []
        with open_buffer(self.source) as data:
            cut = cut_at_or_after(data, self.start, specials, space_cuts=space_cuts)
            stop = cut_at_or_after(data, self.end, specials, space_cuts=space_cuts)
            while cut < stop:
                following = min(
                    stop,
                    cut_at_or_after(data, cut + cuts.chunk_size, specials, space_cuts=space_cuts),
                )
                ranges.append(ByteRange(self.source.location, cut, following))
                cut = following
        return ranges


def byte_ranges_between(
    source: InputFile,
    start: int,
    end: int,
    *,
    chunk_size: int,
    special_tokens: Sequence[str],
    space_cuts: bool,
) -> list[ByteRange]:
    """``Span(source, start, end).byte_ranges(...)``, the cuts given as keywords.

    >>> import pathlib, tempfile
    >>> from streambpe.sources.inputs import resolve_inputs
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "f.txt"
    >>> _ = path.write_bytes(b"one two")
    >>> [source] = resolve_inputs(path)
    >>> byte_ranges_between(source, 0, 7, chunk_size=2, special_tokens=[], space_cuts=True)[0].size
    3
    """
    return Span(source, start, end).byte_ranges(Cuts(special_tokens, space_cuts, chunk_size))


def read_bytes(byte_range: ByteRange) -> bytes:
    """The bytes of ``byte_range``, read locally or with a ranged read for a URL."""
    return read_range(byte_range.path, byte_range.start, byte_range.end)


def read_text(byte_range: ByteRange, errors: DecodeErrors = "strict") -> str:
    """The text of ``byte_range``; invalid UTF-8 is named by its offset in the file."""
    return decode_utf8(
        read_bytes(byte_range), byte_range.path, offset=byte_range.start, errors=errors
    )
