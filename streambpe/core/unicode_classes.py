"""Character classes of the built-in patterns, read from the installed ``regex`` module.

The native pretokenizer (``_pretokenize_impl.hpp``) needs to know, for every
code point, whether it is a letter, a number, whitespace and so on. Rather
than ship a table that could disagree with the ``regex`` module the
pure-Python pretokenizer uses, the tables are built at first use by asking
``regex`` itself. :func:`base_table` holds each code point's general category
and whether it matches ``\\s`` (two passes over one string holding every code
point, about 0.15 s, once per process); every class the scanners and the
pattern compiler use is a union of those, plus the code points ``regex``
matches a letter with under ``(?i)`` (:func:`case_fold_sets`). Whatever
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


#: Unicode general categories, in the order of their index in :func:`base_table`.
GENERAL_CATEGORIES: tuple[str, ...] = (
    "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No",
    "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So",
    "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn",
)  # fmt: skip
#: Added to a code point's category index in :func:`base_table` when it matches ``\\s``.
SPACE_BASE = 32


@dataclass(frozen=True)
class BaseTable:
    """Each code point's general category and whitespace flag, as the installed ``regex`` sees them.

    ``entry(cp) = blocks[block_of[cp >> 8] * 256 + (cp & 255)]`` is the index of
    the category in :data:`GENERAL_CATEGORIES`, plus :data:`SPACE_BASE` if
    ``cp`` matches ``\\s``. Any class of the native pattern matcher is a set of
    these entries plus explicit ranges (:mod:`~streambpe.core.pattern_compiler`).
    """

    block_of: array[int]
    blocks: array[int]

    def entry(self, code_point: int) -> int:
        """The base entry of ``code_point``.

        >>> table = base_table()
        >>> GENERAL_CATEGORIES[table.entry(ord("a"))], table.entry(ord(" ")) >= SPACE_BASE
        ('Ll', True)
        """
        block = self.block_of[code_point >> 8]
        return self.blocks[block * BLOCK_SIZE + (code_point & (BLOCK_SIZE - 1))]


def build_base_table() -> BaseTable:
    """Build the table from the installed ``regex``; :func:`base_table` caches it.

    One pass of a pattern with a group per category over every code point
    (runs of one category are long, so it takes a few thousand matches), and
    one of ``\\s``: about 0.1 s.

    >>> build_base_table().entry(0x10FFFF) == GENERAL_CATEGORIES.index("Cn")
    True
    """
    text = all_code_points()
    entries = bytearray(CODE_POINTS)
    by_category = "|".join(f"(\\p{{{category}}}+)" for category in GENERAL_CATEGORIES)
    covered = 0
    for run in regex.finditer(by_category, text):
        start, end = run.span()
        entries[start:end] = bytes([run.lastindex - 1]) * (end - start)  # type: ignore[operator]
        covered += end - start
    if covered != CODE_POINTS:
        raise RuntimeError(
            f"regex {regex.__version__} puts {CODE_POINTS - covered} code points in no general "
            "category; the native pattern matcher cannot describe its classes"
        )
    for run in regex.finditer(r"\s+", text):
        start, end = run.span()
        entries[start:end] = bytes(value | SPACE_BASE for value in entries[start:end])
    block_ids: dict[bytes, int] = {}
    block_of = array("H")
    blocks = array("B")
    for start in range(0, CODE_POINTS, BLOCK_SIZE):
        block = bytes(entries[start : start + BLOCK_SIZE])
        block_id = block_ids.get(block)
        if block_id is None:
            block_id = block_ids[block] = len(block_ids)
            blocks.frombytes(block)
        block_of.append(block_id)
    return BaseTable(block_of=block_of, blocks=blocks)


@cache
def base_table() -> BaseTable:
    """The base table of this process's ``regex`` module, built on first call."""
    return build_base_table()


#: Categories whose characters have no case: no character outside them is
#: equal to one inside under ``(?i)``, so :func:`case_fold_sets` skips them.
CASELESS_CATEGORIES = frozenset({"Lo", "Cn", "Co", "Cs"})


