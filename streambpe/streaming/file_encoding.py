"""Encode a file of any size into a ``.bin`` of token ids, in constant memory.

The file is memory-mapped and cut where a cut cannot change any id (the same
byte ranges as training, :mod:`~streambpe.cutting.byte_ranges`). Chunks go to
threads or processes, whichever the backend runs best on
(:mod:`~streambpe.streaming.parallel`), or to a caller's executor. Results
come back in input order with a bounded number in flight and are written as
raw little-endian ids with no header (what nanoGPT-style loaders read with
``numpy.memmap``). The output is written to a temporary file and renamed
on success only.

>>> import pathlib, tempfile
>>> from streambpe.encode.encoder import Encoder
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "in.txt").write_text("hi there")
>>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {})
>>> stats = encode_file(encoder, folder / "in.txt", folder / "out.bin", workers=1)
>>> stats.tokens, (folder / "out.bin").stat().st_size
(8, 16)
"""

from __future__ import annotations

import os
import sys
import time
from array import array
from collections.abc import Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

from streambpe._support.atomic import atomic_write
from streambpe._support.progress import ProgressReporter, as_reporter
from streambpe._support.renames import renamed_function, renamed_keyword
from streambpe._support.utf8 import DecodeErrors
from streambpe.cutting.byte_ranges import ByteRange, plan_byte_ranges, read_text
from streambpe.encode.encoder import Encoder
from streambpe.errors import ParameterError
from streambpe.sources.inputs import InputFile, Inputs, resolve_inputs
from streambpe.streaming.options import DEFAULT_ENCODE_CHUNK_SIZE, EncodeOptions
from streambpe.streaming.parallel import encode_map

#: Output dtypes: name -> (array typecode, largest id it holds).
DTYPES: dict[str, tuple[str, int]] = {"uint16": ("H", 2**16 - 1), "uint32": ("I", 2**32 - 1)}


@dataclass(frozen=True)
class EncodeStats:
    """What :func:`encode_file` did."""

    bytes: int
    tokens: int
    seconds: float
    dtype: str

    @property
    def tokens_per_second(self) -> float:
        """Tokens written per second of wall time."""
        return self.tokens / self.seconds if self.seconds > 0 else float("inf")

    @property
    def bytes_per_second(self) -> float:
        """Input bytes consumed per second of wall time."""
        return self.bytes / self.seconds if self.seconds > 0 else float("inf")


def choose_dtype(n_vocab: int, requested: str | None = None) -> str:
    """``uint16`` when every id fits, else ``uint32``; a requested dtype is checked first.

    >>> choose_dtype(50257), choose_dtype(100277)
    ('uint16', 'uint32')
    >>> choose_dtype(100277, "uint16")
    Traceback (most recent call last):
    ...
    streambpe.errors.ParameterError: ids up to 100276 do not fit dtype uint16 (max 65535); use dtype='uint32'
    """
    if requested is None:
        return "uint16" if n_vocab - 1 <= DTYPES["uint16"][1] else "uint32"
    if requested not in DTYPES:
        raise ParameterError(f"unknown dtype {requested!r}; choose one of {sorted(DTYPES)}")
    largest = DTYPES[requested][1]
    if n_vocab - 1 > largest:
        raise ParameterError(
            f"ids up to {n_vocab - 1} do not fit dtype {requested} (max {largest})",
            fix=("dtype", "uint32"),
        )
    return requested


