"""Scale-out training: many inputs, iterators, records, and engines (Dask, Ray, any executor).

docs/design.md, "Scale-out". Every exactness test compares with the default
run on one local file holding the same documents, joined by a special token.
The Dask cluster is real (two worker processes); remote inputs use fsspec's
``memory://`` filesystem, so nothing touches the network.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import fsspec
import psutil
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from streaming_helpers import EOT, make_text

import streambpe
from streambpe.cutting.byte_ranges import byte_ranges_between
from streambpe.errors import FormatError, MissingDependencyError, WorkerError
from streambpe.sources.inputs import resolve_inputs
from streambpe.train.count_tasks import CountSettings, plan_count_tasks
from streambpe.train.trainer import train_bpe, train_bpe_from_iterator

distributed = pytest.importorskip("distributed")

Result = tuple[dict[int, bytes], list[tuple[bytes, bytes]]]
VOCAB = 420


def _documents(count: int, seed: int) -> list[str]:
    """Documents of varied length (a few words to a few thousand characters), no special tokens."""
    rng = random.Random(seed)
    text = make_text(200_000, seed=seed, eot_every=None)
    starts = sorted(rng.sample(range(len(text) - 4000), count))
    return [text[start : start + rng.randint(5, 4000)] for start in starts]


def _write_shards(folder: Path, documents: list[str], shards: int) -> list[Path]:
    """The documents in ``shards`` text files, documents joined by EOT inside each file."""
    folder.mkdir(parents=True, exist_ok=True)
    per_shard = -(-len(documents) // shards)
    paths = []
    for index in range(shards):
        path = folder / f"shard-{index:02d}.txt"
        path.write_text(EOT.join(documents[index * per_shard : (index + 1) * per_shard]))
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def documents() -> list[str]:
    return _documents(120, seed=5)


@pytest.fixture(scope="module")
def reference(documents: list[str], tmp_path_factory: pytest.TempPathFactory) -> Result:
    """The default run on one local file: the documents joined by EOT."""
    path = tmp_path_factory.mktemp("reference") / "all.txt"
    path.write_text(EOT.join(documents))
    return train_bpe(path, VOCAB, [EOT])


@pytest.fixture(scope="module")
def dask_executor() -> Iterator[Executor]:
    """A two-process Dask LocalCluster's executor; closed (workers gone) when the module ends."""
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client.get_executor()


# --------------------------------------------------------------------------- same result, any input


@pytest.mark.usefixtures("backend")
def test_list_of_files_equals_their_concatenation_with_specials(
    documents: list[str], reference: Result, tmp_path: Path
) -> None:
    """Guards "each file is its own stream": a list trains as the files joined by a special token."""
    paths = _write_shards(tmp_path, documents, shards=5)
    for workers, chunk_size in [(1, 1 << 20), (2, 700), (2, 1 << 20)]:
        got = train_bpe(paths, VOCAB, [EOT], workers=workers, chunk_size=chunk_size)
        assert got == reference, (workers, chunk_size)


@pytest.mark.usefixtures("backend")
def test_iterator_equals_a_file_of_its_documents(documents: list[str], reference: Result) -> None:
    """Guards train_bpe_from_iterator: each string is a document, batched or not, pool or not."""
    for workers, batch_size in [(1, 1 << 20), (2, 3000), (2, 1)]:
        got = train_bpe_from_iterator(
            iter(documents), VOCAB, [EOT], workers=workers, batch_size=batch_size
        )
        assert got == reference, (workers, batch_size)


def _write_jsonl(path: Path, documents: list[str]) -> Path:
    with open(path, "w", encoding="utf-8") as file:
        for index, document in enumerate(documents):
            file.write(json.dumps({"id": index, "text": document}) + "\n")
            if index % 7 == 0:
                file.write("\n")  # blank lines are skipped
    return path


