"""One encoding kernel per thread, sharing one vocabulary.

An encoding kernel (:class:`streambpe.core.PieceEncoding`) owns a piece cache
that is not safe to share between threads, and the compiled kernel encodes
without holding the GIL, so threads really do run at once. Each thread
therefore encodes through its own kernel: the first one built, or a
:meth:`~streambpe.core.PieceEncoding.fork` of it that shares the (read-only)
vocabulary and has a cache of its own (``docs/design.md``, "Processes or threads").

A thread's kernel lives as long as the thread does (it is held in
thread-local storage), so a pool of threads keeps one cache per thread and a
finished thread's cache is freed with it.

>>> from streambpe.core import PYTHON
>>> from streambpe.patterns import GPT2
>>> kernels = ThreadKernels(PYTHON, GPT2, {bytes([i]): i for i in range(256)}, {}, 16)
>>> out: list[int] = []
>>> kernels.piece_encoder().encode_text("hi", GPT2, kernels.pretokenizer, out)
>>> out, kernels.cache_info()
([104, 105], (0, 1, 16, 1))
"""

from __future__ import annotations

import threading
import weakref

from streambpe.core import Backend, PieceEncoding, Pretokenizing


class ThreadKernels:
    """The kernels of one backend for one vocabulary: one piece encoder per thread.

    Args:
        backend: the backend whose kernels to build.
        pattern: the pretokenization pattern (a pattern string).
        encoder: token bytes -> id, for every ordinary token.
        ranks: token bytes -> merge rank.
        cache_size: piece-cache entries per thread (0 disables the caches).
    """

    def __init__(
        self,
        backend: Backend,
        pattern: str,
        encoder: dict[bytes, int],
        ranks: dict[bytes, int],
        cache_size: int,
    ) -> None:
        #: The pretokenizer; it keeps no state between calls, so threads share it.
        self.pretokenizer: Pretokenizing = backend.pretokenizer(pattern)
        self._first = backend.piece_encoder(encoder, ranks, cache_size)
        self._first_taken = False
        self._lock = threading.Lock()
        self._local = threading.local()
        # Every live kernel, for the cache counts; a kernel leaves this set when
        # its thread ends and the kernel is freed.
        self._live: weakref.WeakSet[PieceEncoding] = weakref.WeakSet()

    def piece_encoder(self) -> PieceEncoding:
        """The calling thread's piece encoder (built on its first call)."""
        kernel: PieceEncoding | None = getattr(self._local, "kernel", None)
        if kernel is None:
            with self._lock:
                if self._first_taken:
                    kernel = self._first.fork()
                else:
                    kernel, self._first_taken = self._first, True
                self._live.add(kernel)
            self._local.kernel = kernel
        return kernel

    def _kernels(self) -> list[PieceEncoding]:
        with self._lock:
            return list(self._live) or [self._first]

    def cache_info(self) -> tuple[int, int, int, int]:
        """``(hits, misses, maxsize, currsize)`` added up over the live threads' caches."""
        totals = [0, 0, 0, 0]
        for kernel in self._kernels():
            for index, value in enumerate(kernel.cache_info()):
                totals[index] += value
        hits, misses, maxsize, currsize = totals
        return hits, misses, maxsize, currsize

    def clear_caches(self) -> None:
        """Empty every live thread's cache and zero its counts."""
        for kernel in self._kernels():
            kernel.clear_cache()
