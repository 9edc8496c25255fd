"""Byte ranges of a file: plan them at safe cuts, read them, decode them.

Training and file encoding share this module. A :class:`ByteRange` is a plain,
picklable description of work (a path and two offsets), so any executor can
ship it to a worker, which then reads its own bytes through a memory map.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "f.txt"
>>> _ = path.write_bytes(b"one two<|endoftext|>three four")
>>> ranges = plan_byte_ranges(path, chunk_size=5, special_tokens=["<|endoftext|>"], space_cuts=True)
>>> [read_text(r) for r in ranges]
['one two', '<|endoftext|>three', ' four']
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from streambpe._support.utf8 import DecodeErrors, decode_utf8
from streambpe.cutting.chunks import find_chunk_boundaries


@dataclass(frozen=True)
class ByteRange:
    """``path[start:end]``: bytes that can be processed on their own."""

    path: str
    start: int
    end: int

    @property
    def size(self) -> int:
        """The number of bytes in the range."""
        return self.end - self.start


def plan_byte_ranges(
    path: str | os.PathLike[str],
    *,
    chunk_size: int,
    special_tokens: Sequence[str],
    space_cuts: bool,
) -> list[ByteRange]:
    """Cut the file at ``path`` into ranges of about ``chunk_size`` bytes, at safe cuts only.

    Processing the ranges one by one gives the same result as processing the whole file.
    """
    name = os.fspath(path)
    with open(name, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        boundaries = find_chunk_boundaries(data, chunk_size, special_tokens, space_cuts=space_cuts)
    return [ByteRange(name, start, end) for start, end in pairwise(boundaries)]


def read_bytes(byte_range: ByteRange) -> bytes:
    """The bytes of ``byte_range``, read through a memory map."""
    if byte_range.size == 0:
        return b""
    with (
        open(byte_range.path, "rb") as file,
        mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
    ):
        return mapped[byte_range.start : byte_range.end]


def read_text(byte_range: ByteRange, errors: DecodeErrors = "strict") -> str:
    """The text of ``byte_range``; invalid UTF-8 is named by its offset in the file."""
    return decode_utf8(
        read_bytes(byte_range), byte_range.path, offset=byte_range.start, errors=errors
    )
