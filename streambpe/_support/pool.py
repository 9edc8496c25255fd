"""Process pools that leave nothing behind, and an ordered map with bounded work in flight.

Pretokenizing with ``regex`` is CPU-bound Python holding the GIL, so parallel
work runs in processes (``docs/design.md``, "Processes or threads"). Any
``concurrent.futures.Executor`` can stand in for the default pool: the map
step only submits pure, picklable tasks.

Every pool :func:`process_pool` opens is finished before the ``with`` block
returns, whether it ends normally, by an error, by Ctrl-C or by a cancelled
caller: its workers are gone and its manager thread is joined, so nothing is
left for the interpreter to wait on at exit.

>>> list(ordered_map(None, abs, [-2, 1, -3], max_in_flight=2))
[2, 1, 3]
"""

from __future__ import annotations

import os
import signal
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from multiprocessing.queues import SimpleQueue
from threading import Thread
from typing import Any, TypeVar

from streambpe.errors import WorkerError

TaskT = TypeVar("TaskT")
ResultT = TypeVar("ResultT")

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
    if not isinstance(executor, ProcessPoolExecutor):
        return False
    return bool(wait([process.sentinel for process in _workers(executor)], timeout=0))


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
        except BrokenProcessPool as exc:
            raise WorkerError(_WORKER_DIED) from exc


def ordered_map(
    executor: Executor | None,
    function: Callable[[TaskT], ResultT],
    tasks: Iterable[TaskT],
    *,
    max_in_flight: int,
) -> Generator[ResultT, None, None]:
    """Apply ``function`` to ``tasks`` on ``executor``, yielding results in task order.

    At most ``max_in_flight`` tasks are submitted and not yet consumed, which
    bounds memory whatever the number of tasks. With ``executor=None`` the work
    runs in this process. A caller that may stop before the end should close
    the generator (``with contextlib.closing(ordered_map(...)) as results:``):
    closing cancels the tasks not yet started at once, rather than whenever
    the garbage collector finalizes the generator.
    """
    if executor is None:
        yield from map(function, tasks)
        return
    pending: deque[Future[ResultT]] = deque()
    try:
        for task in tasks:
            pending.append(executor.submit(function, task))
            if len(pending) >= max_in_flight:
                yield result_or_worker_error(executor, pending.popleft())
        while pending:
            yield result_or_worker_error(executor, pending.popleft())
    finally:
        for future in pending:
            future.cancel()
