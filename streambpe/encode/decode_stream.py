"""Decoding ids as they arrive, one at a time, into text that is never cut inside a character.

A model generates one token at a time, and a token's bytes need not end on
a character boundary: an emoji or a CJK character is often two or three
byte-level tokens. Decoding each token alone would print replacement
characters; decoding everything so far after each token costs time
quadratic in the length. :class:`DecodeStream` keeps only the bytes of a
character still incomplete, and returns text as soon as it is whole: the
semantics of Hugging Face's ``DecodeStream``, whose ``step`` returns None
while no new text is ready.

>>> stream = DecodeStream({0: b"caf", 1: b"\\xc3", 2: b"\\xa9", 3: b"!"}, 4)
>>> [stream.step(token_id) for token_id in [0, 1, 2, 3]]
['caf', None, 'é', '!']
"""

from __future__ import annotations

import codecs

from streambpe.errors import UnknownTokenError


class DecodeStream:
    """Turns token ids, fed one at a time, into text as soon as it forms whole characters.

    Bytes that can never become valid UTF-8 are handled by ``errors`` (as in
    ``bytes.decode``; by default each becomes U+FFFD at once). Bytes that may
    still be completed by the next token are held back; :meth:`finish` says
    what to do with any left at the end.

    Args:
        decoder: id -> token bytes (special tokens included).
        n_vocab: one more than the largest id, for the error message.
        errors: the UTF-8 error handler (``"replace"``, ``"strict"``, ``"ignore"``...).
    """

    def __init__(self, decoder: dict[int, bytes], n_vocab: int, *, errors: str = "replace") -> None:
        self._decoder = decoder
        self._n_vocab = n_vocab
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors=errors)

    def step(self, token_id: int) -> str | None:
        """The text that ``token_id`` completes, or None if it completes none yet.

        An unknown id raises :class:`~streambpe.errors.UnknownTokenError` and
        leaves the stream as it was.
        """
        token = self._decoder.get(token_id)
        if token is None:
            raise UnknownTokenError(token_id, self._n_vocab)
        return self._utf8.decode(token) or None

    def finish(self) -> str | None:
        """What is still held back (an incomplete character, through ``errors``), or None.

        >>> stream = DecodeStream({0: b"\\xe6\\x9d"}, 1)
        >>> stream.step(0), stream.finish()
        (None, '\\ufffd')
        """
        return self._utf8.decode(b"", final=True) or None
