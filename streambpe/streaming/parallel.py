"""Where encoding work runs: in this process, on threads, on processes, or on a caller's executor.

The choice between threads and processes is made here, once, for every
streaming entry point (``docs/design.md``, "Processes or threads"). When the
encoder's work releases the GIL (the compiled core with a built-in pattern),
threads in this process share one copy of the vocabulary and need no
pickling; otherwise the work goes to processes, each holding its own copy.

:func:`encode_map` runs a task function over tasks and yields the results in
task order, with a bounded number in flight, however the work is spread. A
task function takes the encoder first: ``function(encoder, task)``. It must be
a module-level function so that processes and remote executors can import it.

>>> from streambpe.encode.encoder import Encoder
>>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {})
>>> with encode_map(encoder, Encoder.encode, ["a", "bc"], workers=2) as results:
...     list(results)
[[97], [98, 99]]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import ExitStack, closing, contextmanager
from functools import partial
from typing import TypeVar

from streambpe._support.executors import in_flight_bound, ordered_map
from streambpe._support.pool import Mode, local_pool, pool_size
from streambpe.encode.encoder import Encoder
from streambpe.streaming import worker_encoder

__all__ = ["Mode", "encode_map", "parallel_mode"]

TaskT = TypeVar("TaskT")
ResultT = TypeVar("ResultT")


def parallel_mode(encoder: Encoder) -> Mode:
    """``"threads"`` when ``encoder``'s work releases the GIL, else ``"processes"``.

    The compiled core scans and merges text on the string's own buffer
    without the GIL (``Encoder.releases_gil``), for the built-in patterns and
    any pattern its matcher compiles; a pattern outside that subset runs
    through ``regex``, and the pure backend is Python throughout, both
    holding it.

    >>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {}, pattern=r"\\w+|\\W")
    >>> parallel_mode(encoder)
    'processes'
    """
    return "threads" if encoder.releases_gil else "processes"


def _run_installed(function: Callable[[Encoder, TaskT], ResultT], task: TaskT) -> ResultT:
    """One task in a pool process, with the encoder its initializer installed."""
    return function(worker_encoder.installed(), task)


def _run_referenced(
    function: Callable[[Encoder, TaskT], ResultT], encoder: worker_encoder.EncoderRef, task: TaskT
) -> ResultT:
    """One task on a caller's executor: the encoder is loaded once per worker process."""
    return function(encoder.get(), task)


@contextmanager
def encode_map(
    encoder: Encoder,
    function: Callable[[Encoder, TaskT], ResultT],
    tasks: Sequence[TaskT],
    *,
    workers: int | None,
    executor: Executor | None = None,
    staging_dir: str | os.PathLike[str] | None = None,
    all_in_flight: bool = False,
) -> Iterator[Iterator[ResultT]]:
    """Results of ``function(encoder, task)`` for each task, in task order.

    Args:
        workers: threads or processes to start (``None``: one per core); with an
            ``executor``, a hint for how many tasks to keep in flight when the
            executor does not say how many it runs at once.
        executor: a ``concurrent.futures.Executor`` to run the tasks on instead
            (a Dask ``client.get_executor()``, say). A ``ThreadPoolExecutor``
            shares this encoder; any other gets the encoder once per worker
            process, from a file staged in ``staging_dir``, which its workers
            must be able to read.
        all_in_flight: submit every task at once, for a caller that keeps
            every result anyway; otherwise two per worker are in flight, which
            bounds memory but can leave a worker idle behind a slow task
            whose result is due first.

    When the block ends, by any way, no task of this call is still queued, and
    on the pools started here none is running either. A caller's executor
    stays open (it is the caller's); a task already running there is left to
    finish, and its result is dropped.
    """
    with ExitStack() as cleanup:
        count = pool_size(workers, tasks)
        # Where the tasks run: the caller's executor, a pool started here, or
        # (one worker) this process, with no global state, so that concurrent
        # calls cannot mix encoders.
        pool = executor
        if executor is None and count > 1:
            if parallel_mode(encoder) == "threads":
                pool = cleanup.enter_context(local_pool(count, "threads"))
            else:
                installing = (worker_encoder.install, (encoder,))
                pool = cleanup.enter_context(local_pool(count, "processes", *installing))
        # How the encoder reaches them: threads of this process share it, the
        # processes started here had it installed, any other worker loads it once.
        run: Callable[[TaskT], ResultT]
        if pool is None or isinstance(pool, ThreadPoolExecutor):
            run = partial(function, encoder)
        elif executor is None:
            run = partial(_run_installed, function)
        else:
            reference = cleanup.enter_context(worker_encoder.staged(encoder, staging_dir))
            run = partial(_run_referenced, function, reference)
        in_flight = (
            max(1, len(tasks)) if all_in_flight else in_flight_bound(pool, fallback_workers=count)
        )
        # Entered after the pool, so closed first: queued tasks are cancelled
        # before the pool shuts down, even when the caller abandons the results.
        yield cleanup.enter_context(closing(ordered_map(pool, run, tasks, max_in_flight=in_flight)))
