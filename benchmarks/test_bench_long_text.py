"""One long text on all cores (issue 25, goal 3), and time to the first ids of a stream.

* ``long-text-o200k``: ``encode`` of the ``--bench-encode-mb`` prose (20 MiB by
  default) in one call, on 1 thread and on 2 (``threads=``), the piece caches
  cleared before every round, ids checked against tiktoken's; tiktoken's
  single-threaded ``encode`` in the same group. The note gives the 2-thread
  speedup. Goal: at least 1.7x on 2 cores.
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

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

ROUNDS = 3


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
