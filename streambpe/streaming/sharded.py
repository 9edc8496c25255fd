"""Encode many inputs into a folder of ``.bin`` shards, committed by an index written last.

Each input (a path, a list, a glob, fsspec URLs: :mod:`streambpe.sources`) is
split by size alone into spans of about ``shard_bytes``; each span is one task,
which finds its own safe cuts near its ends (neighbours agree, because a cut
depends only on the bytes) and writes one shard: raw little-endian ids, the
same bytes :func:`~streambpe.streaming.file_encoding.encode_file` writes for
that stretch. Concatenating the shards in index order gives, byte for byte,
``encode_file`` of each input in turn.

The output folder, once done::

    shard-000000.bin  shard-000001.bin  ...   the ids
    index.json                                written last: the commit marker

``index.json`` holds the dtype, the tokenizer's fingerprint, the inputs (with
their sizes and version fingerprints) and ``shards``, in input order, each with
its ``path`` (relative to the folder), ``input``, byte range
(``start``, ``end``) and ``tokens``. A span with no cut inside it yields no
shard.

Nothing is committed piecemeal under a final name: each shard is written to a
temporary file and renamed, and only then does its task record it in
``.streambpe-pending/`` (its token count and what it was made from). A run
that stops for any reason leaves no ``index.json``; run it again and it skips
every shard whose record matches and whose size is its token count times the
dtype's size, and encodes the rest (``docs/design.md``, "Sharded outputs").

>>> import json, pathlib, tempfile
>>> from streambpe.encode.encoder import Encoder
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "a.txt").write_text("hello world")
>>> _ = (folder / "b.txt").write_text("and more")
>>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {})
>>> stats = encode_files(encoder, [folder / "a.txt", folder / "b.txt"], folder / "out", workers=1)
>>> stats.tokens, stats.shards
(19, 2)
>>> index = json.loads((folder / "out" / "index.json").read_text())
>>> [(shard["path"], shard["tokens"]) for shard in index["shards"]]
[('shard-000000.bin', 11), ('shard-000001.bin', 8)]
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from array import array
from concurrent.futures import Executor
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import xxhash

from streambpe._support.atomic import atomic_write
from streambpe._support.progress import ProgressReporter, as_reporter
from streambpe._support.renames import renamed_keyword
from streambpe._support.utf8 import DecodeErrors
from streambpe.cutting.byte_ranges import Cuts, Span
from streambpe.encode.encoder import Encoder
from streambpe.sources.inputs import InputFile, Inputs, resolve_inputs
from streambpe.streaming.file_encoding import (
    DTYPES,
    EncodeStats,
    RangeTask,
    choose_dtype,
    encode_range,
)
from streambpe.streaming.options import (
    DEFAULT_ENCODE_CHUNK_SIZE,
    DEFAULT_SHARD_BYTES,
    EncodeOptions,
)
from streambpe.streaming.parallel import encode_map
from streambpe.streaming.worker_encoder import encoder_fingerprint

#: The commit marker, written last.
INDEX_NAME = "index.json"
#: Where finished shards are recorded until the index is written (removed then).
PENDING_NAME = ".streambpe-pending"
#: Tells a shard index apart from any other JSON; bumped if its meaning changes.
INDEX_FORMAT = "streambpe-shards/1"


@dataclass(frozen=True)
class EncodeFilesStats(EncodeStats):
    """What :func:`encode_files` did: :class:`EncodeStats` plus the shards."""

    shards: int
    skipped: int
    index_path: Path


@dataclass(frozen=True)
class _ShardTask:
    """One shard: a span of one input, found by size alone, and where its output goes."""

    number: int
    source: InputFile
    nominal_start: int
    nominal_end: int
    folder: str
    dtype: str
    errors: DecodeErrors
    chunk_size: int
    key: str

    @property
    def name(self) -> str:
        """The shard's file name, relative to the output folder."""
        return f"shard-{self.number:06d}.bin"

    @property
    def nominal_size(self) -> int:
        return self.nominal_end - self.nominal_start


@dataclass(frozen=True)
class _ShardRecord:
    """A finished shard, as its task records it and the index lists it."""

    path: str
    input: str
    start: int
    end: int
    tokens: int


def _pending(folder: str | Path) -> Path:
    return Path(folder) / PENDING_NAME


def _record_path(folder: str | Path, task: _ShardTask) -> Path:
    return _pending(folder) / f"{task.name}.json"


