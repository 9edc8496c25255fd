"""Chunking and counting: cutting a file anywhere the code chooses never changes a result.

docs/design.md, "Safe cuts". Each test compares chunked output with the whole text processed
at once, and with a reference built from plain ``regex.findall``.
"""

from __future__ import annotations

import itertools
import random
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from streambpe.cutting.byte_ranges import plan_byte_ranges
from streambpe.cutting.chunks import UNMAP_EVERY, find_chunk_boundaries
from streambpe.patterns import CL100K, GPT2, O200K, SPACE_SPLITTABLE_PATTERNS
from streambpe.sources.inputs import resolve_inputs
from streambpe.train.count_tasks import CountSettings
from streambpe.train.counting import count_words_in_inputs, count_words_in_text
from streambpe.train.options import TrainOptions

# The exactness tests run once per backend (docs/design.md, "Backends").
pytestmark = pytest.mark.usefixtures("backend")

PiecesOracle = Callable[[str, str, Sequence[str]], list[str]]

BUILTIN_PATTERNS = {"gpt2": GPT2, "cl100k": CL100K, "o200k": O200K}
EOT = "<|endoftext|>"


def _count_file(
    path: str | Path, pattern: str, specials: Sequence[str], *, chunk_size: int, **run: Any
) -> dict[str, int]:
    """Word counts of a file through the counting step, options built as train_bpe builds them."""
    count_settings = CountSettings(pattern, tuple(specials), chunk_size=chunk_size)
    return count_words_in_inputs(resolve_inputs(path), TrainOptions(count_settings, **run))


WHITESPACE = regex.compile(r"\s")
SPECIAL_SETS: list[list[str]] = [
    [],
    [EOT],
    [EOT, EOT + EOT],
    ["ab", "abc", "bcd"],
]
# fmt: off
FRAGMENTS = [
    " ", "  ", "     ", "\t", "\t\t ", "\n", "\n\n", "\r\n", "\r\n\r\n", " \r\n ", "\r",
    "\u00a0", " \u00a0 ", "\u3000", "\u2028", "\x85", "\x0b", "\x0c", "\x1c",
    "hello", " world", "Hello", "WORLD", "ab", "abcd", "bc", "x",
    "don't", "'s", "'S", "'Ll", "'ve", "'RE", "I'm",
    "1", "42", "12345", "3.14", " 7",
    "héllo", " naïve", "日本語", " 中文", "مرحبا", " שלום", "Привет", "e\u0301",
    "🙃", "👍🏽", "👨‍👩‍👧", " 🙃🙃",
    "!!", "...", "?", " -- ", "/", "$",
    EOT, EOT + EOT, "<|endo", "ftext|>", "<|", "|>",
]
# fmt: on
adversarial_texts = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3)), max_size=40
).map("".join)


def _is_safe_cut(text_bytes: bytes, position: int, specials: Sequence[str]) -> bool:
    """The cuts docs/design.md allows: a special token's start, a space after non-space, or a
    letter after a newline that follows non-space.

    "Space" means the patterns' ``\\s``, which (unlike ``str.isspace``) excludes U+001C-U+001F.
    """
    if any(text_bytes.startswith(token.encode(), position) for token in specials):
        return True
    before = text_bytes[:position].decode("utf-8")
    after = text_bytes[position:].decode("utf-8")
    if after[:1] == " ":
        return WHITESPACE.fullmatch(before[-1]) is None
    return (
        before[-1:] == "\n"
        and len(before) >= 2
        and WHITESPACE.fullmatch(before[-2]) is None
        and regex.fullmatch(r"\p{L}", after[:1]) is not None
    )


