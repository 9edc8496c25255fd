"""The hot kernels behind one seam: pretokenizing, the training merge loop, and pieces to ids.

Each kernel has two implementations with identical results: the pure-Python
reference (:mod:`~streambpe.core.pretokenize`, :mod:`~streambpe.core.merge_loop`,
:mod:`~streambpe.core.piece_encoder`, :mod:`~streambpe.core.token_decoder`), readable and always available, and a
compiled one (``streambpe.core._native``),
built by ``pip install`` when a C++ compiler is present. The compiled
pretokenizer runs the three built-in patterns on scanners of their own, and
any other pattern or chain of split steps that
:mod:`~streambpe.core.pattern_compiler` accepts on the compiled matcher; only
what it refuses goes through ``regex`` (:func:`pretokenizer_engine` says
which, and why). This module is the only place that chooses between them;
every caller goes through :func:`active_backend`.

The compiled backend is used when it imports, unless the environment variable
``STREAMBPE_PURE_PYTHON=1`` is set at import time. Tests and benchmarks switch
at run time with :func:`select_backend`.

>>> active_backend().name in available_backends()
True
>>> with using_backend("python"):
...     active_backend().learn_merges({"abab": 1}, 2)
[(b'a', b'b'), (b'ab', b'ab')]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol, TypeAlias

from streambpe.core import merge_loop
from streambpe.core.piece_encoder import PieceEncoder, Pretokenizing, SpecialSpan, move_id_part
from streambpe.core.pretokenize import Pretokenizer
from streambpe.core.split_steps import Pretokenization, StepsPretokenizer
from streambpe.core.token_decoder import TokenDecoder
from streambpe.patterns import BUILT_IN_PATTERNS

__all__ = [
    "NATIVE",
    "PYTHON",
    "Backend",
    "LearnMerges",
    "MergeCallback",
    "PieceEncoding",
    "PieceEncodingFactory",
    "PretokenizerFactory",
    "Pretokenizing",
    "SpecialSpan",
    "TokenDecoding",
    "TokenDecodingFactory",
    "active_backend",
    "available_backends",
    "kept_table_memory",
    "pretokenizer_engine",
    "python_pretokenizer",
    "select_backend",
    "using_backend",
]


#: Called once per merge made; may raise to stop training (Ctrl-C, cancellation).
MergeCallback = Callable[[], None]


class LearnMerges(Protocol):
    """``learn_merges(word_counts, max_merges, on_merge)``: the merge loop (empties the counts)."""

    def __call__(
        self, word_counts: dict[str, int], max_merges: int, on_merge: MergeCallback | None = None
    ) -> list[tuple[bytes, bytes]]: ...


#: What an encoding kernel offers: the methods of the reference
#: :class:`~streambpe.core.piece_encoder.PieceEncoder`, which the compiled
#: ``PieceEncoder`` repeats one for one (its signatures are written once, there).
PieceEncoding: TypeAlias = PieceEncoder


#: Builds an encoding kernel from (encoder, ranks, cache_size).
PieceEncodingFactory = Callable[[dict[bytes, int], dict[bytes, int], int], PieceEncoding]


#: Builds a pretokenizer for a pattern string or a chain of split steps.
PretokenizerFactory = Callable[[Pretokenization], Pretokenizing]


class TokenDecoding(Protocol):
    """What a decoding kernel offers; see :class:`~streambpe.core.token_decoder.TokenDecoder`."""

    def decode_bytes(self, ids: Iterable[int]) -> bytes: ...


#: Builds a decoding kernel from id -> token bytes.
TokenDecodingFactory = Callable[[dict[int, bytes]], TokenDecoding]


@dataclass(frozen=True)
class Backend:
    """One implementation of the kernels."""

    name: str
    pretokenizer: PretokenizerFactory
    learn_merges: LearnMerges
    piece_encoder: PieceEncodingFactory
    token_decoder: TokenDecodingFactory
    #: Appends the ids of one encoded part (``parts[index]``) to the joined
    #: ids, and puts None in its place.
    move_id_part: Callable[[list[int], list[list[int] | None], int], None]
    #: ``(start, end, token index)`` of the special tokens in a text, as
    #: ``SpecialTokenScanner.matches`` finds them, without the GIL; None where
    #: the scanner itself is the way (the reference backend).
    special_matches: Callable[[str, tuple[str, ...]], list[tuple[int, int, int]]] | None


def python_pretokenizer(pattern: Pretokenization) -> Pretokenizing:
    """The ``regex``-based pretokenizer of a pattern string, or the reference of a chain."""
    if isinstance(pattern, str):
        return Pretokenizer(pattern)
    return StepsPretokenizer(pattern)


PYTHON = Backend(
    "python",
    python_pretokenizer,
    merge_loop.learn_merges,
    PieceEncoder,
    TokenDecoder,
    move_id_part,
    None,
)


def _load_native() -> Backend | None:
    try:
        from streambpe.core import _native  # type: ignore[attr-defined]
    except ImportError:
        return None

    def pretokenizer(pattern: Pretokenization) -> Pretokenizing:
        # Imported here: a tokenizer with a built-in pattern never needs the compiler.
        from streambpe.core.pattern_compiler import UnsupportedPatternError

        try:
            scanner: Pretokenizing = _native.Pretokenizer(pattern)
        except UnsupportedPatternError:
            return python_pretokenizer(pattern)
        return scanner

    return Backend(
        "native",
        pretokenizer,
        _native.learn_merges,
        _native.PieceEncoder,
        _native.TokenDecoder,
        _native.move_id_part,
        _native.special_matches,
    )


NATIVE: Backend | None = _load_native()
_BACKENDS = {backend.name: backend for backend in (PYTHON, NATIVE) if backend is not None}


def _initial_backend() -> Backend:
    # The install step already warned if the compiled core could not be built.
    if os.environ.get("STREAMBPE_PURE_PYTHON", "") not in ("", "0"):
        return PYTHON
    return NATIVE or PYTHON


_active = _initial_backend()


def active_backend() -> Backend:
    """The backend every kernel call uses now."""
    return _active


def pretokenizer_engine(pattern: Pretokenization) -> tuple[str, str | None]:
    """Which engine the active backend cuts ``pattern`` with, and why it is not native if not.

    ``("native", None)``, or ``("regex", reason)``: the pure backend is active,
    or the pattern is outside what the compiled matcher runs.

    >>> with using_backend("python"):
    ...     pretokenizer_engine(r"\\p{L}+")
    ('regex', 'the pure-Python backend is active')
    """
    if _active.name != "native":
        return "regex", "the pure-Python backend is active"
    if isinstance(pattern, str) and pattern in BUILT_IN_PATTERNS:
        return "native", None
    from streambpe.core.pattern_compiler import native_support

    reason = native_support(pattern)
    return ("native", None) if reason is None else ("regex", reason)


def kept_table_memory(limit: int | None = None) -> tuple[int, int]:
    """``(bytes of freed table memory kept now, the most kept)``; ``limit`` sets the most.

    The compiled core keeps the memory of its freed big tables (2 MiB or
    more, on Linux), up to the limit (128 MiB unless set), for the next
    table of the same size, as malloc keeps freed heap ("Kept table memory"
    in ``docs/design.md``). ``kept_table_memory(0)`` hands all of it back to
    the system and keeps nothing more. Without the compiled core, or
    outside Linux, nothing is kept: ``(0, 0)``.

    >>> kept_table_memory(-1)
    Traceback (most recent call last):
    ...
    ValueError: limit must be at least 0, got -1
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be at least 0, got {limit}")
    try:
        from streambpe.core import _native  # type: ignore[attr-defined]
    except ImportError:
        return 0, 0
    kept, most = _native.kept_table_memory(limit)
    return int(kept), int(most)


def available_backends() -> list[str]:
    """Names of the backends this installation has: ``["python"]`` or ``["python", "native"]``."""
    return list(_BACKENDS)


def select_backend(name: str) -> None:
    """Use backend ``name`` (``"python"`` or ``"native"``) from now on, in this process.

    Meant for tests and benchmarks; results never depend on the backend.
    """
    global _active
    try:
        _active = _BACKENDS[name]
    except KeyError:
        raise ValueError(
            f"backend {name!r} is not available here; available: {available_backends()}"
        ) from None


@contextmanager
def using_backend(name: str) -> Iterator[Backend]:
    """Select backend ``name`` for the duration of a ``with`` block."""
    previous = _active
    select_backend(name)
    try:
        yield _active
    finally:
        select_backend(previous.name)
