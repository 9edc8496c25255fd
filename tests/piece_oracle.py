"""The pure-Python answer for one piece, the oracle the compiled core's tests compare with.

Used by ``test_native_core.py`` and ``test_char_atoms.py``.

>>> encoder = {bytes([i]): i for i in range(256)} | {b"ab": 256}
>>> pure_encode(b"abc", encoder, {b"ab": 0})
[256, 99]
"""

from __future__ import annotations

from streambpe.core.bpe import merge_piece


def pure_encode(piece: bytes, encoder: dict[bytes, int], ranks: dict[bytes, int]) -> list[int]:
    """What the pure backend gives for one piece: a whole token, or BPE parts looked up."""
    whole = encoder.get(piece)
    if whole is not None:
        return [whole]
    return [encoder[part] for part in merge_piece(piece, ranks)]
