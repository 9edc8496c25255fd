"""Pieces to ids, in pure Python: the piece cache in front of rank-based BPE.

This is the reference implementation of the encoding kernel; the compiled
backend (``streambpe.core._native``) implements the same interface and is
tested against it. :mod:`streambpe.core` picks one of the two.

A piece that is itself a token is that token; otherwise :func:`merge_piece`
splits it, and each part's id comes from the encoder.

>>> encoder = {bytes([i]): i for i in range(256)} | {b"ab": 256}
>>> pieces = PieceEncoder(encoder, {b"ab": 0}, cache_size=8)
>>> out: list[int] = []
>>> pieces.encode_pieces(["ab", "abc", "ab"], out)
>>> out, pieces.cache_info()  # "ab" is a token: no BPE ran for it, so it is no miss
([256, 256, 99, 256], (2, 1, 8, 2))
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from itertools import chain
from typing import Protocol

from streambpe._support.text_input import require_text
from streambpe.core.bpe import merge_piece
from streambpe.core.piece_cache import TokenIds, TwoGenerationCache
from streambpe.core.split_steps import Pretokenization


class Pretokenizing(Protocol):
    """Cuts text into pieces: the same list as ``regex.findall(pattern, text)``.

    ``count_into`` adds the pieces' numbers of occurrences, over many texts, to a dict.
    """

    def pieces(self, text: str) -> list[str]: ...
    def count_into(self, texts: Iterable[str], counts: dict[str, int]) -> None: ...


#: Pieces looked up per C-level call (a few milliseconds).
_LOOKUP_BATCH = 1 << 15

#: A special token in a text: ``(start, end, id)``, offsets in characters.
SpecialSpan = tuple[int, int, int]


def check_special_spans(specials: list[SpecialSpan] | None, length: int) -> None:
    """Raise ``ValueError`` unless ``specials`` are in order, inside ``length``, not overlapping.

    The compiled kernel makes the same check, in C, before it reads the text.

    >>> check_special_spans([(0, 3, 7), (2, 5, 7)], 9)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: special token spans must be in order, ...; got 2..5 after 3 in 9 characters
    """
    previous_end = 0
    for start, end, token_id in specials or ():
        if not previous_end <= start <= end <= length:
            raise ValueError(
                "special token spans must be in order, within the text and not overlap; "
                f"got {start}..{end} after {previous_end} in {length} characters"
            )
        if not 0 <= token_id < 2**32:
            raise ValueError(f"special token ids must be in 0..2**32-1, got {token_id}")
        previous_end = end


def move_id_part(joined: list[int], parts: list[list[int] | None], index: int) -> None:
    """Appends the ids of ``parts[index]`` to ``joined`` and puts None in its place.

    How the ids of a text encoded in parts come together, each part as soon
    as it and the ones before it are done. The compiled twin moves the items
    of a part nothing else holds instead of copying them, which spares a
    reference-count change per id.

    >>> joined, parts = [], [[1, 2], [3]]
    >>> move_id_part(joined, parts, 0); move_id_part(joined, parts, 1)
    >>> joined, parts
    ([1, 2, 3], [None, None])
    """
    part = parts[index]
    if type(part) is not list:
        raise TypeError("move_id_part takes a list of lists")
    parts[index] = None
    joined.extend(part)


class PieceEncoder:
    """Encodes pretokenized pieces to ids, caching up to ``cache_size`` pieces.

    Args:
        encoder: token bytes -> id, for every ordinary token.
        ranks: token bytes -> merge rank; the lowest-ranked adjacent pair merges first.
        cache_size: piece-cache capacity in entries (0 disables the cache).
    """

    def __init__(self, encoder: dict[bytes, int], ranks: dict[bytes, int], cache_size: int) -> None:
        self._encoder = encoder
        self._ranks = ranks
        self._cache = TwoGenerationCache(self._encode_piece, cache_size)
        # Cache misses that were whole tokens: no BPE ran for them, so they count as hits.
        self._whole_token_misses = 0

    def _encode_piece(self, piece: str) -> TokenIds:
        data = piece.encode("utf-8")
        whole = self._encoder.get(data)
        if whole is not None:
            self._whole_token_misses += 1
            return (whole,)
        return tuple(self.encode_bytes(data))

    def encode_bytes(self, piece: bytes) -> list[int]:
        """The ids of one piece's bytes, without the cache.

        A part without an id raises ``KeyError`` (a merge made a token the vocabulary lacks).
        """
        whole = self._encoder.get(piece)
        if whole is not None:
            return [whole]
        encoder = self._encoder
        return [encoder[part] for part in merge_piece(piece, self._ranks)]

    def encode_pieces(self, pieces: list[str], out: list[int]) -> None:
        """Append the ids of each piece to ``out``, in order.

        A piece with a lone surrogate raises ``UnicodeEncodeError`` (``out`` may
        then hold part of the result: the caller discards it).
        """
        cache = self._cache
        cache.lookups += len(pieces)
        lookup = cache.__getitem__
        # Hits stay in C (dict lookups through map); one extend holds the GIL
        # throughout, so each covers a bounded batch.
        for start in range(0, len(pieces), _LOOKUP_BATCH):
            out.extend(chain.from_iterable(map(lookup, pieces[start : start + _LOOKUP_BATCH])))

    def encode_text(
        self,
        text: str,
        pattern: Pretokenization,
        pretokenizer: Pretokenizing,
        out: list[int],
        specials: list[SpecialSpan] | None = None,
    ) -> None:
        """Append the ids of ``text``: its ordinary stretches cut by ``pretokenizer``.

        ``specials`` lists the special tokens in ``text`` as ``(start, end, id)``,
        in order and not overlapping (``ValueError`` otherwise); each one's id
        comes between the ids of the text around it. ``pattern`` names what
        ``pretokenizer`` runs; the compiled kernel uses it to scan the built-in
        patterns itself, this one has no scanner of its own.

        >>> from streambpe.core.pretokenize import Pretokenizer
        >>> from streambpe.patterns import GPT2
        >>> pieces = PieceEncoder({bytes([i]): i for i in range(256)}, {}, cache_size=8)
        >>> out: list[int] = []
        >>> pieces.encode_text("a<s>b", GPT2, Pretokenizer(GPT2), out, [(1, 4, 300)])
        >>> out
        [97, 300, 98]
        """
        require_text(text)
        check_special_spans(specials, len(text))
        start = 0
        for special_start, special_end, special_id in specials or ():
            if special_start > start:
                self.encode_pieces(pretokenizer.pieces(text[start:special_start]), out)
            out.append(special_id)
            start = special_end
        if start < len(text):
            self.encode_pieces(pretokenizer.pieces(text[start:]), out)

    def encode_with_specials(
        self,
        text: str,
        pattern: Pretokenization,
        pretokenizer: Pretokenizing,
        special_tokens: tuple[str, ...],
        special_ids: tuple[int, ...],
    ) -> list[int] | None:
        """The ids of ``text``, each of ``special_tokens`` (id in ``special_ids``) recognized, or None.

        ``Encoder.encode``'s usual call in one step. This backend has no
        special-token matcher of its own (the compiled one has): it answers a
        text with none of ``special_tokens`` and returns None for the others,
        which the caller then encodes by its general path.

        >>> from streambpe.core.pretokenize import Pretokenizer
        >>> from streambpe.patterns import GPT2
        >>> pieces = PieceEncoder({bytes([i]): i for i in range(256)}, {}, cache_size=8)
        >>> pieces.encode_with_specials("ab", GPT2, Pretokenizer(GPT2), ("<s>",), (256,))
        [97, 98]
        >>> pieces.encode_with_specials("a<s>", GPT2, Pretokenizer(GPT2), ("<s>",), (256,)) is None
        True
        """
        require_text(text)
        if any(token in text for token in special_tokens):
            return None
        out: list[int] = []
        self.encode_text(text, pattern, pretokenizer, out)
        return out

    def encode_many(
        self,
        texts: list[str],
        pattern: Pretokenization,
        pretokenizer: Pretokenizing,
        special_tokens: tuple[str, ...],
        special_ids: tuple[int, ...],
    ) -> list[list[int]] | None:
        """The ids of each of ``texts``, each of ``special_tokens`` (id in ``special_ids``) recognized, or None.

        ``encode_batch``'s work for one thread. The compiled kernel encodes
        the texts in one call without the GIL; this one, with no
        special-token matcher of its own, returns None if any text holds a
        special token (the caller then encodes each text its own way).

        >>> from streambpe.core.pretokenize import Pretokenizer
        >>> from streambpe.patterns import GPT2
        >>> pieces = PieceEncoder({bytes([i]): i for i in range(256)}, {}, cache_size=8)
        >>> pieces.encode_many(["ab", "c"], GPT2, Pretokenizer(GPT2), ("<s>",), (256,))
        [[97, 98], [99]]
        >>> pieces.encode_many(["a<s>"], GPT2, Pretokenizer(GPT2), ("<s>",), (256,)) is None
        True
        """
        for text in texts:
            require_text(text)
        if any(token in text for text in texts for token in special_tokens):
            return None
        results = []
        for text in texts:
            out: list[int] = []
            self.encode_text(text, pattern, pretokenizer, out)
            results.append(out)
        return results

    def encode_text_array(
        self,
        text: str,
        pattern: Pretokenization,
        pretokenizer: Pretokenizing,
        out: array[int],
        specials: list[SpecialSpan] | None = None,
    ) -> None:
        """Append the ids of ``text`` to ``out``, an ``array('I')`` (``specials`` as above)."""
        ids: list[int] = []
        self.encode_text(text, pattern, pretokenizer, ids, specials)
        out.extend(ids)

    def count_text(
        self,
        text: str,
        pattern: Pretokenization,
        pretokenizer: Pretokenizing,
        specials: list[SpecialSpan] | None = None,
    ) -> int:
        """How many ids ``text`` encodes to (``specials`` as above)."""
        ids: list[int] = []
        self.encode_text(text, pattern, pretokenizer, ids, specials)
        return len(ids)

    def fork(self) -> PieceEncoder:
        """A new encoder over the same vocabulary with an empty cache of the same size.

        Each thread encodes through its own: the cache is not safe to share.
        """
        return PieceEncoder(self._encoder, self._ranks, self._cache.maxsize)

    def cache_info(self) -> tuple[int, int, int, int]:
        """``(hits, misses, maxsize, currsize)``: misses are lookups that ran BPE."""
        hits, misses, maxsize, currsize = self._cache.info()
        whole = self._whole_token_misses
        return (hits + whole, misses - whole, maxsize, currsize)

    def clear_cache(self) -> None:
        """Empty the cache and zero its counts."""
        self._cache.reset()
        self._whole_token_misses = 0