def ids_to_bytes(ids: list[int], dtype: str) -> bytes:
    """Pack ids as little-endian ``dtype``.

    >>> ids_to_bytes([1, 258], "uint16")
    b'\\x01\\x00\\x02\\x01'
    """
    packed = array(DTYPES[dtype][0], ids)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def pack_uint32_ids(ids: array[int], dtype: str) -> bytes:
    """Pack an ``array('I')`` of ids (what ``Encoder.encode_to_array`` gives) as little-endian ``dtype``.

    No Python int is made per id: for ``uint16`` the two low bytes of each
    little-endian uint32 are taken with two strided slices. Every id must fit
    ``dtype`` (:func:`choose_dtype` checks the vocabulary before any encoding).

    >>> pack_uint32_ids(array("I", [1, 258]), "uint16")
    b'\\x01\\x00\\x02\\x01'
    """
    if sys.byteorder == "big":
        ids = array("I", ids)
        ids.byteswap()
    raw = ids.tobytes()
    if dtype == "uint32":
        return raw
    narrow = bytearray(len(raw) // 2)
    narrow[0::2] = raw[0::4]
    narrow[1::2] = raw[1::4]
    return bytes(narrow)


@dataclass(frozen=True)
class RangeTask:
    """Encode one byte range of an input into ids packed as ``dtype``."""

    byte_range: ByteRange
    dtype: str
    errors: DecodeErrors


def encode_range(encoder: Encoder, task: RangeTask) -> tuple[int, bytes]:
    """The number of ids of one byte range, and the ids packed as ``task.dtype``.

    The ids go straight into a buffer (``encode_to_array``): a list of Python
    ints, built and packed while holding the GIL, took a third of the time
    and kept threads from running in parallel.
    """
    ids = encoder.encode_to_array(read_text(task.byte_range, task.errors))
    return len(ids), pack_uint32_ids(ids, task.dtype)


def iter_encoded_chunks(
    encoder: Encoder,
    files: list[InputFile],
    options: EncodeOptions,
    *,
    staging_dir: str | os.PathLike[str] | None = None,
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(n_ids, packed_ids)`` for each chunk of resolved input files, in order.

    Each file is its own stream, encoded after the one before; ``packed_ids``
    is little-endian ``options.dtype`` (the smallest that fits if ``None``).
    Nothing is written. With an ``options.executor`` other than a thread
    pool, its workers must be able to read the input and ``staging_dir``
    (default: a temporary folder), where the encoder is staged for them
    (:mod:`~streambpe.streaming.worker_encoder`).
    """
    dtype = choose_dtype(encoder.n_vocab, options.dtype)
    tasks = [
        RangeTask(byte_range, dtype, options.errors)
        for source in files
        for byte_range in plan_byte_ranges(
            source,
            chunk_size=options.chunk_size,
            special_tokens=encoder.cut_tokens,
            space_cuts=encoder.space_cuts,
        )
    ]
    reporter = as_reporter(options.progress)
    with (
        reporter.stage("encoding", total=sum(f.size for f in files), unit="B") as advance,
        encode_map(
            encoder,
            encode_range,
            tasks,
            workers=options.workers,
            executor=options.executor,
            staging_dir=staging_dir,
        ) as results,
    ):
        for task, result in zip(tasks, results, strict=True):
            advance(task.byte_range.size)
            yield result


@renamed_keyword("input_path", "inputs")
def iter_file_id_batches(
    encoder: Encoder,
    inputs: Inputs,
    *,
    workers: int | None = None,
    chunk_size: int = DEFAULT_ENCODE_CHUNK_SIZE,
    errors: DecodeErrors = "strict",
    progress: bool | ProgressReporter = False,
    executor: Executor | None = None,
) -> Iterator[list[int]]:
    """Yield the ids of the inputs a chunk at a time (*batches*: lists of ints), in order.

    Memory stays constant however large the inputs; the arguments are those
    of :func:`encode_file`. Nothing is written anywhere.

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "in.txt"
    >>> _ = path.write_text("hi there")
    >>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {})
    >>> list(iter_file_id_batches(encoder, path, workers=1))
    [[104, 105, 32, 116, 104, 101, 114, 101]]
    """
    # uint32 holds every id, so the batches are the ids as they came.
    options = EncodeOptions(workers, "uint32", chunk_size, errors, progress, executor)
    for _count, packed in iter_encoded_chunks(encoder, resolve_inputs(inputs), options):
        values = array("I")
        values.frombytes(packed)
        if sys.byteorder == "big":
            values.byteswap()
        yield values.tolist()


#: The old name of :func:`iter_file_id_batches` (it yields batches, not single ids).
iter_file_ids = renamed_function(iter_file_id_batches, "iter_file_ids")


@renamed_keyword("input_path", "inputs")
def encode_file(
    encoder: Encoder,
    inputs: Inputs,
    output_path: str | os.PathLike[str],
    *,
    workers: int | None = None,
    dtype: str | None = None,
    chunk_size: int = DEFAULT_ENCODE_CHUNK_SIZE,
    errors: DecodeErrors = "strict",
    progress: bool | ProgressReporter = False,
    executor: Executor | None = None,
) -> EncodeStats:
    """Encode ``inputs`` into ``output_path`` as raw little-endian ids.

    Args:
        inputs: a path, a glob, an fsspec URL, or a list of them; several
            files are encoded one after another, each its own stream (for one
            ``.bin`` per part of a large corpus, see ``encode_files``).
            (``input_path=`` is its old, deprecated keyword.)
        workers: threads or processes to encode with (threads when the backend
            encodes without the GIL); ``None`` means one per core.
        dtype: ``"uint16"`` or ``"uint32"``; by default the smallest that holds every id.
            An id that does not fit raises ``ValueError`` before anything is written.
        chunk_size: input bytes per task, read and decoded at once (the ids never
            depend on it). Training's ``chunk_size`` is the same quantity with a
            larger default; :mod:`~streambpe.streaming.options` says why.
        errors: ``"strict"`` raises on invalid UTF-8 naming the byte offset; ``"replace"``
            substitutes U+FFFD.
        progress: ``True`` for a bar on stderr, or a reporter.
        executor: a ``concurrent.futures.Executor`` to encode on instead (a Dask
            ``client.get_executor()``, say); the ids never depend on it. Its
            workers read the input themselves, and, unless it is a thread pool,
            the encoder from a file staged beside ``output_path``.

    A failure or Ctrl-C leaves no file under ``output_path`` and no worker processes.
    """
    started = time.perf_counter()
    options = EncodeOptions(workers, dtype, chunk_size, errors, progress, executor)
    files = resolve_inputs(inputs)
    chosen = choose_dtype(encoder.n_vocab, options.dtype)
    output = Path(output_path)
    if not output.parent.is_dir():
        raise FileNotFoundError(f"output directory does not exist: {output.parent}")
    tokens = 0
    with atomic_write(output) as sink:
        chunks = iter_encoded_chunks(encoder, files, options, staging_dir=output.parent)
        for count, packed in chunks:
            sink.write(packed)
            tokens += count
    return EncodeStats(
        bytes=sum(f.size for f in files),
        tokens=tokens,
        seconds=time.perf_counter() - started,
        dtype=chosen,
    )
