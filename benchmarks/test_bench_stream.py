"""Streaming benchmarks: ``encode_file`` on a file of a gigabyte, and ``aencode_iterable``.

``encode_file`` (r50k, two worker processes) runs in a child process so that
the peak RSS of its whole process tree is measured. It runs at two sizes, a
tenth of ``--bench-file-mb`` and all of it: constant-memory streaming means
the two peaks are about equal, and the summary prints their ratio.

The tiktoken peer encodes single-threaded and needs the whole text in memory,
so it cannot take the full file at once. For a fair time it encodes (and writes
as uint16) a leading slice of about 100 MiB, cut at a document boundary, and
its time is scaled up to the full file size. The entry's name says it is
extrapolated; its memory is not comparable and is not reported.

``aencode_iterable`` is timed against its synchronous counterparts on the
in-memory encode text, each round with a cold cache: ``iter_id_batches`` over
the same lines (ids in batches, as the async encoder yields them: the like
for like), ``encode_iterable`` over them (one id at a time) and ``encode`` of
the whole text (no lines to iterate). The async encoder runs under asyncio and
trio and is fed the lines by an async generator. Those tests run all of one
way's rounds before the next way's; on a shared machine a slow spell can land
on one side only, so ``test_aencode_iterable_in_turns`` also times
``iter_id_batches``, asyncio and trio back to back in each round, checks
their ids are equal, and notes each round's ratios and their medians.

Every streambpe test runs once per kernel backend (the ``backend`` fixture);
the child-process job gets the backend's name and selects it itself, before
its worker processes start (they inherit it).
"""

from __future__ import annotations

import statistics
import time
from array import array
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from corpus import DEFAULT_SPECIAL, MIB, document_joiner

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

WORKERS = 2
TIKTOKEN_SLICE_BYTES = 100 * MIB
ROUNDS = 3
#: Rounds of the synchronous and the async encoders in turns.
INTERLEAVED_ROUNDS = 5
EVENT_LOOPS = ("asyncio", "trio")


# ---------------------------------------------------------------------------
# encode_file


def encode_file_streambpe(
    tiktoken_path: str,
    pattern: str,
    special_tokens: dict[str, int],
    input_path: str,
    output_path: str,
    workers: int,
    backend: str,
) -> dict[str, int | str]:
    """Child-process job: build the r50k tokenizer, then encode the file to ``output_path``."""
    import streambpe
    from streambpe.core import using_backend

    with using_backend(backend):
        tokenizer = streambpe.Tokenizer.from_tiktoken(
            tiktoken_path, pattern=pattern, special_tokens=special_tokens
        )
        stats = tokenizer.encode_file(input_path, output_path, workers=workers)
        return {"bytes": stats.bytes, "tokens": stats.tokens, "backend": streambpe.backend()}


@pytest.mark.parametrize("size", ["tenth", "full"])
def test_encode_file_streambpe(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    encoding_files: Callable[[str], EncodingFiles],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    size: str,
    backend: str,
) -> None:
    streambpe_api("Tokenizer", "encode_file")
    files = encoding_files("r50k")
    source: Path = request.getfixturevalue("big_file" if size == "full" else "tenth_file")
    benchmark.group = "encode_file" if size == "full" else "encode_file-tenth"
    output = tmp_path / "ids.bin"
    job_args = (str(files.path), files.pattern, files.special_tokens, str(source), str(output))
    try:
        measured = benchmark.pedantic(
            report.in_child,
            args=(encode_file_streambpe, *job_args, WORKERS, backend),
            kwargs={"preload": ["streambpe"]},
            rounds=1,
            iterations=1,
        )
    finally:
        output.unlink(missing_ok=True)  # up to gigabytes: do not leave it in /tmp
    assert measured.result["backend"] == backend, "the child did not run the selected backend"
    name = f"streambpe encode_file ({WORKERS} workers)"
    entry = report.finish(
        name,
        ours=True,
        backend=backend,
        input_bytes=source.stat().st_size,
        tokens=measured.result["tokens"],
    )
    tenth = report.board.find("encode_file-tenth", name, backend)
    if size == "full" and tenth is not None and tenth.peak_rss and entry.peak_rss:
        growth = entry.peak_rss / tenth.peak_rss
        benchmark.extra_info["peak_rss_vs_tenth_size"] = round(growth, 3)
        report.note(
            f"encode_file [{backend}] peak RSS at full size / at a tenth: {growth:.2f}x "
            f"({entry.peak_rss / MIB:.0f} vs {tenth.peak_rss / MIB:.0f} MiB)"
        )