@settings(max_examples=150, deadline=None)
@given(
    text=adversarial_texts,
    specials=st.sampled_from(SPECIAL_SETS),
    pattern_name=st.sampled_from(sorted(BUILTIN_PATTERNS)),
)
def test_boundaries_keep_every_piece(
    text: str, specials: list[str], pattern_name: str, pieces_oracle: PiecesOracle
) -> None:
    """Guards "Safe cuts": pieces of the chunks, concatenated, are exactly the pieces of the whole."""
    pattern = BUILTIN_PATTERNS[pattern_name]
    data = text.encode("utf-8")
    expected = pieces_oracle(text, pattern, specials)
    for chunk_size in (1, 2, 7, 64):
        boundaries = find_chunk_boundaries(data, chunk_size, specials, space_cuts=True)
        assert boundaries[0] == 0
        assert boundaries[-1] == len(data)
        assert boundaries == sorted(set(boundaries))
        chunks = [data[a:b].decode("utf-8") for a, b in itertools.pairwise(boundaries)]
        assert "".join(chunks) == text
        for start, end in itertools.pairwise(boundaries[1:]):
            assert _is_safe_cut(data, start, specials), (chunk_size, start)
            assert end - start >= chunk_size or end == len(data)
        got = [piece for chunk in chunks for piece in pieces_oracle(chunk, pattern, specials)]
        assert got == expected, chunk_size


@settings(max_examples=150, deadline=None)
@given(text=adversarial_texts, chunk_size=st.integers(1, 16))
def test_boundaries_never_split_a_utf8_character(text: str, chunk_size: int) -> None:
    """Guards decoding per chunk: every cut falls between whole UTF-8 characters."""
    data = text.encode("utf-8")
    for space_cuts in (True, False):
        for boundary in find_chunk_boundaries(data, chunk_size, [EOT], space_cuts=space_cuts):
            data[:boundary].decode("utf-8")  # raises if the cut is inside a character
            assert boundary == len(data) or data[boundary] >> 6 != 0b10


def test_whitespace_runs_and_overlapping_specials_are_not_cut() -> None:
    """Guards the unsafe places: inside a whitespace run, inside a chained special token."""
    data = b"a" + b" " * 20 + b"b"
    assert find_chunk_boundaries(data, 3, [], space_cuts=True) == [0, len(data)]
    chained = (EOT * 3).encode()
    assert find_chunk_boundaries(chained, 1, [EOT, EOT + EOT], space_cuts=True) == [0, len(chained)]
    assert find_chunk_boundaries(chained, 1, [EOT], space_cuts=True) == [0, 13, 26, 39]


def test_chunk_size_must_be_positive() -> None:
    """Guards a clear error for a meaningless chunk size."""
    with pytest.raises(ValueError, match="chunk_size"):
        find_chunk_boundaries(b"abc", 0, [], space_cuts=True)


def _write(directory: str, text: str) -> Path:
    path = Path(directory) / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    return path


@settings(max_examples=80, deadline=None)
@given(
    text=adversarial_texts.filter(bool),
    specials=st.sampled_from(SPECIAL_SETS),
    pattern_name=st.sampled_from(sorted(BUILTIN_PATTERNS)),
)
def test_counting_a_file_in_chunks_equals_counting_the_text(
    text: str, specials: list[str], pattern_name: str, pieces_oracle: PiecesOracle
) -> None:
    """Guards "Safe cuts" end to end: any chunk size gives the word counts of the whole text."""
    pattern = BUILTIN_PATTERNS[pattern_name]
    expected = dict(Counter(pieces_oracle(text, pattern, specials)))
    assert count_words_in_text(text, pattern, specials) == expected
    with tempfile.TemporaryDirectory() as directory:
        path = _write(directory, text)
        for chunk_size in (1, 7, 64, 4096):
            got = _count_file(path, pattern, specials, workers=1, chunk_size=chunk_size)
            assert got == expected, chunk_size


def _seeded_corpus(seed: int, fragments: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(FRAGMENTS) for _ in range(fragments))


@pytest.mark.parametrize("pattern_name", sorted(BUILTIN_PATTERNS))
def test_counting_with_two_workers_equals_counting_the_text(
    pattern_name: str, tmp_path: Path, pieces_oracle: PiecesOracle
) -> None:
    """Guards "Determinism": worker processes and chunk sizes do not change the counts."""
    pattern = BUILTIN_PATTERNS[pattern_name]
    specials = [EOT, EOT + EOT]
    text = _seeded_corpus(seed=len(pattern_name), fragments=6000)
    path = _write(str(tmp_path), text)
    expected = dict(Counter(pieces_oracle(text, pattern, specials)))
    for chunk_size in (64, 4096):
        for workers in (1, 2):
            got = _count_file(path, pattern, specials, workers=workers, chunk_size=chunk_size)
            assert got == expected, (chunk_size, workers)


