"""``EncodeOptions``: how the file encoders split, run, report and write, checked once.

The public entry points (``encode_file``, ``iter_file_id_batches``,
``encode_files``, and the :class:`~streambpe.tokenizer.Tokenizer` methods,
which are these same functions) keep their keyword arguments and build one
of these at the edge; everything below them takes the object unchanged, so
each option is named, defaulted and checked in one place.

``chunk_size`` means what it means in training (``train_bpe``): the bytes
read and decoded at a time, which never change a result. The defaults
differ because the unit differs: here each chunk is also one task handed to
a worker, whose text, pieces and ids are all alive at once (1 MiB kept a
2-worker run's peak ~20 MiB lower than 2 MiB, at no cost in speed), while a
training task counts many chunks into one table that outlives them.

>>> options = EncodeOptions(workers=2, dtype="uint16")
>>> options.workers, options.chunk_size == DEFAULT_ENCODE_CHUNK_SIZE, options.errors
(2, True, 'strict')
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass

from streambpe._support.progress import ProgressReporter
from streambpe._support.utf8 import DecodeErrors
from streambpe.errors import ParameterError

#: Bytes of input per task: big enough to amortize the hand-off, small enough that a
#: worker's decoded text, pieces and ids stay small (1 MiB rather than 2 MiB took
#: ~20 MiB off the peak of a 2-worker run, at no measurable cost in speed).
DEFAULT_ENCODE_CHUNK_SIZE = 1024 * 1024
#: Input bytes per shard: one task's work, and what a rerun redoes at most per lost task.
DEFAULT_SHARD_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class EncodeOptions:
    """The keywords of the file encoders (see :func:`~streambpe.streaming.file_encoding.encode_file`).

    The fields follow the order of ``encode_file``'s keywords, then
    ``shard_bytes``, so an entry point passes its arguments in that order. None of them changes the ids: they
    decide where the work runs (``workers``, ``executor``), in what pieces
    (``chunk_size``, ``shard_bytes``), how invalid UTF-8 is met (``errors``),
    how ids are packed (``dtype``) and what is shown (``progress``).
    """

    #: Threads or processes to start (``None``: one per core).
    workers: int | None = None
    #: ``"uint16"``, ``"uint32"``, or ``None`` for the smallest that holds every id.
    dtype: str | None = None
    chunk_size: int = DEFAULT_ENCODE_CHUNK_SIZE
    errors: DecodeErrors = "strict"
    progress: bool | ProgressReporter = False
    #: A caller's ``concurrent.futures.Executor`` to run the tasks on instead.
    executor: Executor | None = None
    #: Input bytes per shard, for ``encode_files`` only.
    shard_bytes: int = DEFAULT_SHARD_BYTES

    def __post_init__(self) -> None:
        if self.shard_bytes < 1:
            raise ParameterError(f"shard_bytes must be at least 1, got {self.shard_bytes}")
