"""One long text on all cores (issue 25, goal 3), and time to the first ids of a stream.

* ``long-text-o200k``: ``encode`` of the ``--bench-encode-mb`` prose (20 MiB by
  default) in one call, on 1 thread and on 2 (``threads=``), the piece caches
  cleared before every round, ids checked against tiktoken's; tiktoken's
  single-threaded ``encode`` in the same group. The note gives the 2-thread
  speedup. Goal: at least 1.7x on 2 cores.
* ``long-text-o200k-in-turns``: the same two calls of the compiled backend in
  turns, 1 thread and 2 (each first in turn), the caches cleared before each, for :data:`TURNS`
  rounds (see :mod:`turns`); the note gives every round's speedup and the
  median, the figure a slow spell of a shared machine cannot tilt.
* ``first-ids-o200k``: the time until ``iter_id_batches`` (and
  ``aencode_iterable``, in the note) yields its first batch when the whole
  text arrives as one chunk, for a tenth of the text and for all of it. Goal:
  about the same for both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from peers import ids_digest
from turns import time_in_turns

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

ROUNDS = 3
#: Rounds of 1 thread and 2 in turns (test_long_text_threads_in_turns).
TURNS = 5


@pytest.fixture(scope="module")
def o200k(encoding_files: Callable[[str], EncodingFiles]) -> EncodingFiles:
    return encoding_files("o200k")


@pytest.fixture(scope="module")
def reference_digest(o200k: EncodingFiles, encode_text: str) -> str:
    return ids_digest(o200k.tiktoken().encode(encode_text, allowed_special="all"))


def _tokenizer(streambpe_api: Callable[..., Any], files: EncodingFiles) -> Any:
    return streambpe_api("Tokenizer").from_tiktoken(
        files.path, pattern=files.pattern, special_tokens=files.special_tokens
    )


@pytest.mark.parametrize("threads", [1, 2])
def test_long_text_streambpe(
    benchmark: Any,
    report: Report,
    backend: str,
    threads: int,
    o200k: EncodingFiles,
    encode_text: str,
    reference_digest: str,
    streambpe_api: Callable[..., Any],
) -> None:
    from streambpe.core import using_backend

    benchmark.group = "long-text-o200k"
    tokenizer = _tokenizer(streambpe_api, o200k)

    def cold() -> tuple[tuple[str], dict[str, Any]]:
        tokenizer.clear_cache()
        return (encode_text,), {"threads": threads}

    with using_backend(backend):
        tokenizer.encode("warm up the kernels", threads=threads)
        ids = benchmark.pedantic(report.timed(tokenizer.encode), setup=cold, rounds=ROUNDS)
    assert ids_digest(ids) == reference_digest
    entry = report.finish(
        f"streambpe encode, {threads} thread{'s' if threads > 1 else ''}",
        ours=True,
        backend=backend,
        input_bytes=len(encode_text.encode()),
        tokens=len(ids),
    )
    single = report.board.find(benchmark.group, "streambpe encode, 1 thread", backend)
    if threads > 1 and single is not None:
        report.note(
            f"one long text [{backend}]: {threads} threads {single.seconds / entry.seconds:.2f}x "
            f"as fast as 1 ({single.seconds:.2f} s -> {entry.seconds:.2f} s)"
        )


def test_long_text_threads_in_turns(
    benchmark: Any,
    report: Report,
    o200k: EncodingFiles,
    encode_text: str,
    reference_digest: str,
    streambpe_api: Callable[..., Any],
) -> None:
    from streambpe.core import NATIVE, using_backend

    if NATIVE is None:
        pytest.skip("the compiled core is not built: its threads are what these rounds compare")
    benchmark.group = "long-text-o200k-in-turns"
    tokenizer = _tokenizer(streambpe_api, o200k)
    with using_backend("native"):
        tokenizer.encode("warm up the kernels", threads=2)

    def encode_on(threads: int) -> Callable[[], Callable[[], list[int]]]:
        def prepare() -> Callable[[], list[int]]:
            tokenizer.clear_cache()

            def run() -> list[int]:
                with using_backend("native"):
                    return tokenizer.encode(encode_text, threads=threads)  # type: ignore[no-any-return]

            return run

        return prepare

    def both_exact(one: list[int], two: list[int]) -> None:
        assert ids_digest(one) == reference_digest, "1 thread: ids differ from tiktoken's"
        assert ids_digest(two) == reference_digest, "2 threads: ids differ from tiktoken's"

    measured = benchmark.pedantic(
        time_in_turns,
        args=(encode_on(1), encode_on(2)),
        kwargs={"rounds": TURNS, "check": both_exact},
        rounds=1,
    )
    report.finish(
        "streambpe encode, 2 threads in turns with 1",
        ours=True,
        backend="native",
        seconds=min(measured.contender_seconds),
        input_bytes=len(encode_text.encode()),
        speedups=[round(ratio, 2) for ratio in measured.ratios],
        median_speedup=round(measured.median_ratio, 2),
        lowest_speedup=round(measured.lowest_ratio, 2),
    )
    report.note("one long text [native], 2 threads over 1, in turns: " + measured.describe())


def test_long_text_tiktoken(
    benchmark: Any, report: Report, o200k: EncodingFiles, encode_text: str, reference_digest: str
) -> None:
    benchmark.group = "long-text-o200k"
    reference = o200k.tiktoken()

    def encode(text: str) -> list[int]:
        return reference.encode(text, allowed_special="all")  # type: ignore[no-any-return]

    ids = benchmark.pedantic(report.timed(encode), args=(encode_text,), rounds=ROUNDS)
    assert ids_digest(ids) == reference_digest
    report.finish("tiktoken encode", ours=False, input_bytes=len(encode_text.encode()))


def test_first_ids_do_not_wait_for_the_whole_text(
    benchmark: Any,
    report: Report,
    backend: str,
    o200k: EncodingFiles,
    encode_text: str,
    streambpe_api: Callable[..., Any],
) -> None:
    from streambpe.core import using_backend

    benchmark.group = "first-ids-o200k"
    tokenizer = _tokenizer(streambpe_api, o200k)
    waits: dict[str, float] = {}

    def first_batch(text: str) -> float:
        started = time.perf_counter()
        batches = tokenizer.iter_id_batches([text])
        next(batches)
        waited = time.perf_counter() - started
        batches.close()
        return waited

    async def first_async_batch(text: str) -> float:
        started = time.perf_counter()
        async with aclosing(tokenizer.aencode_iterable([text])) as batches:
            await anext(batches)
            return time.perf_counter() - started

    def run() -> None:
        for label, text in (
            ("a tenth", encode_text[: len(encode_text) // 10]),
            ("all", encode_text),
        ):
            waits[label] = min(first_batch(text) for _ in range(ROUNDS))
            waits[f"async {label}"] = min(anyio.run(first_async_batch, text) for _ in range(ROUNDS))

    with using_backend(backend):
        tokenizer.encode("warm up the kernels")
        benchmark.pedantic(run, rounds=1)
    report.finish(
        "streambpe iter_id_batches, first batch of the whole text",
        ours=True,
        backend=backend,
        seconds=waits["all"],
    )
    report.note(
        f"time to first ids [{backend}], the text as one chunk: a tenth of it "
        f"{waits['a tenth'] * 1e3:.1f} ms, all of it {waits['all'] * 1e3:.1f} ms; "
        f"aencode_iterable: a tenth {waits['async a tenth'] * 1e3:.1f} ms, "
        f"all {waits['async all'] * 1e3:.1f} ms"
    )