def test_jsonl_records_are_documents(
    documents: list[str], reference: Result, tmp_path: Path
) -> None:
    """Guards jsonl inputs: each record's text field is a document, for any task count."""
    first = _write_jsonl(tmp_path / "a.jsonl", documents[:50])
    second = _write_jsonl(tmp_path / "b.jsonl", documents[50:])
    for workers, tasks, chunk_size in [
        (1, None, 1 << 20),
        (1, None, 100),
        (2, 3, 1 << 20),
        (2, 17, 333),
    ]:
        got = train_bpe(
            [first, second], VOCAB, [EOT], workers=workers, tasks=tasks, chunk_size=chunk_size
        )
        assert got == reference, (workers, tasks, chunk_size)


def test_parquet_rows_are_documents(
    documents: list[str], reference: Result, tmp_path: Path
) -> None:
    """Guards parquet inputs: one document per row, read a row group at a time."""
    pyarrow = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")

    path = tmp_path / "docs.parquet"
    table = pyarrow.table({"id": list(range(len(documents))), "body": documents})
    parquet.write_table(table, path, row_group_size=13)
    for workers in (1, 2):
        got = train_bpe(path, VOCAB, [EOT], workers=workers, text_field="body")
        assert got == reference
    with pytest.raises(FormatError, match=r"no column 'text'.*'body'.*text_field="):
        train_bpe(path, VOCAB, [EOT], workers=1)


# --------------------------------------------------------------------------- Dask


def test_dask_cluster_gives_the_default_result(
    dask_executor: Executor, documents: list[str], reference: Result, tmp_path: Path
) -> None:
    """Guards the executor seam on Dask: many files, a glob, an iterator and jsonl, any tasks/chunks."""
    paths = _write_shards(tmp_path / "shards", documents, shards=4)
    jsonl = _write_jsonl(tmp_path / "docs.jsonl", documents)
    for tasks, chunk_size in [(None, 1 << 20), (3, 900), (11, 1 << 20)]:
        options: dict[str, Any] = {
            "executor": dask_executor,
            "tasks": tasks,
            "chunk_size": chunk_size,
        }
        assert train_bpe(paths, VOCAB, [EOT], **options) == reference, (tasks, chunk_size)
        glob = str(tmp_path / "shards" / "shard-*.txt")
        assert train_bpe(glob, VOCAB, [EOT], **options) == reference, (tasks, chunk_size)
    assert train_bpe(jsonl, VOCAB, [EOT], executor=dask_executor, tasks=5) == reference
    for batch_size in (2500, 1 << 20):
        got = train_bpe_from_iterator(
            iter(documents), VOCAB, [EOT], executor=dask_executor, batch_size=batch_size
        )
        assert got == reference


def _kill_a_busy_worker(client: Any, done: threading.Event) -> list[int]:
    """In a thread: wait until a worker runs a task, then kill that worker's process."""
    killed: list[int] = []
    pids: dict[str, int] = client.run(os.getpid)

    def watch() -> None:
        while not done.is_set():
            busy = [address for address, keys in client.processing().items() if keys]
            if busy:
                psutil.Process(pids[busy[0]]).kill()
                killed.append(pids[busy[0]])
                return
            time.sleep(0.005)

    threading.Thread(target=watch, daemon=True).start()
    return killed


