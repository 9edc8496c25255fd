"""A vocabulary on which BPE is as ambiguous as it gets, for the compiled core's tests.

Every string of two to five letters over "ab" is a token, so most tokens can
be split into ranked parts in several ways and many cannot be formed by BPE at
all. Ranks are a random order, or drawn from a few values so that many tie.
Used by the pair-table test (``test_native_core.py``) and the read-back image
test (``test_table_cache.py``).
"""

from __future__ import annotations

import itertools
import random


def ab_vocabulary(rng: random.Random, *, ties: bool) -> tuple[dict[bytes, int], dict[bytes, int]]:
    """``(encoder, ranks)``: the 256 bytes and every 2-5 letter "ab" string as tokens.

    ``encoder`` maps each token to its id (bytes first); ``ranks`` gives the
    multi-byte tokens their merge ranks, tied when ``ties``.

    >>> encoder, ranks = ab_vocabulary(random.Random(0), ties=True)
    >>> len(encoder) - 256 == len(ranks) == 4 + 8 + 16 + 32
    True
    """
    tokens = [
        "".join(letters).encode()
        for length in range(2, 6)
        for letters in itertools.product("ab", repeat=length)
    ]
    values = (
        [rng.randrange(8) for _ in tokens] if ties else rng.sample(range(len(tokens)), len(tokens))
    )
    ranks = dict(zip(tokens, values, strict=True))
    encoder = {bytes([byte]): byte for byte in range(256)}
    encoder.update({token: 256 + index for index, token in enumerate(tokens)})
    return encoder, ranks
