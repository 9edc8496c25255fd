"""Word counting: the map step of training.

Counting is a pure function from (byte ranges, pattern, special tokens) to
:data:`WordCounts`, so any ``concurrent.futures.Executor`` can run it and its
results can be summed in any order (``docs/design.md``, "Determinism").

>>> counts = count_words_in_text("the cat<|endoftext|>the hat", GPT2, ["<|endoftext|>"])
>>> sorted(counts.items())
[(' cat', 1), (' hat', 1), ('the', 2)]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from contextlib import closing
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from streambpe import core
from streambpe._support.pool import ordered_map, process_pool
from streambpe._support.utf8 import DecodeErrors
from streambpe.core import Pretokenizing
from streambpe.cutting.byte_ranges import ByteRange, plan_byte_ranges, read_text
from streambpe.cutting.specials import SpecialTokenScanner
from streambpe.patterns import GPT2, SPACE_SPLITTABLE_PATTERNS

#: Word (a pretoken, as text) -> number of occurrences.
WordCounts = dict[str, int]

DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024
#: Counting tasks per worker: enough to balance the load, few enough that the
#: parent merges only a handful of large dictionaries.
TASKS_PER_WORKER = 2
#: Called with the number of input bytes just finished.
ProgressCallback = Callable[[int], None]


@dataclass(frozen=True)
class CountTask:
    """One unit of counting work: consecutive byte ranges of one file, and how to split them."""

    ranges: tuple[ByteRange, ...]
    pattern: str
    special_tokens: tuple[str, ...]
    errors: DecodeErrors = "strict"


@cache
def _cached_pretokenizer(backend: str, pattern: str) -> Pretokenizing:
    return core.active_backend().pretokenizer(pattern)


def _pretokenizer(pattern: str) -> Pretokenizing:
    """The active backend's pretokenizer for ``pattern``, built once per process."""
    return _cached_pretokenizer(core.active_backend().name, pattern)


def _count_text_into(
    counts: Counter[str], text: str, pattern: str, special_tokens: Sequence[str]
) -> None:
    find_words = _pretokenizer(pattern).pieces
    if special_tokens:
        for document, _special in SpecialTokenScanner(special_tokens).split(text):
            counts.update(find_words(document))
    else:
        counts.update(find_words(text))


def count_words_in_text(text: str, pattern: str, special_tokens: Sequence[str]) -> WordCounts:
    """Count the words of ``text``; special tokens separate documents and are not counted."""
    counts: Counter[str] = Counter()
    _count_text_into(counts, text, pattern, special_tokens)
    return counts


def run_count_task(task: CountTask) -> WordCounts:
    """Count the words of a task's ranges, one range in memory at a time.

    This is what a worker runs: summing inside the worker (in C, through
    ``Counter.update``) leaves the parent one dictionary to merge per task
    rather than one per range.
    """
    counts: Counter[str] = Counter()
    for byte_range in task.ranges:
        text = read_text(byte_range, task.errors)
        _count_text_into(counts, text, task.pattern, task.special_tokens)
    return counts


def group_ranges(byte_ranges: Sequence[ByteRange], groups: int) -> list[tuple[ByteRange, ...]]:
    """Split ``byte_ranges`` into at most ``groups`` runs of consecutive ranges of similar size.

    >>> ranges = [ByteRange("f", i, i + 1) for i in range(5)]
    >>> [len(group) for group in group_ranges(ranges, 2)]
    [3, 2]
    """
    count = max(1, min(groups, len(byte_ranges)))
    size, extra = divmod(len(byte_ranges), count)
    grouped: list[tuple[ByteRange, ...]] = []
    start = 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        grouped.append(tuple(byte_ranges[start:end]))
        start = end
    return [group for group in grouped if group]


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


def count_words_in_file(
    path: str | Path,
    *,
    pattern: str = GPT2,
    special_tokens: Sequence[str] = (),
    workers: int = 1,
    executor: Executor | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    errors: DecodeErrors = "strict",
    progress_callback: ProgressCallback | None = None,
) -> WordCounts:
    """Count the words of a whole file, in parallel when ``workers > 1`` or an executor is given.

    The result does not depend on ``workers``, ``executor`` or ``chunk_size``.
    """
    ranges = plan_byte_ranges(
        path,
        chunk_size=chunk_size,
        special_tokens=special_tokens,
        space_cuts=pattern in SPACE_SPLITTABLE_PATTERNS,
    )
    specials = tuple(special_tokens)
    if executor is None and (workers <= 1 or len(ranges) <= 1):
        # In-process: one Counter for the whole file, summed in C.
        counts: Counter[str] = Counter()
        for byte_range in ranges:
            _count_text_into(counts, read_text(byte_range, errors), pattern, specials)
            if progress_callback is not None:
                progress_callback(byte_range.size)
        return counts
    tasks = [
        CountTask(group, pattern, specials, errors)
        for group in group_ranges(ranges, TASKS_PER_WORKER * workers)
    ]
    total: WordCounts = {}

    def consume(results: Iterator[WordCounts]) -> None:
        for task, counts in zip(tasks, results, strict=True):
            add_word_counts(total, counts)
            if progress_callback is not None:
                progress_callback(task.ranges[-1].end - task.ranges[0].start)

    in_flight = 2 * max(workers, 1)
    # closing(): an error or Ctrl-C while consuming cancels the queued tasks at once.
    if executor is not None:
        with closing(ordered_map(executor, run_count_task, tasks, max_in_flight=in_flight)) as run:
            consume(run)
    else:
        with (
            process_pool(min(workers, len(tasks))) as pool,
            closing(ordered_map(pool, run_count_task, tasks, max_in_flight=in_flight)) as run,
        ):
            consume(run)
    return total