@pytest.fixture(scope="module")
def slow_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Text that the pure-Python workers below take a second or so to count."""
    path = tmp_path_factory.mktemp("slow") / "corpus.txt"
    path.write_text(make_text(1_500_000, seed=3))
    return path


def _pure_cluster(**config: Any) -> Any:
    """A Dask cluster on the pure backend (slow counting, so a task can be killed while it runs)."""
    import dask

    with dask.config.set(config):
        return distributed.LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            dashboard_address=":0",
            env={"STREAMBPE_PURE_PYTHON": "1"},
        )


@pytest.mark.slow
def test_killed_dask_worker_is_retried_with_the_same_result(slow_corpus: Path) -> None:
    """Guards "the engine retries": a worker killed mid-task changes nothing in the result."""
    expected = train_bpe(slow_corpus, VOCAB, [EOT])
    with _pure_cluster() as cluster, distributed.Client(cluster) as client:
        done = threading.Event()
        killed = _kill_a_busy_worker(client, done)
        try:
            got = train_bpe(slow_corpus, VOCAB, [EOT], executor=client.get_executor(), tasks=6)
        finally:
            done.set()
        assert killed, "no worker was seen running a task"
        assert got == expected


@pytest.mark.slow
def test_killed_dask_worker_without_retries_is_a_clear_error(
    slow_corpus: Path, tmp_path: Path
) -> None:
    """Guards "Errors lose nothing" on a cluster: no retries left -> WorkerError, nothing written."""
    output = tmp_path / "tokenizer"
    with (
        _pure_cluster(**{"distributed.scheduler.allowed-failures": 0}) as cluster,
        distributed.Client(cluster) as client,
    ):
        done = threading.Event()
        killed = _kill_a_busy_worker(client, done)
        try:
            with pytest.raises(WorkerError, match="Dask worker died"):
                vocab, merges = train_bpe(
                    slow_corpus, VOCAB, [EOT], executor=client.get_executor(), tasks=6
                )
                streambpe.Tokenizer(vocab, merges, [EOT]).save(output)
        finally:
            done.set()
        assert killed
        assert not output.exists()


# --------------------------------------------------------------------------- executors


class LoggingExecutor(Executor):
    """A thread pool that records every future it hands out, and says it has ``worker_count`` workers."""

    def __init__(self, worker_count: int = 2, delay: float = 0.0, threads: int = 2) -> None:
        self.worker_count = worker_count
        self.delay = delay
        self.inner = ThreadPoolExecutor(threads)
        self.futures: list[Future[Any]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        def slowly() -> Any:
            time.sleep(self.delay)
            return fn(*args, **kwargs)

        future = self.inner.submit(slowly)
        self.futures.append(future)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.inner.shutdown(wait=wait, cancel_futures=cancel_futures)


def test_executor_reporting_eight_workers_gets_sixteen_tasks(tmp_path: Path) -> None:
    """Guards the task count: it follows the executor's workers, not the caller's cores."""
    path = tmp_path / "corpus.txt"
    path.write_text(make_text(200_000, seed=1))
    executor = LoggingExecutor(worker_count=8)
    with executor:
        got = train_bpe(path, VOCAB, [EOT], executor=executor)
    assert len(executor.futures) >= 16
    assert got == train_bpe(path, VOCAB, [EOT], workers=1)


def assert_cancelling_leaves_nothing_queued(
    executor: LoggingExecutor, call: Callable[[], Awaitable[object]], event_loop: str
) -> None:
    """Cancel ``call`` once it has three tasks out; when it returns, every future ran or was cancelled.

    ``executor`` must run fewer tasks at once than the call keeps out, each
    for at least its ``delay``, so that at the cancel a task is still queued
    and the test sees it cancelled.
    """

    async def cancel_with_work_queued() -> list[str]:
        async def run() -> None:
            await call()
            raise AssertionError("the call finished although it was cancelled")

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            while len(executor.futures) < 3:
                await anyio.sleep(0.005)
            group.cancel_scope.cancel()
        return [repr(f) for f in executor.futures if not (f.done() or f.running())]

    with executor:
        assert anyio.run(cancel_with_work_queued, backend=event_loop) == []
        assert any(future.cancelled() for future in executor.futures)


@pytest.mark.parametrize("event_loop", ["asyncio", "trio"])
def test_cancelled_atrain_bpe_leaves_no_pending_future(tmp_path: Path, event_loop: str) -> None:
    """Guards deterministic cancellation: by the time atrain_bpe returns, no task is still queued."""
    path = tmp_path / "corpus.txt"
    path.write_text(make_text(100_000, seed=2))
    executor = LoggingExecutor(worker_count=8, delay=0.05)

    async def train() -> object:
        return await streambpe.atrain_bpe(path, VOCAB, [EOT], executor=executor, tasks=40)

    assert_cancelling_leaves_nothing_queued(executor, train, event_loop)


@pytest.mark.parametrize("event_loop", ["asyncio", "trio"])
def test_cancelled_aencode_file_leaves_no_pending_future(tmp_path: Path, event_loop: str) -> None:
    """Guards deterministic cancellation for encoding too: nothing queued once the call returns."""
    path = tmp_path / "corpus.txt"
    path.write_text(make_text(400_000, seed=3))
    output = tmp_path / "ids.bin"
    tokenizer = streambpe.Tokenizer.from_files(
        *_trained_files(tmp_path, path), special_tokens=[EOT]
    )
    # One thread under two reported workers: encoding keeps more tasks out than run.
    executor = LoggingExecutor(worker_count=2, delay=0.05, threads=1)

    async def encode() -> object:
        return await tokenizer.aencode_file(path, output, executor=executor, chunk_size=4096)

    assert_cancelling_leaves_nothing_queued(executor, encode, event_loop)
    assert not output.exists()


def _trained_files(folder: Path, corpus: Path) -> tuple[Path, Path]:
    """A small GPT-2-format tokenizer trained on ``corpus``: (vocab.json, merges.txt)."""
    vocab, merges = train_bpe(corpus, VOCAB, [EOT], workers=1)
    target = folder / "tokenizer"
    streambpe.Tokenizer(vocab, merges, [EOT]).save(target, format="gpt2")
    return target / "vocab.json", target / "merges.txt"


def _chdir_elsewhere(folder: str) -> None:
    os.chdir(folder)


def test_relative_paths_work_on_workers_in_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards absolute paths before dispatch: workers whose cwd differs open the same files."""
    (tmp_path / "data").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "data" / "corpus.txt").write_text(make_text(50_000, seed=4))
    monkeypatch.chdir(tmp_path)
    expected = train_bpe("data/corpus.txt", VOCAB, [EOT], workers=1)
    with ProcessPoolExecutor(
        2, initializer=_chdir_elsewhere, initargs=(str(tmp_path / "elsewhere"),)
    ) as pool:
        assert train_bpe(["data/corpus.txt"], VOCAB, [EOT], executor=pool, tasks=4) == expected


