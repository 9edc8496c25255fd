"""Checks on input files, and decoding of byte streams with exact error offsets.

>>> check_input_file("/no/such/file")
Traceback (most recent call last):
...
FileNotFoundError: [Errno 2] input file not found: '/no/such/file'
"""

from __future__ import annotations

import codecs
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from streambpe.errors import InvalidUTF8Error

_READ_BLOCK = 1 << 20


def check_input_file(path: str | os.PathLike[str]) -> Path:
    """Return ``path`` as a Path if it is a readable, non-empty regular file; else raise clearly."""
    resolved = Path(path)
    if not resolved.exists():
        raise FileNotFoundError(errno.ENOENT, "input file not found", str(path))
    if resolved.is_dir():
        raise IsADirectoryError(errno.EISDIR, "input is a directory, not a file", str(path))
    if resolved.stat().st_size == 0:
        raise ValueError(f"{path}: input file is empty; there is nothing to process")
    return resolved


def decode_stream(
    stream: BinaryIO, name: str, errors: str = "strict", block_size: int = _READ_BLOCK
) -> Iterator[str]:
    """Decode a binary stream as UTF-8, block by block; a bad byte is named by its stream offset.

    >>> import io
    >>> "".join(decode_stream(io.BytesIO("é!".encode()), "<stdin>", block_size=1))
    'é!'
    >>> list(decode_stream(io.BytesIO(b"ok\\xff"), "<stdin>"))
    Traceback (most recent call last):
    ...
    streambpe.errors.InvalidUTF8Error: <stdin>: invalid UTF-8 at byte offset 2 (invalid start byte); fix the file, or pass errors='replace' (CLI: --errors replace) to substitute U+FFFD for bad bytes
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors)
    consumed = 0
    while True:
        block = stream.read(block_size)
        # The decoder keeps an unfinished character's bytes; an error's position
        # counts from the first of them.
        held = len(decoder.getstate()[0])
        try:
            text = decoder.decode(block, final=not block)
        except UnicodeDecodeError as exc:
            raise InvalidUTF8Error(name, consumed - held + exc.start, exc.reason) from None
        if text:
            yield text
        if not block:
            return
        consumed += len(block)
