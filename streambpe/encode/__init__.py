"""Encoding: :class:`~streambpe.encode.encoder.Encoder` turns text into ids and back.

It applies the special-token policy and hands ordinary text to the active
backend's kernels (:mod:`streambpe.core`).
"""

from __future__ import annotations

from streambpe.encode.decode_stream import DecodeStream
from streambpe.encode.encoder import Encoder

__all__ = [
    "DecodeStream",
    "Encoder",
]
