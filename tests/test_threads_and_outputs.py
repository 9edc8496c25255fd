"""Encoding from many threads at once, the buffer outputs, and ``count_tokens``.

On the compiled backend encoding runs without the GIL, each thread through
its own piece cache over one shared vocabulary (``docs/design.md``,
"Processes or threads"); these tests check that threads never change an id, on both
backends. ``encode_to_array``, ``encode_to_numpy`` and ``count_tokens`` must
agree with ``encode`` under every special-token policy. tiktoken is the
reference; the o200k pattern is checked with the cl100k ranks (the o200k
vocabulary is not available offline), through tiktoken with the same pattern
and ranks.
"""

from __future__ import annotations

import gc
import random
import sys
import threading
from array import array
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from streaming_helpers import EOT, WORDS, make_text

from streambpe import Tokenizer, core
from streambpe.core import SpecialSpan
from streambpe.encode.encoder import CacheInfo
from streambpe.patterns import GPT2, O200K

pytestmark = pytest.mark.usefixtures("backend")

THREADS = 8


def texts_for_threads(count: int) -> list[str]:
    """``count`` different multilingual texts of varied sizes (so threads finish out of step)."""
    rng = random.Random(7)
    return [
        make_text(rng.randint(2_000, 40_000), seed=seed, eot_every=None) for seed in range(count)
    ]


def encode_in_threads(encode: Callable[[str], Any], texts: list[str], rounds: int) -> list[Any]:
    """``encode`` each text ``rounds`` times, all texts at once on :data:`THREADS` threads."""
    start = threading.Barrier(THREADS)

    def run(index: int) -> list[Any]:
        start.wait()  # all threads begin together, so they overlap
        mine = texts[index::THREADS]
        return [encode(text) for _ in range(rounds) for text in mine]

    with ThreadPoolExecutor(THREADS) as pool:
        per_thread = list(pool.map(run, range(THREADS)))
    results: list[Any] = [None] * len(texts)
    for index, outcomes in enumerate(per_thread):
        mine = texts[index::THREADS]
        for round_number in range(rounds):
            for position, text_index in enumerate(range(index, len(texts), THREADS)):
                outcome = outcomes[round_number * len(mine) + position]
                if round_number == 0:
                    results[text_index] = outcome
                else:
                    assert outcome == results[text_index], "a thread changed its own result"
    return results


def test_threads_share_one_tokenizer_without_changing_ids(
    r50k_ranks: dict[bytes, int], r50k_reference: tiktoken.Encoding
) -> None:
    """Many threads encoding different texts through one tokenizer give the one-thread ids."""
    texts = texts_for_threads(3 * THREADS)
    expected = [r50k_reference.encode_ordinary(text) for text in texts]
    # A small cache, so the threads' caches evict all the time while they run.
    tokenizer = Tokenizer.from_ranks(r50k_ranks, pattern="gpt2", cache_size=64)
    assert encode_in_threads(tokenizer.encode_ordinary, texts, rounds=2) == expected
    hits, misses, _maxsize, currsize = tokenizer.cache_info()
    total_pieces = 2 * sum(len(r50k_reference.encode_ordinary(text)) for text in texts)
    assert misses > 0 and hits + misses <= total_pieces
    assert currsize <= 64 * (THREADS + 1)


def test_each_thread_gets_its_own_cache(r50k_ranks: dict[bytes, int]) -> None:
    """A new thread's cache starts empty; cache_info adds up every thread's cache."""
    tokenizer = Tokenizer.from_ranks(r50k_ranks, pattern="gpt2", cache_size=1000)
    tokenizer.encode_ordinary("qzxv wqpz")
    before = tokenizer.cache_info()
    assert before.misses == 2
    seen: list[CacheInfo] = []

    def encode_twice() -> None:
        tokenizer.encode_ordinary("qzxv wqpz")
        seen.append(tokenizer.cache_info())
        tokenizer.encode_ordinary("qzxv wqpz")
        seen.append(tokenizer.cache_info())

    worker = threading.Thread(target=encode_twice)
    worker.start()
    worker.join()
    # The worker's first call misses what the main thread had cached; its second hits.
    first, second = seen
    assert (first.hits, first.misses) == (before.hits, 2 * before.misses)
    assert (second.hits, second.misses) == (before.hits + 2, 2 * before.misses)
    tokenizer.clear_cache()
    assert tokenizer.cache_info()[:2] == (0, 0)


