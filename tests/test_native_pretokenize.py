"""The native pretokenizer finds exactly ``regex.findall``'s pieces, for every string.

Three kinds of evidence, against the ``regex`` module as the oracle:

* exhaustive: every code point U+0000..U+10FFFF, between copies of a context
  string (a newline pair, a letter, a space, a digit, an apostrophe), under
  each built-in pattern;
* property tests on strings drawn from an alphabet crowded with class
  boundaries (marks, titlecase and modifier letters, other scripts' digits,
  exotic spaces, contraction letters and their case folds, lone surrogates),
  stored as 1-, 2- and 4-byte strs;
* the native class table agrees with ``regex`` on every class, for every
  code point.

The exhaustive comparisons are the slow part (``regex`` needs about a
microsecond per piece, and each context has over a million pieces per
pattern), so they run in two worker processes, started when the first of them
is collected and shared by all of them.
"""

from __future__ import annotations

import multiprocessing
import random
import re
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from functools import cache

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streambpe.core import unicode_classes
from streambpe.patterns import CL100K, GPT2, O200K

native = pytest.importorskip("streambpe.core._native", reason="the compiled core was not built")

PATTERNS: dict[str, str] = {"gpt2": GPT2, "cl100k": CL100K, "o200k": O200K}

#: Each code point is tested between two copies of each of these strings.
#: Together they cover it alone (between line breaks), after and before a
#: letter, a space, a digit and an apostrophe, and after "\r\n".
CONTEXTS: dict[str, str] = {
    "crlf": "\r\n",
    "letter": "a",
    "space": " ",
    "digit": "1",
    "apostrophe": "'",
}


@cache
def _context_text(separator: str) -> str:
    return separator.join(map(chr, range(unicode_classes.CODE_POINTS)))


def _first_difference(separator: str, expected: list[str], found: list[str]) -> str:
    """Where two piece lists of :func:`_context_text` part, and the code point there."""
    index = next(
        (i for i, (a, b) in enumerate(zip(expected, found, strict=False)) if a != b),
        min(len(expected), len(found)),
    )
    offset = sum(map(len, expected[:index]))
    code_point = offset // (len(separator) + 1)
    window = slice(max(index - 2, 0), index + 3)
    return (
        f"near U+{code_point:04X} (separator {separator!r}): "
        f"regex {expected[window]!r}, native {found[window]!r}"
    )


def compare_context(separator: str, pattern_name: str) -> str | None:
    """Compare regex and native pieces over every code point between ``separator``s.

    Runs in a worker process; returns None, or a description of the first difference.
    """
    pattern = PATTERNS[pattern_name]
    text = _context_text(separator)
    expected = regex.findall(pattern, text)
    found = native.Pretokenizer(pattern).pieces(text)
    if expected == found:
        return None
    return _first_difference(separator, expected, found)


# --------------------------------------------------------------------------- hand-picked cases

HAND_PICKED = [
    "Hello world's  end",
    "Hello, wörld's 4242!\n\n  x",
    "x'S x'\u017f x'll x'LL x'Ve x'rE x'\u212a '\u017f",  # case folds: LONG S is (?i:s), KELVIN SIGN is k
    "ǅungla ǅǅa ÉCOLE's HELLO'S hello'sworld WORLD'LL",
    "\u0301\u0301AB \u0301a !\u0301A \u02b0A \u02b0\u02b0 A\u02b0B",  # marks and Lm are in both o200k classes
    "abc\u3005DEF\u3005 ABC\u3005def",
    "12345 ١٢٣٤ ²³ Ⅻ \U0001d7d8\U0001d7d9\U0001d7da\U0001d7db",
    "a  \n  \r\n \t b\n",
    "a \n",
    "a\n\n",
    "  ",
    "\n",
    " !!\n/\n/x  ?/\r\n//",
    "\ud800a \udc00\udfff 1\ud800 '\ud800s",
    "\xa0word\u3000word\u2028word\x1cword\x85x",
]


@pytest.mark.parametrize("pattern", PATTERNS.values(), ids=PATTERNS.keys())
@pytest.mark.parametrize("text", HAND_PICKED)
def test_hand_picked(pattern: str, text: str) -> None:
    assert native.Pretokenizer(pattern).pieces(text) == regex.findall(pattern, text)


#: What may follow a run: each ASCII class, a contraction, Latin-1 letters and
#: a Latin-1 space (beyond ASCII, where the ASCII path must hand over to the
#: general rules), and the end of the text.
RUN_FOLLOWERS = [
    "",
    "A",
    "b",
    "7",
    "'s",
    "'LL",
    "\n",
    "\r\n",
    "\t",
    "!",
    "\xe9",
    "\xdf",
    "\xa0",
    "\xc9",
]


