"""Word counting: the map step of training.

Counting is a pure function from (path, byte range, pattern, special tokens)
to :data:`WordCounts`, so any ``concurrent.futures.Executor`` can run it and
its results can be summed in any order (DESIGN, "Scale-out").

>>> counts = count_words_in_text("the cat<|endoftext|>the hat", GPT2, ["<|endoftext|>"])
>>> sorted(counts.items())
[(' cat', 1), (' hat', 1), ('the', 2)]
"""

from __future__ import annotations

import mmap
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Literal

from streambpe.cutting.chunks import find_chunk_boundaries
from streambpe.errors import InvalidUTF8Error
from streambpe.patterns import GPT2, SPACE_SPLITTABLE_PATTERNS
from streambpe._support.pool import ordered_map, process_pool
from streambpe.encode.pretokenize import Pretokenizer
from streambpe.cutting.specials import SpecialTokenScanner

#: Pretoken (as text) -> number of occurrences.
WordCounts = dict[str, int]
#: How invalid UTF-8 is handled: raise :class:`InvalidUTF8Error`, or substitute U+FFFD.
DecodeErrors = Literal["strict", "replace"]

DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024
#: Counting tasks per worker: enough to balance the load, few enough that the
#: parent merges only a handful of large dictionaries.
TASKS_PER_WORKER = 2
#: Called with the number of input bytes just finished.
ProgressCallback = Callable[[int], None]


@dataclass(frozen=True)
class ByteRange:
    """One unit of counting work: ``path[start:end]``, to be pretokenized with ``pattern``."""

    path: str
    start: int
    end: int
    pattern: str
    special_tokens: tuple[str, ...]
    errors: DecodeErrors = "strict"


def decode_chunk(data: bytes, path: str, offset: int, errors: DecodeErrors) -> str:
    """Decode one chunk, naming the file and absolute byte offset of any invalid UTF-8.

    >>> decode_chunk(b"ok\\xff", "f.txt", 10, "replace")
    'ok\\ufffd'
    >>> decode_chunk(b"ok\\xff", "f.txt", 10, "strict")
    Traceback (most recent call last):
    ...
    streambpe.errors.InvalidUTF8Error: f.txt: invalid UTF-8 at byte offset 12 (invalid start byte); fix the file, or pass errors='replace' (CLI: --errors replace) to substitute U+FFFD for bad bytes
    """
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        raise InvalidUTF8Error(path, offset + exc.start, exc.reason) from None


def read_range(byte_range: ByteRange) -> bytes:
    """The bytes of ``byte_range``, read through a memory map."""
    with open(byte_range.path, "rb") as file:
        size = byte_range.end - byte_range.start
        if size == 0:
            return b""
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return mapped[byte_range.start : byte_range.end]


@cache
def _pretokenizer(pattern: str) -> Pretokenizer:
    return Pretokenizer(pattern)


def _count_text_into(
    counts: Counter[str], text: str, pattern: str, special_tokens: Sequence[str]
) -> None:
    find_pieces = _pretokenizer(pattern).pieces
    if special_tokens:
        for document, _special in SpecialTokenScanner(special_tokens).split(text):
            counts.update(find_pieces(document))
    else:
        counts.update(find_pieces(text))


def _count_range_into(counts: Counter[str], byte_range: ByteRange) -> None:
    text = decode_chunk(
        read_range(byte_range), byte_range.path, byte_range.start, byte_range.errors
    )
    _count_text_into(counts, text, byte_range.pattern, byte_range.special_tokens)


def count_words_in_text(text: str, pattern: str, special_tokens: Sequence[str]) -> WordCounts:
    """Count the pieces of ``text``; special tokens separate documents and are not counted."""
    counts: Counter[str] = Counter()
    _count_text_into(counts, text, pattern, special_tokens)
    return counts


def count_words_in_ranges(byte_ranges: Sequence[ByteRange]) -> WordCounts:
    """Count the pieces of several byte ranges of a file, one range in memory at a time.

    This is the task a worker runs: summing inside the worker (in C, through
    ``Counter.update``) leaves the parent one dictionary to merge per task
    rather than one per range.
    """
    counts: Counter[str] = Counter()
    for byte_range in byte_ranges:
        _count_range_into(counts, byte_range)
    return counts


def group_ranges(byte_ranges: Sequence[ByteRange], groups: int) -> list[tuple[ByteRange, ...]]:
    """Split ``byte_ranges`` into at most ``groups`` runs of consecutive ranges of similar size.

    >>> ranges = [ByteRange("f", i, i + 1, "p", ()) for i in range(5)]
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


def plan_byte_ranges(
    path: str,
    pattern: str,
    special_tokens: Sequence[str],
    *,
    chunk_size: int,
    errors: DecodeErrors,
) -> list[ByteRange]:
    """Cut the file at ``path`` into byte ranges that can be counted independently."""
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        boundaries = find_chunk_boundaries(
            data,
            chunk_size,
            special_tokens,
            space_cuts=pattern in SPACE_SPLITTABLE_PATTERNS,
        )
    specials = tuple(special_tokens)
    return [
        ByteRange(path, start, end, pattern, specials, errors)
        for start, end in pairwise(boundaries)
    ]


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
    """Count the pieces of a whole file, in parallel when ``workers > 1`` or an executor is given.

    The result does not depend on ``workers``, ``executor`` or ``chunk_size``.
    """
    ranges = plan_byte_ranges(
        str(path), pattern, special_tokens, chunk_size=chunk_size, errors=errors
    )
    if executor is None and (workers <= 1 or len(ranges) <= 1):
        # In-process: one Counter for the whole file, summed in C.
        counts: Counter[str] = Counter()
        for byte_range in ranges:
            _count_range_into(counts, byte_range)
            if progress_callback is not None:
                progress_callback(byte_range.end - byte_range.start)
        return counts
    tasks = group_ranges(ranges, TASKS_PER_WORKER * workers)
    total: WordCounts = {}

    def consume(results: Iterator[WordCounts]) -> None:
        for group, counts in zip(tasks, results, strict=True):
            add_word_counts(total, counts)
            if progress_callback is not None:
                progress_callback(group[-1].end - group[0].start)

    in_flight = 2 * max(workers, 1)
    if executor is not None:
        consume(ordered_map(executor, count_words_in_ranges, tasks, max_in_flight=in_flight))
    else:
        with process_pool(min(workers, len(tasks))) as pool:
            consume(ordered_map(pool, count_words_in_ranges, tasks, max_in_flight=in_flight))
    return total
