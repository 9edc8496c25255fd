"""Opening and closing local pools: threads or processes that leave nothing behind.

Pretokenizing with ``regex`` is CPU-bound Python holding the GIL, so Python
work runs in processes; native code that releases the GIL runs on threads
(``docs/design.md``, "Processes or threads"). :func:`local_pool` is where every
pool this package starts is opened, sized and closed; what runs on it, and on
a caller's executor, is :mod:`streambpe._support.executors`.

Every pool opened here is finished before the ``with`` block returns, whether
it ends normally, by an error, by Ctrl-C or by a cancelled caller: a process
pool's workers are gone and its manager thread is joined, a thread pool's
threads have ended, so nothing is left for the interpreter to wait on at exit.
A wait for a process pool's result notices a worker that died
(:func:`result_or_worker_error`).

>>> pool_size(2, ["a", "b", "c"]), pool_size(4, ["a"])
(2, 1)
>>> with local_pool(2, "threads") as pool:
...     pool.submit(abs, -1).result()
1
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator, Sized
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from threading import Thread
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from streambpe.errors import WorkerError

# The process pool's modules are imported when a process pool is made:
# concurrent.futures.process brings in multiprocessing, 16 ms of the 0.1 s
# that importing streambpe took (python -X importtime), and encoding never
# needs it.
if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing.process import BaseProcess
    from multiprocessing.queues import SimpleQueue

ResultT = TypeVar("ResultT")

#: How a local pool spreads work: threads of this process, or worker processes.
Mode = Literal["threads", "processes"]

#: How often a wait for a result checks that the pool's workers are still alive.
LIVENESS_CHECK_SECONDS = 0.5

_WORKER_DIED = (
    "a worker process died unexpectedly (killed, out of memory, or crashed); no output was written"
)


def resolve_workers(workers: int | None) -> int:
    """The number of worker processes to use: ``None`` means one per available core.

    >>> resolve_workers(3)
    3
    """
    if workers is None:
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    return workers


def pool_size(workers: int | None, tasks: object) -> int:
    """How many workers a local pool for ``tasks`` gets: ``workers``, but no more than the tasks.

    ``tasks`` that has no length (an iterator being consumed) does not cap it.

    >>> pool_size(4, ["a", "b"]), pool_size(4, iter("ab")), pool_size(4, [])
    (2, 4, 1)
    """
    count = resolve_workers(workers)
    if isinstance(tasks, Sized):
        count = min(count, len(tasks))
    return max(1, count)


def _ignore_sigint_then(initializer: Callable[..., None] | None, *initargs: Any) -> None:
    # Ctrl-C is the parent's to handle: it stops the pool and kills the workers.
    # Workers that also raised KeyboardInterrupt would only add noise.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)


def _workers(executor: ProcessPoolExecutor) -> list[BaseProcess]:
    """The pool's worker processes (none once it has shut down)."""
    processes: dict[int, BaseProcess] | None = getattr(executor, "_processes", None)
    return list((processes or {}).values())


def _stop_now(executor: ProcessPoolExecutor) -> None:
    """Kill the pool's workers and wait until the pool's manager thread has exited.

    This reaches into CPython 3.11-3.13's ``ProcessPoolExecutor``: there is no
    public way to stop busy workers before 3.14, and ``shutdown(wait=False)``
    drops the references needed afterwards, so they are taken first.
    """
    # typeshed calls the manager thread a _ThreadWakeup, and none of these is
    # ever None there; at run time each is None once the pool has shut down.
    processes = _workers(executor)
    manager: Thread | None = getattr(executor, "_executor_manager_thread", None)
    results: SimpleQueue[Any] | None = getattr(executor, "_result_queue", None)
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(timeout=5)
    if results is None:
        return
    # A worker killed halfway through sending a result leaves part of a message
    # in the result pipe, and the manager thread waits for the rest forever: this
    # process holds the pipe's write end too, so no end-of-file ever comes, and
    # the interpreter would hang at exit joining that thread. Closing our write
    # end turns the wait into end-of-file, which the manager handles as a broken
    # pool: it fails the pending futures and exits.
    results._writer.close()  # type: ignore[attr-defined]
    if manager is not None:
        manager.join()
    results.close()