def leading_documents(path: Path, size: int, special: str = DEFAULT_SPECIAL) -> str:
    """The whole documents within the first ``size`` bytes of a corpus (all of a small file)."""
    with path.open("rb") as corpus:
        head = corpus.read(size)
        if corpus.read(1):
            cut = head.rfind(document_joiner(special).encode("utf-8"))
            head = head[:cut] if cut > 0 else head
    # A single document longer than the slice may end mid-character: drop that fragment.
    return head.decode("utf-8", errors="ignore")


def test_encode_file_tiktoken_extrapolated(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    big_file: Path,
    tmp_path: Path,
) -> None:
    benchmark.group = "encode_file"
    encoding = encoding_files("r50k").tiktoken()
    text = leading_documents(big_file, TIKTOKEN_SLICE_BYTES)
    slice_bytes = len(text.encode("utf-8"))
    output = tmp_path / "ids.bin"

    def encode_and_write(text: str) -> int:
        ids = encoding.encode(text, allowed_special="all")
        with output.open("wb") as out:
            array("H", ids).tofile(out)
        return len(ids)

    tokens = benchmark.pedantic(report.timed(encode_and_write), args=(text,), rounds=1)
    output.unlink()
    scale = big_file.stat().st_size / slice_bytes
    report.finish(
        "tiktoken encode (1 thread, extrapolated)",
        ours=False,
        seconds=report.best_seconds * scale,
        input_bytes=big_file.stat().st_size,
        tokens=round(tokens * scale),
        measured_slice_mib=round(slice_bytes / MIB, 1),
        measured_slice_seconds=round(report.best_seconds, 3),
    )


# ---------------------------------------------------------------------------
# aencode_iterable against its synchronous counterparts


@pytest.fixture(scope="module")
def encode_lines(encode_text: str) -> list[str]:
    return encode_text.splitlines(keepends=True)


async def async_lines(lines: list[str]) -> AsyncIterator[str]:
    """The lines from an async generator, as an async application would feed them."""
    for line in lines:
        yield line


def _cold_r50k(
    streambpe_api: Callable[..., Any],
    encoding_files: Callable[[str], EncodingFiles],
    backend: str,
) -> Callable[[], tuple[tuple[Any], dict[str, Any]]]:
    """A pedantic ``setup`` giving each round a fresh r50k tokenizer (cold piece cache).

    The tokenizer's kernel for ``backend`` is built here, outside the clock.
    """
    from streambpe.core import using_backend

    tokenizer_class = streambpe_api("Tokenizer")
    files = encoding_files("r50k")

    def setup() -> tuple[tuple[Any], dict[str, Any]]:
        tokenizer = tokenizer_class.from_tiktoken(
            files.path, pattern=files.pattern, special_tokens=files.special_tokens
        )
        with using_backend(backend):
            tokenizer.cache_info()
        return (tokenizer,), {}

    return setup


@pytest.mark.benchmark(group="aencode_iterable")
@pytest.mark.parametrize("event_loop", ["asyncio", "trio"])
def test_aencode_iterable(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    encoding_files: Callable[[str], EncodingFiles],
    encode_text: str,
    encode_lines: list[str],
    event_loop: str,
    backend: str,
) -> None:
    from streambpe.core import using_backend

    streambpe_api("Tokenizer", "aencode_iterable")

    async def count_tokens(tokenizer: Any) -> int:
        count = 0
        async for batch in tokenizer.aencode_iterable(async_lines(encode_lines)):
            count += len(batch)
        return count

    def run(tokenizer: Any) -> int:
        with using_backend(backend):
            return anyio.run(count_tokens, tokenizer, backend=event_loop)

    tokens = benchmark.pedantic(
        report.timed(run), setup=_cold_r50k(streambpe_api, encoding_files, backend), rounds=ROUNDS
    )
    report.finish(
        f"streambpe aencode_iterable ({event_loop})",
        ours=True,
        backend=backend,
        input_bytes=len(encode_text.encode("utf-8")),
        tokens=tokens,
    )


#: The synchronous ways over the same lines: how each counts its ids, and its label.
SYNC_OVER_LINES: dict[str, tuple[Callable[[Iterable[Any]], int], str]] = {
    "encode_iterable": (lambda ids: sum(1 for _ in ids), "encode_iterable (sync)"),
    "iter_id_batches": (lambda batches: sum(map(len, batches)), "iter_id_batches (sync, batches)"),
}


