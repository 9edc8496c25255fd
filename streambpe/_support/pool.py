"""Process pools that leave nothing behind, and an ordered map with bounded work in flight.

Pretokenizing is CPU-bound Python holding the GIL, so parallel work runs in
processes (DESIGN rule 6). Any ``concurrent.futures.Executor`` can stand in for
the default pool: the map step only submits pure, picklable tasks.

>>> list(ordered_map(None, abs, [-2, 1, -3], max_in_flight=2))
[2, 1, 3]
"""

from __future__ import annotations

import os
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, TypeVar

from streambpe.errors import WorkerError

TaskT = TypeVar("TaskT")
ResultT = TypeVar("ResultT")


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


def _stop_now(executor: ProcessPoolExecutor) -> None:
    # ProcessPoolExecutor has no public way to stop busy workers before 3.14, and
    # shutdown() forgets its processes, so take the list first.
    processes = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(timeout=5)


@contextmanager
def process_pool(
    workers: int,
    initializer: Callable[..., None] | None = None,
    initargs: tuple[Any, ...] = (),
) -> Iterator[ProcessPoolExecutor]:
    """A process pool that is shut down, and its workers killed, on any error or Ctrl-C.

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
        executor.shutdown(wait=True)


def _result(future: Future[ResultT]) -> ResultT:
    try:
        return future.result()
    except BrokenProcessPool as exc:
        raise WorkerError(
            "a worker process died unexpectedly (killed, out of memory, or crashed); "
            "no output was written"
        ) from exc


def ordered_map(
    executor: Executor | None,
    function: Callable[[TaskT], ResultT],
    tasks: Iterable[TaskT],
    *,
    max_in_flight: int,
) -> Iterator[ResultT]:
    """Apply ``function`` to ``tasks`` on ``executor``, yielding results in task order.

    At most ``max_in_flight`` tasks are submitted and not yet consumed, which
    bounds memory whatever the number of tasks. With ``executor=None`` the work
    runs in this process.
    """
    if executor is None:
        yield from map(function, tasks)
        return
    pending: deque[Future[ResultT]] = deque()
    try:
        for task in tasks:
            pending.append(executor.submit(function, task))
            if len(pending) >= max_in_flight:
                yield _result(pending.popleft())
        while pending:
            yield _result(pending.popleft())
    finally:
        for future in pending:
            future.cancel()
