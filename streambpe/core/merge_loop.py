"""The BPE merge loop: learn merges from word counts.

State kept between merges, so no step rescans all pairs:

* ``pair_counts``: how often each adjacent token pair occurs, weighted by word count;
* ``pair_words``: pair -> indexes of the words that contain (or once contained) it,
  as lists: a stale or repeated index only costs a look at a word that no
  longer has the pair, and lists take a third of the memory of sets;
* a max-heap of ``(count, tie-break key, pair)`` with lazy deletion: an entry
  whose stored count is above the pair's current count is pushed back with the
  current count when it reaches the top.

The pair with the highest count is merged; among equal counts the greater pair,
compared as ``(left_bytes, right_bytes)``, wins (``docs/design.md``, "The tie-break"). Only pairs that
contain the newly made token ever *increase*; all others only decrease, which is
what makes one heap entry per pair enough.

>>> learn_merges({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 3)
[(b's', b't'), (b'e', b'st'), (b'o', b'w')]
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise

Pair = tuple[int, int]
#: Called once per merge made.
MergeCallback = Callable[[], None]

# Maps each byte b to 255 - b so that, decoded as latin-1, a *smaller* string
# means a *greater* token. The U+0100 terminator sorts after every byte, so a
# prefix (the smaller token) gets the larger key, as it should.
_INVERT = bytes(range(255, -1, -1))
_TERMINATOR = "\u0100"


def descending_key(token: bytes) -> str:
    """A string that sorts in the *opposite* order of ``token`` (a min-heap then pops the max).

    >>> descending_key(b"b") < descending_key(b"a") < descending_key(b"")
    True
    >>> descending_key(b"ab") < descending_key(b"a")
    True
    """
    return token.translate(_INVERT).decode("latin-1") + _TERMINATOR


@dataclass
class MergeState:
    """The merge loop's working state; see the module docstring."""

    words: list[list[int]]
    word_counts: list[int]
    token_bytes: list[bytes]
    token_keys: list[str] = field(default_factory=list)
    pair_counts: dict[Pair, int] = field(default_factory=dict)
    pair_words: dict[Pair, list[int]] = field(default_factory=dict)
    heap: list[tuple[int, str, str, int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.token_keys = [descending_key(token) for token in self.token_bytes]
        pair_counts = self.pair_counts
        holders: defaultdict[Pair, list[int]] = defaultdict(list)
        for index, (word, count) in enumerate(zip(self.words, self.word_counts, strict=True)):
            for pair in pairwise(word):
                pair_counts[pair] = pair_counts.get(pair, 0) + count
                holders[pair].append(index)
        self.pair_words = dict(holders)
        keys = self.token_keys
        self.heap = [(-count, keys[a], keys[b], a, b) for (a, b), count in pair_counts.items()]
        heapq.heapify(self.heap)

    def best_pair(self) -> Pair | None:
        """Pop the pair to merge next, or None when no pair is left."""
        heap = self.heap
        pair_counts = self.pair_counts
        while heap:
            negative_count, left_key, right_key, a, b = heap[0]
            current = pair_counts.get((a, b), 0)
            if current == -negative_count:
                heapq.heappop(heap)
                return (a, b)
            # Stale: the pair lost occurrences since this entry was pushed.
            if current > 0:
                heapq.heapreplace(heap, (-current, left_key, right_key, a, b))
            else:
                heapq.heappop(heap)
        return None

    def merge(self, pair: Pair) -> int:
        """Replace every occurrence of ``pair`` by a new token; return the new token's id."""
        a, b = pair
        new_id = len(self.token_bytes)
        self.token_bytes.append(self.token_bytes[a] + self.token_bytes[b])
        self.token_keys.append(descending_key(self.token_bytes[new_id]))
        pair_counts = self.pair_counts
        pair_words = self.pair_words
        words = self.words
        word_counts = self.word_counts
        # Pairs that contain ``new_id`` are new in this step: count and index them
        # apart, then add them to the shared tables once.
        new_counts: dict[Pair, int] = {}
        new_holders: defaultdict[Pair, list[int]] = defaultdict(list)
        for index in pair_words.pop(pair, ()):
            word = words[index]
            count = word_counts[index]
            search_from = 0
            # Each pass consumes an occurrence of ``a`` (two when a == b and they merge).
            # Stale index entries (the pair was consumed earlier) find no match.
            remaining = word.count(a)
            while remaining > 0:
                position = word.index(a, search_from)
                search_from = position + 1
                remaining -= 1
                if position + 1 == len(word) or word[position + 1] != b:
                    continue
                if a == b:
                    remaining -= 1
                if position > 0:
                    before = word[position - 1]
                    if before == new_id:  # "a b a b": the pair made just before
                        new_counts[(new_id, a)] -= count
                    else:
                        pair_counts[(before, a)] -= count
                    left = (before, new_id)
                    new_counts[left] = new_counts.get(left, 0) + count
                    new_holders[left].append(index)
                if position + 2 < len(word):
                    after = word[position + 2]
                    pair_counts[(b, after)] -= count
                    right = (new_id, after)
                    new_counts[right] = new_counts.get(right, 0) + count
                    new_holders[right].append(index)
                word[position : position + 2] = (new_id,)
        pair_counts.pop(pair, None)
        keys = self.token_keys
        heap = self.heap
        for new_pair, count in new_counts.items():
            if count > 0:
                pair_counts[new_pair] = count
                pair_words[new_pair] = new_holders[new_pair]
                left_id, right_id = new_pair
                heapq.heappush(heap, (-count, keys[left_id], keys[right_id], left_id, right_id))
        return new_id


def spell_words(word_counts: dict[str, int]) -> tuple[list[list[int]], list[int]]:
    """Spell each word as a list of byte values, emptying ``word_counts`` as it goes.

    Single-byte words are dropped: they hold no pair. Popping keeps peak memory
    near one copy of the words rather than two.

    >>> spell_words({"ab": 2, "c": 5})
    ([[97, 98]], [2])
    """
    words: list[list[int]] = []
    counts: list[int] = []
    while word_counts:
        word, count = word_counts.popitem()
        if count < 1:
            raise ValueError(f"word {word!r} has count {count}; counts must be at least 1")
        spelled = list(word.encode("utf-8"))
        if len(spelled) > 1:
            words.append(spelled)
            counts.append(count)
    words.reverse()
    counts.reverse()
    return words, counts


def learn_merges(
    word_counts: dict[str, int],
    max_merges: int,
    on_merge: MergeCallback | None = None,
) -> list[tuple[bytes, bytes]]:
    """Learn up to ``max_merges`` merges, in order, from word counts (which it empties).

    Stops early when no pair is left (every word has become a single token).
    This is the pure-Python backend's entry point (see :mod:`streambpe.core`).
    """
    words, counts = spell_words(word_counts)
    return learn_merges_from_words(words, counts, max_merges, on_merge=on_merge)


def learn_merges_from_words(
    words: list[list[int]],
    counts: list[int],
    max_merges: int,
    *,
    on_merge: MergeCallback | None = None,
) -> list[tuple[bytes, bytes]]:
    """Like :func:`learn_merges`, from words already spelled as byte lists (which it edits).

    >>> learn_merges_from_words([[97, 98], [97, 98, 99]], [2, 1], 2)
    [(b'a', b'b'), (b'ab', b'c')]
    """
    state = MergeState(words, counts, [bytes([byte]) for byte in range(256)])
    merges: list[tuple[bytes, bytes]] = []
    while len(merges) < max_merges:
        pair = state.best_pair()
        if pair is None:
            break
        state.merge(pair)
        merges.append((state.token_bytes[pair[0]], state.token_bytes[pair[1]]))
        if on_merge is not None:
            on_merge()
    return merges
