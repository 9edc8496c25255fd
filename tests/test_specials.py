"""SpecialTokenScanner: leftmost-longest matching, checked against a brute-force matcher."""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streambpe.cutting.specials import SpecialTokenScanner, validate_special_tokens

Oracle = Callable[[str, Sequence[str]], list[tuple[int, int, str]]]

OVERLAPPING = ["ab", "abc", "bcd", "<|a|>", "<|a|><|a|>"]

special_sets = st.lists(
    st.text(alphabet="ab<|>", min_size=1, max_size=6), min_size=1, max_size=6, unique=True
)
# Texts built from fragments of the overlapping set, so partial and chained matches are common.
overlap_texts = st.lists(
    st.sampled_from(["a", "b", "c", "d", "<", "|", ">", *OVERLAPPING, "<|a|", "|><|"]),
    max_size=25,
).map("".join)


def _as_tuples(scanner: SpecialTokenScanner, text: str) -> list[tuple[int, int, str]]:
    return [(m.start, m.end, m.token) for m in scanner.matches(text)]


@settings(max_examples=300, deadline=None)
@given(tokens=special_sets, text=st.text(alphabet="ab<|>", max_size=40))
def test_matches_equal_brute_force_on_random_sets(
    tokens: list[str], text: str, special_matches_oracle: Oracle
) -> None:
    """Guards rule 2: every leftmost-longest match is found, none invented or dropped."""
    assert _as_tuples(SpecialTokenScanner(tokens), text) == special_matches_oracle(text, tokens)


@settings(max_examples=300, deadline=None)
@given(
    tokens=st.lists(st.sampled_from(OVERLAPPING), min_size=1, max_size=5, unique=True),
    text=overlap_texts,
)
def test_matches_equal_brute_force_on_overlapping_tokens(
    tokens: list[str], text: str, special_matches_oracle: Oracle
) -> None:
    """Guards the iter_long pitfall: prefix/overlapping tokens and failed partial matches."""
    assert _as_tuples(SpecialTokenScanner(tokens), text) == special_matches_oracle(text, tokens)


@pytest.mark.parametrize(
    ("tokens", "text", "expected"),
    [
        (["ab"], "xxab", [(2, 4, "ab")]),
        (["ab", "abc"], "zzab", [(2, 4, "ab")]),
        (["abc", "bcd"], "xabcd", [(1, 4, "abc")]),
        (["ab", "abc", "bcd"], "abcabd", [(0, 3, "abc"), (3, 5, "ab")]),
        (["<|a|>", "<|a|><|a|>"], "<|a|><|a|", [(0, 5, "<|a|>")]),
        (["<|a|>", "<|a|><|a|>"], "x<|a|><|a|>", [(1, 11, "<|a|><|a|>")]),
        (["<|a|>", "<|a|><|a|>"], "<|a|><|a|><|a|>", [(0, 10, "<|a|><|a|>"), (10, 15, "<|a|>")]),
        (["aa"], "aaa", [(0, 2, "aa")]),
        (["<|endoftext|>"], "<|endoftext", []),
    ],
)
def test_matches_known_cases(
    tokens: list[str], text: str, expected: list[tuple[int, int, str]]
) -> None:
    """Guards matches at the very end of the input and after a failed partial match."""
    assert _as_tuples(SpecialTokenScanner(tokens), text) == expected


@settings(max_examples=150, deadline=None)
@given(tokens=special_sets, text=st.text(alphabet="ab<|>", max_size=30), data=st.data())
def test_matches_in_a_window_use_text_offsets(
    tokens: list[str], text: str, data: st.DataObject, special_matches_oracle: Oracle
) -> None:
    """Guards ``matches(text, start, end)``: scans only the window, reports offsets into ``text``."""
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    expected = [
        (s + start, e + start, token)
        for s, e, token in special_matches_oracle(text[start:end], tokens)
    ]
    got = [(m.start, m.end, m.token) for m in SpecialTokenScanner(tokens).matches(text, start, end)]
    assert got == expected


@settings(max_examples=150, deadline=None)
@given(tokens=special_sets, text=st.text(alphabet="ab<|>", max_size=30))
def test_split_covers_the_text(
    tokens: list[str], text: str, special_matches_oracle: Oracle
) -> None:
    """Guards ``split``: ordinary text and tokens, in order, rebuild the input exactly."""
    pairs = list(SpecialTokenScanner(tokens).split(text))
    assert "".join(ordinary + (special or "") for ordinary, special in pairs) == text
    assert pairs[-1][1] is None
    assert [s for _, s in pairs[:-1]] == [t for _, _, t in special_matches_oracle(text, tokens)]


def test_empty_scanner_finds_nothing() -> None:
    """Guards the no-special case: a falsy scanner that yields the whole text."""
    scanner = SpecialTokenScanner([])
    assert not scanner
    assert scanner.matches("<|endoftext|>") == []
    assert list(scanner.split("abc")) == [("abc", None)]


def test_scanner_survives_pickling() -> None:
    """Guards worker processes: a pickled scanner still matches leftmost-longest."""
    scanner = pickle.loads(pickle.dumps(SpecialTokenScanner(OVERLAPPING)))
    assert _as_tuples(scanner, "xabcd<|a|><|a|>") == [(1, 4, "abc"), (5, 15, "<|a|><|a|>")]


@pytest.mark.parametrize(
    ("tokens", "error", "message"),
    [
        ([""], ValueError, "empty special token"),
        (["<s>", "</s>", "<s>"], ValueError, "duplicate special token '<s>'"),
        ("<|endoftext|>", TypeError, "write ['<|endoftext|>']"),
        ([b"<s>"], TypeError, "not a str"),
    ],
)
def test_validate_special_tokens_rejects_bad_lists(
    tokens: object, error: type[Exception], message: str
) -> None:
    """Guards rule 8: empty, duplicate, or non-list special tokens raise a helpful error."""
    with pytest.raises(error, match=re.escape(message)):
        validate_special_tokens(tokens)  # type: ignore[arg-type]
    with pytest.raises(error):
        SpecialTokenScanner(tokens)  # type: ignore[arg-type]


def test_validate_special_tokens_accepts_good_lists() -> None:
    """Guards the happy path: None means none, order is kept, any iterable works."""
    assert validate_special_tokens(None) == []
    assert validate_special_tokens(("<b>", "<a>")) == ["<b>", "<a>"]
    assert validate_special_tokens(iter(["x"])) == ["x"]


non_ascii_alphabet = st.sampled_from(["a", "<", ">", "é", "日", "🙃", "\u00a0", "x"])
non_ascii_specials = st.lists(
    st.sampled_from(["<é>", "🙃🙃", "日", "é<", "<x>", "a🙃"]), min_size=1, max_size=4, unique=True
)


@settings(max_examples=200, deadline=None)
@given(tokens=non_ascii_specials, text=st.lists(non_ascii_alphabet, max_size=30).map("".join))
def test_non_ascii_specials_match_like_the_oracle(
    tokens: list[str], text: str, special_matches_oracle: Oracle
) -> None:
    """Guards multi-byte and astral characters: offsets are character offsets, as the oracle's."""
    got = [(m.start, m.end, m.token) for m in SpecialTokenScanner(tokens).matches(text)]
    assert got == [tuple(match) for match in special_matches_oracle(text, tokens)]
