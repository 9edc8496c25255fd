"""Where text may be cut without changing any piece, under the built-in patterns.

Under the GPT-2, cl100k and o200k patterns two kinds of position always begin a
new piece, and no piece looks back across them:

* a space right after a non-whitespace character (``"word| next"``);
* a letter right after a newline that follows a non-whitespace character
  (``"end.\\n|Next"``): the newline ends its piece whether or not the text
  goes on, and no piece starts with a newline followed by a letter.

The second kind lets text without spaces (Chinese, Japanese, Thai) be cut at
line breaks. Both checks use ``str.isspace`` (true for every ``\\s`` character,
and a few more) and ``str.isalpha`` (true only for ``\\p{L}``), so where the
Unicode tables differ they can only miss a cut, never invent one. Tests compare
cut and uncut results for every pattern.

>>> is_safe_cut("a b", 1), is_safe_cut("a  b", 2), is_safe_cut("。\\n吾", 2)
(True, False, True)
>>> next_safe_cut("ab\\n\\ncd ef", 1), next_safe_cut("ab\\n\\ncd", 1)
(6, 6)
"""

from __future__ import annotations

from typing import Protocol

_MAX_UTF8_LENGTH = 4
_SPACE = 0x20
_NEWLINE = 0x0A


def is_safe_cut(text: str, position: int) -> bool:
    """True when ``text`` may be cut before ``position`` (see the module docstring)."""
    if position < 1 or position >= len(text):
        return False
    following = text[position]
    before = text[position - 1]
    if following == " ":
        return not before.isspace()
    return (
        before == "\n"
        and position >= 2
        and not text[position - 2].isspace()
        and following.isalpha()
    )


def next_safe_cut(text: str, start: int, end: int | None = None) -> int:
    """The first safe cut in ``[start, end)``, else ``len(text)``."""
    stop = len(text) if end is None else min(end, len(text))
    position = max(start, 1)
    while position < stop:
        space = text.find(" ", position, stop)
        newline = text.find("\n", position - 1, stop - 1)
        candidates = [found for found in (space, newline + 1 if newline >= 0 else -1) if found >= 0]
        if not candidates:
            break
        candidate = min(candidates)
        if is_safe_cut(text, candidate):
            return candidate
        position = candidate + 1
    return len(text)


def last_safe_cut(text: str, lowest: int, highest: int) -> int | None:
    """The last safe cut in ``[lowest, highest]``, or None.

    >>> last_safe_cut("a b c", 1, 4)
    3
    """
    position = min(highest, len(text) - 1)
    floor = max(lowest, 1)
    while position >= floor:
        space = text.rfind(" ", floor, position + 1)
        newline = text.rfind("\n", floor - 1, position)
        candidate = max(space, newline + 1 if newline >= 0 else -1)
        if candidate < floor:
            return None
        if is_safe_cut(text, candidate):
            return candidate
        position = candidate - 1
    return None


class ByteBuffer(Protocol):
    """What byte-level cutting needs from ``bytes`` or an ``mmap``."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: slice, /) -> bytes: ...
    def find(self, sub: bytes, start: int = ..., end: int = ..., /) -> int: ...


def _character_before(data: ByteBuffer, position: int) -> str:
    start = position - 1
    # Step back over UTF-8 continuation bytes to the start of the character.
    while (
        start > 0 and position - start < _MAX_UTF8_LENGTH and data[start : start + 1][0] >> 6 == 2
    ):
        start -= 1
    return data[start:position].decode("utf-8", errors="replace")[-1:]


def _character_at(data: ByteBuffer, position: int) -> str:
    return data[position : position + _MAX_UTF8_LENGTH].decode("utf-8", errors="replace")[:1]


def is_safe_byte_cut(data: ByteBuffer, position: int) -> bool:
    """:func:`is_safe_cut` on UTF-8 bytes: only ever true before a whole character.

    >>> is_safe_byte_cut("。\\n吾".encode(), 4), is_safe_byte_cut(b"a\\n\\nb", 3)
    (True, False)
    """
    if position < 1 or position >= len(data):
        return False
    following = data[position : position + 1][0]
    if following == _SPACE:
        return not _character_before(data, position).isspace()
    if data[position - 1 : position][0] != _NEWLINE or position < 2:
        return False
    return (
        not _character_before(data, position - 1).isspace()
        and _character_at(data, position).isalpha()
    )


def next_safe_byte_cut(data: ByteBuffer, start: int, end: int) -> int | None:
    """The first safe cut in ``[start, end)`` of UTF-8 bytes, or None."""
    stop = min(end, len(data))
    position = max(start, 1)
    while position < stop:
        space = data.find(b" ", position, stop)
        newline = data.find(b"\n", position - 1, stop - 1)
        candidates = [found for found in (space, newline + 1 if newline >= 0 else -1) if found >= 0]
        if not candidates:
            return None
        candidate = min(candidates)
        if is_safe_byte_cut(data, candidate):
            return candidate
        position = candidate + 1
    return None