@pytest.mark.parametrize("pattern", PATTERNS.values(), ids=PATTERNS.keys())
@pytest.mark.parametrize("head", ["Z", "\u4e00"], ids=["one-byte", "two-byte"])
def test_long_runs_of_small_letters_and_spaces(pattern: str, head: str) -> None:
    """Runs of 0-40 small letters or spaces, each follower, then 0-18 characters more.

    The o200k scanner reads these runs 16 bytes at a time in one-byte text
    while 16 bytes are left (``ascii_range_end``), and one at a time after
    that or in wider text: runs that end before, at and after each 16-byte
    step, with the end of the text at every distance from the run's end.
    """
    pretokenizer = native.Pretokenizer(pattern)
    for run_character in ("x", " "):
        for length in range(41):
            for follower in RUN_FOLLOWERS:
                for tail in ("", "ab", "a" * 17, " " * 15 + "q"):
                    text = head + run_character * length + follower + tail
                    assert pretokenizer.pieces(text) == regex.findall(pattern, text), text


# --------------------------------------------------------------------------- property tests

#: Characters at class boundaries, each listed with why it is interesting.
BOUNDARY_ALPHABET = (
    "aZbY"  # ASCII letters
    "sSdDmMtTlLvVeErR\u017f\u212a"  # contraction letters, LONG S and KELVIN SIGN (case folds)
    "'\u2019"  # the apostrophe and a lookalike that is not one
    "0159\u00b2\u00bd\u0663\u216b\U0001d7d8"  # digits, No, other scripts' Nd, Nl, astral Nd
    " \t\n\r\x0b\x0c\x1c\x85\xa0\u1680\u2000\u2028\u2029\u202f\u3000"  # spaces; \x1c is not \s
    "/!.,-\x00\xad\xd7"  # punctuation, NUL, soft hyphen (Cf), multiplication sign
    "\u00c9\u00e9\u00df\u00b5\u00aa\u03a9\u03c9\U00010400\U00010428\U0001d400"  # Lu/Ll, Lo ª
    "\u01c5\u1f88"  # titlecase (Lt)
    "\u02b0\u3005\u1d2c"  # modifier letters (Lm): in both o200k case classes
    "\u05d0\u4e00\u0e01"  # other letters (Lo): in both o200k case classes
    "\u0301\u0903\u20dd\u0e31"  # marks (Mn, Mc, Me): not letters, yet in both case classes
    "\U0001f600\U0001f1fa\u200d"  # emoji, regional indicator, zero width joiner
    "\ud800\udc00\udfff"  # lone surrogates
)

_MAX_CODE_POINT = {1: 0xFF, 2: 0xFFFF, 4: 0x10FFFF}
#: A character that makes a str use code units of the given size.
_WIDENER = {1: "\xe9", 2: "\u4e00", 4: "\U0001f600"}


@cache
def _texts(unit_size: int) -> st.SearchStrategy[str]:
    """Short strings over the boundary alphabet (and any character), stored with ``unit_size``.

    Multi-character items make runs and the sequences the patterns look for.
    """
    limit = _MAX_CODE_POINT[unit_size]
    alphabet = [char for char in BOUNDARY_ALPHABET if ord(char) <= limit]
    sequences = ["\r\n", "  ", "\n\n", "'s", "'ll", "'RE", "'ve", "\u0301\u0301", "\u01c5a", "/\n"]
    items = st.sampled_from(alphabet + sequences) | st.characters(max_codepoint=limit)
    return st.builds(
        lambda parts, at: "".join([*parts[:at], _WIDENER[unit_size], *parts[at:]]),
        st.lists(items, max_size=30),
        st.integers(0, 30),
    )


@pytest.mark.parametrize("unit_size", [1, 2, 4])
@pytest.mark.parametrize("pattern", PATTERNS.values(), ids=PATTERNS.keys())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_same_pieces_as_regex(pattern: str, unit_size: int, data: st.DataObject) -> None:
    text = data.draw(_texts(unit_size))
    assert max(map(ord, text)) > _MAX_CODE_POINT.get(unit_size // 2, -1)  # the intended str kind
    pretokenizer = native.Pretokenizer(pattern)
    expected = regex.findall(pattern, text)
    assert pretokenizer.pieces(text) == expected
    assert pretokenizer.piece_count(text) == len(expected)
    counts = {"\x00already there": 2, expected[0]: 5} if expected else {}
    pretokenizer.count_into([text], counts)
    reference = Counter(expected)
    if expected:
        reference.update({"\x00already there": 2, expected[0]: 5})
    assert counts == reference


# --------------------------------------------------------------------------- o200k windows

#: ASCII characters and runs at o200k's class boundaries (contractions, the
#: punctuation tail's newlines and slashes, runs of spaces after a newline,
#: digit runs, \x1c which is not \s), for one-byte texts long enough that the
#: scanner finds piece starts a window of 60 characters at a time
#: (``Scanner::o200k_bulk``), with windows starting anywhere in them.
O200K_WINDOW_ITEMS = [
    *"aZbYsStTmMdDlLvVrReE0159 \t\n\r\x0b\x0c\x1c'/!.,-_(){}\"#",
    *["  ", "\r\n", "\n\n", "'s", "'ll", "'RE", "'ve", "'t's", "/\n", ";\n/", ";\n/.", "\n/"],
    *["123456", "x" * 20, "Ab" * 9, " " * 20, "\n" + " " * 30, "\n" + " " * 70 + "x"],
]


def _o200k_window_texts(seed: int, count: int) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(count):
        yield "".join(rng.choices(O200K_WINDOW_ITEMS, k=rng.randint(20, 160)))


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(O200K_WINDOW_ITEMS), min_size=20, max_size=160))
def test_o200k_windows_find_the_pieces_regex_finds(parts: list[str]) -> None:
    text = "".join(parts)
    assert native.Pretokenizer(O200K).pieces(text) == regex.findall(O200K, text)


