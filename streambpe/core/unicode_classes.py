"""Character classes of the built-in patterns, read from the installed ``regex`` module.

The native pretokenizer (``_pretokenize_impl.hpp``) needs to know, for every
code point, whether it is a letter, a number, whitespace and so on. Rather
than ship a table that could disagree with the ``regex`` module the
pure-Python pretokenizer uses, the table is built at first use by asking
``regex`` itself: each class pattern of :data:`CLASS_BITS` is run over one
string holding every code point (about 0.5 s, once per process). Whatever
Unicode version ``regex`` implements, both pretokenizers see the same one.

The table has two stages: ``block_of[cp >> 8]`` is the index of a block of
256 entries in ``blocks``, each entry the class bits of one code point.
Identical blocks are stored once, which keeps the table small (the many
unassigned or all-CJK blocks share one block each).

>>> table = class_table()
>>> table.bits(ord("a")) & bit("letter") != 0
True
>>> table.bits(ord("\\u017f")) & bit("fold_s") != 0  # LATIN SMALL LETTER LONG S matches (?i:s)
True
>>> table.regex_version == regex.__version__
True
"""

from __future__ import annotations

import sys
from array import array
from dataclasses import dataclass
from functools import cache

import regex

from streambpe._support.table_cache import content_key, read_table, write_table

