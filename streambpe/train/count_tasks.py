"""Counting work, planned from sizes alone: which parts of which inputs each task counts.

A :class:`CountTask` is a plain, picklable list of parts, each yielding texts
that are counted independently (no piece spans two of them):

* :class:`TextSpan`: nominal offsets of a text file; the worker moves each to
  the next safe cut and reads the bytes between, ``chunk_size`` at a time;
* :class:`JsonlSpan`: nominal offsets of a jsonl file, moved to line starts;
  each record's text field is a document;
* :class:`ParquetRowGroups`: row groups of a parquet file, a document per row;
* :class:`TextBatch`: strings from an iterator, each one a document.

Neighbouring spans share their nominal offset, and a cut depends only on the
file's bytes, so the spans of a file tile it exactly without the planner
reading it (``docs/design.md``, "Scale-out").

>>> files = [InputFile("/a.txt", 10, ""), InputFile("/b.txt", 6, "")]
>>> tasks = plan_count_tasks(files, tasks=2, settings=CountSettings("x", ()))
>>> [[(p.source.location, p.start, p.end) for p in t.parts] for t in tasks]
[[('/a.txt', 0, 8)], [('/a.txt', 8, 10), ('/b.txt', 0, 6)]]
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from streambpe._support.utf8 import DecodeErrors
from streambpe.cutting.byte_ranges import Cuts, Span, read_text
from streambpe.errors import ParameterError
from streambpe.patterns import SPACE_SPLITTABLE_PATTERNS
from streambpe.sources.inputs import InputFile
from streambpe.sources.records import jsonl_documents, parquet_documents, parquet_row_groups

DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024

#: How records are read: ``auto`` picks by suffix (``.jsonl``/``.ndjson``, ``.parquet``, else text).
InputFormat = Literal["auto", "text", "jsonl", "parquet"]
INPUT_FORMATS: tuple[str, ...] = ("auto", "text", "jsonl", "parquet")
_SUFFIX_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


@dataclass(frozen=True)
class CountSettings:
    """Everything counting depends on besides the input."""

    pattern: str
    special_tokens: tuple[str, ...]
    errors: DecodeErrors = "strict"
    #: Bytes of text decoded and counted at a time inside a task (results never depend on it).
    chunk_size: int = DEFAULT_CHUNK_SIZE

    @property
    def space_cuts(self) -> bool:
        """True when the pattern allows cuts inside a document (``docs/design.md``, "Safe cuts")."""
        return self.pattern in SPACE_SPLITTABLE_PATTERNS

    @property
    def cuts(self) -> Cuts:
        """Where a text file may be cut for counting: at special tokens, and at spaces if the pattern allows."""
        return Cuts(self.special_tokens, self.space_cuts, self.chunk_size)


@dataclass(frozen=True)
class TextSpan(Span):
    """Text file bytes from the first safe cut at or after ``start`` to the first at or after ``end``."""

    def texts(self, settings: CountSettings) -> Iterator[str]:
        for byte_range in self.byte_ranges(settings.cuts):
            yield read_text(byte_range, settings.errors)


@dataclass(frozen=True)
class JsonlSpan(Span):
    """The records of a jsonl file whose lines start between two nominal offsets."""

    text_field: str

    def texts(self, settings: CountSettings) -> Iterator[str]:
        return jsonl_documents(
            self.source, self.start, self.end, self.text_field, settings.errors, settings.chunk_size
        )


@dataclass(frozen=True)
class ParquetRowGroups:
    """Row groups of a parquet file; ``size`` is their share of the file's bytes, for planning."""

    source: InputFile
    row_groups: tuple[int, ...]
    text_field: str
    size: int

    def texts(self, settings: CountSettings) -> Iterator[str]:
        return parquet_documents(self.source, self.row_groups, self.text_field)


@dataclass(frozen=True)
class TextBatch:
    """Strings from an iterator, each one a document."""

    documents: tuple[str, ...]

    @property
    def size(self) -> int:
        return sum(len(document) for document in self.documents)

    def texts(self, settings: CountSettings) -> Iterator[str]:
        return iter(self.documents)


@dataclass(frozen=True)
class CountTask:
    """One unit of counting work: parts to count with the same settings."""

    parts: tuple[TextSpan | JsonlSpan | ParquetRowGroups | TextBatch, ...]
    settings: CountSettings

    @property
    def size(self) -> int:
        """The input bytes (characters, for text batches) this task covers."""
        return sum(part.size for part in self.parts)


def input_format_of(source: InputFile, input_format: str) -> str:
    """``input_format``, or for ``"auto"`` the format its suffix says.

    >>> input_format_of(InputFile("s3://b/shard-0.jsonl", 1, ""), "auto")
    'jsonl'
    """
    if input_format not in INPUT_FORMATS:
        raise ParameterError(
            f"unknown input_format {input_format!r}; choose one of {', '.join(INPUT_FORMATS)}"
        )
    if input_format != "auto":
        return input_format
    suffix = os.path.splitext(source.location)[1].lower()
    return _SUFFIX_FORMATS.get(suffix, "text")


def plan_count_tasks(
    files: Iterable[InputFile],
    *,
    tasks: int,
    settings: CountSettings,
    input_format: str = "auto",
    text_field: str = "text",
) -> list[CountTask]:
    """Cut ``files``, taken as one run of bytes, into about ``tasks`` tasks of similar size.

    Only sizes are used (and a parquet file's footer, for its row groups).
    A task may hold the end of one file and the start of the next.
    """
    files = list(files)
    total = sum(file.size for file in files)
    target = max(1, -(-total // max(1, tasks)))
    parts: dict[int, list[TextSpan | JsonlSpan | ParquetRowGroups | TextBatch]] = {}
    offset = 0
    for file in files:
        kind = input_format_of(file, input_format)
        if kind == "parquet" and file.size > 0:
            groups = parquet_row_groups(file, text_field)
            by_task: dict[int, list[int]] = {}
            for group in range(groups):
                by_task.setdefault((offset + file.size * group // groups) // target, []).append(
                    group
                )
            for index, members in by_task.items():
                share = file.size * len(members) // groups
                parts.setdefault(index, []).append(
                    ParquetRowGroups(file, tuple(members), text_field, share)
                )
        else:
            local = 0
            while local < file.size:
                index = (offset + local) // target
                following = min(file.size, (index + 1) * target - offset)
                span: TextSpan | JsonlSpan = (
                    JsonlSpan(file, local, following, text_field)
                    if kind == "jsonl"
                    else TextSpan(file, local, following)
                )
                parts.setdefault(index, []).append(span)
                local = following
        offset += file.size
    return [CountTask(tuple(parts[index]), settings) for index in sorted(parts)]


def batch_count_tasks(
    texts: Iterable[str], *, settings: CountSettings, batch_chars: int
) -> Iterator[CountTask]:
    """Tasks of about ``batch_chars`` characters of documents each, as ``texts`` is consumed.

    >>> [len(task.parts[0].documents) for task in batch_count_tasks(
    ...     ["ab", "cd", "e"], settings=CountSettings("x", ()), batch_chars=3)]
    [2, 1]
    """
    batch: list[str] = []
    characters = 0
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts must be strings; item {index} is {type(text).__name__}")
        batch.append(text)
        characters += len(text)
        if characters >= batch_chars:
            yield CountTask((TextBatch(tuple(batch)),), settings)
            batch, characters = [], 0
    if batch:
        yield CountTask((TextBatch(tuple(batch)),), settings)
