"""The compiled encoder's ASCII stretches: a wide str whose long ASCII runs are read as bytes.

One character beyond ASCII makes CPython store a whole str in 2 or 4 bytes
a character (1 for Latin-1). Under a built-in pattern the compiled encoder
then encodes each run of 128 ASCII characters or more as one-byte text, up to
the last place a space follows a non-space (the cut rule of
``streambpe.cutting.rule``), and the rest as it is. Each case here puts a
stretch's edge where a wrong cut would change a piece, and checks both
backends against tiktoken (``check_encode``: ``encode`` with and without
special tokens, ``encode_ordinary``, ``count_tokens``, ``encode_to_array``),
on cl100k's ranks: unlike r50k's they have tokens for runs of spaces, so a
cut that splits a run of whitespace shows in the ids. A property test runs
the same check on random text of this shape (``mostly_ascii_text``).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import tiktoken
import tiktoken.load
from adversarial_text import SPECIAL, mostly_ascii_text
from hypothesis import HealthCheck, given, settings
from test_fuzz_differential import check_encode_against, tiktoken_with

from streambpe import Tokenizer
from streambpe.core import using_backend
from streambpe.patterns import CL100K, GPT2, O200K

native = pytest.importorskip(
    "streambpe.core._native", reason="the compiled core was not built (no C++ compiler at install)"
)

CL100K_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "tiktoken" / "cl100k_base.tiktoken"
SPECIAL_ID = 100257

#: The built-in patterns: only their scanners are known to respect the cut rule.
PATTERNS = [GPT2, CL100K, O200K]
patterns = pytest.mark.parametrize("pattern", PATTERNS, ids=["gpt2", "cl100k", "o200k"])


@cache
def cl100k_ranks() -> dict[bytes, int]:
    return tiktoken.load.load_tiktoken_bpe(str(CL100K_FILE))


@cache
def reference(pattern: str) -> tiktoken.Encoding:
    """tiktoken with cl100k's ranks, ``pattern`` and one special token."""
    return tiktoken_with(f"cl100k_{PATTERNS.index(pattern)}", cl100k_ranks(), pattern, SPECIAL_ID)


@cache
def subject(pattern: str) -> Tokenizer:
    """Our tokenizer equivalent to :func:`reference`, with a small cache that evicts often."""
    return Tokenizer.from_ranks(
        cl100k_ranks(), pattern=pattern, special_tokens={SPECIAL: SPECIAL_ID}, cache_size=64
    )


def check_encode(pattern: str, text: str) -> None:
    """Both backends give tiktoken's ids and counts (cl100k's ranks), special tokens allowed or not."""
    check_encode_against(reference(pattern), subject(pattern), text)


WORDS = "The quick brown fox, don't you think? It's 1234 times (x) -> y;\n    "

CASES = {
    # A run longer than the longest stretch (65,536 characters on), then more.
    "run past the longest stretch": WORDS * 1200 + "\u00e9" + WORDS * 3,
    # Latin-1: one byte a character, the stretch read in place.
    "latin-1 text": WORDS * 4 + "caf\u00e9" + WORDS * 4 + "\u00a9",
    "four-byte text": WORDS * 4 + "\U0001f600" + WORDS * 4,
    # No space after a non-space in the run: no cut, so no stretch.
    "run without a cut": "ab." * 200 + "\u00e9" + "x" * 300 + "\u4e2d",
    # Whitespace whose pieces depend on what ends it: a space beyond ASCII,
    # a newline, a letter beyond ASCII.
    "spaces before a wide space": "word" + " " * 300 + "\u00a0x" + WORDS * 3,
    "spaces before a wide letter": WORDS * 3 + " " * 200 + "\u00e9t\u00e9",
    "newlines and indents": ("\n" + " " * 150 + "\n") * 3 + "\u3000\n" + WORDS * 3,
    "a contraction across the edge": WORDS * 3 + "it\u2019s and it's" + WORDS * 3,
    "a mark after the run": WORDS * 3 + "e\u0301 " + WORDS * 3,
    "capitals into a wide letter": WORDS * 3 + " HTTPS\u00c9rver" + WORDS * 3,
    "digits into wide digits": WORDS * 3 + " 12\u0663\u0664" + WORDS * 3,
    "special tokens between runs": WORDS * 3 + "<|endoftext|>\u00e9" + WORDS * 3 + "<|endoftext|>",
    "runs shorter than a stretch": ("short run \u00e9 " * 40) + WORDS,
}


@patterns
@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_text_with_long_ascii_runs_matches_pure_and_tiktoken(pattern: str, text: str) -> None:
    check_encode(pattern, text)


@patterns
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(text=mostly_ascii_text())
def test_random_text_with_long_ascii_runs_matches_pure_and_tiktoken(
    pattern: str, text: str
) -> None:
    check_encode(pattern, text)


@patterns
@pytest.mark.parametrize("wide", ["\u00e9", "\u4e2d", "\U0001f600", "\u00a0"])
def test_a_stretch_never_ends_inside_whitespace(pattern: str, wide: str) -> None:
    """Runs of spaces and newlines at every offset from the character beyond ASCII.

    The stretch before a long run ends at a cut found in blocks of 16
    characters, so each offset puts the whitespace at another place in them.
    """
    for offset in range(20):
        for blank in ("   ", "\n\n  ", " \t "):
            check_encode(
                pattern, wide + "y" * offset + blank + WORDS * 3 + wide + blank + WORDS * 3
            )


@patterns
def test_ids_handed_over_in_blocks_resume_inside_a_stretch(
    pattern: str, small_id_blocks: tuple[int, int]
) -> None:
    """Once a block of ids is full the kernel pauses mid-stretch, and resumes there."""
    block, _ = small_id_blocks
    text = "\u00e9 " + "x " * (20 * block) + "\u4e2d" + "y " * block
    expected = reference(pattern).encode_ordinary(text)
    assert len(expected) > 20 * block
    with using_backend("native"):
        assert subject(pattern).encode_ordinary(text) == expected
        assert subject(pattern).count_tokens(text) == len(expected)


def test_a_lone_surrogate_after_a_stretch_is_found_where_it_is() -> None:
    """The error names the surrogate's offset in the whole text, not in a stretch."""
    text = WORDS * 5 + "\ud800" + WORDS
    kernel = native.PieceEncoder({bytes([byte]): byte for byte in range(256)}, {}, 64)
    with pytest.raises(UnicodeEncodeError) as raised:
        kernel.encode_text(text, GPT2, None, [])
    assert raised.value.start == text.index("\ud800")
    # The tokenizer then encodes it as tiktoken does (the surrogate replaced).
    with using_backend("native"):
        assert subject(GPT2).encode(text) == reference(GPT2).encode(text)
