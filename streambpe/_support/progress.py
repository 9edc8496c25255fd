"""Progress reporting on stderr: a tqdm bar for people, JSON lines for programs.

Library functions take ``progress: bool | ProgressReporter``; the command line
chooses the reporter (``--quiet``, ``--progress json``).

>>> reporter = as_reporter(False)
>>> with reporter.stage("counting", total=10, unit="B") as advance:
...     advance(10)
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial, update_wrapper
from typing import Any, ParamSpec, Protocol, TextIO, TypeVar

ParamsT = ParamSpec("ParamsT")
ResultT = TypeVar("ResultT")

#: Adds to the current stage's done count.
Advance = Callable[[int], None]


class ProgressReporter(Protocol):
    """Something that can show the progress of named stages."""

    def stage(self, name: str, *, total: int | None, unit: str) -> AbstractContextManager[Advance]:
        """Report one stage; the context gives a function to call with each amount done."""
        ...


class SilentProgress:
    """Reports nothing."""

    @contextmanager
    def stage(self, name: str, *, total: int | None, unit: str) -> Iterator[Advance]:
        yield lambda done: None


class BarProgress:
    """A tqdm bar per stage on stderr."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream

    @contextmanager
    def stage(self, name: str, *, total: int | None, unit: str) -> Iterator[Advance]:
        from tqdm import tqdm  # imported lazily: importing streambpe stays fast

        with tqdm(
            total=total,
            desc=name,
            unit=unit,
            unit_scale=unit == "B",
            unit_divisor=1024 if unit == "B" else 1000,
            file=self.stream or sys.stderr,
            dynamic_ncols=True,
        ) as bar:

            def advance(amount: int) -> None:
                bar.update(amount)

            yield advance


class JsonLinesProgress:
    """One JSON object per line on stderr: ``{"stage", "done", "total", "unit", "elapsed"}``.

    Updates are throttled to ``interval`` seconds; the final state of each stage
    is always written.
    """

    def __init__(self, stream: TextIO | None = None, interval: float = 0.5) -> None:
        self.stream = stream
        self.interval = interval

    def _emit(self, name: str, done: int, total: int | None, unit: str, started: float) -> None:
        record = {
            "stage": name,
            "done": done,
            "total": total,
            "unit": unit,
            "elapsed": round(time.monotonic() - started, 3),
        }
        stream = self.stream or sys.stderr
        stream.write(json.dumps(record) + "\n")
        stream.flush()

    @contextmanager
    def stage(self, name: str, *, total: int | None, unit: str) -> Iterator[Advance]:
        started = time.monotonic()
        done = 0
        last = started

        def advance(amount: int) -> None:
            nonlocal done, last
            done += amount
            now = time.monotonic()
            if now - last >= self.interval:
                last = now
                self._emit(name, done, total, unit, started)

        self._emit(name, 0, total, unit, started)
        yield advance
        self._emit(name, done, total, unit, started)


class CancellableProgress:
    """Wraps a reporter so every progress step checks for cancellation of the awaiting task.

    For work that an async function runs in a worker thread (through anyio):
    cancelling the awaiting task raises inside the thread at the next step,
    which unwinds pools and removes temporary outputs.
    """

    def __init__(self, inner: ProgressReporter) -> None:
        self.inner = inner

    @contextmanager
    def stage(self, name: str, *, total: int | None, unit: str) -> Iterator[Advance]:
        import anyio.from_thread  # imported lazily: only async callers need it

        with self.inner.stage(name, total=total, unit=unit) as advance:

            def step(amount: int) -> None:
                anyio.from_thread.check_cancelled()
                advance(amount)

            yield step


def as_reporter(progress: bool | ProgressReporter) -> ProgressReporter:
    """``True`` -> a tqdm bar, ``False`` -> silence, a reporter -> itself."""
    if progress is True:
        return BarProgress()
    if progress is False:
        return SilentProgress()
    return progress


def awaitable_in_thread(
    function: Callable[ParamsT, ResultT], *, name: str, doc: str
) -> Callable[ParamsT, Coroutine[Any, Any, ResultT]]:
    """The async twin of a blocking ``function``: the same arguments, run in a worker thread.

    ``function`` must take a ``progress`` keyword (``bool`` or a reporter).
    The twin wraps it in :class:`CancellableProgress`, so cancelling the
    awaiting task raises inside the thread at the next progress step, which
    unwinds pools and removes temporary outputs. One definition serves every
    async entry point (``atrain_bpe``, ``aencode_file``), so their arguments
    are never written twice.

    >>> import anyio
    >>> def add(a: int, b: int, *, progress: bool = False) -> int:
    ...     return a + b
    >>> aadd = awaitable_in_thread(add, name="aadd", doc="Async add.")
    >>> anyio.run(aadd, 1, 2), aadd.__name__
    (3, 'aadd')
    """

    async def run(*args: ParamsT.args, **kwargs: ParamsT.kwargs) -> ResultT:
        import anyio.to_thread  # imported lazily: only async callers need it

        options: dict[str, Any] = dict(kwargs)
        options["progress"] = CancellableProgress(as_reporter(options.get("progress", False)))
        call: Callable[[], ResultT] = partial(function, *args, **options)
        return await anyio.to_thread.run_sync(call)

    update_wrapper(run, function)
    run.__name__ = run.__qualname__ = name
    run.__doc__ = doc
    return run
