"""streambpe: byte-level BPE tokenizers, trained and applied in streams.

Train on a file of any size, then encode and decode, in scripts, async
pipelines or the shell::

    >>> import streambpe  # doctest: +SKIP
    >>> vocab, merges = streambpe.train_bpe("corpus.txt", 32_000, ["<|endoftext|>"])  # doctest: +SKIP
    >>> tok = streambpe.Tokenizer(vocab, merges, ["<|endoftext|>"])  # doctest: +SKIP
    >>> tok.decode(tok.encode("Hello world"))  # doctest: +SKIP
    'Hello world'

>>> backend() in ("native", "python")
True
"""

from __future__ import annotations

from streambpe import core, patterns
from streambpe._support.executors import RayExecutor
from streambpe.errors import (
    EmptyInputError,
    FormatError,
    InvalidUTF8Error,
    MissingDependencyError,
    ParameterError,
    StreamBPEError,
    UnknownTokenError,
    VocabSizeWarning,
    WorkerError,
)
from streambpe.streaming.aio import flatten
from streambpe.streaming.file_encoding import EncodeStats
from streambpe.streaming.sharded import EncodeFilesStats
from streambpe.tokenizer import Tokenizer
from streambpe.train.trainer import atrain_bpe, train_bpe, train_bpe_from_iterator

__version__ = "0.2.0"


def backend() -> str:
    """The name of the backend running the hot loops: ``"native"`` (compiled) or ``"python"``."""
    return core.active_backend().name


__all__ = [
    "EmptyInputError",
    "EncodeFilesStats",
    "EncodeStats",
    "FormatError",
    "InvalidUTF8Error",
    "MissingDependencyError",
    "ParameterError",
    "RayExecutor",
    "StreamBPEError",
    "Tokenizer",
    "UnknownTokenError",
    "VocabSizeWarning",
    "WorkerError",
    "__version__",
    "atrain_bpe",
    "backend",
    "flatten",
    "patterns",
    "train_bpe",
    "train_bpe_from_iterator",
]
