"""streambpe: byte-level BPE tokenizers, trained and applied in streams.

Train on a file of any size, then encode and decode, in scripts, async
pipelines or the shell::

    >>> import streambpe  # doctest: +SKIP
    >>> vocab, merges = streambpe.train_bpe("corpus.txt", 32_000, ["<|endoftext|>"])  # doctest: +SKIP
    >>> tok = streambpe.Tokenizer(vocab, merges, ["<|endoftext|>"])  # doctest: +SKIP
    >>> tok.decode(tok.encode("Hello world"))  # doctest: +SKIP
    'Hello world'
"""

from __future__ import annotations

from streambpe import patterns
from streambpe.streaming.aio import aencode_file, aencode_iterable, atrain_bpe, flatten
from streambpe.errors import FormatError, InvalidUTF8Error, StreamBPEError, WorkerError
from streambpe.streaming.file_encoding import EncodeStats, encode_file, iter_file_ids
from streambpe.tokenizer import Tokenizer
from streambpe.train.trainer import VocabSizeWarning, train_bpe

__version__ = "0.1.0"

__all__ = [
    "EncodeStats",
    "FormatError",
    "InvalidUTF8Error",
    "StreamBPEError",
    "Tokenizer",
    "VocabSizeWarning",
    "WorkerError",
    "__version__",
    "aencode_file",
    "aencode_iterable",
    "atrain_bpe",
    "encode_file",
    "flatten",
    "iter_file_ids",
    "patterns",
    "train_bpe",
]
