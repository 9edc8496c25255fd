"""Pretokenizer: its ASCII fast path and block path give exactly ``regex.findall``'s pieces."""

from __future__ import annotations

import random

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from streambpe.core.pretokenize import Pretokenizer
from streambpe.cutting.rule import next_safe_cut
from streambpe.patterns import CL100K, GPT2, O200K

BUILTIN_PATTERNS = {"gpt2": GPT2, "cl100k": CL100K, "o200k": O200K}

ALL_ASCII = [chr(code) for code in range(128)]
# fmt: off
NON_ASCII = [
    "é", "É", "ß", "\u017f", "\u212a", "ǅ", "ʰ", "\u0301", "日", "ア", "한", "ع", "ש", "П",
    "٣", "½", "²", "\u00a0", "\u3000", "\u2028", "\x85", "\u180e", "\u200b", "🙃", "\U0001f3fd",
]
# fmt: on
# Whitespace and controls get a branch of their own so that runs of them are common:
# \x0b and \x0c are \s, \x1c-\x1f are not (though str.isspace says they are).
# fmt: off
WHITESPACE_AND_CONTROLS = [
    "\t", "\n", "\x0b", "\x0c", "\r", " ", "\x00", "\x1b", "\x7f", "\x1c", "\x1d", "\x1e", "\x1f",
]
# fmt: on
ASCII_FRAGMENTS = ["\r\n", "'s", "'LL", "'Re", "  ", "123456", "\x1c ", " \x1f", "\r\n  "]
pure_ascii_text = st.lists(
    st.one_of(
        st.sampled_from(ALL_ASCII),
        st.sampled_from(WHITESPACE_AND_CONTROLS),
        st.sampled_from(ASCII_FRAGMENTS),
    ),
    max_size=80,
).map("".join)
ascii_heavy_text = st.lists(
    st.one_of(
        st.sampled_from(ALL_ASCII),
        st.sampled_from(WHITESPACE_AND_CONTROLS),
        st.sampled_from(ASCII_FRAGMENTS),
        st.sampled_from(NON_ASCII),
    ),
    max_size=80,
).map("".join)


@pytest.mark.parametrize("pattern_name", sorted(BUILTIN_PATTERNS))
@settings(max_examples=200, deadline=None)
@given(text=ascii_heavy_text)
def test_pieces_equal_regex_findall(pattern_name: str, text: str) -> None:
    """Guards the ASCII spellings: same pieces as the real pattern, incl. \\x1c-\\x1f and controls."""
    pattern = BUILTIN_PATTERNS[pattern_name]
    assert Pretokenizer(pattern).pieces(text) == regex.compile(pattern).findall(text)


@pytest.mark.parametrize("pattern_name", sorted(BUILTIN_PATTERNS))
@settings(max_examples=200, deadline=None)
@given(text=pure_ascii_text)
def test_pure_ascii_pieces_equal_regex_findall(pattern_name: str, text: str) -> None:
    """Guards the all-ASCII fast path (``re`` with ASCII classes) on every ASCII character."""
    pattern = BUILTIN_PATTERNS[pattern_name]
    assert Pretokenizer(pattern).pieces(text) == regex.compile(pattern).findall(text)


@pytest.mark.parametrize("pattern_name", sorted(BUILTIN_PATTERNS))
@settings(max_examples=150, deadline=None)
@given(text=ascii_heavy_text, block_size=st.integers(1, 12))
def test_small_blocks_give_the_same_pieces(pattern_name: str, text: str, block_size: int) -> None:
    """Guards the block path: cutting mixed text into blocks never moves a piece boundary."""
    pattern = BUILTIN_PATTERNS[pattern_name]
    pretokenizer = Pretokenizer(pattern, block_size=block_size)
    assert pretokenizer.pieces(text) == regex.compile(pattern).findall(text)


def _long_mixed_text(seed: int) -> str:
    rng = random.Random(seed)
    ascii_words = ["the", " cat", "'s", "  ", "\n", "\r\n", "123456", "!?", "\t", "\x1c", "\x1f "]
    other_words = ["日本語", " naïve", "\u00a0", "🙃", "\u3000 ", "e\u0301", "\u017f'S"]
    parts: list[str] = []
    for _ in range(20_000):
        # Long ASCII stretches with occasional non-ASCII: some blocks take each path.
        pool = other_words if rng.random() < 0.01 else ascii_words
        parts.append(rng.choice(pool))
        parts.append(" " if rng.random() < 0.5 else "")
    return "".join(parts)


@pytest.mark.parametrize("pattern_name", sorted(BUILTIN_PATTERNS))
def test_long_mixed_text_uses_blocks_and_matches(pattern_name: str) -> None:
    """Guards the default block size on texts far longer than one block."""
    pattern = BUILTIN_PATTERNS[pattern_name]
    text = _long_mixed_text(seed=3)
    assert not text.isascii()
    assert len(text) > 20 * Pretokenizer(pattern).block_size
    assert Pretokenizer(pattern).pieces(text) == regex.compile(pattern).findall(text)


def test_custom_pattern_is_plain_findall() -> None:
    """Guards custom patterns: no ASCII rewrite, so the pieces are the pattern's own."""
    pattern = r"\w+ ?|\W"
    text = "one two  three é日 " * 300
    assert Pretokenizer(pattern, block_size=8).pieces(text) == regex.findall(pattern, text)


@pytest.mark.parametrize(
    ("text", "start", "expected"),
    [
        ("a  b c", 2, 4),
        ("a b", 0, 1),
        ("ab", 0, 2),
        ("\x1c b", 0, 3),
        ("   ", 0, 3),
        ("。\n吾", 0, 2),
        ("a\nb", 0, 2),
        ("a\n\nb", 0, 4),
        ("a\r\nb", 0, 4),
        ("a\n1", 0, 3),
        ("a\n b", 0, 4),
    ],
)
def test_next_safe_cut(text: str, start: int, expected: int) -> None:
    """Guards the block cut: a space after non-whitespace, or a letter after "X\\n", else the end."""
    assert next_safe_cut(text, start) == expected
