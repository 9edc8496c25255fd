"""``_support.shared_work.in_order``: tasks shared by the caller and helper threads.

Guards: every task runs once and indexes come back in order whatever the
thread count; the calling thread takes tasks too; a failing task's exception
reaches the caller and no task starts after it; a caller that stops early
leaves no thread behind; a bad thread count is refused.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

from streambpe._support.shared_work import in_order


def helper_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("streambpe-encode-")]


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
@pytest.mark.parametrize("count", [0, 1, 5, 40])
def test_every_task_runs_once_and_indexes_come_in_order(threads: int, count: int) -> None:
    rng = random.Random(count * 10 + threads)
    delays = [rng.choice([0.0, 0.0005, 0.002]) for _ in range(count)]
    runs: list[int] = []
    lock = threading.Lock()

    def run(index: int) -> None:
        time.sleep(delays[index])
        with lock:
            runs.append(index)

    yielded = []
    for index in in_order(count, run, threads=threads):
        # Every task up to this one is done by the time it is yielded.
        assert set(range(index + 1)) <= set(runs)
        yielded.append(index)
    assert yielded == list(range(count))
    assert sorted(runs) == list(range(count))
    assert helper_threads() == []


def test_the_caller_takes_tasks_too() -> None:
    runners: list[int] = []

    def run(index: int) -> None:
        runners.append(threading.get_ident())
        time.sleep(0.02)

    assert list(in_order(6, run, threads=2)) == list(range(6))
    assert threading.get_ident() in runners, "the calling thread ran no task"
    assert len(set(runners)) == 2, "one helper and the caller"


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_a_failing_task_raises_and_stops_the_work(threads: int) -> None:
    started: list[int] = []

    def run(index: int) -> None:
        started.append(index)
        if index == 3:
            raise KeyError("task 3")
        time.sleep(0.001)

    yielded: list[int] = []
    with pytest.raises(KeyError, match="task 3"):
        for index in in_order(50, run, threads=threads):
            yielded.append(index)
    assert yielded == list(range(len(yielded))) and len(yielded) <= 3
    # Only the tasks already taken when task 3 failed ran: one per thread at most.
    assert max(started) < 3 + threads
    assert helper_threads() == []


def test_a_caller_that_stops_early_leaves_no_thread_behind() -> None:
    started: list[int] = []

    def run(index: int) -> None:
        started.append(index)
        time.sleep(0.002)

    work = in_order(100, run, threads=3)
    assert next(work) == 0
    work.close()
    assert helper_threads() == []
    assert len(started) < 100, "no new task starts once the caller has stopped"


def test_threads_must_be_positive() -> None:
    with pytest.raises(ValueError, match="threads must be at least 1"):
        list(in_order(3, lambda index: None, threads=0))