def test_o200k_windows_on_many_texts() -> None:
    """Seeded, so a failure is the same on every run: 4,000 texts of 20-160 items."""
    pretokenizer = native.Pretokenizer(O200K)
    for text in _o200k_window_texts(seed=25, count=4000):
        assert pretokenizer.pieces(text) == regex.findall(O200K, text), text


def test_o200k_windows_in_an_encode_match_tiktoken(cl100k_ranks: dict[bytes, int]) -> None:
    """The windows run in a one-byte text's encode, and in a wide str's long ASCII runs."""
    import tiktoken

    from streambpe import Tokenizer

    reference = tiktoken.Encoding(
        "o200k_pattern", pat_str=O200K, mergeable_ranks=cl100k_ranks, special_tokens={}
    )
    tokenizer = Tokenizer.from_ranks(cl100k_ranks, pattern=O200K)
    texts = list(_o200k_window_texts(seed=7, count=200))
    for text in (*texts, "\u4e00".join(texts)):
        assert tokenizer.encode_ordinary(text) == reference.encode_ordinary(text)


def test_count_into_counts_many_texts_like_counter() -> None:
    """Enough distinct pieces to grow the native tally; a lone surrogate survives intact."""
    text = " ".join(f"w{number % 5000} {number}" for number in range(40_000))
    counts: dict[str, int] = {}
    native.Pretokenizer(GPT2).count_into([text, "\ud800x", text[:99]], counts)
    expected = Counter(regex.findall(GPT2, text))
    expected.update(regex.findall(GPT2, "\ud800x") + regex.findall(GPT2, text[:99]))
    assert counts == expected


# --------------------------------------------------------------------------- the class table


def test_class_table_matches_regex_for_every_code_point() -> None:
    expected = [0] * unicode_classes.CODE_POINTS
    text = unicode_classes.all_code_points()
    for index, (_, class_pattern) in enumerate(unicode_classes.CLASS_BITS):
        for match in regex.finditer(class_pattern, text):
            expected[match.start()] |= 1 << index
    found = native.class_bits(text)
    if found != expected:
        code_point = next(
            cp for cp, (a, b) in enumerate(zip(expected, found, strict=True)) if a != b
        )
        pytest.fail(
            f"U+{code_point:04X}: regex {expected[code_point]:#x}, native {found[code_point]:#x}"
        )


def test_class_bits_match_the_native_enum_order() -> None:
    """A spot check per class that names agree with the C++ ``ClassBit`` values."""
    samples = {"letter": "a", "number": "7", "space": " ", "upper_like": "A", "lower_like": "a"}
    samples |= {f"fold_{letter}": letter for letter in "sdmtlver"}
    for name, char in samples.items():
        assert native.class_bits(char)[0] & unicode_classes.bit(name), name


def test_versions_are_recorded() -> None:
    table = unicode_classes.class_table()
    assert table.regex_version == regex.__version__
    assert re.fullmatch(r"(<|>=)?\d+\.\d+", table.unicode_version)


# --------------------------------------------------------------------------- the bridge


def test_names_resolve_and_patterns_outside_the_subset_are_refused() -> None:
    assert native.Pretokenizer("cl100k_base").pattern == CL100K
    with pytest.raises(ValueError, match="outside the subset"):
        native.Pretokenizer(r"\w+")


def test_empty_text() -> None:
    for pattern in PATTERNS.values():
        assert native.Pretokenizer(pattern).pieces("") == []
        assert native.Pretokenizer(pattern).piece_count("") == 0


# --------------------------------------------------------------------------- every code point


@pytest.fixture(scope="module", autouse=True)
def exhaustive_runs(
    request: pytest.FixtureRequest,
) -> Iterator[dict[tuple[str, str], Future[str | None]]]:
    """Every (context, pattern) comparison, submitted to two worker processes.

    Autouse, so that the workers run while the other tests of this module do
    (the comparisons come last), but only when some of them were selected.
    """
    if not any(
        getattr(item, "originalname", None) == "test_every_code_point_in_context"
        for item in request.session.items
    ):
        yield {}
        return
    native.class_bits("a")  # build the class table once, before forking
    # fork: the workers inherit the imported modules and the class table.
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        yield {
            (context, pattern): pool.submit(compare_context, separator, pattern)
            for context, separator in CONTEXTS.items()
            for pattern in PATTERNS
        }


@pytest.mark.slow
@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("context", CONTEXTS)
def test_every_code_point_in_context(
    exhaustive_runs: dict[tuple[str, str], Future[str | None]], context: str, pattern: str
) -> None:
    assert exhaustive_runs[context, pattern].result() is None