def _write_record(task: _ShardTask, record: _ShardRecord) -> None:
    with atomic_write(_record_path(task.folder, task)) as sink:
        sink.write(json.dumps({"key": task.key, **asdict(record)}).encode("utf-8"))


def _encode_shard(encoder: Encoder, task: _ShardTask) -> _ShardRecord:
    """Write one shard (in a worker): find its cuts, encode range by range, rename, record it."""
    span = Span(task.source, task.nominal_start, task.nominal_end)
    ranges = span.byte_ranges(Cuts(encoder.cut_tokens, encoder.space_cuts, task.chunk_size))
    tokens = 0
    if ranges:
        with atomic_write(Path(task.folder) / task.name) as sink:
            for byte_range in ranges:
                count, packed = encode_range(
                    encoder, RangeTask(byte_range, task.dtype, task.errors)
                )
                sink.write(packed)
                tokens += count
        start, end = ranges[0].start, ranges[-1].end
    else:
        # No cut inside the span: the neighbours' ranges cover its bytes.
        start = end = task.nominal_start
    record = _ShardRecord(task.name, task.source.location, start, end, tokens)
    _write_record(task, record)
    return record


def _plan(
    files: list[InputFile], folder: Path, options: EncodeOptions, *, dtype: str, tokenizer: str
) -> list[_ShardTask]:
    """Spans of about ``options.shard_bytes`` of each input, from sizes alone, numbered across inputs."""
    shard_bytes, errors = options.shard_bytes, options.errors
    tasks: list[_ShardTask] = []
    for source in files:
        for part in range(math.ceil(source.size / shard_bytes)):
            start, end = part * shard_bytes, min(source.size, (part + 1) * shard_bytes)
            # Everything that decides this shard's bytes: a record with another key is stale.
            key = xxhash.xxh3_64_hexdigest(
                json.dumps([tokenizer, dtype, errors, asdict(source), start, end]).encode()
            )
            tasks.append(
                _ShardTask(
                    len(tasks),
                    source,
                    start,
                    end,
                    str(folder),
                    dtype,
                    errors,
                    options.chunk_size,
                    key,
                )
            )
    return tasks


def _read_json(path: Path) -> Any:
    """The JSON in ``path``, or None if it is missing or not whole."""
    try:
        return json.loads(path.read_bytes())
    except (FileNotFoundError, ValueError):
        return None


def _verified(task: _ShardTask, found: Any) -> _ShardRecord | None:
    """The record ``found`` for ``task`` if it is this task's and its shard file is complete."""
    if not isinstance(found, dict) or found.get("key") != task.key:
        return None
    try:
        record = _ShardRecord(**{k: v for k, v in found.items() if k != "key"})
    except TypeError:
        return None
    if record.tokens == 0:
        return record  # a span with no cut inside: no file was written
    itemsize = array(DTYPES[task.dtype][0]).itemsize
    with suppress(FileNotFoundError):
        if (Path(task.folder) / task.name).stat().st_size == record.tokens * itemsize:
            return record
    return None


def _index_header(
    encoder: Encoder, tokenizer: str, files: list[InputFile], dtype: str, options: EncodeOptions
) -> dict[str, Any]:
    return {
        "format": INDEX_FORMAT,
        "dtype": dtype,
        "tokenizer": {
            "fingerprint": tokenizer,
            "n_vocab": encoder.n_vocab,
            "pattern": encoder.pattern,
            "special_tokens": encoder.special_tokens,
        },
        "errors": options.errors,
        "shard_bytes": options.shard_bytes,
        "inputs": [asdict(source) for source in files],
    }


def _resume(
    index_path: Path, header: dict[str, Any], tasks: list[_ShardTask]
) -> dict[int, _ShardRecord]:
    """Shards already done, by task number: from a matching index, else from the pending records.

    An index that does not describe every planned shard as complete is
    removed before any shard is written, so it never lists a shard being
    rewritten; the shards it did vouch for are recorded as pending first.
    """
    done: dict[int, _ShardRecord] = {}
    index = _read_json(index_path)
    if isinstance(index, dict) and {k: index.get(k) for k in header} == header:
        by_path = {entry.get("path"): entry for entry in index.get("shards", [])}
        for task in tasks:
            entry = by_path.get(task.name)
            found = {"key": task.key, **entry} if isinstance(entry, dict) else None
            record = _verified(task, found)
            if record is not None:
                done[task.number] = record
    for task in tasks:
        if task.number not in done:
            record = _verified(task, _read_json(_record_path(task.folder, task)))
            if record is not None:
                done[task.number] = record
    if len(done) < len(tasks) and index_path.exists():
        for task in tasks:
            if task.number in done:
                _write_record(task, done[task.number])
        index_path.unlink()
    return done


