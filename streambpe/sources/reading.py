"""Read bytes of an input: a byte range, or a buffer that reads only what is looked at.

Local files are read with plain ``pread``-style reads (one copy into the
result) and mapped with ``mmap`` when searched; remote ones are fetched with
ranged reads (fsspec's ``cat_file(path, start, end)``), so a worker asks the
store for its own range only.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "f.txt"
>>> _ = path.write_bytes(b"0123456789")
>>> read_range(str(path), 2, 5)
b'234'
>>> with open_buffer(str(path)) as data:
...     data.find(b"7", 0, len(data))
7
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from streambpe.sources.inputs import InputFile
from streambpe.sources.remote import filesystem, is_url

#: The smallest remote read while searching: a cut is usually found within a few bytes,
#: so reading much more per cut would be mostly waste. Longer searches read more per
#: request (up to ``MAX_SEARCH_READ``), so a long scan does not become thousands of requests.
SEARCH_BLOCK = 4 * 1024
MAX_SEARCH_READ = 1024 * 1024


def _location(source: str | InputFile) -> str:
    return source.location if isinstance(source, InputFile) else source


def read_range(source: str | InputFile, start: int, end: int) -> bytes:
    """The bytes ``[start, end)`` of a local file or a URL (shorter only at the end of the file)."""
    location = _location(source)
    if end <= start:
        return b""
    if is_url(location):
        fs, path = filesystem(location)
        return bytes(fs.cat_file(path, start=start, end=end))
    with open(location, "rb", buffering=0) as file:
        file.seek(start)
        chunks: list[bytes] = []
        remaining = end - start
        # A raw read may return less than asked (large reads, some filesystems).
        while remaining > 0 and (chunk := file.read(remaining)):
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)


class RemoteBuffer:
    """A remote file seen as a read-only byte buffer, fetched in blocks on first use.

    It offers what cutting needs from ``bytes`` (``len``, slicing, ``find``), so
    the same cut search runs on a memory map and on an object store. ``find``
    stops at the first match, so a search that ends after a few bytes fetches
    one block, whatever range it was allowed.
    """

    def __init__(self, fs: Any, path: str, size: int, block: int = SEARCH_BLOCK) -> None:
        self._fs = fs
        self._path = path
        self._size = size
        self._block = block
        self._blocks: dict[int, bytes] = {}

    def __len__(self) -> int:
        return self._size

    def _load(self, first: int, last: int) -> None:
        """Make blocks ``first..last`` present, one ranged read per run of missing blocks."""
        index = first
        while index <= last:
            if index in self._blocks:
                index += 1
                continue
            run_end = index
            while run_end + 1 <= last and run_end + 1 not in self._blocks:
                run_end += 1
            start = index * self._block
            data = bytes(
                self._fs.cat_file(
                    self._path, start=start, end=min(self._size, (run_end + 1) * self._block)
                )
            )
            for offset in range(index, run_end + 1):
                at = (offset - index) * self._block
                self._blocks[offset] = data[at : at + self._block]
            index = run_end + 1

    def _slice(self, start: int, end: int) -> bytes:
        start, end = max(0, start), min(self._size, end)
        if end <= start:
            return b""
        first, last = start // self._block, (end - 1) // self._block
        self._load(first, last)
        joined = b"".join(self._blocks[index] for index in range(first, last + 1))
        offset = first * self._block
        return joined[start - offset : end - offset]

    def __getitem__(self, index: slice, /) -> bytes:
        start, stop, step = index.indices(self._size)
        if step != 1:
            raise ValueError("RemoteBuffer supports contiguous slices only")
        return self._slice(start, stop)

    def find(self, sub: bytes, start: int = 0, end: int | None = None, /) -> int:
        """Like ``bytes.find``, reading only until the first match, in growing steps."""
        stop = self._size if end is None else min(end, self._size)
        position = max(0, start)
        step = self._block
        while position + len(sub) <= stop:
            # Search to a block edge, plus the overlap a match could straddle.
            edge = (position // self._block + 1) * self._block + step - self._block
            window_end = min(stop, edge + len(sub) - 1)
            found = self._slice(position, window_end).find(sub)
            if found >= 0:
                return position + found
            position = max(position + 1, window_end - len(sub) + 1)
            step = min(2 * step, MAX_SEARCH_READ)
        return -1


@contextmanager
def open_buffer(source: str | InputFile) -> Iterator[mmap.mmap | RemoteBuffer | bytes]:
    """The whole input as a byte buffer that reads only the parts that are looked at.

    A local file is memory-mapped (the kernel reads the pages touched); a URL
    becomes a :class:`RemoteBuffer`. An empty local file gives ``b""``, since
    ``mmap`` refuses empty files.
    """
    location = _location(source)
    if is_url(location):
        fs, path = filesystem(location)
        size = source.size if isinstance(source, InputFile) else int(fs.size(path))
        yield RemoteBuffer(fs, path, size)
        return
    with open(location, "rb") as file:
        if file.seek(0, 2) == 0:
            yield b""
            return
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            # Cut searches touch a few KiB here and there: without this, each
            # fault maps the kernel's read-around too, and planning a 1 GiB file
            # kept about 400 MiB of it mapped (counted in the process's RSS).
            if hasattr(mmap, "MADV_RANDOM"):
                mapped.madvise(mmap.MADV_RANDOM)
            yield mapped
