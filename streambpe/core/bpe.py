"""Rank-based byte-pair merging of one piece, as tiktoken does it.

Start from the piece's single bytes; repeatedly merge the adjacent pair whose
concatenation has the lowest rank (the leftmost on ties) until no adjacent
concatenation has a rank. A piece that is itself a token is one token, without
merging (tiktoken checks that first, and so do we).

>>> ranks = {b"ab": 0, b"bc": 1, b"abc": 2}
>>> merge_piece(b"abcb", ranks)
[b'abc', b'b']
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from itertools import pairwise

from streambpe.core.bpe_long import merge_long_piece

_NO_RANK = sys.maxsize
_SINGLE_BYTES = [bytes([byte]) for byte in range(256)]
#: Pieces longer than this merge through a heap: rescanning every pair after each
#: merge is quadratic, which a megabyte of one letter or a base64 blob would show.
LONG_PIECE = 256


def merge_piece(piece: bytes, ranks: Mapping[bytes, int], *, below: int = _NO_RANK) -> list[bytes]:
    """Split ``piece`` into tokens by rank-based BPE; returns the token bytes in order.

    Only ranks lower than ``below`` may merge (deriving merges from ranks needs
    that: a token's own parts come from strictly earlier ranks).

    >>> merge_piece(b"aaa", {b"aa": 0})
    [b'aa', b'a']
    >>> merge_piece(b"abc", {b"ab": 3, b"bc": 4, b"abc": 5}, below=5)
    [b'ab', b'c']
    >>> merge_piece(b"", {})
    []
    """
    if len(piece) > LONG_PIECE:
        return merge_long_piece(piece, ranks, below=below)
    parts = [_SINGLE_BYTES[byte] for byte in piece]
    if len(parts) < 2:
        return parts
    rank_of = ranks.get
    pair_ranks = [rank_of(left + right, below) for left, right in pairwise(parts)]
    while True:
        best = min(pair_ranks)
        if best >= below:
            return parts
        index = pair_ranks.index(best)
        parts[index] += parts.pop(index + 1)
        del pair_ranks[index]
        if not pair_ranks:
            return parts
        # Only the two pairs touching the merged part can change rank.
        if index > 0:
            pair_ranks[index - 1] = rank_of(parts[index - 1] + parts[index], below)
        if index < len(pair_ranks):
            pair_ranks[index] = rank_of(parts[index] + parts[index + 1], below)


def ranks_from_merges(merges: list[tuple[bytes, bytes]]) -> dict[bytes, int]:
    """Each merged token's rank is the index of the first merge that made it.

    >>> ranks_from_merges([(b"a", b"b"), (b"ab", b"c"), (b"a", b"bc")])
    {b'ab': 0, b'abc': 1}
    """
    ranks: dict[bytes, int] = {}
    for rank, (left, right) in enumerate(merges):
        ranks.setdefault(left + right, rank)
    return ranks
