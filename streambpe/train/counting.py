"""Word counting: the map step of training.

Counting is a pure function from (byte ranges, pattern, special tokens) to
:data:`WordCounts`, so any ``concurrent.futures.Executor`` can run it and its
results can be summed in any order (``docs/design.md``, "Determinism").

>>> from streambpe.patterns import GPT2
>>> counts = count_words_in_text("the cat<|endoftext|>the hat", GPT2, ["<|endoftext|>"])
>>> sorted(counts.items())
[(' cat', 1), (' hat', 1), ('the', 2)]
"""

from __future__ import annotations

import marshal
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor
from contextlib import ExitStack
from functools import cache

from streambpe import core
from streambpe._support.executors import in_flight_bound, map_reduce, task_count
from streambpe._support.pool import local_pool, pool_size
from streambpe.core import Pretokenizing
from streambpe.cutting.specials import SpecialTokenScanner
from streambpe.sources.inputs import InputFile
from streambpe.train.count_tasks import CountTask, plan_count_tasks
from streambpe.train.options import TrainOptions

#: Word (a pretoken, as text) -> number of occurrences.
WordCounts = dict[str, int]

#: Called with the number of input bytes just finished.
ProgressCallback = Callable[[int], None]


@cache
def _cached_pretokenizer(backend: str, pattern: str) -> Pretokenizing:
    return core.active_backend().pretokenizer(pattern)


def _pretokenizer(pattern: str) -> Pretokenizing:
    """The active backend's pretokenizer for ``pattern``, built once per process."""
    return _cached_pretokenizer(core.active_backend().name, pattern)


def _count_text_into(
    counts: Counter[str], text: str, pattern: str, special_tokens: Sequence[str]
) -> None:
    # On the compiled backend the pieces of all documents are counted in
    # native code, and only distinct ones become strs.
    count_into = _pretokenizer(pattern).count_into
    if special_tokens:
        scanner = SpecialTokenScanner(special_tokens)
        count_into((document for document, _special in scanner.split(text) if document), counts)
    else:
        count_into([text], counts)


def count_words_in_text(text: str, pattern: str, special_tokens: Sequence[str]) -> WordCounts:
    """Count the words of ``text``; special tokens separate documents and are not counted."""
    counts: Counter[str] = Counter()
    _count_text_into(counts, text, pattern, special_tokens)
    return counts


def run_count_task(task: CountTask) -> WordCounts:
    """Count the words of a task's parts, one text in memory at a time.

    This is what a worker runs: summing inside the worker (in C, through
    ``Counter.update``) leaves one dictionary per task to merge.
    """
    counts: Counter[str] = Counter()
    _count_task_into(counts, task)
    return counts


def _count_task_into(counts: Counter[str], task: CountTask) -> None:
    settings = task.settings
    for part in task.parts:
        for text in part.texts(settings):
            _count_text_into(counts, text, settings.pattern, settings.special_tokens)


def add_word_counts(total: WordCounts, part: WordCounts) -> None:
    """Add ``part`` into ``total`` in place (word counts form a commutative monoid).

    >>> total = {"a": 1}
    >>> add_word_counts(total, {"a": 2, "b": 1})
    >>> total
    {'a': 3, 'b': 1}
    """
    if not total:
        total.update(part)
        return
    get = total.get
    for word, count in part.items():
        total[word] = get(word, 0) + count


def merged_word_counts(left: WordCounts, right: WordCounts) -> WordCounts:
    """A new dictionary holding ``left + right``; neither input changes.

    This is the merge step run on a cluster, where an input may be a stored
    result that a retried task reads again, so it must stay as it was.

    >>> left = {"a": 1}
    >>> merged_word_counts(left, {"a": 2, "b": 1}), left
    ({'a': 3, 'b': 1}, {'a': 1})
    """
    larger, smaller = (left, right) if len(left) >= len(right) else (right, left)
    merged = dict(larger)
    add_word_counts(merged, smaller)
    return merged


def pack_word_counts(counts: WordCounts) -> bytes:
    """``counts`` as ``marshal`` bytes (about 21 bytes per word): how a cluster stores and moves them.

    >>> unpack_word_counts(pack_word_counts(Counter("aab")))
    {'a': 2, 'b': 1}
    """
    return marshal.dumps(counts if type(counts) is dict else dict(counts))


def unpack_word_counts(packed: bytes) -> WordCounts:
    """The counts :func:`pack_word_counts` packed (``marshal`` runs no code while loading)."""
    counts: WordCounts = marshal.loads(packed)
    return counts


def count_words(
    tasks: Iterable[CountTask],
    *,
    workers: int = 1,
    executor: Executor | None = None,
    max_in_flight: int | None = None,
    progress_callback: ProgressCallback | None = None,
) -> WordCounts:
    """Sum the word counts of ``tasks``: in this process, on a local pool, or on ``executor``.

    ``tasks`` may be a long iterator (texts being batched): at most
    ``max_in_flight`` tasks (default: twice the workers) are out at a time. On
    Dask and Ray the counts are summed on the cluster
    (:func:`~streambpe._support.executors.map_reduce`). The result does not
    depend on the workers, the executor or the task count.
    """
    if executor is None and workers <= 1:
        # In-process: one Counter for everything, summed in C.
        counts: Counter[str] = Counter()
        for task in tasks:
            _count_task_into(counts, task)
            if progress_callback is not None:
                progress_callback(task.size)
        return counts
    sizes: list[int] = []

    def remember_sizes() -> Iterator[CountTask]:
        for task in tasks:
            sizes.append(task.size)
            yield task

    def task_done(index: int) -> None:
        if progress_callback is not None:
            progress_callback(sizes[index])

    in_flight = max_in_flight or in_flight_bound(executor, fallback_workers=workers)
    with ExitStack() as stack:
        if executor is None:
            executor = stack.enter_context(local_pool(pool_size(workers, tasks)))
        return map_reduce(
            executor,
            # Looked up at call time, so a test can stand in for either.
            run_count_task,
            remember_sizes(),
            empty=dict,
            merge=merged_word_counts,
            merge_into=add_word_counts,
            max_in_flight=in_flight,
            on_task_done=task_done,
            pack=pack_word_counts,
            unpack=unpack_word_counts,
        )


def count_words_in_inputs(
    files: list[InputFile],
    options: TrainOptions,
    progress_callback: ProgressCallback | None = None,
) -> WordCounts:
    """Count the words of resolved input files: each file is its own stream.

    The result does not depend on the workers, the executor, the task count
    or the chunk size of ``options``.

    >>> import pathlib, tempfile
    >>> from streambpe.patterns import GPT2
    >>> from streambpe.sources.inputs import resolve_inputs
    >>> from streambpe.train.count_tasks import CountSettings
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
    >>> _ = path.write_text("the cat the")
    >>> counts = count_words_in_inputs(resolve_inputs(path), TrainOptions(CountSettings(GPT2, ())))
    >>> sorted(counts.items())
    [(' cat', 1), (' the', 1), ('the', 1)]
    """
    parallel = options.executor is not None or options.workers > 1
    planned = plan_count_tasks(
        files,
        tasks=task_count(options.executor, fallback_workers=options.workers, tasks=options.tasks)
        if parallel
        else 1,
        settings=options.count,
        input_format=options.input_format,
        text_field=options.text_field,
    )
    return count_words(
        planned,
        workers=options.workers,
        executor=options.executor,
        progress_callback=progress_callback,
    )
