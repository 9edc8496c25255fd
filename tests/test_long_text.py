"""One long text on several threads, and streams in bounded blocks: always the ids of one call.

``Encoder.encode`` cuts a long text at safe places (``streambpe.encode.text_parts``)
and encodes the parts on threads when the kernel releases the GIL;
``iter_id_batches`` cuts a long chunk into blocks the same way. Whatever the
cuts, the ids must equal single-threaded ``encode`` of the whole text, and
tiktoken's. The thresholds are lowered here so that short generated texts
are cut many times, including next to and between special tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from streambpe import core
from streambpe._support import shared_work
from streambpe.cutting.specials import SpecialTokenScanner
from streambpe.cutting.splitter import StreamSplitter
from streambpe.encode import encoder as encoder_module
from streambpe.encode.text_parts import part_specials, plan_parts, plan_parts_clear_of
from streambpe.errors import ParameterError
from streambpe.tokenizer import Tokenizer

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "sample" / "tinytales.txt"

needs_native = pytest.mark.skipif(
    "native" not in core.available_backends(), reason="the compiled core was not built"
)

FRAGMENTS = [
    "a", "bc", " ", "  ", "\n", "\n\n", "\t", "Ab", "é", "東京", "😀", "12", "!", "'s", " x",
    "<|endoftext|>", "<|fim_prefix|>", "<|endoftext|><|endoftext|>",
]  # fmt: skip
texts = st.lists(st.sampled_from(FRAGMENTS), max_size=120).map("".join)


@pytest.fixture
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(encoder_module, "PARALLEL_MIN_CHARS", 16)
    monkeypatch.setattr(encoder_module, "PARTS_MIN_CHARS", 4)
    monkeypatch.setattr(encoder_module, "STREAM_BLOCK_CHARS", 7)


def spans_of(tokenizer: Tokenizer, text: str) -> list[tuple[int, int, int]]:
    return tokenizer._special_spans(tokenizer._scanner, text)


shares = st.one_of(st.none(), st.integers(1, 6))


def assert_no_part_short_of_nominal(
    parts: list[tuple[int, int]], length: int, part_chars: int, share: int | None
) -> None:
    """Every part but the last is at least its nominal length: cuts only move later."""
    for start, end in parts[:-1]:
        nominal = max(part_chars, (length - start) // share) if share else part_chars
        assert end - start >= nominal


@settings(max_examples=200, deadline=None)
@given(texts, st.integers(1, 30), shares)
def test_parts_cover_the_text_and_never_cut_a_special(
    cl100k_tokenizer: Tokenizer, text: str, part_chars: int, share: int | None
) -> None:
    specials = spans_of(cl100k_tokenizer, text)
    parts = plan_parts(text, specials, part_chars=part_chars, space_cuts=True, share=share)
    assert parts[0][0] == 0 and parts[-1][1] == len(text)
    assert all(end == start for (_, end), (start, _) in pairwise(parts))
    for start, end in parts:
        assert start < end or len(text) == 0
        assert not any(first < start < last for first, last, _ in specials)
    assert sum(len(part_specials(specials, start, end)) for start, end in parts) == len(specials)
    assert_no_part_short_of_nominal(parts, len(text), part_chars, share)


def test_shared_out_parts_shrink_towards_the_end() -> None:
    """With ``share``, each part is nominally a share of what is left, down to ``part_chars``."""
    text = "word " * 20_000
    parts = plan_parts(text, [], part_chars=1_000, space_cuts=True, share=4)
    lengths = [end - start for start, end in parts]
    assert lengths[0] >= len(text) // 4 > lengths[1] > lengths[2]
    assert all(1_000 <= length < 1_010 for length in lengths[-3:-1])
    assert lengths == sorted(lengths, reverse=True)


# Special tokens with spaces inside (a safe cut can fall in one) and overlaps.
SPACED_TOKENS = ["<x y>", "<x", "y> z", "zz"]
spaced_texts = st.lists(
    st.sampled_from(["<", "x", " ", "y", ">", "z", "<x y>", "ab", "  ", "\n", "é"]), max_size=80
).map("".join)


def _matches(text: str, offset: int = 0) -> list[tuple[int, int, str]]:
    scanner = SpecialTokenScanner(SPACED_TOKENS)
    return [(m.start + offset, m.end + offset, m.token) for m in scanner.matches(text)]


@settings(max_examples=300, deadline=None)
@given(spaced_texts, st.integers(1, 12), shares)
def test_parts_clear_of_occurrences_find_the_whole_texts_special_tokens(
    text: str, part_chars: int, share: int | None
) -> None:
    """Guards the threaded encode whose parts find their own special tokens."""
    parts = plan_parts_clear_of(text, SPACED_TOKENS, part_chars=part_chars, share=share)
    assert parts[0][0] == 0 and parts[-1][1] == len(text)
    assert all(end == start for (_, end), (start, _) in pairwise(parts))
    assert_no_part_short_of_nominal(parts, len(text), part_chars, share)
    found = [match for start, end in parts for match in _matches(text[start:end], start)]
    assert found == _matches(text)


@needs_native
@pytest.mark.usefixtures("small_thresholds")
@settings(max_examples=150, deadline=None)
@given(spaced_texts, st.integers(2, 4))
def test_threads_find_special_tokens_with_spaces_as_one_call(text: str, threads: int) -> None:
    tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], SPACED_TOKENS)
    with core.using_backend("python"):
        expected = tokenizer.encode(text, threads=1)
    with core.using_backend("native"):
        assert tokenizer.encode(text, threads=threads) == expected


@needs_native
@pytest.mark.usefixtures("small_thresholds")
@settings(max_examples=200, deadline=None)
@given(texts, st.integers(2, 5))
def test_threads_give_the_ids_of_one_call(
    cl100k_tokenizer: Tokenizer, cl100k_reference: tiktoken.Encoding, text: str, threads: int
) -> None:
    with core.using_backend("native"):
        expected = cl100k_reference.encode(text, allowed_special="all")
        assert cl100k_tokenizer.encode(text, threads=threads) == expected
        assert cl100k_tokenizer.encode(text, threads=1) == expected
        ordinary = cl100k_reference.encode_ordinary(text)
        assert cl100k_tokenizer.encode(text, disallowed_special=(), threads=threads) == ordinary


@pytest.mark.usefixtures("small_thresholds")
@settings(max_examples=150, deadline=None)
@given(texts)
def test_a_stream_in_one_chunk_comes_back_in_blocks(
    cl100k_tokenizer: Tokenizer, cl100k_reference: tiktoken.Encoding, text: str
) -> None:
    batches = list(cl100k_tokenizer.iter_id_batches([text]))
    assert [i for batch in batches for i in batch] == cl100k_reference.encode(
        text, allowed_special="all"
    )


@needs_native
def test_a_long_text_on_threads_matches_tiktoken(
    r50k_tokenizer: Tokenizer, r50k_reference: tiktoken.Encoding
) -> None:
    """A real text past the default threshold, with lone surrogates (repaired as tiktoken does)."""
    text = SAMPLE.read_text(encoding="utf-8") * 3 + " tail \ud800 end"
    assert len(text) >= encoder_module.PARALLEL_MIN_CHARS
    expected = r50k_reference.encode(text, allowed_special="all")
    with core.using_backend("native"):
        for threads in (None, 2, 3):
            assert r50k_tokenizer.encode(text, threads=threads) == expected


def test_first_block_of_a_huge_chunk_is_bounded(r50k_tokenizer: Tokenizer) -> None:
    text = SAMPLE.read_text(encoding="utf-8") * 2
    batches = r50k_tokenizer.iter_id_batches([text])
    first = next(batches)
    # Text runs three to five characters per id; a block holds STREAM_BLOCK_CHARS characters.
    assert 0 < len(first) < encoder_module.STREAM_BLOCK_CHARS
    assert first + [i for batch in batches for i in batch] == r50k_tokenizer.encode(text)


def test_a_huge_chunk_reaches_the_splitter_a_slice_at_a_time(
    r50k_tokenizer: Tokenizer,
    r50k_reference: tiktoken.Encoding,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The splitter never searches more than ``FEED_CHARS`` at once, so the first
    ids of one huge chunk do not wait for a search of all of it; the ids are
    still ``encode``'s."""
    fed: list[int] = []
    feed = StreamSplitter.feed

    def counting_feed(splitter: StreamSplitter, chunk: str) -> str:
        fed.append(len(chunk))
        return feed(splitter, chunk)

    monkeypatch.setattr(StreamSplitter, "feed", counting_feed)
    monkeypatch.setattr(encoder_module, "FEED_CHARS", 5000)
    text = SAMPLE.read_text(encoding="utf-8")[:22_000] + "<|endoftext|> end"
    ids = [i for batch in r50k_tokenizer.iter_id_batches([text, "!"]) for i in batch]
    assert ids == r50k_reference.encode(text + "!", allowed_special="all")
    assert fed == [5000] * 4 + [len(text) - 20_000, 1]


