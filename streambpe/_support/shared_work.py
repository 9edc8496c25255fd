"""Tasks shared by the calling thread and helper threads, finished in order.

A pool of ``n`` threads and a caller that waits for their results are
``n + 1`` threads on ``n`` cores: each time a result was ready the caller
woke and took a core from a thread that was encoding. For one long text on
the compiled backend, which encodes without the GIL, :func:`in_order`
instead starts ``n - 1`` helpers and has the caller take tasks like them,
and join the results as they come in between: 8 and 20 MiB of o200k prose
(caches cleared) encoded on 2 threads ran 1.71x as fast as on one, against
1.64-1.66x with a pool of two (medians of nine rounds in turns, measured; a
small gain, which the benchmark's noisier rounds do not show).
``encode_batch`` keeps its pool: see "Processes or threads" in
``docs/design.md`` for why.

Tasks are handed out in index order, so the first results come first. When
the block ends, by any way, no task is running any more: helpers take no new
task once one has failed or the caller has stopped waiting, and the caller
joins them before it goes on. A task is a bounded piece of work (a part of a
text), so that wait is short.

>>> done = []
>>> for index in in_order(3, done.append, threads=2):
...     print(index, index in done)
0 True
1 True
2 True
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator


class _Tasks:
    """Which task is next, whether to stop, and when each task is done."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._lock = threading.Lock()
        self._next = 0
        self._stopped = False
        self.done = [threading.Event() for _ in range(count)]
        self.failure: BaseException | None = None

    def claim(self) -> int | None:
        """The next task not yet taken, or None if none is left or the work stopped."""
        with self._lock:
            if self._stopped or self._next >= self.count:
                return None
            index = self._next
            self._next += 1
            return index

    def stop(self, failure: BaseException | None = None) -> None:
        """Hand out no more tasks; the ones never taken count as done, so no wait hangs."""
        with self._lock:
            self.failure = self.failure or failure
            self._stopped = True
            for event in self.done[self._next :]:
                event.set()
            self._next = self.count

    def run(self, run: Callable[[int], None], index: int) -> None:
        """``run(index)``, marking the task done however it ends; a failure stops the work."""
        try:
            run(index)
        except BaseException as error:
            self.stop(error)
        finally:
            self.done[index].set()


def _run_tasks(tasks: _Tasks, run: Callable[[int], None], *, until: int | None = None) -> None:
    # Takes tasks until none is left, or (the caller) until task ``until`` is done.
    while until is None or not tasks.done[until].is_set():
        index = tasks.claim()
        if index is None:
            return
        tasks.run(run, index)


def in_order(count: int, run: Callable[[int], None], *, threads: int) -> Generator[int, None, None]:
    """Run ``run(index)`` for each index below ``count`` on ``threads`` threads, this one among them.

    Yields each index once its task and every one before it are done, so the
    caller can take each result, in order, while the helpers go on. A task's
    exception is raised here, the first one if several failed; no task is
    started after it.

    >>> results = [0] * 4
    >>> def square(index: int) -> None:
    ...     results[index] = index * index
    >>> list(in_order(4, square, threads=2)), results
    ([0, 1, 2, 3], [0, 1, 4, 9])
    """
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    tasks = _Tasks(count)
    started: list[threading.Thread] = []
    try:
        for number in range(1, min(threads, count)):
            helper = threading.Thread(
                target=_run_tasks, args=(tasks, run), name=f"streambpe-encode-{number}"
            )
            helper.start()
            started.append(helper)
        for due in range(count):
            # The caller works while the result it needs next is not ready,
            # and waits only when no task is left to take.
            _run_tasks(tasks, run, until=due)
            tasks.done[due].wait()
            if tasks.failure is not None:
                raise tasks.failure
            yield due
    finally:
        tasks.stop()
        for helper in started:
            helper.join()
