"""``Tokenizer.encode_batch``: many texts, in-process when small, over threads or processes when large.

Guards: the result equals ``[encode(t) for t in texts]`` on every path
(in-process, threads, processes; on both backends), in order, with the
keywords passed through to every text (in the workers too), and errors raised
in a worker reach the caller with no process or thread left behind.
"""

from __future__ import annotations

import gc
import random
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from streaming_helpers import (
    EOT,
    child_pids,
    encode_threads,
    fresh_r50k_tokenizer,
    make_text,
    make_whitespace_text,
    new_children,
)

import streambpe._support.pool
import streambpe.streaming.batch
import streambpe.streaming.parallel
from streambpe.tokenizer import Tokenizer

# The exactness tests run once per backend (docs/design.md, "Backends").
pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture(scope="module")
def gpt2_tok() -> Tokenizer:
    """r50k_base (GPT-2) with ``<|endoftext|>``."""
    return fresh_r50k_tokenizer()


def varied_texts(count: int, seed: int) -> list[str]:
    """Texts of very different lengths (empty ones too), several scripts, specials, whitespace."""
    rng = random.Random(seed)
    sources = [make_text(100_000, seed=seed), make_whitespace_text(100_000, seed=seed)]
    texts = []
    for index in range(count):
        size = rng.choice([0, 1, 5, 40, 300, 2000, rng.randint(1, 20_000)])
        start = rng.randrange(100_000 - size)
        texts.append(sources[index % 2][start : start + size])
    return texts


class PoolSpy:
    """Wraps a pool context manager of ``streambpe._support.pool`` to record the pools started and their sizes."""

    def __init__(self, original: Callable[..., AbstractContextManager[Any]]) -> None:
        self.original = original
        self.workers: list[int] = []

    @contextmanager
    def __call__(self, workers: int, *args: Any, **kwargs: Any) -> Iterator[Any]:
        self.workers.append(workers)
        with self.original(workers, *args, **kwargs) as pool:
            yield pool


def spy_on_pools(monkeypatch: pytest.MonkeyPatch) -> PoolSpy:
    """One spy on both kinds of pool (thread and process) that ``encode_map`` may start."""
    module = streambpe._support.pool
    spy = PoolSpy(module.process_pool)
    threads = PoolSpy(module.thread_pool)
    threads.workers = spy.workers
    monkeypatch.setattr(module, "process_pool", spy)
    monkeypatch.setattr(module, "thread_pool", threads)
    return spy


@pytest.fixture(params=["processes", "threads"])
def parallel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> PoolSpy:
    """Make small batches take the parallel path (tiny thresholds) on threads or on processes, and spy on the pool."""
    mode = request.param
    monkeypatch.setattr(streambpe.streaming.parallel, "parallel_mode", lambda encoder: mode)
    monkeypatch.setitem(streambpe.streaming.batch.PARALLEL_THRESHOLD_CHARS, mode, 10_000)
    monkeypatch.setitem(streambpe.streaming.batch.TASK_CHARS, mode, 7_000)
    return spy_on_pools(monkeypatch)


