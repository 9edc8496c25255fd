"""Wall time and peak memory of work run in a fresh child process, counting its whole tree.

Our trainer and encoder fan out to worker processes, Hugging Face tokenizers
and rustbpe use threads, tiktoken uses one thread: to compare their memory
fairly, each runs in a child process of its own, and a sampler thread here
adds up the resident set size (RSS) of that child and all its descendants
every 20 ms. The peak of those sums is what we report, raised if needed to the
kernel's own high-water mark of the child process, ``VmHWM`` on Linux (which
catches a spike that fell between two samples). ``getrusage``'s ``ru_maxrss``
would not do: Linux carries it across ``exec``, so a spawned child would
inherit its parent's peak.

Summed RSS counts pages shared between processes (libraries, copy-on-write
memory after a fork) once per process, so it slightly overstates a process
tree; it never understates one.

>>> import math
>>> run = run_in_child(math.factorial, 20)
>>> run.result, run.peak_rss > 0
(2432902008176640000, True)

From a shell, for any command::

    python benchmarks/peak_memory.py -- streambpe train corpus.txt ...
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import psutil

ResultT = TypeVar("ResultT")

MIB = 1 << 20
SAMPLE_INTERVAL_S = 0.02


class ChildFailed(RuntimeError):
    """The measured child raised, crashed or was killed; the message carries its traceback."""


@dataclass(frozen=True)
class Measurement(Generic[ResultT]):
    """What a measured run returned, how long it took and its process tree's peak RSS."""

    result: ResultT
    seconds: float
    peak_rss: int
    samples: int

    @property
    def peak_rss_mib(self) -> float:
        return self.peak_rss / MIB


