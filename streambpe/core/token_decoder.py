"""Token ids back to bytes: the pure-Python reference of the compiled ``TokenDecoder``.

Decoding is a lookup per id and a join; the compiled kernel does the same in
one pass over an id array, without a Python object per token and without the
GIL for long inputs. Both raise ``KeyError(id)`` for an id the vocabulary
lacks and ``TypeError`` for a value that is not an integer, so the caller
turns either into one error message.

>>> TokenDecoder({0: b"he", 1: b"llo"}).decode_bytes([0, 1])
b'hello'
"""

from __future__ import annotations

import operator
from collections.abc import Iterable


class TokenDecoder:
    """``b"".join(decoder[i] for i in ids)``, with the kernel's errors.

    Args:
        decoder: id -> token bytes, for every id (special tokens included).
    """

    def __init__(self, decoder: dict[int, bytes]) -> None:
        self._decoder = decoder

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of ``ids``, one token after another.

        >>> TokenDecoder({0: b"a"}).decode_bytes([0, 5])
        Traceback (most recent call last):
        ...
        KeyError: 5
        """
        decoder = self._decoder
        parts: list[bytes] = []
        for token_id in ids:
            try:
                index = operator.index(token_id)
            except TypeError:
                raise TypeError(f"token ids must be ints, got {token_id!r}") from None
            parts.append(decoder[index])
        return b"".join(parts)