def _cased_candidates() -> str:
    """Every code point outside :data:`CASELESS_CATEGORIES`, as one string (some 40,000)."""
    table = base_table()
    caseless = bytearray(256)
    for index, category in enumerate(GENERAL_CATEGORIES):
        if category in CASELESS_CATEGORIES:
            caseless[index] = caseless[index | SPACE_BASE] = 1
    points = array("I")
    block_of = table.block_of
    for block_index in range(CODE_POINTS // BLOCK_SIZE):
        start = block_of[block_index] * BLOCK_SIZE
        block = table.blocks[start : start + BLOCK_SIZE].tobytes().translate(bytes(caseless))
        if block.count(0) == 0:
            continue
        base = block_index * BLOCK_SIZE
        points.extend(base + offset for offset, skip in enumerate(block) if not skip)
    return points.tobytes().decode(f"utf-32-{sys.byteorder[0]}e", "surrogatepass")


@cache
def case_fold_sets(chars: frozenset[str]) -> dict[int, frozenset[int]]:
    """For each of ``chars``, every code point ``regex`` matches it with under ``(?i)``.

    One pass over the code points that can have case finds the candidates;
    each is then matched against the characters one by one.

    >>> [hex(cp) for cp in sorted(case_fold_sets(frozenset("k"))[ord("k")])]
    ['0x4b', '0x6b', '0x212a']
    """
    text = _cased_candidates() + "".join(sorted(chars))
    wanted = regex.escape("".join(sorted(chars)))
    candidates = {ord(found[0]) for found in regex.finditer(f"(?i)[{wanted}]", text)}
    folds: dict[int, frozenset[int]] = {}
    for char in chars:
        single = regex.compile(f"(?i){regex.escape(char)}")
        folds[ord(char)] = frozenset(cp for cp in candidates if single.fullmatch(chr(cp)))
    return folds


#: The classes of :data:`CLASS_BITS` that are unions of general categories
#: (``space`` is the whitespace flag); the others are case-fold sets of one letter.
_CATEGORY_CLASSES: dict[str, tuple[str, ...]] = {
    "letter": ("Lu", "Ll", "Lt", "Lm", "Lo"),
    "number": ("Nd", "Nl", "No"),
    "upper_like": ("Lu", "Lt", "Lm", "Lo", "Mn", "Mc", "Me"),
    "lower_like": ("Ll", "Lm", "Lo", "Mn", "Mc", "Me"),
}


def build_class_table() -> ClassTable:
    """Build the table from :func:`base_table` and :func:`case_fold_sets`; :func:`class_table` caches it.

    Each class of :data:`CLASS_BITS` is a union of general categories, the
    whitespace flag, or the case-fold set of one letter, so the table follows
    from what ``regex`` reports about categories and case, with no pass of
    its own over every code point. The tests compare it with each class
    pattern run over every code point.

    >>> build_class_table().bits(ord(" ")) == bit("space")
    True
    """
    base = base_table()
    # The category classes all have bits below 8: one byte per base entry.
    by_entry = bytearray(256)
    for entry in range(2 * SPACE_BASE):
        category = GENERAL_CATEGORIES[entry % SPACE_BASE] if entry % SPACE_BASE < 30 else ""
        if entry >= SPACE_BASE:
            by_entry[entry] |= bit("space")
        for name, categories in _CATEGORY_CLASSES.items():
            if category in categories:
                by_entry[entry] |= bit(name)
    translation = bytes(by_entry)
    low = bytearray(CODE_POINTS)
    for block_index in range(CODE_POINTS // BLOCK_SIZE):
        start = base.block_of[block_index] * BLOCK_SIZE
        low[block_index * BLOCK_SIZE : (block_index + 1) * BLOCK_SIZE] = (
            base.blocks[start : start + BLOCK_SIZE].tobytes().translate(translation)
        )
    entries = bytearray(2 * CODE_POINTS)
    entries[0::2] = low
    fold_names = [name for name, _ in CLASS_BITS if name.startswith("fold_")]
    folds = case_fold_sets(frozenset(name[-1] for name in fold_names))
    for name in fold_names:
        mask = bit(name)
        for code_point in folds[ord(name[-1])]:
            entries[2 * code_point] |= mask & 0xFF
            entries[2 * code_point + 1] |= mask >> 8
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