def own_peak_rss() -> int:
    """This process's RSS high-water mark in bytes (``VmHWM``), or 0 where ``/proc`` lacks it."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # reported in kB
    except OSError:
        pass
    return 0


def _descendant_pids(pid: int) -> list[int]:
    """Pids of every descendant of ``pid``, read from ``/proc`` where the kernel lists them.

    psutil's ``children(recursive=True)`` scans every process on the machine,
    which costs about a millisecond per sample; walking ``/proc/PID/task/*/children``
    touches only the tree we measure.
    """
    found: list[int] = []
    stack = [pid]
    while stack:
        parent = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue  # the process is gone
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as listing:
                    children = [int(child) for child in listing.read().split()]
            except OSError:
                continue  # the thread ended between listing and reading
            found.extend(children)
            stack.extend(children)
    return found


def _proc_lists_children() -> bool:
    return Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists()


class TreeMemorySampler:
    """Samples, in a background thread, the summed RSS of a process and its descendants.

    Processes come and go while we read them; one that vanished between being
    listed and being read simply contributes nothing to that sample.
    """

    def __init__(self, pid: int, interval: float = SAMPLE_INTERVAL_S) -> None:
        self.pid = pid
        self.interval = interval
        self.peak = 0
        self.samples = 0
        self._processes: dict[int, psutil.Process] = {}
        self._fast_listing = _proc_lists_children()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rss-sampler-{pid}", daemon=True)

    def __enter__(self) -> TreeMemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _tree_pids(self) -> list[int]:
        if self._fast_listing:
            return [self.pid, *_descendant_pids(self.pid)]
        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return []
        return [self.pid, *(child.pid for child in children)]

    def sample(self) -> int:
        """Summed RSS in bytes of the tree right now (0 if the root is gone)."""
        pids = self._tree_pids()
        total = 0
        for pid in pids:
            try:
                # psutil.Process objects are cached: creating one reads /proc each time.
                process = self._processes.get(pid)
                if process is None:
                    process = self._processes[pid] = psutil.Process(pid)
                total += process.memory_info().rss
            except psutil.Error:
                self._processes.pop(pid, None)  # vanished, a zombie, or not ours to read
        # Forget pids that left the tree, so a recycled pid is not mistaken for them.
        for gone in self._processes.keys() - set(pids):
            del self._processes[gone]
        return total

    def _run(self) -> None:
        while True:
            self.peak = max(self.peak, self.sample())
            self.samples += 1
            if self._stop.wait(self.interval):
                return


@contextmanager
def _environment(overrides: Mapping[str, str] | None) -> Iterator[None]:
    """Temporarily set environment variables, so that a child spawned inside inherits them."""
    if not overrides:
        yield
        return
    saved = {name: os.environ.get(name) for name in overrides}
    os.environ.update(overrides)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _child_main(
    connection: Any,
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    preload: Sequence[str],
) -> None:
    try:
        # Imports happen before the clock starts: we time the work, not the import.
        for module in preload:
            importlib.import_module(module)
        started = time.perf_counter()
        result = function(*args, **kwargs)
        seconds = time.perf_counter() - started
        connection.send(("ok", result, seconds, own_peak_rss()))
    except BaseException as exc:  # report everything, including KeyboardInterrupt, then die
        connection.send(("error", "".join(traceback.format_exception(exc)), 0.0, 0))
    finally:
        connection.close()


def run_in_child(
    function: Callable[..., ResultT],
    *args: Any,
    preload: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    interval: float = SAMPLE_INTERVAL_S,
    **kwargs: Any,
) -> Measurement[ResultT]:
    """Call ``function(*args, **kwargs)`` in a freshly spawned Python process and measure it.

    ``function`` and its arguments must be picklable (a module-level function),
    and so must its result. ``preload`` names modules the child imports before
    the clock starts; ``env`` adds environment variables for the child (for
    example ``RAYON_NUM_THREADS``). ``seconds`` is the wall time of the call
    alone, measured in the child; ``peak_rss`` covers the child's whole life.

    Raises :class:`ChildFailed` if the call raises or the child dies.
    """
    # "spawn" gives every tool the same clean interpreter: a forked child would
    # start with a copy of this (possibly large) process and inflate its RSS.
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(
        target=_child_main,
        args=(sender, function, args, kwargs, tuple(preload)),
        name=f"measured-{getattr(function, '__name__', 'call')}",
    )
    with _environment(env):
        child.start()
    sender.close()
    message: tuple[str, Any, float, int] | None = None
    try:
        with TreeMemorySampler(child.pid or 0, interval) as sampler:
            # Poll so that a child that dies without a word does not hang us.
            while message is None and (child.is_alive() or receiver.poll()):
                if receiver.poll(0.1):
                    try:
                        message = receiver.recv()
                    except EOFError:
                        break
            child.join()
    finally:
        if child.is_alive():
            child.kill()
            child.join()
        receiver.close()
    if message is None:
        raise ChildFailed(f"measured child exited with code {child.exitcode} and no result")
    status, payload, seconds, max_rss = message
    if status != "ok":
        raise ChildFailed(f"measured call failed in the child:\n{payload}")
    return Measurement(payload, seconds, max(sampler.peak, max_rss), sampler.samples)


def measure_command(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    interval: float = SAMPLE_INTERVAL_S,
) -> Measurement[int]:
    """Run a command to completion; its result is the exit code, ``seconds`` its wall time."""
    child_env = {**os.environ, **env} if env else None
    started = time.perf_counter()
    process = subprocess.Popen(list(argv), env=child_env, cwd=cwd)
    with TreeMemorySampler(process.pid, interval) as sampler:
        returncode = process.wait()
    seconds = time.perf_counter() - started
    return Measurement(returncode, seconds, sampler.peak, sampler.samples)


def main(argv: Sequence[str] | None = None) -> int:
    """``python benchmarks/peak_memory.py -- CMD ARGS...``: print wall time and peak RSS."""
    command = list(sys.argv[1:] if argv is None else argv)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("usage: python benchmarks/peak_memory.py -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    measured = measure_command(command)
    print(
        f"exit {measured.result}, {measured.seconds:.2f} s wall, "
        f"peak RSS of the process tree {measured.peak_rss_mib:.1f} MiB "
        f"({measured.samples} samples)",
        file=sys.stderr,
    )
    return measured.result


if __name__ == "__main__":
    sys.exit(main())