@settings(max_examples=10, deadline=None)
@given(text=adversarial_texts.filter(bool), chunk_size=st.sampled_from([1, 7, 64]))
def test_counting_with_two_workers_on_random_text(
    text: str, chunk_size: int, pieces_oracle: PiecesOracle
) -> None:
    """Guards the pool path on hypothesis text: same counts as the whole text."""
    specials = [EOT, EOT + EOT]
    with tempfile.TemporaryDirectory() as directory:
        path = _write(directory, text)
        got = _count_file(path, GPT2, specials, workers=2, chunk_size=chunk_size)
    assert got == dict(Counter(pieces_oracle(text, GPT2, specials)))


def test_counting_on_any_executor(tmp_path: Path, pieces_oracle: PiecesOracle) -> None:
    """Guards the scale-out seam: a user-supplied Executor gives the same counts."""
    text = _seeded_corpus(seed=7, fragments=3000)
    path = _write(str(tmp_path), text)
    with ThreadPoolExecutor(2) as executor:
        got = _count_file(path, CL100K, [EOT], executor=executor, chunk_size=97)
    assert got == dict(Counter(pieces_oracle(text, CL100K, [EOT])))


@pytest.mark.parametrize("pattern_name", sorted(BUILTIN_PATTERNS))
def test_file_without_specials_is_cut_into_bounded_ranges(
    pattern_name: str, tmp_path: Path
) -> None:
    """Guards bounded memory: one long document still becomes many small byte ranges."""
    rng = random.Random(1)
    words = ["alpha", "beta", "gamma", "délta", "日本", "🙃", "42", "don't", "\n", "  "]
    text = " ".join(rng.choice(words) for _ in range(40_000))
    path = _write(str(tmp_path), text)
    chunk_size = 4096
    ranges = plan_byte_ranges(
        path,
        chunk_size=chunk_size,
        special_tokens=[],
        space_cuts=BUILTIN_PATTERNS[pattern_name] in SPACE_SPLITTABLE_PATTERNS,
    )
    size = path.stat().st_size
    assert len(ranges) >= size // (2 * chunk_size)
    assert max(r.end - r.start for r in ranges) <= chunk_size + 64
    assert [r.start for r in ranges[1:]] == [r.end for r in ranges[:-1]]
    assert (ranges[0].start, ranges[-1].end) == (0, size)


def test_planning_a_memory_map_equals_planning_its_bytes(tmp_path: Path) -> None:
    """Guards the planner's page releases: the cuts over a mapped file are the cuts over its bytes."""
    text = ("word " * 30 + EOT + "\n") * 600
    path = _write(str(tmp_path), text)
    data = path.read_bytes()
    expected = find_chunk_boundaries(data, 64, [EOT], space_cuts=True)
    assert len(expected) > 3 * UNMAP_EVERY  # the mapped pages are released several times
    ranges = plan_byte_ranges(path, chunk_size=64, special_tokens=[EOT], space_cuts=True)
    assert [r.start for r in ranges] + [ranges[-1].end] == expected


def test_custom_pattern_is_cut_only_at_specials(tmp_path: Path) -> None:
    """Guards custom patterns: a space is no safe cut for them, so only specials cut the file."""
    pattern = r"\w+ ?|\W"  # a piece swallows the space after it: a space cut would be wrong
    text = ("one two three " * 200 + EOT) * 3
    path = _write(str(tmp_path), text)
    ranges = plan_byte_ranges(
        path, chunk_size=64, special_tokens=[EOT], space_cuts=pattern in SPACE_SPLITTABLE_PATTERNS
    )
    assert [r.start for r in ranges] == [0, 2800, 5613, 8426]
    got = _count_file(path, pattern, [EOT], chunk_size=1)
    assert got == {"one ": 600, "two ": 600, "three ": 600}
