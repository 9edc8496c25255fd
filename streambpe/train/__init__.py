"""Training: count the words of a corpus, then learn merges from the counts.

:mod:`~streambpe.train.count_tasks` plans counting tasks from input sizes,
:mod:`~streambpe.train.counting` is the map step (any executor can run it),
:mod:`~streambpe.train.count_cache` keeps counts across runs, and
:mod:`~streambpe.train.trainer` holds ``train_bpe``, ``train_bpe_from_iterator``
and ``atrain_bpe``.
"""

from __future__ import annotations

from streambpe.train.trainer import atrain_bpe, train_bpe, train_bpe_from_iterator

__all__ = [
    "atrain_bpe",
    "train_bpe",
    "train_bpe_from_iterator",
]
