"""The one seam between streambpe's map steps and the engines that run them.

Any ``concurrent.futures.Executor`` runs the tasks: a local pool
(:mod:`streambpe._support.pool` opens those), a Dask ``client.get_executor()``,
or :class:`RayExecutor` over ``ray.remote``. The engine schedules, retries and
moves data. This module holds the two ways streambpe runs tasks on one,
:func:`ordered_map` (results in task order: encoding) and :func:`map_reduce`
(their sum: training's word counts), and decides four things
(``docs/design.md``, "Scale-out"):

* how many tasks may be out at once: :func:`in_flight_bound`, a small
  factor times the executor's worker count, which bounds memory whatever the
  number of tasks;
* how many tasks to make: the executor's worker count times a small factor,
  unless the caller says (:func:`task_count`);
* where results are summed: on the cluster, as a tree of merge tasks, when
  the engine can pass one task's result to another without the caller
  (Dask, Ray); in the caller otherwise (:func:`map_reduce`);
* that no task of a call is left pending when the call returns or raises:
  every handle not yet consumed is cancelled in a ``finally``.

>>> from concurrent.futures import ThreadPoolExecutor
>>> with ThreadPoolExecutor(2) as pool:
...     task_count(pool, fallback_workers=1), in_flight_bound(pool, fallback_workers=1), map_reduce(
...         pool, abs, [-1, -2, 3], empty=int, merge=lambda a, b: a + b, max_in_flight=2)
(4, 4, 6)
>>> list(ordered_map(None, abs, [-2, 1, -3], max_in_flight=2))
[2, 1, 3]
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Executor, Future, InvalidStateError
from contextlib import closing, suppress
from functools import partial
from typing import Any, Generic, Protocol, TypeVar

from streambpe._support.pool import result_or_worker_error
from streambpe.errors import MissingDependencyError, WorkerError

TaskT = TypeVar("TaskT")
ResultT = TypeVar("ResultT")

#: Tasks per worker when the executor says how many workers it has: enough that a
#: slow worker or a retried task does not hold up the end, few enough that few
#: partial results are merged.
TASKS_PER_WORKER = 2

#: Tasks in flight per worker: one running and one queued, so no worker waits for the next task.
IN_FLIGHT_PER_WORKER = 2


def executor_workers(executor: Executor) -> int | None:
    """How many tasks ``executor`` runs at once, when it says; else None.

    Understood: ``ProcessPoolExecutor`` and ``ThreadPoolExecutor``
    (``max_workers``), Dask's ``client.get_executor()`` (the cluster's threads,
    asked of the scheduler now), :class:`RayExecutor` (the cluster's CPUs), and
    any executor with a ``worker_count`` attribute or method.

    >>> class Eight(Executor):
    ...     worker_count = 8
    >>> executor_workers(Eight())
    8
    """
    declared = getattr(executor, "worker_count", None)
    if callable(declared):
        declared = declared()
    if declared is None:
        client = _dask_client(executor)
        if client is not None:
            workers = client.scheduler_info()["workers"].values()
            declared = sum(int(worker.get("nthreads", 1)) for worker in workers)
    if declared is None:
        declared = getattr(executor, "_max_workers", None)
    return declared if isinstance(declared, int) and declared > 0 else None


def task_count(
    executor: Executor | None, *, fallback_workers: int, tasks: int | None = None
) -> int:
    """The number of tasks to cut the work into: ``tasks`` if given, else workers x a small factor.

    The workers are the executor's own count (:func:`executor_workers`), so a
    2-core caller still gives a 64-core cluster enough tasks; ``fallback_workers``
    counts for an executor that does not say, and for the default pool.

    >>> task_count(None, fallback_workers=3), task_count(None, fallback_workers=3, tasks=5)
    (6, 5)
    """
    if tasks is not None:
        if isinstance(tasks, bool) or not isinstance(tasks, int) or tasks < 1:
            raise ValueError(f"tasks must be an int of at least 1, got {tasks!r}")
        return tasks
    workers = executor_workers(executor) if executor is not None else None
    return TASKS_PER_WORKER * (workers or max(1, fallback_workers))


def in_flight_bound(executor: Executor | None, *, fallback_workers: int) -> int:
    """How many tasks a map over ``executor`` keeps submitted and not yet finished.

    Two per worker: the executor's own count (:func:`executor_workers`), else
    ``fallback_workers``. A pool opened for the call says its size, so the
    bound follows it.

    >>> from concurrent.futures import ThreadPoolExecutor
    >>> with ThreadPoolExecutor(3) as pool:
    ...     in_flight_bound(pool, fallback_workers=8), in_flight_bound(None, fallback_workers=0)
    (6, 2)
    """
    workers = executor_workers(executor) if executor is not None else None
    return IN_FLIGHT_PER_WORKER * (workers or max(1, fallback_workers))


# --------------------------------------------------------------------------- engines


class _Engine(Protocol):
    """How tasks are submitted, awaited and cancelled on one kind of executor."""

    #: True when a handle can be passed as an argument of another task, the
    #: engine handing over the result without the caller (a cluster-side reduce).
    keeps_results: bool

    def submit(self, function: Callable[..., Any], *args: Any) -> Any: ...
    def result(self, handle: Any) -> Any: ...
    def wait(self, handle: Any) -> None: ...
    def cancel(self, handles: list[Any]) -> None: ...


class _FuturesEngine:
    """Any ``concurrent.futures.Executor``: results come back to the caller."""

    keeps_results = False

    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    def submit(self, function: Callable[..., Any], *args: Any) -> Future[Any]:
        return self.executor.submit(function, *args)

    def result(self, handle: Future[Any]) -> Any:
        return result_or_worker_error(self.executor, handle)

    def wait(self, handle: Future[Any]) -> None:
        self.result(handle)

    def cancel(self, handles: list[Future[Any]]) -> None:
        for handle in handles:
            handle.cancel()


def _dask_client(executor: Executor) -> Any:
    """The ``distributed.Client`` behind Dask's ``client.get_executor()``, else None.

    ``ClientExecutor`` wraps each Dask future in a ``concurrent.futures`` one,
    which cannot be passed to another task; its client can, and keeps results
    on the workers. ``_client`` is its only reference to the client.
    """
    if type(executor).__module__.split(".")[0] != "distributed":
        return None
    return getattr(executor, "_client", None)


class _DaskEngine:
    keeps_results = True

    def __init__(self, client: Any, options: dict[str, Any]) -> None:
        self.client = client
        # The executor's own options (retries=, resources=...) apply to every task;
        # pure=False: tasks are unique, so hashing their arguments for a key is waste.
        self.options = {"pure": False, **options}

    def submit(self, function: Callable[..., Any], *args: Any) -> Any:
        return self.client.submit(function, *args, **self.options)

    def result(self, handle: Any) -> Any:
        try:
            return handle.result()
        except Exception as exc:
            if type(exc).__name__ == "KilledWorker":
                raise WorkerError(
                    f"a Dask worker died running a task, more often than the cluster "
                    f"allows (distributed.scheduler.allowed-failures): {exc}"
                ) from exc
            raise

    def wait(self, handle: Any) -> None:
        import distributed

        # Waits on the workers: the result itself stays there.
        wait_for: Callable[[list[Any]], Any] = distributed.wait
        wait_for([handle])
        if handle.status == "error":
            self.result(handle)

    def cancel(self, handles: list[Any]) -> None:
        if handles and self.client.status == "running":
            self.client.cancel(handles)


class _RayEngine:
    keeps_results = True

    def __init__(self, executor: RayExecutor) -> None:
        self.executor = executor

    def submit(self, function: Callable[..., Any], *args: Any) -> Any:
        return self.executor.submit_remote(function, *args)

    def result(self, handle: Any) -> Any:
        return self.executor.get(handle)

    def wait(self, handle: Any) -> None:
        self.executor.get(handle)

    def cancel(self, handles: list[Any]) -> None:
        self.executor.cancel_remote(handles)


def _engine(executor: Executor) -> _Engine:
    if isinstance(executor, RayExecutor):
        return _RayEngine(executor)
    client = _dask_client(executor)
    if client is not None:
        return _DaskEngine(client, dict(getattr(executor, "_kwargs", {})))
    return _FuturesEngine(executor)


# --------------------------------------------------------------------------- map and reduce


def _submitted_in_order(
    engine: _Engine,
    function: Callable[[TaskT], Any],
    tasks: Iterable[TaskT],
    *,
    max_in_flight: int,
    on_submit: Callable[[Any], None] | None = None,
) -> Generator[tuple[int, Any], None, None]:
    """Submit ``function(task)`` for each task; yield ``(index, handle)``, oldest first, when one is due.

    A handle is due once ``max_in_flight`` tasks are out, or when no task is
    left; the caller waits for it before taking the next, which bounds the
    work in flight. ``on_submit`` sees each handle as it is submitted. When
    the generator ends or is closed, the handles not yet yielded are cancelled.
    """
    in_flight: deque[tuple[int, Any]] = deque()
    try:
        for index, task in enumerate(tasks):
            handle = engine.submit(function, task)
            in_flight.append((index, handle))
            if on_submit is not None:
                on_submit(handle)
            if len(in_flight) >= max_in_flight:
                yield in_flight.popleft()
        while in_flight:
            yield in_flight.popleft()
    finally:
        engine.cancel([handle for _, handle in in_flight])


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

    Results come back through the executor's own futures on every engine
    (Dask and Ray included: there is nothing to sum on the cluster), and a
    wait notices a dead local worker
    (:func:`~streambpe._support.pool.result_or_worker_error`).
    """
    if executor is None:
        yield from map(function, tasks)
        return
    engine = _FuturesEngine(executor)
    with closing(_submitted_in_order(engine, function, tasks, max_in_flight=max_in_flight)) as due:
        for _index, handle in due:
            yield engine.result(handle)


def _packed_call(pack: Callable[[Any], bytes], function: Callable[[Any], Any], task: Any) -> bytes:
    return pack(function(task))


def _packed_merge(
    pack: Callable[[Any], bytes],
    unpack: Callable[[bytes], Any],
    merge: Callable[[Any, Any], Any],
    merge_into: Callable[[Any, Any], None] | None,
    left: bytes,
    right: bytes,
) -> bytes:
    # Unpacking makes private copies, so adding into one cannot change a stored
    # result; the longer one is the target, so the loop runs over the shorter.
    larger, smaller = (left, right) if len(left) >= len(right) else (right, left)
    if merge_into is None:
        return pack(merge(unpack(larger), unpack(smaller)))
    total = unpack(larger)
    merge_into(total, unpack(smaller))
    return pack(total)


class _TreeReduction(Generic[ResultT]):
    """Pairs results into merge tasks as they are submitted, like carries in a binary counter.

    After ``n`` results, at most ``log2(n) + 1`` partial sums are open, and the
    merge tree's shape depends only on ``n``: the sum is the same whatever
    finishes first. Merge tasks are submitted before their inputs are ready;
    the engine runs each when both are.
    """

    def __init__(self, engine: _Engine, merge: Callable[[ResultT, ResultT], ResultT]) -> None:
        self.engine = engine
        self.merge = merge
        self.levels: list[tuple[int, Any]] = []
        self.handles: list[Any] = []

    def add(self, handle: Any) -> None:
        level = 0
        while self.levels and self.levels[-1][0] == level:
            _, left = self.levels.pop()
            handle = self.engine.submit(self.merge, left, handle)
            self.handles.append(handle)
            level += 1
        self.levels.append((level, handle))

    def root(self) -> Any:
        handle = None
        while self.levels:
            _, left = self.levels.pop()
            if handle is None:
                handle = left
            else:
                handle = self.engine.submit(self.merge, left, handle)
                self.handles.append(handle)
        return handle


def map_reduce(
    executor: Executor,
    function: Callable[[TaskT], ResultT],
    tasks: Iterable[TaskT],
    *,
    empty: Callable[[], ResultT],
    merge: Callable[[ResultT, ResultT], ResultT],
    merge_into: Callable[[ResultT, ResultT], None] | None = None,
    max_in_flight: int,
    on_task_done: Callable[[int], None] | None = None,
    pack: Callable[[ResultT], bytes] | None = None,
    unpack: Callable[[bytes], ResultT] | None = None,
) -> ResultT:
    """The sum of ``function(task)`` over ``tasks``, run on ``executor``.

    Args:
        empty: makes the sum of no results.
        merge: sums two results into a new one, never changing either: on a
            cluster an input may be a stored result that a retried task reads again.
        merge_into: adds the second result into the first in place, for sums made
            in this process (cheaper than ``merge``); None to use ``merge``.
        max_in_flight: how many map tasks may be submitted and not yet finished;
            bounds memory when ``tasks`` is a long iterator.
        on_task_done: called with each map task's index as it finishes, in task
            order, in this thread (progress, and a point where cancellation is seen).
        pack, unpack: turn a result into bytes and back, for results kept on a
            cluster. Dask serializes a large dict or list element by element
            (about 1 s per 20,000 entries); bytes go through whole.

    On Dask and Ray the sum is a tree of merge tasks on the cluster, and only
    the total reaches this process; on other executors results come back in
    task order and are summed here. Either way, when this returns or raises,
    every task it submitted has finished or been cancelled.
    """
    engine = _engine(executor)
    # What runs where: on a cluster that keeps results, packed forms when asked.
    map_function: Callable[[TaskT], Any] = function
    tree_merge: Callable[[Any, Any], Any] = merge
    if engine.keeps_results and pack is not None and unpack is not None:
        map_function = partial(_packed_call, pack, function)
        tree_merge = partial(_packed_merge, pack, unpack, merge, merge_into)
    else:
        unpack = None
    tree: _TreeReduction[Any] | None = (
        _TreeReduction(engine, tree_merge) if engine.keeps_results else None
    )
    # Only a cluster's handles are kept to the end: cancelling a finished Dask
    # or Ray task releases its result there, while a finished future holds
    # its result in this process, and cancelling it does nothing.
    submitted: list[Any] = []
    total = empty()

    def on_submit(handle: Any) -> None:
        if tree is not None:
            submitted.append(handle)
            tree.add(handle)

    due = _submitted_in_order(
        engine, map_function, tasks, max_in_flight=max_in_flight, on_submit=on_submit
    )
    try:
        with closing(due):
            for index, handle in due:
                if tree is not None:
                    engine.wait(handle)
                elif merge_into is not None:
                    merge_into(total, engine.result(handle))
                else:
                    total = merge(total, engine.result(handle))
                if on_task_done is not None:
                    on_task_done(index)
        if tree is None:
            return total
        root = tree.root()
        if root is None:
            return empty()
        result = engine.result(root)
        return unpack(result) if unpack is not None else result
    finally:
        # Everything on the cluster, done or not, and only now: cancelling a
        # map task there would also cancel the merge tasks that need it.
        engine.cancel(submitted + (tree.handles if tree is not None else []))


# --------------------------------------------------------------------------- Ray


def _invoke(function: Callable[..., ResultT], *args: Any, **kwargs: Any) -> ResultT:
    """Run in a Ray worker: Ray has resolved any task refs among ``args`` to their values."""
    return function(*args, **kwargs)


class RayExecutor(Executor):
    """A ``concurrent.futures.Executor`` that runs each call as a Ray task.

    Ray has no such executor of its own. Each ``submit`` becomes a
    ``ray.remote`` task with the options given here (``num_cpus``,
    ``max_retries``: Ray reruns a task whose worker died); ``cancel()`` on a
    returned future cancels the Ray task. streambpe also passes one task's
    result to the next without fetching it (:func:`map_reduce`).

    Ray must be installed (``pip install 'streambpe[ray]'``) and initialized
    by the caller (``ray.init(...)``): this class never starts or stops a Ray
    instance, so a late cancel cannot start a new one.

    Example (not run here; it needs a Ray cluster)::

        import ray, streambpe
        ray.init()
        vocab, merges = streambpe.train_bpe("s3://bucket/shards/*.txt", 32_000,
                                            ["<|endoftext|>"], executor=streambpe.RayExecutor())
    """

    def __init__(self, **remote_options: Any) -> None:
        try:
            import ray
        except ImportError:
            raise MissingDependencyError("RayExecutor", "ray", "ray") from None
        # Typed loosely: Ray's own annotations are partial.
        self._ray: Any = ray
        self._options: dict[str, Any] = {"num_cpus": 1, "max_retries": 3, **remote_options}
        # One remote function for every call: Ray exports it once, and the callable
        # travels as an argument (ray.remote refuses partials and other callables).
        self._invoke = ray.remote(**self._options)(_invoke)
        self._lock = threading.Lock()
        self._outstanding: set[Any] = set()
        self._shutdown = False

    def worker_count(self) -> int:
        """The CPUs of the Ray cluster, over the CPUs each task asks for."""
        cpus = float(self._ray.cluster_resources().get("CPU", 1))
        return max(1, int(cpus // float(self._options["num_cpus"] or 1)))

    def submit_remote(self, function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Start ``function(*args, **kwargs)`` as a Ray task; arguments may be other tasks' refs."""
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new tasks after shutdown")
            ref = self._invoke.remote(function, *args, **kwargs)
            self._outstanding.add(ref)
        return ref

    def get(self, ref: Any) -> Any:
        """The result of the task ``ref``, raising its exception as the task raised it."""
        try:
            return self._ray.get(ref)
        except self._ray.exceptions.RayTaskError as exc:
            raise exc.as_instanceof_cause() from None
        finally:
            with self._lock:
                self._outstanding.discard(ref)

    def cancel_remote(self, refs: Iterable[Any]) -> None:
        """Cancel the Ray tasks ``refs`` (finished ones are only released)."""
        refs = list(refs)
        with self._lock:
            self._outstanding.difference_update(refs)
        # Never call into Ray once it is shut down: that would start a new instance.
        if not self._ray.is_initialized():
            return
        for ref in refs:
            self._ray.cancel(ref, force=False)

    def submit(self, fn: Callable[..., ResultT], /, *args: Any, **kwargs: Any) -> Future[ResultT]:
        ref = self.submit_remote(fn, *args, **kwargs)
        future: Future[ResultT] = Future()

        def settle(done: Future[Any]) -> None:
            with self._lock:
                self._outstanding.discard(ref)
            error = done.exception()
            if isinstance(error, self._ray.exceptions.RayTaskError):
                error = error.as_instanceof_cause()
            # The caller may cancel ours at any moment, even between a check and a set.
            with suppress(InvalidStateError):
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(done.result())

        def on_cancel(mine: Future[ResultT]) -> None:
            if mine.cancelled():
                self.cancel_remote([ref])

        future.add_done_callback(on_cancel)
        ref.future().add_done_callback(settle)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop accepting tasks; cancel outstanding ones if asked, else wait for them if asked."""
        with self._lock:
            self._shutdown = True
            outstanding = list(self._outstanding)
        if cancel_futures:
            self.cancel_remote(outstanding)
        elif wait and outstanding and self._ray.is_initialized():
            self._ray.wait(outstanding, num_returns=len(outstanding))