def test_small_batch_is_encoded_in_process(
    gpt2_tok: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below the threshold no pool starts, and each text is encoded as ``encode`` would."""
    spy = spy_on_pools(monkeypatch)
    texts = ["Hello world", "", "a\n\n b", f"x{EOT}y", "日本語 👍🏽", "   "]
    assert gpt2_tok.encode_batch(texts, workers=2) == [gpt2_tok.encode(t) for t in texts]
    assert spy.workers == []


def test_empty_batch(gpt2_tok: Tokenizer, parallel: PoolSpy) -> None:
    """No texts, no ids, no pool."""
    assert gpt2_tok.encode_batch([], workers=2) == []
    assert parallel.workers == []


@pytest.mark.parametrize("workers", [2, 3])
def test_large_batch_in_parallel_keeps_order(
    gpt2_tok: Tokenizer, parallel: PoolSpy, workers: int
) -> None:
    """Over the threshold the batch goes to processes; results still line up with the texts."""
    texts = varied_texts(120, seed=workers)
    children = child_pids()
    result = gpt2_tok.encode_batch(texts, workers=workers)
    assert len(parallel.workers) == 1 and parallel.workers[0] >= 2
    assert result == [gpt2_tok.encode(t) for t in texts]
    assert all(gc.is_tracked(ids) for ids in result), "the caller gets ordinary lists"
    assert new_children(children) == set()
    assert encode_threads() == []


def test_keywords_reach_the_workers(gpt2_tok: Tokenizer, parallel: PoolSpy) -> None:
    """``disallowed_special=()`` makes ``<|endoftext|>`` plain text in every worker, as in ``encode``."""
    texts = [f"doc {i} {EOT} " + make_text(500 + 7 * i, seed=i % 3) for i in range(60)]
    plain = gpt2_tok.encode_batch(texts, disallowed_special=(), workers=2)
    assert parallel.workers, "the batch should have taken the parallel path"
    assert plain == [gpt2_tok.encode(t, disallowed_special=()) for t in texts]
    assert all(50256 not in ids for ids in plain)
    special = gpt2_tok.encode_batch(texts, workers=2)
    assert all(50256 in ids for ids in special)


def test_disallowed_special_raises_from_a_worker(gpt2_tok: Tokenizer, parallel: PoolSpy) -> None:
    """A ValueError raised inside a worker reaches the caller as ValueError; the pool is gone."""
    texts = [make_text(800 + i, seed=i % 3, eot_every=None) for i in range(40)] + [f"late {EOT}"]
    children = child_pids()
    with pytest.raises(ValueError, match="disallowed"):
        gpt2_tok.encode_batch(texts, allowed_special=set(), disallowed_special="all", workers=2)
    assert parallel.workers
    assert new_children(children) == set()
    assert encode_threads() == []


def test_threads_keep_their_lists_from_the_collector_until_the_batch_is_done(
    gpt2_tok: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cyclic collector never walks the id lists of a batch the threads are still
    building (``streambpe._support.gc_walks``), and the caller gets them tracked again."""
    monkeypatch.setattr(streambpe.streaming.parallel, "parallel_mode", lambda encoder: "threads")
    monkeypatch.setitem(streambpe.streaming.batch.PARALLEL_THRESHOLD_CHARS, "threads", 10_000)
    monkeypatch.setitem(streambpe.streaming.batch.TASK_CHARS, "threads", 7_000)
    tracked_while_building: list[bool] = []
    encode_group = streambpe.streaming.batch._encode_group

    def watched(encoder: Any, group: Any) -> list[list[int]]:
        encoded = encode_group(encoder, group)
        tracked_while_building.extend(gc.is_tracked(ids) for ids in encoded)
        return encoded

    monkeypatch.setattr(streambpe.streaming.batch, "_encode_group", watched)
    texts = varied_texts(120, seed=9)
    result = gpt2_tok.encode_batch(texts, workers=2)
    assert result == [gpt2_tok.encode(t) for t in texts]
    assert len(tracked_while_building) == len(texts)
    assert not any(tracked_while_building)
    assert all(gc.is_tracked(ids) for ids in result)


# --------------------------------------------------------------------------- encode_each


def test_encode_each_gives_encodes_ids_on_every_path(gpt2_tok: Tokenizer) -> None:
    """One kernel call for the usual case; text by text for keywords and lone surrogates."""
    texts = [
        *varied_texts(30, seed=5),
        "",
        f"{EOT}{EOT}",
        f"a{EOT[:-1]}",
        "x\ud800y",
        "日本語 👍🏽",
    ]
    each = gpt2_tok.encode_each(texts)
    assert each == [gpt2_tok.encode(t) for t in texts]
    assert all(gc.is_tracked(ids) for ids in each), "ordinary lists, as encode's"
    assert gpt2_tok.encode_each(texts, disallowed_special=()) == [
        gpt2_tok.encode(t, disallowed_special=()) for t in texts
    ]
    assert gpt2_tok.encode_each([]) == []
    with pytest.raises(ValueError, match="disallowed"):
        gpt2_tok.encode_each(texts, allowed_special=set())


def test_encode_each_leaves_a_long_text_to_encode(
    gpt2_tok: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A text long enough for encode's own threads is not handed to the one-call kernel."""
    import streambpe.encode.encoder as encoder_module

    monkeypatch.setattr(encoder_module, "PARALLEL_MIN_CHARS", 100)
    calls: list[str] = []
    original = Tokenizer.encode

    def counting_encode(self: Tokenizer, text: str, **keywords: Any) -> list[int]:
        calls.append(text)
        return original(self, text, **keywords)

    monkeypatch.setattr(Tokenizer, "encode", counting_encode)
    texts = ["short", make_text(400, seed=1)]
    assert gpt2_tok.encode_each(texts) == [original(gpt2_tok, t) for t in texts]
    assert calls == texts
