"""Encoding at scale: files to ``.bin`` ids, batches of texts, and async streams.

Every function here takes an :class:`~streambpe.encode.encoder.Encoder`; the
public :class:`~streambpe.tokenizer.Tokenizer` offers them as methods.
"""

from __future__ import annotations

from streambpe.streaming.aio import flatten
from streambpe.streaming.batch import encode_batch
from streambpe.streaming.file_encoding import EncodeStats, encode_file
from streambpe.streaming.sharded import EncodeFilesStats, encode_files

__all__ = [
    "EncodeFilesStats",
    "EncodeStats",
    "encode_batch",
    "encode_file",
    "encode_files",
    "flatten",
]