@pytest.mark.parametrize("threads", [0, -1])
def test_threads_must_be_positive(r50k_tokenizer: Tokenizer, threads: int) -> None:
    with pytest.raises(ParameterError, match="threads must be at least 1"):
        r50k_tokenizer.encode("x", threads=threads)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "ab", "aa", "<s>"]), min_size=1, max_size=3, unique=True),
    st.lists(st.sampled_from(["a", "b", "x", "<s>", "aa"]), max_size=30).map("".join),
)
def test_quick_special_spans_match_the_scanner(tokens: list[str], text: str) -> None:
    """Short texts find their special tokens with str.find: the scanner's parse, overlaps included."""
    tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], tokens)
    ids = tokenizer.special_tokens
    expected = [
        (match.start, match.end, ids[match.token])
        for match in SpecialTokenScanner(tokens).matches(text)
    ]
    assert tokenizer._special_spans(tokenizer._scanner, text) == expected


@needs_native
@pytest.mark.usefixtures("small_thresholds")
def test_only_the_main_thread_spreads_out_unasked(
    r50k_tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool's worker (encode_batch, encode_file) must not spread its encode over more threads."""
    spreads: list[int] = []
    real_in_order = shared_work.in_order

    def counting_in_order(count: int, run: Callable[[int], None], *, threads: int) -> Any:
        spreads.append(threads)
        return real_in_order(count, run, threads=threads)

    monkeypatch.setattr(shared_work, "in_order", counting_in_order)
    text = "some words and more words " * 20
    with core.using_backend("native"):
        expected = r50k_tokenizer.encode(text, threads=1)
        assert spreads == []
        with ThreadPoolExecutor(1) as outer:
            assert outer.submit(r50k_tokenizer.encode, text).result() == expected
        assert spreads == []
        assert r50k_tokenizer.encode(text, threads=2) == expected
        assert spreads == [2]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=50, max_size=400).map("".join))
def test_blocks_found_window_by_window_give_the_ids_of_one_call(
    cl100k_tokenizer: Tokenizer,
    cl100k_reference: tiktoken.Encoding,
    text: str,
) -> None:
    """Blocks long next to the special tokens (here 40 characters, windows of 80), so most
    cuts come from a window's own scan rather than from a scan of the whole rest."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(encoder_module, "STREAM_BLOCK_CHARS", 40)
        batches = list(cl100k_tokenizer.iter_id_batches([text]))
    expected = cl100k_reference.encode(text, allowed_special="all")
    assert [i for batch in batches for i in batch] == expected