def test_a_new_thread_takes_over_an_ended_threads_warm_cache(r50k_ranks: dict[bytes, int]) -> None:
    """Pools started per call find their caches warm: kernels outlive their threads."""
    tokenizer = Tokenizer.from_ranks(r50k_ranks, pattern="gpt2", cache_size=1000)
    tokenizer.encode_ordinary("warm up the main thread")
    misses: list[int] = []

    def encode_in_a_new_thread() -> None:
        def run() -> None:
            before = tokenizer.cache_info().misses
            tokenizer.encode_ordinary("qzxv wqpz")
            misses.append(tokenizer.cache_info().misses - before)

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()

    encode_in_a_new_thread()
    gc.collect()  # the ended thread's storage is freed at once in CPython; this makes sure
    encode_in_a_new_thread()
    assert misses == [2, 0]


def test_usual_encode_keeps_to_the_calling_threads_cache(
    r50k_ranks: dict[bytes, int], r50k_reference: tiktoken.Encoding
) -> None:
    """``encode`` with its default keywords binds the calling thread's kernel, never another's.

    That call keeps its kernel in thread-local storage (``Encoder._bind_usual_call``):
    kept on the tokenizer instead, a second thread would use the first
    one's cache, and find the main thread's pieces there.
    """
    tokenizer = Tokenizer.from_ranks(
        r50k_ranks, pattern="gpt2", special_tokens={EOT: 50256}, cache_size=1000
    )
    text = f"qzxv wqpz{EOT}"
    expected = r50k_reference.encode(text, allowed_special="all")
    assert tokenizer.encode(text) == expected
    before = tokenizer.cache_info()
    assert before.misses == 2
    seen: list[tuple[list[int], CacheInfo]] = []

    def encode_twice() -> None:
        for _ in range(2):
            ids = tokenizer.encode(text)
            seen.append((ids, tokenizer.cache_info()))

    worker = threading.Thread(target=encode_twice)
    worker.start()
    worker.join()
    (first_ids, first), (second_ids, second) = seen
    assert first_ids == second_ids == expected
    assert (first.hits, first.misses) == (before.hits, 2 * before.misses)
    assert (second.hits, second.misses) == (before.hits + 2, 2 * before.misses)


def test_usual_encode_follows_a_backend_switch(
    r50k_ranks: dict[bytes, int], r50k_reference: tiktoken.Encoding
) -> None:
    """After a switch of backend, ``encode`` runs on the new backend's kernel, not the one it bound."""
    if "native" not in core.available_backends():
        pytest.skip("needs the compiled backend beside the pure one (not built here)")
    tokenizer = Tokenizer.from_ranks(
        r50k_ranks, pattern="gpt2", special_tokens={EOT: 50256}, cache_size=1000
    )
    # A word no turn has encoded before is a miss in the cache that sees it.
    turns = [("native", "qzxv"), ("python", "wqpz"), ("native", "vxqz"), ("python", "pzqw")]
    for name, new_word in turns:
        text = f"{new_word}{EOT} {name}"
        with core.using_backend(name):
            before = tokenizer.cache_info()  # of this backend's kernels only
            assert tokenizer.encode(text) == r50k_reference.encode(text, allowed_special="all")
            assert tokenizer.cache_info().misses > before.misses, name


@pytest.mark.parametrize("threads", [1, THREADS])
def test_o200k_pattern_matches_tiktoken(cl100k_ranks: dict[bytes, int], threads: int) -> None:
    """The o200k scanner through the whole encoder: ids equal tiktoken's with the same pattern."""
    reference = tiktoken.Encoding(
        "o200k_pattern_cl100k_ranks",
        pat_str=O200K,
        mergeable_ranks=cl100k_ranks,
        special_tokens={EOT: len(cl100k_ranks)},
    )
    tokenizer = Tokenizer.from_ranks(cl100k_ranks, pattern="o200k", special_tokens=[EOT])
    texts = [
        *texts_for_threads(THREADS),
        "HelloWorld's CAMELCase x/y/z\r\n\r\n  tabs\t\tand ÀÉÎ ǅǈ 12345678 ʰʲ",
        " ".join(WORDS) + "\n",
    ]
    if threads == 1:
        ids = [tokenizer.encode(text, allowed_special="all") for text in texts]
    else:
        ids = encode_in_threads(
            lambda text: tokenizer.encode(text, allowed_special="all"), texts, rounds=1
        )
    assert ids == [reference.encode(text, allowed_special="all") for text in texts]


# --------------------------------------------------------------------------- buffer outputs and counts

#: Text with specials, lone surrogates and several scripts: every branch of the encoders.
texts = st.lists(
    st.sampled_from([*WORDS, EOT, " ", "\n\n", "\ud800", "<|endoftext", "  x"]), max_size=30
).map("".join)
policies: list[dict[str, Any]] = [
    {},
    {"allowed_special": "all"},
    {"disallowed_special": ()},
    {"allowed_special": {EOT}, "disallowed_special": ()},
]


