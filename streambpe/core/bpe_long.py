"""Rank-based byte-pair merging of one long piece in O(n log n).

:func:`streambpe.core.bpe.merge_piece` rescans every pair after each merge,
which is quadratic: fine for words, far too slow for a megabyte of one letter
or a base64 blob. :func:`merge_long_piece` gives the same tokens by keeping the
parts in a linked list and the mergeable pairs in a min-heap of
``(rank, start)``, so each merge costs O(log n).

>>> merge_long_piece(b"abcb", {b"ab": 0, b"bc": 1, b"abc": 2})
[b'abc', b'b']
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Mapping

_NO_RANK = sys.maxsize


def merge_long_piece(
    piece: bytes, ranks: Mapping[bytes, int], *, below: int = _NO_RANK
) -> list[bytes]:
    """Split ``piece`` into tokens exactly as ``merge_piece(piece, ranks, below=below)`` does.

    The lowest-ranked adjacent pair merges first, the leftmost on ties; only
    ranks lower than ``below`` may merge.

    >>> merge_long_piece(b"aaaaa", {b"aa": 0, b"aaaa": 1})
    [b'aaaa', b'a']
    >>> merge_long_piece(b"", {})
    []
    """
    size = len(piece)
    # Part i starts at byte i; parts[i] is b"" once it has been merged into
    # the part before it. ``following[i]`` is the next live part (size at the end).
    parts = [piece[i : i + 1] for i in range(size)]
    following = list(range(1, size + 1))
    preceding = list(range(-1, size - 1))
    # The rank of the pair that starts at each part, or None; a heap entry is
    # stale when it no longer matches this.
    pair_rank: list[int | None] = [None] * size
    heap: list[tuple[int, int]] = []

    def refresh(start: int) -> None:
        after = following[start]
        rank = ranks.get(parts[start] + parts[after], below) if after < size else below
        pair_rank[start] = rank if rank < below else None
        if rank < below:
            heapq.heappush(heap, (rank, start))

    for start in range(size - 1):
        refresh(start)
    while heap:
        rank, start = heapq.heappop(heap)
        # An entry equal to the pair's current rank stands for the current pair:
        # ties between it and a fresh twin resolve the same way.
        if pair_rank[start] != rank:
            continue
        gone = following[start]
        parts[start] += parts[gone]
        parts[gone] = b""
        pair_rank[gone] = None
        following[start] = following[gone]
        if following[start] < size:
            preceding[following[start]] = start
        refresh(start)
        if preceding[start] >= 0:
            refresh(preceding[start])
    return [part for part in parts if part]
