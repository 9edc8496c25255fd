"""The encoder a pool worker encodes with, installed once per worker process.

Shipping the encoder with every task would pickle its tables each time; a
pool initializer installs it once instead, and tasks look it up here.

>>> from streambpe.encode.encoder import Encoder
>>> install(Encoder({i: bytes([i]) for i in range(256)}, {}))
>>> installed().encode("hi")
[104, 105]
"""

from __future__ import annotations

from streambpe.encode.encoder import Encoder

_encoder: Encoder | None = None


def install(encoder: Encoder) -> None:
    """Make ``encoder`` this process's worker encoder (a pool initializer)."""
    global _encoder
    _encoder = encoder


def installed() -> Encoder:
    """This worker's encoder; raises if no pool initializer installed one."""
    if _encoder is None:
        raise RuntimeError("this process has no worker encoder installed")
    return _encoder