@settings(max_examples=60, deadline=None)
@given(texts)
def test_array_numpy_and_count_agree_with_encode(r50k_tokenizer: Tokenizer, text: str) -> None:
    for policy in policies:
        expected = r50k_tokenizer.encode(text, **policy)
        as_array = r50k_tokenizer.encode_to_array(text, **policy)
        assert isinstance(as_array, array) and as_array.typecode == "I"
        assert as_array.tolist() == expected
        as_numpy = r50k_tokenizer.encode_to_numpy(text, **policy)
        assert as_numpy.dtype == np.uint32 and as_numpy.tolist() == expected
        assert r50k_tokenizer.count_tokens(text, **policy) == len(expected)
        into = [7, 8]
        assert r50k_tokenizer.encode_into(text, into, **policy) == len(expected)
        assert into == [7, 8, *expected]


def test_encode_into_rolls_back_a_run_stopped_by_a_lone_surrogate(
    cl100k_tokenizer: Tokenizer, cl100k_reference: tiktoken.Encoding
) -> None:
    """The kernel hands ids over in blocks; a lone surrogate near the end stops it
    after several, and the run on the repaired text must replace them, not follow them."""
    text = make_text(600_000, seed=4) + "\ud800 tail"
    expected = cl100k_reference.encode(text, allowed_special="all")
    assert len(expected) > 2 * 65536
    out = [5]
    assert cl100k_tokenizer.encode_into(text, out, allowed_special="all") == len(expected)
    assert out == [5, *expected]


def test_encode_into_leaves_the_list_as_it_was_on_errors(r50k_tokenizer: Tokenizer) -> None:
    out = [1, 2]
    with pytest.raises(ValueError, match="disallowed"):
        r50k_tokenizer.encode_into(f"a{EOT}b", out, disallowed_special="all")
    assert out == [1, 2]
    with pytest.raises(TypeError, match="appends to a list, got tuple"):
        r50k_tokenizer.encode_into("abc", ())  # type: ignore[arg-type]


