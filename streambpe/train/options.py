"""``TrainOptions``: the keywords of ``train_bpe`` that say how to read and count, checked once.

``train_bpe`` builds one from its keyword arguments at the public edge; the
counting and caching steps below it take the object unchanged, so each
option is named, defaulted and checked in one place.

>>> options = TrainOptions(CountSettings("x", ("<s>",)), workers=2)
>>> options.count.special_tokens, options.workers, options.tasks
(('<s>',), 2, None)
"""

from __future__ import annotations

import os
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Literal

from streambpe.train.count_tasks import CountSettings, InputFormat

#: How the word-count cache names the inputs' version: their metadata (no reads) or their bytes.
CacheKey = Literal["metadata", "content"]
CACHE_KEYS: tuple[str, ...] = ("metadata", "content")


@dataclass(frozen=True)
class TrainOptions:
    """How training reads and counts its inputs (see :func:`~streambpe.train.trainer.train_bpe`).

    The word counts depend on ``count`` (pattern, special tokens, error policy)
    and on how records are read (``input_format``, ``text_field``); the
    workers, the executor, the task count and the chunk size only decide
    where, and in what pieces, the work runs.
    """

    count: CountSettings
    #: Local counting processes (already resolved: ``None`` became the core count).
    workers: int = 1
    executor: Executor | None = None
    tasks: int | None = None
    input_format: InputFormat = "auto"
    text_field: str = "text"
    cache: bool | str | os.PathLike[str] = False
    cache_key: CacheKey = "metadata"
