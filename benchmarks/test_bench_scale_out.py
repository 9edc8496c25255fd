"""Scale-out (issue 11): counting on a Dask LocalCluster against the default pool, and the planner's reads.

Group ``scale-out-count``: ``count_words_in_inputs`` on the generated corpus
(``--bench-scale-mb``, 100 MiB by default; GPT-2 pattern, ``<|endoftext|>``)
with the default local pool of 2 processes, and with the executor of a Dask
``LocalCluster`` of 2 worker processes (1 thread each) started once for the
module (outside the clock), where the counts are summed on the cluster by a
tree of merge tasks. Both must give the same counts. Per backend: the Dask
workers run the backend under test (``STREAMBPE_PURE_PYTHON=1`` for the pure one).

Group ``scale-out-planner``: the corpus is copied into an fsspec in-memory
filesystem that counts the bytes each ranged read returns; every cut the
workers of a 16-task plan would place (4 MiB chunks inside each task) is
found, and the bytes read are reported as a fraction of the input
(``planner_read_fraction`` in ``extra_info``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from corpus import DEFAULT_SPECIAL as SPECIAL
from corpus import cached_corpus

if TYPE_CHECKING:
    from conftest import Report

MIB = 1024 * 1024
ROUNDS = 2
PLAN_TASKS = 16


@pytest.fixture(scope="module")
def scale_corpus(pytestconfig: pytest.Config) -> Path:
    size = round(float(pytestconfig.getoption("--bench-scale-mb")) * MIB)
    return cached_corpus(size, seed=pytestconfig.getoption("--bench-seed") + 11)


@pytest.fixture(scope="module")
def counts_by_engine() -> dict[str, dict[str, int]]:
    """Counts each run produced, to check the engines agree."""
    return {}


@pytest.fixture
def dask_executor(backend: str) -> Iterator[Any]:
    distributed = pytest.importorskip("distributed")
    environment = {"STREAMBPE_PURE_PYTHON": "1"} if backend == "python" else {}
    with (
        distributed.LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            dashboard_address=":0",
            env=environment,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client.get_executor()


def _count(corpus: Path, backend: str, **options: Any) -> dict[str, int]:
    from streambpe import core
    from streambpe.patterns import GPT2
    from streambpe.sources.inputs import resolve_inputs
    from streambpe.train.count_tasks import CountSettings
    from streambpe.train.counting import count_words_in_inputs
    from streambpe.train.options import TrainOptions

    with core.using_backend(backend):
        settings = CountSettings(GPT2, (SPECIAL,))
        return count_words_in_inputs(resolve_inputs(corpus), TrainOptions(settings, **options))


def _check_same(
    counts_by_engine: dict[str, dict[str, int]], name: str, counts: dict[str, int]
) -> bool:
    counts_by_engine.setdefault(name, counts)
    return all(other == counts for other in counts_by_engine.values())


def test_count_default_pool(
    benchmark: Any,
    report: Report,
    scale_corpus: Path,
    backend: str,
    counts_by_engine: dict[str, dict[str, int]],
) -> None:
    benchmark.group = "scale-out-count"
    counts = benchmark.pedantic(
        report.timed(_count), args=(scale_corpus, backend), kwargs={"workers": 2}, rounds=ROUNDS
    )
    same = _check_same(counts_by_engine, f"pool-{backend}", dict(counts))
    report.finish(
        "streambpe count, default pool (2 processes)",
        ours=True,
        backend=backend,
        input_bytes=scale_corpus.stat().st_size,
        distinct_words=len(counts),
    )
    assert same


def test_count_dask_local_cluster(
    benchmark: Any,
    report: Report,
    scale_corpus: Path,
    backend: str,
    dask_executor: Any,
    counts_by_engine: dict[str, dict[str, int]],
) -> None:
    benchmark.group = "scale-out-count"
    counts = benchmark.pedantic(
        report.timed(_count),
        args=(scale_corpus, backend),
        kwargs={"executor": dask_executor},
        rounds=ROUNDS,
    )
    same = _check_same(counts_by_engine, f"dask-{backend}", dict(counts))
    report.finish(
        "streambpe count, Dask LocalCluster (2 processes x 1 thread, tree-summed)",
        ours=True,
        backend=backend,
        input_bytes=scale_corpus.stat().st_size,
        distinct_words=len(counts),
    )
    assert same


def test_planner_bytes_read(benchmark: Any, report: Report, scale_corpus: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    from fsspec.implementations.memory import MemoryFileSystem

    from streambpe.cutting.byte_ranges import byte_ranges_between
    from streambpe.patterns import GPT2
    from streambpe.sources.inputs import resolve_inputs
    from streambpe.train.count_tasks import CountSettings, TextSpan, plan_count_tasks

    class CountingMemory(MemoryFileSystem):
        protocol = "benchcountingmemory"
        read = 0

        @classmethod
        def _strip_protocol(cls, path: str) -> str:
            return str(super()._strip_protocol(path.replace(cls.protocol + "://", "memory://")))

        def cat_file(self, path: str, start: Any = None, end: Any = None, **kwargs: Any) -> Any:
            data = super().cat_file(path, start=start, end=end, **kwargs)
            CountingMemory.read += len(data)
            return data

    benchmark.group = "scale-out-planner"
    fsspec.register_implementation(CountingMemory.protocol, CountingMemory, clobber=True)
    fs = CountingMemory()
    fs.pipe_file("/bench/corpus.txt", scale_corpus.read_bytes())
    try:
        [source] = resolve_inputs(f"{CountingMemory.protocol}:///bench/corpus.txt")
        settings = CountSettings(GPT2, (SPECIAL,))
        tasks = plan_count_tasks([source], tasks=PLAN_TASKS, settings=settings)

        def place_every_cut() -> int:
            CountingMemory.read = 0
            ranges = 0
            for task in tasks:
                for part in task.parts:
                    assert isinstance(part, TextSpan)
                    ranges += len(
                        byte_ranges_between(
                            source,
                            part.start,
                            part.end,
                            chunk_size=settings.chunk_size,
                            special_tokens=settings.special_tokens,
                            space_cuts=settings.space_cuts,
                        )
                    )
            return ranges

        ranges = benchmark.pedantic(report.timed(place_every_cut), rounds=ROUNDS)
        fraction = CountingMemory.read / source.size
        report.finish(
            "streambpe planner (16 tasks, 4 MiB chunks), cuts on a remote file",
            ours=True,
            input_bytes=source.size,
            planner_bytes_read=CountingMemory.read,
            planner_read_fraction=round(fraction, 5),
            ranges=ranges,
        )
        report.note(
            f"planner: read {CountingMemory.read:,} of {source.size:,} bytes "
            f"({fraction:.3%}) to place the cuts of {ranges} ranges"
        )
        assert fraction < 0.1
    finally:
        fs.rm_file("/bench/corpus.txt")
