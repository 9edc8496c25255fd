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


def is_cut_between(two_before: str, before: str, following: str) -> bool:
    """The rule itself, on the characters around a position (``""`` where there is none).

    Every other function here applies this one to text or to UTF-8 bytes.

    >>> is_cut_between("", "a", " "), is_cut_between("", " ", " "), is_cut_between(".", "\\n", "N")
    (True, False, True)
    """
    if following == " ":
        return before != "" and not before.isspace()
    return before == "\n" and two_before != "" and not two_before.isspace() and following.isalpha()


def is_safe_cut(text: str, position: int) -> bool:
    """True when ``text`` may be cut before ``position`` (see the module docstring)."""
    if position < 1 or position >= len(text):
        return False
    two_before = text[position - 2] if position >= 2 else ""
    return is_cut_between(two_before, text[position - 1], text[position])


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


def _character_start(data: ByteBuffer, position: int) -> int:
    """Where the UTF-8 character that ends just before ``position`` starts."""
    start = position - 1
    # Step back over continuation bytes (0b10xxxxxx) to the character's first byte.
    while (
        start > 0 and position - start < _MAX_UTF8_LENGTH and data[start : start + 1][0] >> 6 == 2
    ):
        start -= 1
    return start


def _character_at(data: ByteBuffer, position: int) -> str:
    return data[position : position + _MAX_UTF8_LENGTH].decode("utf-8", errors="replace")[:1]


def is_safe_byte_cut(data: ByteBuffer, position: int) -> bool:
    """:func:`is_safe_cut` on UTF-8 bytes: only ever true before a whole character.

    >>> is_safe_byte_cut("。\\n吾".encode(), 4), is_safe_byte_cut(b"a\\n\\nb", 3)
    (True, False)
    """
    if position < 1 or position >= len(data):
        return False
    # Every cut sits before a space or after a newline: reject the rest without decoding.
    if data[position : position + 1][0] != _SPACE and data[position - 1 : position][0] != _NEWLINE:
        return False
    before_start = _character_start(data, position)
    before = data[before_start:position].decode("utf-8", errors="replace")[-1:]
    two_before = ""
    if before_start >= 1:
        two_before_start = _character_start(data, before_start)
        two_before = data[two_before_start:before_start].decode("utf-8", errors="replace")[-1:]
    return is_cut_between(two_before, before, _character_at(data, position))


def next_safe_byte_cut(data: ByteBuffer, start: int, end: int) -> int | None:
    """The first safe cut in ``[start, end)`` of UTF-8 bytes, or None."""
    stop = min(end, len(data))
    position = max(start, 1)
    while position < stop:
        space = data.find(b" ", position, stop)
        # A newline past the space cannot give an earlier cut: stop looking there, so a
        # search on a lazily read buffer reads only up to the first space.
        newline = data.find(b"\n", position - 1, stop - 1 if space < 0 else min(stop - 1, space))
        candidates = [found for found in (space, newline + 1 if newline >= 0 else -1) if found >= 0]
        if not candidates:
            return None
        candidate = min(candidates)
        if is_safe_byte_cut(data, candidate):
            return candidate
        position = candidate + 1
    return None
