"""The tokenizer a pool worker encodes with, installed once per worker process.

Shipping the tokenizer with every task would pickle its tables each time; a
pool initializer installs it once instead, and tasks look it up here.

>>> from streambpe.tokenizer import Tokenizer
>>> install(Tokenizer({i: bytes([i]) for i in range(256)}, []))
>>> installed().encode("hi")
[104, 105]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streambpe.tokenizer import Tokenizer

_tokenizer: Tokenizer | None = None


def install(tokenizer: Tokenizer) -> None:
    """Make ``tokenizer`` this process's worker tokenizer (a pool initializer)."""
    global _tokenizer
    _tokenizer = tokenizer


def installed() -> Tokenizer:
    """This worker's tokenizer; raises if no pool initializer installed one."""
    if _tokenizer is None:
        raise RuntimeError("this process has no worker tokenizer installed")
    return _tokenizer
