"""The cut rule itself: cutting at any safe cut never changes a piece, for every built-in pattern."""

from __future__ import annotations

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from streambpe.cutting.rule import is_safe_byte_cut, is_safe_cut, last_safe_cut, next_safe_cut
from streambpe.patterns import CL100K, GPT2, O200K

PATTERNS = {"gpt2": GPT2, "cl100k": CL100K, "o200k": O200K}

# Fragments chosen around the cut rule: spaces and newlines next to letters, digits,
# punctuation, other whitespace, marks and letters from scripts without spaces.
FRAGMENTS = [
    " ", "  ", "\n", "\n\n", "\r\n", "\r", "\t", "\u00a0", "\u3000", "\x0b", "\x85", "\x1c",
    "a", "Ab", "xyz", "é", "e\u0301", "\u0301", "吾輩", "猫", "。", "、", "ไทย", "١٢", "42", "7",
    ".", "!?", "/", "'s", "'LL", "'", "-", "🙃", "👍🏽", "ǅ", "ʰ",
]  # fmt: skip
texts = st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(texts)
def test_every_safe_cut_keeps_every_piece(text: str) -> None:
    """Guards docs/design.md, "Safe cuts" at its root: pieces(text) == pieces(left) + pieces(right) at a safe cut."""
    for pattern in PATTERNS.values():
        compiled = regex.compile(pattern)
        whole = compiled.findall(text)
        for position in range(len(text) + 1):
            if is_safe_cut(text, position):
                assert (
                    compiled.findall(text[:position]) + compiled.findall(text[position:]) == whole
                )


@settings(max_examples=200, deadline=None)
@given(texts)
def test_byte_rule_matches_text_rule(text: str) -> None:
    """Guards the file chunker: the byte-level rule finds exactly the text-level cuts."""
    data = text.encode("utf-8")
    char_starts = {len(text[:index].encode("utf-8")): index for index in range(len(text) + 1)}
    for offset in range(len(data) + 1):
        expected = offset in char_starts and is_safe_cut(text, char_starts[offset])
        assert is_safe_byte_cut(data, offset) == expected


@settings(max_examples=200, deadline=None)
@given(texts, st.integers(0, 40), st.integers(0, 40))
def test_next_and_last_find_the_extreme_cuts(text: str, low: int, high: int) -> None:
    """Guards the searches against a scan of every position."""
    cuts = [p for p in range(len(text) + 1) if is_safe_cut(text, p)]
    assert next_safe_cut(text, low) == min([p for p in cuts if p >= low], default=len(text))
    inside = [p for p in cuts if low <= p <= high]
    assert last_safe_cut(text, low, high) == (max(inside) if inside else None)


def test_a_whitespace_run_before_a_newline_is_not_a_cut() -> None:
    """The classic trap: after "a \\n" or "a\\n\\n" the newline run's pieces depend on what follows."""
    for text in ("a \nb", "a\n\nb", "a\r\nb", " \nb"):
        assert not any(is_safe_cut(text, p) for p in range(2, len(text)) if text[p - 1] == "\n")
