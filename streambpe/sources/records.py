"""Documents from record files: one per line of a jsonl file, one per row of a parquet file.

Corpora are often shipped as jsonl or parquet shards with a text field. Each
record's text is one document. A jsonl file splits anywhere a line starts, so
a task given nominal offsets moves each to the next line start, as text cuts
move to the next safe cut; a parquet file splits into row groups, read through
pyarrow (``pip install 'streambpe[parquet]'``).

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "docs.jsonl"
>>> _ = path.write_text('{"text": "first doc"}\\n{"text": "second", "id": 2}\\n')
>>> from streambpe.sources.inputs import resolve_inputs
>>> [source] = resolve_inputs(path)
>>> list(jsonl_documents(source, 0, source.size, "text"))
['first doc', 'second']
>>> list(jsonl_documents(source, 5, source.size, "text"))
['second']
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from streambpe._support.utf8 import DecodeErrors, decode_utf8
from streambpe.errors import FormatError, MissingDependencyError
from streambpe.sources.inputs import InputFile
from streambpe.sources.reading import open_buffer, read_range
from streambpe.sources.remote import filesystem, is_url

#: Bytes read at a time when counting lines for an error message.
_LINE_COUNT_BLOCK = 8 * 1024 * 1024
#: Bytes of jsonl lines decoded at a time (more for a longer line).
JSONL_BLOCK = 4 * 1024 * 1024


def line_start_at_or_after(source: InputFile, offset: int) -> int:
    """The first line start at or after ``offset`` (``source.size`` if none is left).

    Reads only up to the next newline.
    """
    if offset <= 0:
        return 0
    if offset >= source.size:
        return source.size
    with open_buffer(source) as data:
        newline = data.find(b"\n", offset - 1, source.size)
    return source.size if newline < 0 else newline + 1


def _line_number(source: InputFile, offset: int) -> int:
    """The 1-based number of the line starting at ``offset`` (reads the file up to there)."""
    newlines = 0
    for start in range(0, offset, _LINE_COUNT_BLOCK):
        newlines += read_range(source, start, min(offset, start + _LINE_COUNT_BLOCK)).count(b"\n")
    return newlines + 1


def _record_text(record: Any, text_field: str) -> str:
    """The text of one record, or a ValueError saying what is wrong with it."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object with a {text_field!r} field, got {record!r:.60}")
    if text_field not in record:
        fields = ", ".join(repr(name) for name in list(record)[:10])
        raise ValueError(
            f"no field {text_field!r} in this record (its fields: {fields}); "
            "pass text_field= (CLI: --text-field) to name the field holding the text"
        )
    text = record[text_field]
    if not isinstance(text, str):
        raise ValueError(f"field {text_field!r} is not a string: {text!r:.60}")
    return text


def jsonl_documents(
    source: InputFile,
    start: int,
    end: int,
    text_field: str,
    errors: DecodeErrors = "strict",
    block_size: int = JSONL_BLOCK,
) -> Iterator[str]:
    """The text field of every jsonl record whose line starts in ``[start, end)``, once both move to a line start.

    Lines are read about ``block_size`` bytes at a time (a longer line whole),
    so a span of gigabytes never sits in memory at once. Blank lines are
    skipped. A line that is not a JSON object with a string ``text_field``
    raises :class:`~streambpe.errors.FormatError` naming the file and the line.
    """
    block_start = line_start_at_or_after(source, start)
    stop = line_start_at_or_after(source, end)
    while block_start < stop:
        block_end = min(stop, line_start_at_or_after(source, block_start + block_size))
        yield from _jsonl_block(source, block_start, block_end, text_field, errors)
        block_start = block_end


def _jsonl_block(
    source: InputFile, first: int, stop: int, text_field: str, errors: DecodeErrors
) -> Iterator[str]:
    """The records of the whole lines in ``[first, stop)``."""
    data = read_range(source, first, stop)
    position = 0
    while position < len(data):
        newline = data.find(b"\n", position)
        line_end = len(data) if newline < 0 else newline
        line = data[position:line_end]
        if line.strip():
            text = decode_utf8(line, source.location, offset=first + position, errors=errors)
            try:
                yield _record_text(json.loads(text), text_field)
            except ValueError as exc:
                line_number = _line_number(source, first + position)
                raise FormatError(source.location, line_number, str(exc)) from None
        position = line_end + 1


@contextmanager
def _open_parquet(source: InputFile) -> Iterator[Any]:
    """The parquet file at ``source``, closed (with its remote handle) when the block ends."""
    try:
        import pyarrow.parquet
    except ImportError:
        raise MissingDependencyError(
            f"reading the parquet file {source.location!r}", "pyarrow", "parquet"
        ) from None
    with ExitStack() as stack:
        if is_url(source.location):
            fs, path = filesystem(source.location)
            handle: Any = stack.enter_context(fs.open(path, "rb"))
        else:
            handle = source.location
        yield stack.enter_context(pyarrow.parquet.ParquetFile(handle))


def parquet_row_groups(source: InputFile, text_field: str) -> int:
    """How many row groups the parquet file has (reads its footer only); checks the text column."""
    with _open_parquet(source) as parquet:
        names = parquet.schema_arrow.names
        if text_field not in names:
            raise FormatError(
                source.location,
                None,
                f"no column {text_field!r} (columns: {', '.join(map(repr, names[:10]))}); "
                "pass text_field= (CLI: --text-field) to name the column holding the text",
            )
        return int(parquet.metadata.num_row_groups)


def parquet_documents(
    source: InputFile, row_groups: tuple[int, ...], text_field: str
) -> Iterator[str]:
    """The text column of the given row groups, one document per row, one row group in memory."""
    with _open_parquet(source) as parquet:
        row_number = 0
        for group in range(max(row_groups, default=-1) + 1):
            rows = parquet.metadata.row_group(group).num_rows
            if group in row_groups:
                column = parquet.read_row_group(group, columns=[text_field]).column(0)
                for index, text in enumerate(column.to_pylist()):
                    if not isinstance(text, str):
                        raise FormatError(
                            source.location,
                            None,
                            f"row {row_number + index}: column {text_field!r} is not a string: "
                            f"{text!r:.60}",
                        )
                    yield text
            row_number += rows
