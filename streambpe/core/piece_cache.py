"""A bounded cache from piece (text) to token ids, fast on hits.

Most pieces of real text repeat, so the encoder looks each piece up here and
runs BPE only on a miss. Hits must cost next to nothing, so the cache *is* a
``dict``: a lookup is ``dict.__getitem__`` (C code, called through ``map``), and
only a miss reaches Python, in ``__missing__``.

Eviction approximates LRU with two generations: when the current generation is
full it becomes the previous one and a fresh one starts; a miss that finds its
piece in the previous generation moves it back. A piece used at least once per
generation therefore never leaves, and memory stays bounded by ``maxsize``.
(The compiled backend's ``PieceCache`` is set-associative instead: it evicts
other pieces, so its hit counts may differ, never the ids.)

>>> cache = TwoGenerationCache(lambda piece: (len(piece),), maxsize=4)
>>> cache["hello"], cache["hello"]
((5,), (5,))
>>> cache.misses
1
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

TokenIds = tuple[int, ...]


class CacheInfo(NamedTuple):
    """Piece-cache counts, of one cache or summed over a tokenizer's: hits are lookups that ran no BPE."""

    hits: int
    misses: int
    maxsize: int
    currsize: int

    @property
    def hit_rate(self) -> float:
        """Hits over lookups (0.0 before any lookup)."""
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0


class TwoGenerationCache(dict[str, TokenIds]):
    """Piece -> token ids, computing misses with ``compute``; at most ``maxsize`` entries.

    ``maxsize=0`` disables caching (every lookup computes).
    """

    def __init__(self, compute: Callable[[str], TokenIds], maxsize: int) -> None:
        super().__init__()
        if maxsize < 0:
            raise ValueError(f"cache size must be >= 0, got {maxsize}")
        self.compute = compute
        self.maxsize = maxsize
        # Two generations of maxsize // 2 each; below 2 there is room for one only.
        self._keeps_previous = maxsize >= 2
        self._generation_size = maxsize // 2 if self._keeps_previous else maxsize
        self._previous: dict[str, TokenIds] = {}
        self.misses = 0
        self.lookups = 0  # maintained by callers that look up in bulk through ``map``

    def __missing__(self, piece: str) -> TokenIds:
        ids = self._previous.pop(piece, None)
        if ids is None:
            self.misses += 1
            ids = self.compute(piece)
            if self.maxsize == 0:
                return ids
        if len(self) >= self._generation_size:
            self._previous = dict(self) if self._keeps_previous else {}
            self.clear()
        self[piece] = ids
        return ids

    def info(self) -> CacheInfo:
        """Hit and miss counts so far; hits are lookups that ran no BPE."""
        lookups = max(self.lookups, self.misses)
        return CacheInfo(
            lookups - self.misses, self.misses, self.maxsize, len(self) + len(self._previous)
        )

    def reset(self) -> None:
        """Drop every entry and zero the counts."""
        self.clear()
        self._previous = {}
        self.misses = 0
        self.lookups = 0
