"""One encoding kernel per thread, sharing one vocabulary.

An encoding kernel (:class:`streambpe.core.PieceEncoding`) owns a piece cache
that is not safe to share between threads, and the compiled kernel encodes
without holding the GIL, so threads really do run at once. Each thread
therefore encodes through its own kernel: the first one built, or a
:meth:`~streambpe.core.PieceEncoding.fork` of it that shares the (read-only)
vocabulary and has a cache of its own (``docs/design.md``, "Processes or threads").

A thread holds its kernel in thread-local storage. When the thread ends,
its kernel is not freed but kept for the next new thread, cache and all: a
pool of threads started for each call (``encode_batch``, ``encode_file``)
then finds its caches warm, and the number of kernels never exceeds the
largest number of threads that encoded at once.

>>> from streambpe.core import PYTHON
>>> from streambpe.patterns import GPT2
>>> kernels = ThreadKernels(PYTHON, GPT2, {bytes([i]): i for i in range(256)}, {}, 16)
>>> out: list[int] = []
>>> kernels.piece_encoder().encode_text("hi", GPT2, kernels.pretokenizer, out)
>>> out, kernels.cache_info()
([104, 105], (0, 1, 16, 1))
"""

from __future__ import annotations

import os
import threading
import weakref

from streambpe.core import Backend, PieceEncoding, Pretokenizing
from streambpe.core.split_steps import Pretokenization


class _Lease:
    """A thread's hold on a kernel, kept in its thread-local storage."""

    __slots__ = ("__weakref__", "kernel")

    def __init__(self, kernel: PieceEncoding) -> None:
        self.kernel = kernel


#: Every ThreadKernels alive, so that a forked child can renew their locks.
_ALL_KERNELS: weakref.WeakSet[ThreadKernels] = weakref.WeakSet()


def _renew_locks_in_child() -> None:
    # A lock another thread held at the fork stays held for ever in the
    # child, where that thread never runs again; the child has one thread
    # when this runs, so fresh locks are safe.
    for kernels in list(_ALL_KERNELS):
        kernels._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_locks_in_child)


def _give_back(owner: weakref.ref[ThreadKernels], kernel: PieceEncoding, leased_in: int) -> None:
    """Return a finished thread's kernel to its owner's idle list, if the owner is still alive."""
    kernels = owner()
    # No lock: list.append is atomic, and in a forked child this runs
    # while the other threads' states are cleared, before the fork hooks
    # renew the locks. A kernel leased by a thread of the parent may have
    # been mid-encode at the fork, so a child does not reuse it.
    if kernels is not None and os.getpid() == leased_in:
        kernels._idle.append(kernel)


class ThreadKernels:
    """The kernels of one backend for one vocabulary: one piece encoder per thread.

    Args:
        backend: the backend whose kernels to build.
        pattern: the pretokenization pattern string or chain of split steps.
        encoder: token bytes -> id, for every ordinary token.
        ranks: token bytes -> merge rank.
        cache_size: piece-cache entries per thread (0 disables the caches).
    """

    def __init__(
        self,
        backend: Backend,
        pattern: Pretokenization,
        encoder: dict[bytes, int],
        ranks: dict[bytes, int],
        cache_size: int,
    ) -> None:
        #: The pretokenizer; it keeps no state between calls, so threads share it.
        self.pretokenizer: Pretokenizing = backend.pretokenizer(pattern)
        self._first = backend.piece_encoder(encoder, ranks, cache_size)
        self._lock = threading.Lock()
        self._local = threading.local()
        # Kernels whose threads ended, ready for the next new thread.
        self._idle: list[PieceEncoding] = [self._first]
        # Every kernel handed out, for the cache counts.
        self._live: weakref.WeakSet[PieceEncoding] = weakref.WeakSet()
        _ALL_KERNELS.add(self)

    def piece_encoder(self) -> PieceEncoding:
        """The calling thread's piece encoder (an idle one, or a new fork, on its first call)."""
        try:
            # Every call but a thread's first. An attribute that is there
            # is read faster this way than by getattr with a default.
            return self._local.lease.kernel  # type: ignore[no-any-return]
        except AttributeError:
            return self._lease_one()

    def _lease_one(self) -> PieceEncoding:
        """A kernel for the calling thread, which has none yet."""
        with self._lock:
            kernel = self._idle.pop() if self._idle else self._first.fork()
            self._live.add(kernel)
        lease = _Lease(kernel)
        # Runs when the thread's storage is freed: as the thread ends, or
        # as these kernels go. The finalizer holds them only weakly: a
        # strong hold (a bound method) kept alive, through the registry
        # of finalizers, the very thread-local storage whose freeing
        # would run it, so every tokenizer that had encoded leaked its
        # tables and caches (20 MB or more each) for the process's life.
        weakref.finalize(lease, _give_back, weakref.ref(self), kernel, os.getpid())
        self._local.lease = lease
        return kernel

    def _kernels(self) -> list[PieceEncoding]:
        with self._lock:
            return list(self._live | set(self._idle))

    def cache_info(self) -> tuple[int, int, int, int]:
        """``(hits, misses, maxsize, currsize)`` added up over every thread's cache."""
        totals = [0, 0, 0, 0]
        for kernel in self._kernels():
            for index, value in enumerate(kernel.cache_info()):
                totals[index] += value
        hits, misses, maxsize, currsize = totals
        return hits, misses, maxsize, currsize

    def clear_caches(self) -> None:
        """Empty every thread's cache and zero its counts."""
        for kernel in self._kernels():
            kernel.clear_cache()
