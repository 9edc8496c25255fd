"""``encode_batch``: many texts at once, spread over processes when that pays off.

Starting processes and shipping text to them costs milliseconds, so small
batches are encoded in this process.

>>> from streambpe.encode.encoder import Encoder
>>> encode_batch(Encoder({i: bytes([i]) for i in range(256)}, {}), ["a", "bc"])
[[97], [98, 99]]
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import closing
from functools import partial
from typing import Any

from streambpe._support.pool import ordered_map, process_pool, resolve_workers
from streambpe.encode.encoder import UNSET, Encoder, SpecialSet
from streambpe.streaming import worker_encoder

#: Below this many characters in total, a batch is encoded in-process.
PARALLEL_THRESHOLD_CHARS = 4 * 1024 * 1024
#: Characters per task sent to a worker.
TASK_CHARS = 1024 * 1024


def _encode_group(options: dict[str, Any], texts: list[str]) -> list[list[int]]:
    encoder = worker_encoder.installed()
    return [encoder.encode(text, **options) for text in texts]


def _groups(texts: Sequence[str]) -> list[list[str]]:
    # Consecutive texts, about TASK_CHARS characters per group, order kept.
    groups: list[list[str]] = [[]]
    size = 0
    for text in texts:
        if size >= TASK_CHARS:
            groups.append([])
            size = 0
        groups[-1].append(text)
        size += len(text)
    return groups


def encode_batch(
    encoder: Encoder,
    texts: Sequence[str],
    *,
    allowed_special: SpecialSet | object = UNSET,
    disallowed_special: SpecialSet | object = UNSET,
    workers: int | None = None,
) -> list[list[int]]:
    """Encode each text (see :meth:`Encoder.encode` for the keywords), in order."""
    # Keywords left unset stay unset, so encode applies its own defaults.
    options: dict[str, Any] = {
        name: value
        for name, value in (
            ("allowed_special", allowed_special),
            ("disallowed_special", disallowed_special),
        )
        if value is not UNSET
    }
    count = resolve_workers(workers)
    if count <= 1 or sum(map(len, texts)) < PARALLEL_THRESHOLD_CHARS:
        return [encoder.encode(text, **options) for text in texts]
    groups = _groups(texts)
    results: list[list[int]] = []
    with (
        process_pool(min(count, len(groups)), worker_encoder.install, (encoder,)) as pool,
        closing(
            ordered_map(pool, partial(_encode_group, options), groups, max_in_flight=2 * count)
        ) as encoded_groups,
    ):
        for encoded in encoded_groups:
            results.extend(encoded)
    return results
