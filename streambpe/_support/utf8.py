"""UTF-8 decoding that names the file and the absolute byte offset of a bad byte.

Every place that turns input bytes into text goes through here: byte ranges of
a file (where the offset of the range is added), incremental streams such as
stdin, and tokenizer files.

>>> decode_utf8(b"ok\\xff", "f.txt", offset=10, errors="replace")
'ok\\ufffd'
>>> decode_utf8(b"ok\\xff", "f.txt", offset=10)
Traceback (most recent call last):
...
streambpe.errors.InvalidUTF8Error: f.txt: invalid UTF-8 at byte offset 12 (invalid start byte); fix the file, or pass errors='replace' (CLI: --errors replace) to substitute U+FFFD for bad bytes
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from typing import BinaryIO, Literal

from streambpe.errors import InvalidUTF8Error, ParameterError

#: How invalid UTF-8 is handled: raise :class:`InvalidUTF8Error`, or substitute U+FFFD.
DecodeErrors = Literal["strict", "replace"]

_READ_BLOCK = 1 << 20

#: Bytes that never occur in UTF-8 (C0, C1, F5-FF), so text never needs a token for them.
NEVER_IN_UTF8 = frozenset([0xC0, 0xC1, *range(0xF5, 0x100)])


def check_errors_policy(errors: str) -> DecodeErrors:
    """Return ``errors`` if it is a known policy; raise a clear error otherwise.

    >>> check_errors_policy("replace")
    'replace'
    """
    if errors == "strict":
        return "strict"
    if errors == "replace":
        return "replace"
    raise ParameterError(f"errors must be 'strict' or 'replace', got {errors!r}")


def decode_utf8(data: bytes, name: str, *, offset: int = 0, errors: DecodeErrors = "strict") -> str:
    """Decode ``data``, which starts at byte ``offset`` of the input called ``name``."""
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        raise InvalidUTF8Error(name, offset + exc.start, exc.reason) from None


def decode_utf8_stream(
    stream: BinaryIO, name: str, errors: DecodeErrors = "strict", block_size: int = _READ_BLOCK
) -> Iterator[str]:
    """Decode a binary stream block by block; a bad byte is named by its stream offset.

    >>> import io
    >>> "".join(decode_utf8_stream(io.BytesIO("é!".encode()), "<stdin>", block_size=1))
    'é!'
    >>> list(decode_utf8_stream(io.BytesIO(b"ok\\xff"), "<stdin>"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    streambpe.errors.InvalidUTF8Error: <stdin>: invalid UTF-8 at byte offset 2 (invalid start byte); ...
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
