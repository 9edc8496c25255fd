"""Encoding at scale: files to ``.bin`` ids, batches of texts, and async streams.

Every function here takes an :class:`~streambpe.encode.encoder.Encoder`; the
public :class:`~streambpe.tokenizer.Tokenizer` offers them as methods.
"""

from __future__ import annotations

from streambpe.streaming.aio import aencode_iterable, aiter_id_batches, flatten
from streambpe.streaming.batch import encode_batch
from streambpe.streaming.file_encoding import EncodeStats, encode_file, iter_file_id_batches
from streambpe.streaming.options import EncodeOptions
from streambpe.streaming.sharded import EncodeFilesStats, encode_files

__all__ = [
    "EncodeFilesStats",
    "EncodeOptions",
    "EncodeStats",
    "aencode_iterable",
    "aiter_id_batches",
    "encode_batch",
    "encode_file",
    "encode_files",
    "flatten",
    "iter_file_id_batches",
]