class InFlightExecutor(LoggingExecutor):
    """Records the most futures it had out (submitted, not finished) at any time."""

    def __init__(self, worker_count: int) -> None:
        super().__init__(worker_count=worker_count)
        self.most_out = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = super().submit(fn, *args, **kwargs)
        self.most_out = max(self.most_out, sum(not f.done() for f in self.futures))
        return future


def test_iterator_is_consumed_with_a_bounded_number_of_batches_out(
    documents: list[str], reference: Result
) -> None:
    """Guards bounded memory: batches are counted as the iterator is read, a few at a time."""
    pulled = 0

    def texts() -> Iterator[str]:
        nonlocal pulled
        for document in documents:
            pulled += 1
            yield document

    executor = InFlightExecutor(worker_count=2)
    with executor:
        got = train_bpe_from_iterator(texts(), VOCAB, [EOT], executor=executor, batch_size=2000)
    assert got == reference
    assert len(executor.futures) > 20  # many batches...
    assert executor.most_out <= 4  # ...but never more than twice the workers out at once
    assert pulled == len(documents)


def test_cli_trains_on_several_inputs_and_jsonl(
    documents: list[str], reference: Result, tmp_path: Path
) -> None:
    """Guards ``streambpe train A B 'glob'``: the CLI passes every input and the jsonl options on."""
    from streambpe.cli import main

    def trained_merges(name: str, *argv: str) -> list[tuple[bytes, bytes]]:
        out = tmp_path / name
        options = ["--vocab-size", str(VOCAB), "--special-token", EOT, "--out", str(out), "--quiet"]
        assert main(["train", *argv, *options]) == 0
        return streambpe.Tokenizer.load(out).merges

    paths = _write_shards(tmp_path / "shards", documents, shards=4)
    glob = str(tmp_path / "shards" / "shard-0[123].txt")
    assert trained_merges("tok", str(paths[0]), glob) == reference[1]
    records = tmp_path / "records.data"
    records.write_text("".join(json.dumps({"body": d}) + "\n" for d in documents))
    jsonl_options = ["--input-format", "jsonl", "--text-field", "body"]
    assert trained_merges("tok-jsonl", str(records), *jsonl_options) == reference[1]


