"""The one execution seam: encoding and counting run through the same maps, bound and pools.

docs/design.md, "Scale-out" (the table of where each piece lives). Encoding
(``encode_map``) goes through ``ordered_map`` and counting (``count_words``)
through ``map_reduce``; both must keep the same number of tasks out per
worker, cancel what is left when they stop early, and re-raise a task's error
with its type.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from typing import Any

import pytest

from streambpe._support.executors import in_flight_bound, map_reduce, ordered_map
from streambpe._support.pool import local_pool, pool_size
from streambpe.encode.encoder import Encoder
from streambpe.patterns import GPT2
from streambpe.streaming.parallel import encode_map
from streambpe.train.count_tasks import CountSettings, batch_count_tasks
from streambpe.train.counting import count_words

WORKERS = 3


class CountingExecutor(ThreadPoolExecutor):
    """A thread pool that says it has ``WORKERS`` workers and records the most tasks out at once.

    A task is out from its submission until the caller has taken its result:
    ``taken`` is advanced by the test as results reach it.
    """

    worker_count = WORKERS

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.futures: list[Future[Any]] = []
        self.taken = 0
        self.most_out = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = super().submit(fn, *args, **kwargs)
        self.futures.append(future)
        self.most_out = max(self.most_out, len(self.futures) - self.taken)
        return future


def _fail_on_seven(number: int) -> int:
    if number == 7:
        raise KeyError(number)
    return number


def test_encoding_and_counting_keep_the_same_bound_out() -> None:
    """Both maps fill up to two tasks per worker the executor reports, and never go past it."""
    bound = in_flight_bound(CountingExecutor(), fallback_workers=1)
    assert bound == 2 * WORKERS
    encoder = Encoder({i: bytes([i]) for i in range(256)}, {})
    texts = [f"text {number} " * (number % 5 + 1) for number in range(40)]

    encoding = CountingExecutor()
    with encoding, encode_map(encoder, Encoder.encode, texts, workers=1, executor=encoding) as ids:
        for text, got in zip(texts, ids, strict=True):
            encoding.taken += 1
            assert got == list(text.encode())
    assert (encoding.most_out, len(encoding.futures)) == (bound, len(texts))

    counting = CountingExecutor()

    def taken(_size: int) -> None:
        counting.taken += 1

    settings = CountSettings(GPT2, ())
    tasks = batch_count_tasks(texts, settings=settings, batch_chars=20)
    with counting:
        counts = count_words(tasks, executor=counting, progress_callback=taken)
    assert counting.most_out == bound and len(counting.futures) > bound
    assert counts == count_words(batch_count_tasks(texts, settings=settings, batch_chars=20))


def test_ordered_map_closed_early_cancels_what_is_queued() -> None:
    """Closing the results after the first cancels the queued tasks at once, not at exit."""
    release = threading.Event()

    def first_or_wait(number: int) -> int:
        if number > 0:
            release.wait(timeout=10)
        return number

    executor = CountingExecutor()
    with executor:
        with closing(ordered_map(executor, first_or_wait, range(50), max_in_flight=6)) as results:
            assert next(results) == 0
        # Two threads: at most tasks 1 and 2 have started; the rest were queued.
        cancelled = [future.cancelled() for future in executor.futures]
        release.set()
    assert len(executor.futures) == 6
    assert cancelled[3:] == [True, True, True]
    assert all(future.done() for future in executor.futures)


@pytest.mark.parametrize("path", ["ordered_map", "map_reduce"])
def test_a_task_error_reaches_the_caller_with_its_type(path: str) -> None:
    """A task's KeyError is raised as KeyError by either map, and no task is left pending."""
    executor = CountingExecutor()
    with executor, pytest.raises(KeyError):
        if path == "ordered_map":
            list(ordered_map(executor, _fail_on_seven, range(30), max_in_flight=4))
        else:
            map_reduce(
                executor,
                _fail_on_seven,
                range(30),
                empty=int,
                merge=lambda a, b: a + b,
                max_in_flight=4,
            )
    assert all(future.done() for future in executor.futures)
    assert len(executor.futures) < 30


def test_map_reduce_sums_in_any_executor_as_in_this_process() -> None:
    """The sum over a pool equals the plain sum, whatever the bound."""
    with ThreadPoolExecutor(2) as executor:
        for bound in (1, 2, 7):
            total = map_reduce(
                executor,
                abs,
                range(-20, 5),
                empty=int,
                merge=lambda a, b: a + b,
                max_in_flight=bound,
            )
            assert total == sum(abs(number) for number in range(-20, 5))


def test_local_pool_sizes_and_kinds() -> None:
    """A pool is no larger than its tasks; a thread pool refuses an initializer it could not honour."""
    assert pool_size(8, ["a", "b"]) == 2
    assert pool_size(2, iter(range(100))) == 2
    assert pool_size(3, []) == 1
    with pytest.raises(ValueError, match="at least 1"):
        pool_size(0, ["a"])
    with local_pool(2, "threads") as pool:
        assert isinstance(pool, ThreadPoolExecutor)
        assert in_flight_bound(pool, fallback_workers=9) == 4
    with (
        pytest.raises(ValueError, match="initializer"),
        local_pool(2, "threads", print, ("x",)) as refused,
    ):
        refused.submit(abs, -1)


@pytest.mark.parametrize(("all_in_flight", "expected"), [(False, 4), (True, 10)])
def test_all_in_flight_submits_every_task_before_the_first_result(
    all_in_flight: bool, expected: int
) -> None:
    """``encode_batch`` keeps every result, so it puts every task in flight;
    otherwise two per worker are, and a worker can idle behind the task due first."""
    encoder = Encoder({i: bytes([i]) for i in range(256)}, {})
    gate = threading.Event()
    submitted: list[Any] = []

    class CountingPool(ThreadPoolExecutor):
        def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
            submitted.append(args)
            return super().submit(fn, *args, **kwargs)

    def held_back(encoder: Encoder, task: int) -> int:
        gate.wait(timeout=30)
        return task

    with (
        CountingPool(2) as pool,
        encode_map(
            encoder,
            held_back,
            list(range(10)),
            workers=2,
            executor=pool,
            all_in_flight=all_in_flight,
        ) as results,
    ):
        first: list[int] = []
        reader = threading.Thread(target=lambda: first.append(next(results)))
        reader.start()
        # Until the gate opens no task ends, so what is submitted by then
        # is what the bound lets through.
        for _ in range(1000):  # at most 10 s, so a wrong bound fails rather than hangs
            if len(submitted) >= expected:
                break
            threading.Event().wait(0.01)
        threading.Event().wait(0.2)
        in_flight = len(submitted)
        gate.set()
        reader.join()
        assert first == [0] and list(results) == list(range(1, 10))
    assert in_flight == expected