#: The class bits, in order: bit ``i`` of an entry is set when the code point
#: matches the ``i``-th pattern. Must match ``ClassBit`` in ``_pretokenize_impl.hpp``.
CLASS_BITS: tuple[tuple[str, str], ...] = (
    ("letter", r"\p{L}"),
    ("number", r"\p{N}"),
    ("space", r"\s"),
    ("upper_like", r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"),  # o200k's first case class
    ("lower_like", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"),  # o200k's second case class
    # The letters of the case-insensitive contractions of cl100k and o200k;
    # ``regex`` folds case simply, so (?i:s) also matches U+017F LONG S.
    ("fold_s", r"(?i:s)"),
    ("fold_d", r"(?i:d)"),
    ("fold_m", r"(?i:m)"),
    ("fold_t", r"(?i:t)"),
    ("fold_l", r"(?i:l)"),
    ("fold_v", r"(?i:v)"),
    ("fold_e", r"(?i:e)"),
    ("fold_r", r"(?i:r)"),
)

CODE_POINTS = 0x110000
BLOCK_SIZE = 256

#: Characters first assigned in each Unicode version, newest last: the newest
#: version whose character ``regex`` knows (does not match ``\p{Cn}``,
#: unassigned) is the Unicode version it implements.
UNICODE_VERSION_PROBES: tuple[tuple[str, str], ...] = (
    ("14.0", "\U0001fae0"),  # MELTING FACE
    ("15.0", "\U00011f00"),  # KAWI SIGN CANDRABINDU
    ("15.1", "\u2ffc"),  # IDEOGRAPHIC DESCRIPTION CHARACTER SURROUND FROM RIGHT
    ("16.0", "\U00010d40"),  # GARAY DIGIT ZERO
    ("17.0", "\U00010940"),  # SIDETIC LETTER N01
)


def bit(name: str) -> int:
    """The mask of the class called ``name`` in :data:`CLASS_BITS`.

    >>> bit("letter"), bit("space")
    (1, 4)
    """
    for index, (class_name, _) in enumerate(CLASS_BITS):
        if class_name == name:
            return 1 << index
    raise KeyError(f"no character class {name!r}; known: {[n for n, _ in CLASS_BITS]}")


def regex_unicode_version() -> str:
    """The Unicode version of the installed ``regex``, from :data:`UNICODE_VERSION_PROBES`.

    Reads ``"<14.0"`` if ``regex`` knows none of the probes, and
    ``">=17.0"``-style when it knows the newest (a later version may be in).

    >>> regex_unicode_version()[-4:] in {v for v, _ in UNICODE_VERSION_PROBES}
    True
    """
    known = [
        version for version, char in UNICODE_VERSION_PROBES if not regex.match(r"\p{Cn}", char)
    ]
    if not known:
        return f"<{UNICODE_VERSION_PROBES[0][0]}"
    newest = known[-1]
    return f">={newest}" if newest == UNICODE_VERSION_PROBES[-1][0] else newest


@dataclass(frozen=True)
class ClassTable:
    """The class bits of every code point, as two arrays of 16-bit unsigned ints.

    ``bits(cp) == blocks[block_of[cp >> 8] * 256 + (cp & 255)]``.
    """

    block_of: array[int]
    blocks: array[int]
    regex_version: str
    unicode_version: str

    def bits(self, code_point: int) -> int:
        """The class bits of ``code_point``.

        >>> class_table().bits(ord("7")) == bit("number")
        True
        """
        block = self.block_of[code_point >> 8]
        return self.blocks[block * BLOCK_SIZE + (code_point & (BLOCK_SIZE - 1))]


def all_code_points() -> str:
    """One string holding every code point, U+0000 to U+10FFFF, lone surrogates included.

    Decoded from UTF-32 in one call, five times faster than joining ``chr`` of each.

    >>> text = all_code_points()
    >>> len(text), text[0x41], text[0xD800] == chr(0xD800)
    (1114112, 'A', True)
    """
    units = array("I", range(CODE_POINTS))
    assert units.itemsize == 4, "array('I') is not 32-bit on this platform"
    return units.tobytes().decode(f"utf-32-{sys.byteorder[0]}e", "surrogatepass")


def _class_plane(pattern: str, value: int, text: str) -> bytes:
    """One byte per code point: ``value`` where ``pattern`` matches the code point, else 0."""
    plane = bytearray(CODE_POINTS)
    for match in regex.finditer(f"(?:{pattern})+", text):
        start, end = match.span()
        plane[start:end] = bytes([value]) * (end - start)
    return bytes(plane)


def _merge_planes(planes: list[bytes]) -> bytes:
    """The bitwise OR of equal-length byte strings (as big integers: one C loop each)."""
    merged = 0
    for plane in planes:
        merged |= int.from_bytes(plane, "little")
    return merged.to_bytes(CODE_POINTS, "little")


def build_class_table() -> ClassTable:
    """Build the table from the installed ``regex``; :func:`class_table` caches it.

    >>> build_class_table().bits(ord(" ")) == bit("space")
    True
    """
    text = all_code_points()
    # Bits 0-7 and 8-15 go to separate byte planes, then interleave as
    # little-endian 16-bit entries.
    low: list[bytes] = []
    high: list[bytes] = []
    for index, (_, pattern) in enumerate(CLASS_BITS):
        half = low if index < 8 else high
        half.append(_class_plane(pattern, 1 << (index % 8), text))
    entries = bytearray(2 * CODE_POINTS)
    entries[0::2] = _merge_planes(low)
    entries[1::2] = _merge_planes(high)
    entry_bytes = 2 * BLOCK_SIZE

    block_ids: dict[bytes, int] = {}
    block_of = array("H")
    blocks = array("H")
    for start in range(0, len(entries), entry_bytes):
        block = bytes(entries[start : start + entry_bytes])
        block_id = block_ids.get(block)
        if block_id is None:
            block_id = block_ids[block] = len(block_ids)
            chunk = array("H")
            chunk.frombytes(block)
            blocks.extend(chunk)
        block_of.append(block_id)
    if array("H", [1]).tobytes() != b"\x01\x00":  # entries were assembled little-endian
        blocks.byteswap()
    return ClassTable(
        block_of=block_of,
        blocks=blocks,
        regex_version=regex.__version__,
        unicode_version=regex_unicode_version(),
    )


#: Names the layout of :func:`_table_bytes`, for the table cache.
_STORED_LAYOUT = f"class table 1, {sys.byteorder}-endian"


def _table_bytes(table: ClassTable) -> bytes:
    """``table`` as bytes for the table cache; :func:`_table_from_bytes` reads them back."""
    versions = f"{table.regex_version}\n{table.unicode_version}".encode()
    return b"".join(
        (
            len(versions).to_bytes(4, "little"),
            versions,
            table.block_of.tobytes(),
            table.blocks.tobytes(),
        )
    )


def _table_from_bytes(data: bytes | memoryview) -> ClassTable | None:
    """The table :func:`_table_bytes` stored, or None if ``data`` does not hold one whole."""
    view = memoryview(data)
    size = int.from_bytes(view[:4], "little")
    regex_version, _, unicode_version = bytes(view[4 : 4 + size]).decode().partition("\n")
    block_of = array("H")
    block_of.frombytes(view[4 + size : 4 + size + 2 * (CODE_POINTS // BLOCK_SIZE)])
    blocks = array("H")
    blocks.frombytes(view[4 + size + 2 * len(block_of) :])
    complete = len(block_of) == CODE_POINTS // BLOCK_SIZE and len(blocks) % BLOCK_SIZE == 0
    if not complete or max(block_of) >= len(blocks) // BLOCK_SIZE:
        return None
    return ClassTable(block_of, blocks, regex_version, unicode_version)


@cache
def class_table() -> ClassTable:
    """The class table of this process's ``regex`` module, built on first call.

    Asking ``regex`` about every code point takes a fifth of a second, so
    the table is kept in the table cache (:mod:`streambpe._support.table_cache`),
    under a key naming the ``regex`` version and the classes.
    """
    key = content_key("classes", regex.__version__, repr(CLASS_BITS))
    stored = read_table(key, _STORED_LAYOUT)
    table = _table_from_bytes(stored) if stored is not None else None
    if table is None or table.regex_version != regex.__version__:
        table = build_class_table()
        write_table(key, _STORED_LAYOUT, _table_bytes(table))
    return table