# --------------------------------------------------------------------------- remote inputs and the planner


class CountingMemoryFileSystem(MemoryFileSystem):
    """fsspec's in-memory filesystem, counting the bytes each ranged read returns."""

    protocol = "countingmemory"
    bytes_read = 0

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        # MemoryFileSystem strips only its own "memory://" prefix.
        if path.startswith("countingmemory://"):
            path = "memory://" + path[len("countingmemory://") :]
        return str(super()._strip_protocol(path))

    def cat_file(
        self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any
    ) -> bytes:
        data = super().cat_file(path, start=start, end=end, **kwargs)
        CountingMemoryFileSystem.bytes_read += len(data)
        return bytes(data)


@pytest.fixture
def counting_fs() -> Iterator[CountingMemoryFileSystem]:
    fsspec.register_implementation("countingmemory", CountingMemoryFileSystem, clobber=True)
    fs = CountingMemoryFileSystem()
    yield fs
    for path in fs.find("/planner"):
        fs.rm_file(path)


@pytest.mark.parametrize("specials", [[EOT], []], ids=["with-specials", "no-specials"])
def test_planner_reads_under_a_tenth_of_the_file(
    counting_fs: CountingMemoryFileSystem, specials: list[str]
) -> None:
    """Guards "the planner reads a small window around each cut", with and without special tokens."""
    text = make_text(4_000_000, seed=6, eot_every=17 if specials else None)
    data = text.encode("utf-8")
    counting_fs.pipe_file("/planner/corpus.txt", data)
    [source] = resolve_inputs("countingmemory:///planner/corpus.txt")
    settings = CountSettings(streambpe.patterns.GPT2, tuple(specials), chunk_size=256 * 1024)
    tasks = plan_count_tasks([source], tasks=16, settings=settings)
    assert len(tasks) == 16
    CountingMemoryFileSystem.bytes_read = 0
    cuts = []
    for task in tasks:
        for part in task.parts:
            # What a worker does before reading its text: place its cuts.
            ranges = byte_ranges_between(
                source,
                part.start,  # type: ignore[union-attr]
                part.end,  # type: ignore[union-attr]
                chunk_size=settings.chunk_size,
                special_tokens=specials,
                space_cuts=True,
            )
            cuts += [(r.start, r.end) for r in ranges]
    assert CountingMemoryFileSystem.bytes_read < len(data) / 10, CountingMemoryFileSystem.bytes_read
    # The cuts tile the file: every byte is counted once.
    assert cuts[0][0] == 0 and cuts[-1][1] == len(data)
    assert all(end == start for (_, end), (start, _) in itertools.pairwise(cuts))


def test_remote_inputs_train_like_local_files(
    counting_fs: CountingMemoryFileSystem, documents: list[str], reference: Result
) -> None:
    """Guards URLs and remote globs: training on memory:// shards equals the local reference."""
    for index in range(3):
        shard = EOT.join(documents[index * 40 : (index + 1) * 40]).encode("utf-8")
        counting_fs.pipe_file(f"/planner/shard-{index}.txt", shard)
    for workers in (1, 2):
        got = train_bpe("countingmemory:///planner/shard-*.txt", VOCAB, [EOT], workers=workers)
        assert got == reference