def test_encode_into_takes_back_what_an_interrupted_run_appended(
    r50k_tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped midway (Ctrl-C in the kernel's hand-over, say) leaves no ids behind."""

    def interrupted(scanner: object, text: str, out: list[int]) -> None:
        out.extend([9, 9, 9])
        raise KeyboardInterrupt

    monkeypatch.setattr(r50k_tokenizer, "_append_with", interrupted)
    out = [1]
    with pytest.raises(KeyboardInterrupt):
        r50k_tokenizer.encode_into("hello", out)
    assert out == [1]


def test_outputs_match_tiktoken_on_a_long_text(
    cl100k_tokenizer: Tokenizer, cl100k_reference: tiktoken.Encoding
) -> None:
    # Long enough for the compiled kernel to hand its ids over in several blocks.
    text = make_text(600_000, seed=3)
    expected = cl100k_reference.encode(text, allowed_special="all")
    assert len(expected) > 2 * 65536
    assert cl100k_tokenizer.encode(text, allowed_special="all") == expected
    assert cl100k_tokenizer.encode_to_numpy(text, allowed_special="all").tolist() == expected
    assert cl100k_tokenizer.count_tokens(text, allowed_special="all") == len(expected)
    assert np.array_equal(
        cl100k_tokenizer.encode_to_numpy(text, disallowed_special=()),
        cl100k_reference.encode_to_numpy(text, disallowed_special=()),
    )


@pytest.mark.parametrize("method", ["encode_to_array", "encode_to_numpy", "count_tokens"])
def test_disallowed_special_raises_in_every_output(r50k_tokenizer: Tokenizer, method: str) -> None:
    with pytest.raises(ValueError, match="disallowed"):
        getattr(r50k_tokenizer, method)(f"a{EOT}b", disallowed_special="all")


def test_custom_pattern_outputs_agree(r50k_ranks: dict[bytes, int]) -> None:
    """A custom pattern goes through regex, with the same results in every output."""
    tokenizer = Tokenizer.from_ranks(r50k_ranks, pattern=r"\w+|\s+|[^\w\s]+")
    text = make_text(5_000, seed=5, eot_every=None)
    expected = tokenizer.encode(text)
    assert tokenizer.encode_to_array(text).tolist() == expected
    assert tokenizer.count_tokens(text) == len(expected)
    assert not tokenizer.releases_gil


def test_encode_to_numpy_without_numpy_says_what_to_install(
    r50k_tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # makes "import numpy" fail
    with pytest.raises(ImportError, match="pip install numpy"):
        r50k_tokenizer.encode_to_numpy("hello")
    assert r50k_tokenizer.encode_to_array("hello").tolist() == r50k_tokenizer.encode("hello")


# --------------------------------------------------------------------------- special spans


def _kernel(r50k_ranks: dict[bytes, int], pattern: str) -> tuple[Any, Any]:
    """The active backend's pretokenizer and piece encoder for r50k and ``pattern``."""
    backend = core.active_backend()
    # tiktoken's ids are the ranks: the ranks are the encoder too.
    return backend.pretokenizer(pattern), backend.piece_encoder(r50k_ranks, r50k_ranks, 64)


def _stretch_by_stretch(
    pieces: Any, pretokenizer: Any, pattern: str, text: str, specials: list[SpecialSpan]
) -> list[int]:
    """What the spans mean: each ordinary stretch encoded as a text of its own, ids between."""
    expected: list[int] = []
    start = 0
    for special_start, special_end, special_id in specials:
        pieces.encode_text(text[start:special_start], pattern, pretokenizer, expected)
        expected.append(special_id)
        start = special_end
    pieces.encode_text(text[start:], pattern, pretokenizer, expected)
    return expected


def _one_call_outputs(
    pieces: Any, pretokenizer: Any, pattern: str, text: str, specials: list[SpecialSpan]
) -> tuple[list[int], list[int], int]:
    """The list, the array (as a list) and the count that one call with ``specials`` gives."""
    out: list[int] = []
    pieces.encode_text(text, pattern, pretokenizer, out, specials)
    buffer = array("I")
    pieces.encode_text_array(text, pattern, pretokenizer, buffer, specials)
    return out, buffer.tolist(), pieces.count_text(text, pattern, pretokenizer, specials)


@st.composite
def texts_with_spans(draw: st.DrawFn) -> tuple[str, list[SpecialSpan]]:
    """A text and in-order, non-overlapping spans in it (empty ones, at the edges, adjacent)."""
    text = draw(st.sampled_from(["", "a", make_text(3_000, seed=3, eot_every=None)]))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    spans = [
        (cuts[index], cuts[index + 1], draw(st.integers(0, 2**32 - 1)))
        for index in range(0, len(cuts) - 1, 2)
    ]
    return text, spans


@pytest.mark.parametrize("pattern", [GPT2, r"\w+|\s+|[^\w\s]+"])
@settings(max_examples=60, deadline=None)
@given(case=texts_with_spans())
def test_special_spans_are_encoded_in_one_call(
    r50k_ranks: dict[bytes, int], pattern: str, case: tuple[str, list[SpecialSpan]]
) -> None:
    """One call with spans gives the ids of the stretches between them, each span's id between."""
    text, specials = case
    pretokenizer, pieces = _kernel(r50k_ranks, pattern)
    expected = _stretch_by_stretch(pieces, pretokenizer, pattern, text, specials)
    ordinary = len(text) - sum(end - start for start, end, _ in specials)
    assert len(expected) >= len(specials) + (ordinary > 0)  # not vacuous: ordinary text has ids
    assert _one_call_outputs(pieces, pretokenizer, pattern, text, specials) == (
        expected,
        expected,
        len(expected),
    )


def test_special_spans_across_blocks_of_ids(
    r50k_ranks: dict[bytes, int], small_id_blocks: tuple[int, int]
) -> None:
    """Thousands of spans in a text of many blocks of ids keep their places."""
    text = make_text(400_000, seed=11, eot_every=None)
    rng = random.Random(11)
    cuts = sorted(rng.sample(range(len(text)), 6_000))
    specials = [(cuts[i], cuts[i + 1], 50_000 + i) for i in range(0, len(cuts) - 1, 2)]
    pretokenizer, pieces = _kernel(r50k_ranks, GPT2)
    expected = _stretch_by_stretch(pieces, pretokenizer, GPT2, text, specials)
    assert len(expected) > 10 * small_id_blocks[0]  # ids handed over in many blocks
    assert _one_call_outputs(pieces, pretokenizer, GPT2, text, specials) == (
        expected,
        expected,
        len(expected),
    )


@pytest.mark.parametrize(
    "specials",
    [
        [(3, 2, 7)],  # ends before it starts
        [(0, 4, 7), (3, 5, 7)],  # overlaps the one before
        [(4, 5, 7), (0, 1, 7)],  # out of order
        [(5, 11, 7)],  # runs past the text
        [(-1, 2, 7)],  # starts before it
        [(1, 2, -7)],  # a negative id
        [(1, 2, 2**32)],  # an id past 32 bits
    ],
)
def test_bad_special_spans_raise_and_append_nothing(
    r50k_ranks: dict[bytes, int], specials: list[SpecialSpan]
) -> None:
    pretokenizer, pieces = _kernel(r50k_ranks, GPT2)
    out = [1, 2]
    with pytest.raises(ValueError, match="special token"):
        pieces.encode_text("0123456789", GPT2, pretokenizer, out, specials)
    assert out == [1, 2]
    with pytest.raises(ValueError, match="special token"):
        pieces.count_text("0123456789", GPT2, pretokenizer, specials)