@contextmanager
def process_pool(
    workers: int,
    initializer: Callable[..., None] | None = None,
    initargs: tuple[Any, ...] = (),
) -> Iterator[ProcessPoolExecutor]:
    """A process pool that is finished, workers and manager thread, when the block ends.

    On success, tasks still queued are cancelled and running ones finish; on
    any error or Ctrl-C the workers are killed. Either way no process or thread
    of the pool outlives the block.

    >>> with process_pool(1) as pool:
    ...     pool.submit(abs, -1).result()
    1
    """
    from concurrent.futures import ProcessPoolExecutor

    executor = ProcessPoolExecutor(
        max_workers=workers,
        initializer=_ignore_sigint_then,
        initargs=(initializer, *initargs),
    )
    try:
        yield executor
    except BaseException:
        _stop_now(executor)
        raise
    else:
        executor.shutdown(wait=True, cancel_futures=True)


def _lost_a_worker(executor: Executor) -> bool:
    # A pool worker only exits when the pool shuts down, so one that is gone
    # while results are awaited died. Waiting on the sentinels does not reap
    # the process, which stays the pool's own business.
    process_pools = sys.modules.get("concurrent.futures.process")
    if process_pools is None or not isinstance(executor, process_pools.ProcessPoolExecutor):
        return False  # not a process pool: none was ever made
    from multiprocessing.connection import wait

    return bool(wait([process.sentinel for process in _workers(executor)], timeout=0))


def _is_broken_process_pool(error: BaseException) -> bool:
    """Whether ``error`` is a ``BrokenProcessPool`` (only a process pool, once made, raises one)."""
    process_pools = sys.modules.get("concurrent.futures.process")
    return process_pools is not None and isinstance(error, process_pools.BrokenProcessPool)


def result_or_worker_error(executor: Executor, future: Future[ResultT]) -> ResultT:
    """The future's result, or :class:`WorkerError` as soon as a worker is seen dead.

    ``ProcessPoolExecutor`` reports a dead worker by failing the futures with
    ``BrokenProcessPool``, except when the worker died halfway through sending
    a result: then its manager thread blocks on the rest of the message and
    the futures never finish, so the wait also checks on the workers itself.
    """
    while True:
        try:
            return future.result(timeout=LIVENESS_CHECK_SECONDS)
        except TimeoutError:
            if _lost_a_worker(executor):
                raise WorkerError(_WORKER_DIED) from None
        except Exception as exc:
            if _is_broken_process_pool(exc):
                raise WorkerError(_WORKER_DIED) from exc
            raise


@contextmanager
def thread_pool(workers: int) -> Iterator[ThreadPoolExecutor]:
    """A thread pool whose threads have all ended when the block does.

    Queued tasks are cancelled and running ones finish (a thread cannot be
    stopped from outside; each task is a bounded piece of work), whether the
    block ends normally, by an error, by Ctrl-C or by cancellation.

    >>> with thread_pool(2) as pool:
    ...     pool.submit(abs, -1).result()
    1
    """
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="streambpe-encode")
    try:
        yield executor
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


@contextmanager
def local_pool(
    workers: int,
    mode: Mode = "processes",
    initializer: Callable[..., None] | None = None,
    initargs: tuple[Any, ...] = (),
) -> Iterator[Executor]:
    """A pool of ``workers`` threads or processes, finished when the block ends.

    The one place a call opens a pool: :func:`process_pool` or
    :func:`thread_pool`. Each worker process runs ``initializer(*initargs)``
    first; threads share this process's state, so a thread pool takes none.

    >>> with local_pool(1, "processes") as pool:
    ...     pool.submit(abs, -2).result()
    2
    """
    if mode == "threads":
        if initializer is not None:
            raise ValueError("a thread pool takes no initializer: its threads share this process")
        opened: AbstractContextManager[Executor] = thread_pool(workers)
    else:
        opened = process_pool(workers, initializer, initargs)
    with opened as pool:
        yield pool