def _output_folder(out_dir: str | os.PathLike[str]) -> Path:
    """``out_dir``, absolute, created if only its last part is missing (never ``mkdir -p``)."""
    folder = Path(out_dir).absolute()
    if not folder.parent.is_dir():
        raise FileNotFoundError(f"output directory's parent does not exist: {folder.parent}")
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"output directory is a file: {folder}")
    folder.mkdir(exist_ok=True)
    (folder / PENDING_NAME).mkdir(exist_ok=True)
    return folder


def _finish(folder: Path) -> None:
    """After the commit: drop the pending records and the temporaries a killed task left behind.

    Every task has finished by now, so no temporary file here is still being written.
    """
    shutil.rmtree(_pending(folder), ignore_errors=True)
    for leftover in folder.glob(".shard-*.bin.*.tmp"):
        leftover.unlink(missing_ok=True)


@renamed_keyword("input_path", "inputs")
def encode_files(
    encoder: Encoder,
    inputs: Inputs,
    out_dir: str | os.PathLike[str],
    *,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    executor: Executor | None = None,
    workers: int | None = None,
    dtype: str | None = None,
    chunk_size: int = DEFAULT_ENCODE_CHUNK_SIZE,
    errors: DecodeErrors = "strict",
    progress: bool | ProgressReporter = False,
) -> EncodeFilesStats:
    """Encode ``inputs`` into shards under ``out_dir``, then write ``out_dir/index.json``.

    Args:
        inputs: a path, a glob, an fsspec URL, or a list of them; each file is
            its own stream (no piece spans two files).
        out_dir: the output folder; created if its parent exists. Workers write
            their shards there, so with a cluster it must be a shared folder.
        shard_bytes: input bytes per shard (the concatenated ids never depend on it).
        executor: a ``concurrent.futures.Executor`` to encode on (a Dask
            ``client.get_executor()``, say); by default threads or processes of
            this machine. The encoder reaches each worker once.
        workers: threads or processes when no executor is given (``None``: one per core).
        dtype, chunk_size, errors, progress: as for
            :func:`~streambpe.streaming.file_encoding.encode_file`.

    Running it again after a failure or a kill resumes: complete shards are
    kept, the others are encoded, and the index is written at the end.
    """
    started = time.perf_counter()
    options = EncodeOptions(workers, dtype, chunk_size, errors, progress, executor, shard_bytes)
    files = resolve_inputs(inputs)
    chosen = choose_dtype(encoder.n_vocab, options.dtype)
    folder = _output_folder(out_dir)
    tokenizer = encoder_fingerprint(encoder)
    tasks = _plan(files, folder, options, dtype=chosen, tokenizer=tokenizer)
    header = _index_header(encoder, tokenizer, files, chosen, options)
    index_path = folder / INDEX_NAME
    done = _resume(index_path, header, tasks)
    todo = [task for task in tasks if task.number not in done]
    reporter = as_reporter(options.progress)
    with reporter.stage("encoding", total=sum(f.size for f in files), unit="B") as advance:
        advance(sum(task.nominal_size for task in tasks if task.number in done))
        with encode_map(
            encoder,
            _encode_shard,
            todo,
            workers=options.workers,
            executor=options.executor,
            staging_dir=_pending(folder),
        ) as results:
            for task, record in zip(todo, results, strict=True):
                done[task.number] = record
                advance(task.nominal_size)
    records = [
        done[task.number] for task in tasks if done[task.number].end > done[task.number].start
    ]
    total = sum(record.tokens for record in records)
    index = {**header, "tokens": total, "shards": [asdict(record) for record in records]}
    with atomic_write(index_path) as sink:
        sink.write(json.dumps(index, indent=1).encode("utf-8"))
    _finish(folder)
    return EncodeFilesStats(
        bytes=sum(f.size for f in files),
        tokens=total,
        seconds=time.perf_counter() - started,
        dtype=chosen,
        shards=len(records),
        skipped=len(tasks) - len(todo),
        index_path=index_path,
    )
