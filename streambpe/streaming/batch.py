"""``encode_batch``: many texts at once, spread over threads or processes when that pays off.

Threads serve a backend that encodes without the GIL, processes the others
(:mod:`~streambpe.streaming.parallel`). Starting processes and shipping text
to them costs milliseconds, so small batches are encoded in this process; a
thread costs far less, so the threshold for threads is lower.

>>> from streambpe.encode.encoder import Encoder
>>> encode_batch(Encoder({i: bytes([i]) for i in range(256)}, {}), ["a", "bc"])
[[97], [98, 99]]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streambpe._support import gc_walks
from streambpe._support.pool import resolve_workers
from streambpe._support.text_input import require_text
from streambpe.encode.encoder import UNSET, Encoder, SpecialSet
from streambpe.streaming import parallel
from streambpe.streaming.parallel import Mode, encode_map

#: Below this many characters in total, a batch is encoded in-process.
PARALLEL_THRESHOLD_CHARS: dict[Mode, int] = {
    "processes": 4 * 1024 * 1024,
    "threads": 256 * 1024,
}
#: The fewest characters per task (but the last): large for processes (each
#: hand-off pickles the text), smaller for threads (a hand-off is cheap, and
#: small last tasks let the workers finish together).
TASK_CHARS: dict[Mode, int] = {"processes": 1024 * 1024, "threads": 128 * 1024}


@dataclass(frozen=True)
class _Group:
    """Consecutive texts of the batch, encoded by one task with the caller's keywords."""

    texts: list[str]
    options: dict[str, Any]


def _encode_group(encoder: Encoder, group: _Group) -> list[list[int]]:
    encoded = encoder.encode_each(group.texts, **group.options)
    # Out of the collector's walks until encode_batch hands them over (see gc_walks).
    gc_walks.untrack(encoded)
    return encoded


def _groups(
    texts: Sequence[str], task_chars: int, workers: int, options: dict[str, Any]
) -> list[_Group]:
    """Consecutive texts in groups that shrink, order kept.

    A group holds about a ``2 * workers``-th of the characters left, and at
    least ``task_chars``: a worker that drew slow text takes fewer groups,
    and the last ones are small, so the workers finish together (as the
    parts of one long text do, ``Encoder._encode_in_parts``). Groups of a
    fixed 128 K characters made a worker hand each group's ids to its lists
    between encoding the next, and each pushed the other's tables and int
    objects out of the caches: r50k, 8 MiB in 1000 documents, two workers,
    cold, medians of 156 and 118 ms in two runs against 110 and 104 for groups
    of 1 M characters.

    >>> [len(group.texts) for group in _groups(["ab"] * 8, 2, 1, {})]
    [4, 2, 1, 1]
    """
    left = sum(map(len, texts))
    groups: list[list[str]] = [[]]
    size = 0
    target = max(task_chars, left // (2 * workers))
    for text in texts:
        if size >= target:
            left -= size
            groups.append([])
            size = 0
            target = max(task_chars, left // (2 * workers))
        groups[-1].append(text)
        size += len(text)
    return [_Group(group, options) for group in groups]


def encode_batch(
    encoder: Encoder,
    texts: Sequence[str],
    *,
    allowed_special: SpecialSet | object = UNSET,
    disallowed_special: SpecialSet | object = UNSET,
    workers: int | None = None,
) -> list[list[int]]:
    """Encode each text (see :meth:`Encoder.encode` for the keywords), in order.

    The result never depends on ``workers``: ``None`` means one thread or
    process per core, ``1`` encodes in this thread.
    """
    # Keywords left unset stay unset, so encode applies its own defaults.
    options: dict[str, Any] = {
        name: value
        for name, value in (
            ("allowed_special", allowed_special),
            ("disallowed_special", disallowed_special),
        )
        if value is not UNSET
    }
    for text in texts:
        require_text(text)
    count = resolve_workers(workers)
    mode = parallel.parallel_mode(encoder)
    if count <= 1 or sum(map(len, texts)) < PARALLEL_THRESHOLD_CHARS[mode]:
        return encoder.encode_each(texts, **options)
    results: list[list[int]] = []
    groups = _groups(texts, TASK_CHARS[mode], count, options)
    # Every result is kept, so every group may be in flight: a thread never
    # waits for a slow group whose result is due first.
    with encode_map(
        encoder, _encode_group, groups, workers=count, all_in_flight=True
    ) as encoded_groups:
        for encoded in encoded_groups:
            results.extend(encoded)
    gc_walks.track(results)
    return results
