"""``encode_files``: many inputs into ``.bin`` shards, committed by ``index.json`` written last.

Guards (docs/design.md, "Sharded outputs"): the shards in index order
concatenate to ``encode_file`` of each input in turn, for any shard size,
worker count, way of spreading the work and executor; the index's counts add
up; a failed or killed task leaves no ``index.json``, and a rerun completes
the job re-encoding only the shards that are missing, damaged or stale;
relative paths work for workers running in another directory; the tokenizer
reaches a caller's executor once per worker, never pickled with every task.
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from streaming_helpers import (
    EOT,
    child_pids,
    encode_threads,
    fresh_r50k_tokenizer,
    listing,
    make_text,
    make_whitespace_text,
    new_children,
)

import streambpe.core
import streambpe.streaming.parallel
import streambpe.streaming.sharded
from streambpe.cli import main
from streambpe.errors import WorkerError
from streambpe.tokenizer import Tokenizer

# The exactness tests run once per backend (docs/design.md, "Backends").
pytestmark = pytest.mark.usefixtures("backend")

#: Inputs by file name, in the order they are passed: different kinds of text,
#: one much smaller than a shard, one with a special token at every other sentence.
CONTENTS: dict[str, Callable[[], str]] = {
    "a-multilingual.txt": lambda: make_text(90_000, seed=21),
    "b-tiny.txt": lambda: "Just one line, shorter than any shard.\n",
    "c-specials.txt": lambda: EOT + make_text(60_000, seed=22, eot_every=2) + EOT,
    "d-whitespace.txt": lambda: make_whitespace_text(50_000, seed=23),
}


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    """r50k_base (GPT-2) with ``<|endoftext|>``."""
    return fresh_r50k_tokenizer()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The input files of :data:`CONTENTS`, in order."""
    folder = tmp_path_factory.mktemp("sharded-inputs")
    paths = []
    for name, build in CONTENTS.items():
        path = folder / name
        path.write_bytes(build().encode("utf-8"))
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def expected(tok: Tokenizer, corpus: list[Path], tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """``encode_file`` of each input, one thread, concatenated: what the shards must add up to."""
    folder = tmp_path_factory.mktemp("sharded-expected")
    parts = []
    for path in corpus:
        tok.encode_file(path, folder / f"{path.name}.bin", workers=1)
        parts.append((folder / f"{path.name}.bin").read_bytes())
    return b"".join(parts)


def read_index(out: Path) -> dict[str, Any]:
    """``out/index.json``, parsed."""
    index: dict[str, Any] = json.loads((out / "index.json").read_text(encoding="utf-8"))
    return index


def concatenated(out: Path) -> bytes:
    """The shards of ``out`` joined in index order."""
    return b"".join((out / shard["path"]).read_bytes() for shard in read_index(out)["shards"])


def check_index(out: Path, corpus: list[Path]) -> None:
    """The index describes its shards truly: counts, sizes, and byte ranges tiling every input."""
    index = read_index(out)
    shards = index["shards"]
    assert index["tokens"] == sum(shard["tokens"] for shard in shards)
    assert index["dtype"] == "uint16"
    assert [entry["location"] for entry in index["inputs"]] == [str(p) for p in corpus]
    for shard in shards:
        assert not Path(shard["path"]).is_absolute()
        assert (out / shard["path"]).stat().st_size == 2 * shard["tokens"]
        assert shard["tokens"] > 0
    for path in corpus:
        ranges = [(s["start"], s["end"]) for s in shards if s["input"] == str(path)]
        starts = [start for start, _ in ranges]
        ends = [end for _, end in ranges]
        assert starts[0] == 0 and ends[-1] == path.stat().st_size
        assert starts[1:] == ends[:-1], f"the shards of {path.name} do not tile it"
    # Shards come in input order.
    order = [str(p) for p in corpus]
    positions = [order.index(shard["input"]) for shard in shards]
    assert positions == sorted(positions)


# --------------------------------------------------------------------------- equivalence


@pytest.mark.parametrize("shard_bytes", [9_000, 10**9])
@pytest.mark.parametrize("spread", ["one-thread", "threads", "processes"])
def test_shards_concatenate_to_encode_file_of_each_input(
    tok: Tokenizer,
    corpus: list[Path],
    expected: bytes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shard_bytes: int,
    spread: str,
) -> None:
    """Any shard size, on one thread, on threads or on processes: the same bytes, a true index."""
    workers = 1
    if spread != "one-thread":
        monkeypatch.setattr(streambpe.streaming.parallel, "parallel_mode", lambda encoder: spread)
        workers = 2
    out = tmp_path / "out"
    stats = tok.encode_files(
        corpus, out, workers=workers, shard_bytes=shard_bytes, chunk_size=3_000
    )
    assert concatenated(out) == expected
    check_index(out, corpus)
    index = read_index(out)
    assert stats.tokens == index["tokens"] == len(expected) // 2
    assert stats.shards == len(index["shards"])
    assert stats.skipped == 0
    assert stats.bytes == sum(p.stat().st_size for p in corpus)
    if shard_bytes == 9_000:
        assert stats.shards > 2 * len(corpus), "small shards should cut the inputs"
    assert listing(out) == {"index.json"} | {s["path"] for s in index["shards"]}
    assert encode_threads() == []


def test_a_glob_is_the_files_in_name_order(
    tok: Tokenizer, corpus: list[Path], expected: bytes, tmp_path: Path
) -> None:
    """``folder/*.txt`` names the same files in the same (sorted) order as the list."""
    out = tmp_path / "out"
    tok.encode_files(str(corpus[0].parent / "*.txt"), out, workers=1, shard_bytes=30_000)
    assert concatenated(out) == expected


# --------------------------------------------------------------------------- resuming


class CountingExecutor(ThreadPoolExecutor):
    """A thread pool that counts the tasks submitted to it."""

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def encode_counting(tok: Tokenizer, corpus: list[Path], out: Path, **options: Any) -> int:
    """Run ``encode_files`` on a :class:`CountingExecutor`; return how many shards it encoded."""
    with CountingExecutor(2) as executor:
        stats = tok.encode_files(corpus, out, executor=executor, **options)
    assert stats.skipped + executor.submitted == len(planned_shards(corpus, **options))
    return executor.submitted


def planned_shards(corpus: list[Path], *, shard_bytes: int, **_: Any) -> list[tuple[Path, int]]:
    """The shards the size-only plan makes: (input, part) for every ``shard_bytes`` of each input."""
    return [
        (path, part) for path in corpus for part in range(-(-path.stat().st_size // shard_bytes))
    ]


_real_encode_shard = streambpe.streaming.sharded._encode_shard


def _fail_on_shard_three(encoder: Any, task: Any) -> Any:
    """Stands in for ``_encode_shard``: the fourth shard's task raises."""
    if task.number == 3:
        raise OSError("the disk under shard 3 went away")
    return _real_encode_shard(encoder, task)


def _die_on_shard_three(encoder: Any, task: Any) -> Any:
    """Stands in for ``_encode_shard``: the fourth shard's worker process dies mid-way."""
    if task.number == 3:
        os._exit(1)
    return _real_encode_shard(encoder, task)


@pytest.mark.parametrize("failure", ["task-raises", "worker-killed"])
def test_failed_run_leaves_no_index_and_a_rerun_completes_it(
    tok: Tokenizer,
    corpus: list[Path],
    expected: bytes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    failure: str,
) -> None:
    """A task that raises, or a worker killed mid-shard: the error reaches the caller,
    ``index.json`` is never written, and a rerun encodes only what was not finished."""
    out = tmp_path / "out"
    options: dict[str, Any] = {"shard_bytes": 20_000, "chunk_size": 4_000}
    children = child_pids()
    if failure == "task-raises":
        monkeypatch.setattr(streambpe.streaming.sharded, "_encode_shard", _fail_on_shard_three)
        with pytest.raises(OSError, match="went away"):
            tok.encode_files(corpus, out, workers=1, **options)
    else:
        monkeypatch.setattr(streambpe.streaming.parallel, "parallel_mode", lambda e: "processes")
        monkeypatch.setattr(streambpe.streaming.sharded, "_encode_shard", _die_on_shard_three)
        with pytest.raises(WorkerError, match="died"):
            tok.encode_files(corpus, out, workers=2, **options)
    monkeypatch.undo()
    assert new_children(children) == set()
    assert not (out / "index.json").exists()
    # What the tasks recorded as done (a shard renamed but not yet recorded is redone).
    records = (out / streambpe.streaming.sharded.PENDING_NAME).glob("shard-*.json")
    finished = {record.name.removesuffix(".json") for record in records}
    assert finished and "shard-000003.bin" not in finished
    if failure == "task-raises":
        assert finished == {"shard-000000.bin", "shard-000001.bin", "shard-000002.bin"}
    encoded = encode_counting(tok, corpus, out, **options)
    assert encoded == len(planned_shards(corpus, **options)) - len(finished)
    assert concatenated(out) == expected
    check_index(out, corpus)
    assert all(not name.startswith(".") for name in listing(out)), "temporaries were left"


def test_rerun_skips_verified_shards_and_redoes_damaged_ones(
    tok: Tokenizer, corpus: list[Path], expected: bytes, tmp_path: Path
) -> None:
    """A complete output is not re-encoded; a deleted or truncated shard is, and only it."""
    out = tmp_path / "out"
    options: dict[str, Any] = {"shard_bytes": 20_000}
    total = len(planned_shards(corpus, **options))
    assert encode_counting(tok, corpus, out, **options) == total
    assert encode_counting(tok, corpus, out, **options) == 0
    shards = read_index(out)["shards"]
    (out / shards[1]["path"]).unlink()
    damaged = out / shards[-1]["path"]
    damaged.write_bytes(damaged.read_bytes()[:-2])
    assert encode_counting(tok, corpus, out, **options) == 2
    assert concatenated(out) == expected
    check_index(out, corpus)


def test_other_settings_reencode_everything(
    tok: Tokenizer, corpus: list[Path], tmp_path: Path
) -> None:
    """Shards made with another dtype (or tokenizer, or input version) are never reused."""
    out = tmp_path / "out"
    options: dict[str, Any] = {"shard_bytes": 30_000}
    total = len(planned_shards(corpus, **options))
    encode_counting(tok, corpus, out, **options)
    assert encode_counting(tok, corpus, out, dtype="uint32", **options) == total
    index = read_index(out)
    assert index["dtype"] == "uint32"
    assert all((out / s["path"]).stat().st_size == 4 * s["tokens"] for s in index["shards"])
    other = fresh_r50k_tokenizer(eot_id=60000)
    assert encode_counting(other, corpus, out, dtype="uint32", **options) == total
    assert read_index(out)["tokenizer"]["special_tokens"] == {EOT: 60000}


def test_an_unfinished_rerun_removes_the_old_index_first(
    tok: Tokenizer, corpus: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rerun that must rewrite shards drops the old ``index.json`` before writing any,
    so a failure cannot leave an index describing shards of another run."""
    out = tmp_path / "out"
    tok.encode_files(corpus, out, workers=1, shard_bytes=20_000)
    monkeypatch.setattr(streambpe.streaming.sharded, "_encode_shard", _fail_on_shard_three)
    with pytest.raises(OSError, match="went away"):
        tok.encode_files(corpus, out, workers=1, shard_bytes=20_000, dtype="uint32")
    assert not (out / "index.json").exists()


# --------------------------------------------------------------------------- executors


def _move_to(folder: str) -> None:
    """Pool initializer: the worker runs in another directory than the caller."""
    os.chdir(folder)


class PicklingSpy(ProcessPoolExecutor):
    """A process pool that records the pickled size of every task it is given."""

    def __init__(self, workers: int, **options: Any) -> None:
        super().__init__(workers, **options)
        self.task_sizes: list[int] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.task_sizes.append(len(pickle.dumps((fn, args, kwargs))))
        return super().submit(fn, *args, **kwargs)


def test_relative_paths_with_workers_in_another_directory(
    tok: Tokenizer,
    corpus: list[Path],
    expected: bytes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Relative inputs and output folder work on workers started elsewhere, and each task
    is small: the encoder is staged once, not pickled with every task."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(corpus[0].parent)
    relative_out = os.path.relpath(tmp_path / "out")
    with PicklingSpy(2, initializer=_move_to, initargs=(str(elsewhere),)) as executor:
        tok.encode_files(
            [p.name for p in corpus], relative_out, executor=executor, shard_bytes=25_000
        )
    out = tmp_path / "out"
    assert concatenated(out) == expected
    check_index(out, corpus)
    assert listing(elsewhere) == set()
    assert executor.task_sizes and max(executor.task_sizes) < 4_000
    assert len(pickle.dumps(tok)) > 100 * max(executor.task_sizes)


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Any]:
    """A Dask ``LocalCluster`` of two worker processes, closed after the module."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def test_dask_local_cluster(
    tok: Tokenizer,
    corpus: list[Path],
    expected: bytes,
    tmp_path: Path,
    dask_client: Any,
    backend: str,
) -> None:
    """Dask's ``client.get_executor()`` writes the same shards; a rerun encodes nothing."""
    if backend != "native" and "native" in streambpe.core.available_backends():
        # Dask's workers are fresh processes running the default backend: one run covers them.
        pytest.skip("Dask workers run the default backend whatever this process selected")
    out = tmp_path / "out"
    executor: Executor = dask_client.get_executor()
    stats = tok.encode_files(corpus, out, executor=executor, shard_bytes=20_000)
    assert concatenated(out) == expected
    check_index(out, corpus)
    again = tok.encode_files(corpus, out, executor=executor, shard_bytes=20_000)
    assert again.skipped == len(planned_shards(corpus, shard_bytes=20_000))
    assert again.tokens == stats.tokens


# --------------------------------------------------------------------------- command line


def test_command_line_encode_files(
    corpus: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``streambpe encode-files``: the same shards, a JSON summary, and a rerun that keeps them all."""
    vocab = {i: bytes([i]) for i in range(256)}
    merges = [(b"t", b"h"), (b"th", b"e"), (b" ", b"a"), (b"e", b"n")]
    tokenizer_dir = tmp_path / "tok"
    Tokenizer(vocab | {256 + i: a + b for i, (a, b) in enumerate(merges)}, merges, [EOT]).save(
        tokenizer_dir
    )
    small = Tokenizer.load(tokenizer_dir)
    for path in corpus:
        small.encode_file(path, tmp_path / f"{path.name}.bin", workers=1)
    expected = b"".join((tmp_path / f"{path.name}.bin").read_bytes() for path in corpus)
    out = tmp_path / "out"
    argv = ["encode-files", "--tokenizer", str(tokenizer_dir), *map(str, corpus)]
    argv += ["--out-dir", str(out), "--shard-mb", "0.02", "--json", "--quiet"]
    capsys.readouterr()
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert concatenated(out) == expected
    check_index(out, corpus)
    assert summary["tokens"] == read_index(out)["tokens"] == len(expected) // 2
    assert summary["shards"] == len(read_index(out)["shards"]) > len(corpus)
    assert summary["skipped"] == 0
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["skipped"] == len(planned_shards(corpus, shard_bytes=round(0.02 * 2**20)))
    assert again["tokens"] == summary["tokens"]


def test_inputs_on_an_fsspec_filesystem(
    tok: Tokenizer, corpus: list[Path], expected: bytes, tmp_path: Path
) -> None:
    """URLs (here fsspec's in-memory filesystem) are read with ranged reads: the same shards."""
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    urls = [f"memory://sharded-test/{path.name}" for path in corpus]
    for path, url in zip(corpus, urls, strict=True):
        memory.pipe(url, path.read_bytes())
    try:
        out = tmp_path / "out"
        tok.encode_files(urls, out, workers=1, shard_bytes=25_000)
        assert concatenated(out) == expected
        inputs = {shard["input"] for shard in read_index(out)["shards"]}
        assert {url.rsplit("/", 1)[1] for url in inputs} == {path.name for path in corpus}
        assert all(url.startswith("memory://") for url in inputs)
    finally:
        memory.rm("sharded-test", recursive=True)