@pytest.mark.benchmark(group="aencode_iterable")
@pytest.mark.parametrize("method", list(SYNC_OVER_LINES))
def test_sync_over_lines(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    encoding_files: Callable[[str], EncodingFiles],
    encode_text: str,
    encode_lines: list[str],
    method: str,
    backend: str,
) -> None:
    from streambpe.core import using_backend

    streambpe_api("Tokenizer", method)
    count, label = SYNC_OVER_LINES[method]

    def run(tokenizer: Any) -> int:
        with using_backend(backend):
            return count(getattr(tokenizer, method)(encode_lines))

    tokens = benchmark.pedantic(
        report.timed(run), setup=_cold_r50k(streambpe_api, encoding_files, backend), rounds=ROUNDS
    )
    report.finish(
        f"streambpe {label}",
        ours=False,
        backend=backend,
        input_bytes=len(encode_text.encode("utf-8")),
        tokens=tokens,
    )


@pytest.mark.benchmark(group="aencode_iterable")
def test_encode_whole_text_sync(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    encoding_files: Callable[[str], EncodingFiles],
    encode_text: str,
    backend: str,
) -> None:
    from streambpe.core import using_backend

    def run(tokenizer: Any) -> int:
        with using_backend(backend):
            return len(tokenizer.encode(encode_text))

    tokens = benchmark.pedantic(
        report.timed(run), setup=_cold_r50k(streambpe_api, encoding_files, backend), rounds=ROUNDS
    )
    report.finish(
        "streambpe encode (sync, whole text)",
        ours=False,
        backend=backend,
        input_bytes=len(encode_text.encode("utf-8")),
        tokens=tokens,
    )


@pytest.mark.benchmark(group="aencode_iterable-in-turns")
def test_aencode_iterable_in_turns(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    encoding_files: Callable[[str], EncodingFiles],
    encode_text: str,
    encode_lines: list[str],
) -> None:
    """``iter_id_batches`` and ``aencode_iterable`` (asyncio, trio) in turns, a ratio per round.

    Each round gives each of the three a fresh tokenizer (cold cache), times
    them back to back over the same lines, each going first in turn, and
    checks that their ids are equal. The ratio is the synchronous time over
    the async one: 1.0 means the async encoder keeps all of the synchronous
    speed.
    """
    from streambpe.core import NATIVE, using_backend

    if NATIVE is None:
        pytest.skip("the compiled core is not built: these rounds time the compiled kernel")
    cold = _cold_r50k(streambpe_api, encoding_files, "native")

    async def collect(tokenizer: Any) -> list[int]:
        ids: list[int] = []
        async for batch in tokenizer.aencode_iterable(async_lines(encode_lines)):
            ids += batch
        return ids

    def collect_batches(tokenizer: Any) -> list[int]:
        # Joined batch by batch, as ``collect`` joins the async batches.
        ids: list[int] = []
        for batch in tokenizer.iter_id_batches(encode_lines):
            ids += batch
        return ids

    def timed(run: Callable[[Any], list[int]]) -> tuple[float, list[int]]:
        (tokenizer,), _ = cold()
        with using_backend("native"):
            started = time.perf_counter()
            ids = run(tokenizer)
            return time.perf_counter() - started, ids

    ways: dict[str, Callable[[Any], list[int]]] = {"iter_id_batches": collect_batches}
    for loop in EVENT_LOOPS:
        ways[loop] = lambda tokenizer, loop=loop: anyio.run(collect, tokenizer, backend=loop)
    sync_seconds: list[float] = []
    ratios: dict[str, list[float]] = {loop: [] for loop in EVENT_LOOPS}

    def rounds() -> None:
        names = list(ways)
        for number in range(INTERLEAVED_ROUNDS):
            # Each way goes first in turn, so none always runs after the same one.
            order = names[number % len(names) :] + names[: number % len(names)]
            results = {name: timed(ways[name]) for name in order}
            seconds, expected = results["iter_id_batches"]
            sync_seconds.append(seconds)
            for loop in EVENT_LOOPS:
                loop_seconds, ids = results[loop]
                assert ids == expected, (
                    f"aencode_iterable ({loop}) ids differ from iter_id_batches'"
                )
                ratios[loop].append(seconds / loop_seconds)

    benchmark.pedantic(rounds, rounds=1)
    medians = {loop: statistics.median(values) for loop, values in ratios.items()}
    report.finish(
        "streambpe aencode_iterable, rounds in turns with iter_id_batches",
        ours=True,
        backend="native",
        seconds=min(sync_seconds),
        input_bytes=len(encode_text.encode("utf-8")),
        **{f"median_speed_{loop}": round(median, 2) for loop, median in medians.items()},
    )
    for loop, values in ratios.items():
        shown = ", ".join(f"{ratio:.2f}x" for ratio in values)
        report.note(
            f"aencode_iterable ({loop}) in turns with iter_id_batches over the same lines: "
            f"its speed / theirs per round {shown}; median {medians[loop]:.2f}x, "
            f"lowest {min(values):.2f}x"
        )
