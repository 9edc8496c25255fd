"""Differential fuzzing: the compiled core against the pure-Python one and against tiktoken.

On adversarial text (``tests/adversarial_text.py``) every check compares
three implementations that must agree exactly: pretokenizing (native scanner,
pure ``Pretokenizer``, ``regex.findall``), ``encode``, ``encode_ordinary``
and ``count_tokens`` (both backends and tiktoken, built from r50k's ranks
with each pattern, built-in and custom), training merges (native and pure merge loops on the word
counts of the text), and streaming (``encode_iterable`` at every chunk size
against ``encode`` of the whole text, special tokens cut anywhere).

The tokenizers here have a tiny piece cache, so eviction runs all the time.
The checks are plain functions (``check_*``) so ``tests/fuzz_long.py`` can run
them for as long as wanted, under the sanitizer build; here each runs a
bounded number of examples.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import regex
import tiktoken
import tiktoken.load
from adversarial_text import SPECIAL, adversarial_text, valid_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streambpe import Tokenizer
from streambpe.core import NATIVE, PYTHON, merge_loop, using_backend
from streambpe.core.pretokenize import Pretokenizer
from streambpe.patterns import CL100K, GPT2, O200K
from streambpe.train.counting import count_words_in_text

if NATIVE is None:
    pytest.skip("the compiled core was not built", allow_module_level=True)

TIKTOKEN_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tiktoken"

#: A custom pattern in the subset the compiled matcher runs (a GPT-2 variant
#: with a possessive digit group and no look-ahead).
CUSTOM = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}{1,3}+| ?[^\s\p{L}\p{N}]+|\s+"""

#: Every pattern the compiled scanners run: the three hand-written ones and
#: compiled custom ones. Another custom pattern is one more entry.
PATTERNS = [GPT2, CL100K, O200K, CUSTOM]
PATTERN_IDS = ["gpt2", "cl100k", "o200k", "custom"]

#: Small enough that a few fragments of text evict entries all the time.
TINY_CACHE = 16

FUZZ = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


@cache
def r50k_ranks() -> dict[bytes, int]:
    return tiktoken.load.load_tiktoken_bpe(str(TIKTOKEN_FIXTURES / "r50k_base.tiktoken"))


def tiktoken_with(
    name: str, ranks: dict[bytes, int], pattern: str, special_id: int
) -> tiktoken.Encoding:
    """tiktoken with ``ranks``, ``pattern`` and :data:`SPECIAL` as ``special_id``."""
    return tiktoken.Encoding(
        name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={SPECIAL: special_id}
    )


@cache
def reference(pattern: str) -> tiktoken.Encoding:
    """tiktoken with r50k's ranks, ``pattern`` and one special token."""
    return tiktoken_with(f"r50k_{PATTERNS.index(pattern)}", r50k_ranks(), pattern, 50256)


@cache
def subject(pattern: str) -> Tokenizer:
    """Our tokenizer equivalent to :func:`reference` (its kernels exist per backend)."""
    return Tokenizer.from_ranks(
        r50k_ranks(), pattern=pattern, special_tokens={SPECIAL: 50256}, cache_size=TINY_CACHE
    )


# --------------------------------------------------------------------------- checks


def check_pretokenize(pattern: str, text: str) -> None:
    """Native scanner, pure pretokenizer and ``regex`` cut ``text`` into the same pieces."""
    expected = regex.findall(pattern, text)
    assert Pretokenizer(pattern).pieces(text) == expected
    assert NATIVE is not None
    assert NATIVE.pretokenizer(pattern).pieces(text) == expected


def check_encode(pattern: str, text: str) -> None:
    """Both backends give tiktoken's ids and counts, special tokens allowed or not."""
    check_encode_against(reference(pattern), subject(pattern), text)


def check_encode_against(
    tiktoken_encoding: tiktoken.Encoding, tokenizer: Tokenizer, text: str
) -> None:
    """:func:`check_encode` for any pair of equivalent encodings (another vocabulary, say)."""
    with_specials = tiktoken_encoding.encode(text, allowed_special="all")
    ordinary = tiktoken_encoding.encode_ordinary(text)
    for backend in (NATIVE, PYTHON):
        assert backend is not None
        with using_backend(backend.name):
            assert tokenizer.encode(text, allowed_special="all") == with_specials, backend.name
            assert tokenizer.encode(text) == with_specials, backend.name
            assert tokenizer.encode_ordinary(text) == ordinary, backend.name
            assert tokenizer.count_tokens(text, allowed_special="all") == len(with_specials)
            assert tokenizer.count_tokens(text, disallowed_special=()) == len(ordinary)
            assert tokenizer.encode_to_array(text, allowed_special="all").tolist() == with_specials


def check_stream_splits(pattern: str, text: str) -> None:
    """``encode_iterable`` gives ``encode``'s ids at every chunk size, on both backends."""
    tokenizer = subject(pattern)
    for backend in (NATIVE, PYTHON):
        assert backend is not None
        with using_backend(backend.name):
            whole = tokenizer.encode(text)
            for size in range(1, len(text) + 1):
                chunks = [text[i : i + size] for i in range(0, len(text), size)]
                assert list(tokenizer.encode_iterable(chunks)) == whole, (backend.name, size)


def check_training(pattern: str, text: str, max_merges: int) -> None:
    """Word counts (both scanners) and merges (both merge loops) are identical."""
    with using_backend("python"):
        counts = count_words_in_text(text, pattern, [SPECIAL])
    with using_backend("native"):
        assert count_words_in_text(text, pattern, [SPECIAL]) == counts
    expected = merge_loop.learn_merges(dict(counts), max_merges)
    assert NATIVE is not None
    assert NATIVE.learn_merges(dict(counts), max_merges) == expected


# --------------------------------------------------------------------------- tests

patterns = pytest.mark.parametrize("pattern", PATTERNS, ids=PATTERN_IDS)


@patterns
@FUZZ
@given(text=adversarial_text())
def test_pretokenize_matches_pure_and_regex(pattern: str, text: str) -> None:
    check_pretokenize(pattern, text)


@patterns
@FUZZ
@given(text=adversarial_text())
def test_encode_matches_pure_and_tiktoken(pattern: str, text: str) -> None:
    check_encode(pattern, text)


@patterns
@FUZZ
@given(text=adversarial_text(max_fragments=4).map(lambda text: text[:60]))
def test_stream_splits_at_every_chunk_size(pattern: str, text: str) -> None:
    check_stream_splits(pattern, text)


@patterns
@FUZZ
@given(text=valid_text(), max_merges=st.integers(0, 80))
def test_training_merges_match_pure(pattern: str, text: str, max_merges: int) -> None:
    check_training(pattern, text, max_merges)


#: Each check, by name, with the strategy of its arguments (for ``tests/fuzz_long.py``).
CHECKS = {
    "pretokenize": (check_pretokenize, st.tuples(st.sampled_from(PATTERNS), adversarial_text())),
    "encode": (check_encode, st.tuples(st.sampled_from(PATTERNS), adversarial_text())),
    "stream": (
        check_stream_splits,
        st.tuples(
            st.sampled_from(PATTERNS),
            adversarial_text(max_fragments=4).map(lambda t: t[:60]),
        ),
    ),
    "training": (
        check_training,
        st.tuples(st.sampled_from(PATTERNS), valid_text(), st.integers(0, 80)),
    ),
}