# --------------------------------------------------------------------------- the count cache


def test_cache_keys_on_metadata_or_on_content(tmp_path: Path) -> None:
    """Guards the cache keys and their documented trade-off (docs/design.md, "Scale-out")."""
    cache = tmp_path / "cache"
    path = tmp_path / "corpus.txt"
    path.write_text("aaa bbb aaa bbb ccc")
    first = train_bpe(path, 260, [], workers=1, cache=cache)
    stamp = path.stat().st_mtime_ns
    # Same size, same mtime, other bytes: the metadata key cannot tell (the stale hit
    # the README warns about); the content key can.
    path.write_text("xxx yyy xxx yyy zzz")
    os.utime(path, ns=(stamp, stamp))
    assert train_bpe(path, 260, [], workers=1, cache=cache) == first
    fresh = train_bpe(path, 260, [], workers=1)
    assert fresh != first
    assert train_bpe(path, 260, [], workers=1, cache=cache, cache_key="content") == fresh
    # A new mtime is enough for the metadata key to count again.
    os.utime(path, ns=(stamp + 10**9, stamp + 10**9))
    assert train_bpe(path, 260, [], workers=1, cache=cache) == fresh
    # The content key survives a copy elsewhere.
    copy = tmp_path / "copy.txt"
    copy.write_bytes(path.read_bytes())
    entries = len(list(cache.iterdir()))
    assert train_bpe(copy, 260, [], workers=1, cache=cache, cache_key="content") == fresh
    assert len(list(cache.iterdir())) == entries


# --------------------------------------------------------------------------- errors


def test_input_errors_name_the_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards the error paths: missing file in a list, glob with no match, bad jsonl line, no text field."""
    present = tmp_path / "present.txt"
    present.write_text("some text")
    with pytest.raises(FileNotFoundError, match=r"input file not found: .*absent\.txt"):
        train_bpe([present, tmp_path / "absent.txt"], VOCAB, [EOT])
    with pytest.raises(FileNotFoundError, match="no input file matches the glob"):
        train_bpe(str(tmp_path / "*.jsonl"), VOCAB, [EOT])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": "fine too"}\n{"text": broken\n')
    with pytest.raises(FormatError, match=r"bad\.jsonl:3: ") as info:
        train_bpe(bad, VOCAB, [EOT], workers=2, tasks=3)
    assert info.value.line_number == 3
    unnamed = tmp_path / "unnamed.jsonl"
    unnamed.write_text('{"content": "no text field here"}\n')
    with pytest.raises(
        FormatError, match=r"unnamed\.jsonl:1: no field 'text'.*'content'.*text_field="
    ):
        train_bpe(unnamed, VOCAB, [EOT])
    with pytest.warns(streambpe.VocabSizeWarning):
        assert train_bpe(unnamed, VOCAB, [EOT], text_field="content")[1]


def test_url_without_fsspec_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards the optional extra at the API: a URL without fsspec says what to install."""
    import builtins

    real_import = builtins.__import__

    def no_fsspec(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("fsspec"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_fsspec)
    with pytest.raises(MissingDependencyError, match=r"streambpe\[remote\]"):
        train_bpe("s3://bucket/corpus.txt", VOCAB, [EOT])


# --------------------------------------------------------------------------- Ray


@pytest.mark.slow
def test_ray_executor_gives_the_default_result(
    documents: list[str], reference: Result, tmp_path: Path
) -> None:
    """Guards the Ray adapter: a local Ray instance counts and merges like the default run."""
    ray = pytest.importorskip("ray")
    paths = _write_shards(tmp_path, documents, shards=3)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        executor = streambpe.RayExecutor()
        assert executor.worker_count() == 2
        assert train_bpe(paths, VOCAB, [EOT], executor=executor, tasks=5) == reference
        assert executor.submit(abs, -3).result(timeout=60) == 3
    finally:
        ray.shutdown()
