"""tiktoken's ``Encoding``, as a face over a :class:`~streambpe.tokenizer.Tokenizer`.

The ids come from the ``Tokenizer`` (one engine, several faces); this class
adds tiktoken's names, keyword defaults and error messages. The main one:
``encode`` refuses text holding a special token unless it is allowed, where
``Tokenizer.encode`` recognizes every special token by default. The
``Tokenizer`` is at hand as :attr:`Encoding.tokenizer`, for what tiktoken
lacks (``encode_file``, ``aencode_iterable``, ``count_tokens``).

>>> ranks = {bytes([i]): i for i in range(256)} | {b"he": 256, b"hel": 257}
>>> enc = Encoding("tiny", pat_str=r"\\w+|\\W", mergeable_ranks=ranks,
...                special_tokens={"<|endoftext|>": 258})
>>> enc.encode("help"), enc.decode([257, 112])
([257, 112], 'help')
>>> enc.encode("<|endoftext|>", allowed_special="all")
[258]
>>> enc.tokenizer.count_tokens("help")
2
"""

from __future__ import annotations

import bisect
import functools
from collections import deque
from collections.abc import Collection, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from streambpe import core
from streambpe._support.pool import resolve_workers
from streambpe._support.text_input import require_text
from streambpe.cutting.specials import SpecialTokenScanner
from streambpe.encode.encoder import fix_surrogates
from streambpe.errors import ParameterError
from streambpe.formats.text_files import first_repeat
from streambpe.patterns import compile_pattern
from streambpe.tokenizer import Tokenizer

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: ``allowed_special``: ``"all"`` or a set of special-token strings.
AllowedSpecial = Literal["all"] | AbstractSet[str]
#: ``disallowed_special``: ``"all"`` or a collection of strings.
DisallowedSpecial = Literal["all"] | Collection[str]

#: The default of ``allowed_special``: none.
_NO_SPECIALS: frozenset[str] = frozenset()
#: Up to this many special tokens, ``encode``'s default call looks for each
#: with ``in`` (one fast search each); more, and the general check runs.
_QUICK_CHECK_TOKENS = 8
#: From this many characters on, ``encode``'s default call looks for its
#: special tokens with the compiled matcher, all in one pass, where one
#: ``in`` each read the whole text once per token.
_ONE_PASS_CHARS = 1 << 16
#: UTF-8 continuation bytes: they add no character to a decoded text.
_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))
#: Bytes of a token that counts as all whitespace when widening the unstable tail.
_TAIL_SPACE_BYTES = b" \n\t"


class _Definition(NamedTuple):
    """What makes an encoding: ``Encoding``'s arguments, which are also its pickled state."""

    name: str
    pat_str: str
    mergeable_ranks: dict[bytes, int]
    special_tokens: dict[str, int]


class Encoding:
    """A tiktoken encoding: ``Encoding(name, *, pat_str, mergeable_ranks, special_tokens)``.

    Args:
        name: the encoding's name (``get_encoding`` finds registered ones by it).
        pat_str: the pretokenization regex.
        mergeable_ranks: token bytes -> rank, which is also the token's id.
        special_tokens: special-token string -> id.
        explicit_n_vocab: when given, the number of tokens (ordinary plus
            special) the encoding must have, its largest id being one less.

    Raises ``ParameterError`` (a ``ValueError``) where tiktoken would fail an
    assertion or fail later: a token count other than ``explicit_n_vocab``, two
    tokens with one rank, a missing single byte, a bad pattern.
    """

    def __init__(
        self,
        name: str,
        *,
        pat_str: str,
        mergeable_ranks: dict[bytes, int],
        special_tokens: dict[str, int],
        explicit_n_vocab: int | None = None,
    ) -> None:
        _check_ranks(name, mergeable_ranks, special_tokens, explicit_n_vocab)
        tokenizer = Tokenizer.from_ranks(
            mergeable_ranks, pattern=pat_str, special_tokens=special_tokens
        )
        self._attach(_Definition(name, pat_str, mergeable_ranks, special_tokens), tokenizer)

    @classmethod
    def from_tokenizer(cls, tokenizer: Tokenizer, name: str) -> Encoding:
        """The tiktoken face of ``tokenizer`` (one trained with ``train_bpe``, say), sharing it.

        Its ids must follow merge order (see :meth:`Tokenizer.tiktoken_ranks`).

        >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"<|endoftext|>", 257: b"ab"}
        >>> tok = Tokenizer(vocab, [(b"a", b"b")], ["<|endoftext|>"])
        >>> enc = Encoding.from_tokenizer(tok, "mine")
        >>> enc.encode("abc"), enc.eot_token, enc.tokenizer is tok
        ([257, 99], 256, True)
        """
        if not isinstance(tokenizer.pattern, str):
            raise ParameterError(
                "a tokenizer that cuts text with a chain of split steps has no single pattern "
                "for tiktoken's pat_str; use the Tokenizer itself"
            )
        encoding = cls.__new__(cls)
        definition = _Definition(
            name, tokenizer.pattern, tokenizer.tiktoken_ranks(), tokenizer.special_tokens
        )
        encoding._attach(definition, tokenizer)
        return encoding

    def _attach(self, definition: _Definition, tokenizer: Tokenizer) -> None:
        # tiktoken's attribute names: code written against tiktoken reads them.
        self.name, self._pat_str, self._mergeable_ranks, self._special_tokens = definition
        self._tokenizer = tokenizer
        self.max_token_value = max(
            max(self._mergeable_ranks.values()), max(self._special_tokens.values(), default=0)
        )
        self._special_token_values = frozenset(self._special_tokens.values())
        self._special_names = frozenset(self._special_tokens)
        # The special tokens encode()'s default call looks for with ``in``;
        # None where there are too many for that (the general check then runs).
        self._quick_disallowed: tuple[str, ...] | None = (
            tuple(self._special_tokens)
            if len(self._special_tokens) <= _QUICK_CHECK_TOKENS
            else None
        )

    def __repr__(self) -> str:
        return f"<Encoding {self.name!r}>"

    @property
    def tokenizer(self) -> Tokenizer:
        """The :class:`~streambpe.tokenizer.Tokenizer` behind this encoding (same ids).

        It has what tiktoken lacks: ``encode_file``, ``encode_files``,
        ``encode_iterable``, ``aencode_iterable``, ``count_tokens``. Its
        ``encode`` recognizes every special token unless told otherwise.
        """
        return self._tokenizer

    # ----------------------------------------------------------------- encoding

    def encode_ordinary(self, text: str) -> list[int]:
        """The ids of ``text``, special tokens being plain text.

        >>> _tiny().encode_ordinary("hi <|endoftext|>")[:3]
        [104, 105, 32]
        """
        return self._tokenizer.encode_ordinary(text)

    def encode(
        self,
        text: str,
        *,
        allowed_special: AllowedSpecial = _NO_SPECIALS,
        disallowed_special: DisallowedSpecial = "all",
    ) -> list[int]:
        """The ids of ``text``; a special token in it raises ``ValueError`` unless allowed.

        ``allowed_special`` (``"all"`` or a set) names the special tokens to
        encode as such; ``disallowed_special`` (default ``"all"``: every special
        token not allowed) names those whose presence is an error. Any other
        special token is plain text. Lone surrogates become U+FFFD.

        >>> enc = _tiny()
        >>> enc.encode("hi<|endoftext|>", allowed_special={"<|endoftext|>"})
        [104, 105, 256]
        >>> len(enc.encode("hi<|endoftext|>", disallowed_special=()))
        15
        """
        quick = self._quick_disallowed
        if (
            quick is not None
            and allowed_special is _NO_SPECIALS
            and disallowed_special == "all"
            and type(text) is str
            and not self._holds_any(text, quick)
        ):
            # tiktoken's defaults, the way tiktoken code calls: every special
            # token disallowed, none allowed. A text holding none of them is
            # encode_ordinary's, without working out the policy and a
            # scanner for it: encode("hi") on o200k took 9,350 instructions
            # that way and takes 6,870 this way (callgrind).
            return self._tokenizer.encode_ordinary(text)
        allowed = self._allowed_after_check(text, allowed_special, disallowed_special)
        if not allowed:
            return self._tokenizer.encode_ordinary(text)
        return self._tokenizer.encode(text, allowed_special=allowed, disallowed_special=())

    @staticmethod
    def _holds_any(text: str, tokens: tuple[str, ...]) -> bool:
        """Whether any of ``tokens`` occurs in ``text``.

        A long text goes to the compiled matcher, one pass for all the
        tokens: 8 MiB of source code and o200k's two tokens took 0.84 ms
        against 2.83 for an ``in`` each.
        """
        if len(text) >= _ONE_PASS_CHARS:
            matches = core.active_backend().special_matches
            if matches is not None:
                return bool(matches(text, tokens))
        # A loop, not any(): on a chat message the generator cost more than the searches.
        for token in tokens:  # noqa: SIM110
            if token in text:
                return True
        return False

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: AllowedSpecial = _NO_SPECIALS,
        disallowed_special: DisallowedSpecial = "all",
    ) -> npt.NDArray[np.uint32]:
        """:meth:`encode` into a numpy ``uint32`` array, without a Python int per id.

        >>> _tiny().encode_to_numpy("hi").tolist()
        [104, 105]
        """
        allowed = self._allowed_after_check(text, allowed_special, disallowed_special)
        return self._tokenizer.encode_to_numpy(text, allowed_special=allowed, disallowed_special=())

    def encode_ordinary_batch(self, text: list[str], *, num_threads: int = 8) -> list[list[int]]:
        """:meth:`encode_ordinary` of each text, on up to ``num_threads`` threads (see :meth:`encode_batch`).

        >>> _tiny().encode_ordinary_batch(["hi", "h"])
        [[104, 105], [104]]
        """
        texts = list(text)
        for each in texts:
            require_text(each)
        return self._tokenizer.encode_batch(
            texts,
            allowed_special=_NO_SPECIALS,
            disallowed_special=(),
            workers=_workers(num_threads),
        )

    def encode_batch(
        self,
        text: list[str],
        *,
        num_threads: int = 8,
        allowed_special: AllowedSpecial = _NO_SPECIALS,
        disallowed_special: DisallowedSpecial = "all",
    ) -> list[list[int]]:
        """:meth:`encode` of each text, on up to ``num_threads`` threads.

        The batch takes :meth:`streambpe.Tokenizer.encode_batch`, on as many
        threads as ``num_threads`` allows and the machine has cores: the
        compiled core encodes without the GIL, and each thread encodes whole
        groups of texts with a piece cache of its own, so threads beyond the
        cores would only split the cache (tiktoken's eight threads on two
        cores took twice as long here). A disallowed special token raises
        for the first text that holds one, before any is encoded.

        >>> _tiny().encode_batch(["hi", "<|endoftext|>"], allowed_special="all")
        [[104, 105], [256]]
        """
        texts = list(text)  # any iterable, as tiktoken's pool.map takes
        allowed = _NO_SPECIALS
        for each in texts:
            allowed = self._allowed_after_check(each, allowed_special, disallowed_special)
        return self._tokenizer.encode_batch(
            texts, allowed_special=allowed, disallowed_special=(), workers=_workers(num_threads)
        )

    def encode_with_unstable(
        self,
        text: str,
        *,
        allowed_special: AllowedSpecial = _NO_SPECIALS,
        disallowed_special: DisallowedSpecial = "all",
    ) -> tuple[list[int], list[list[int]]]:
        """The stable ids of ``text``, and every id sequence its unstable end may become.

        The last piece of the text (with whitespace tokens before it) could
        merge differently once more text follows, so its ids are left out of
        the stable ones; each completion is a sequence of ids whose bytes
        start with that piece's bytes. Completions come sorted (tiktoken's come
        in no particular order).

        >>> stable, completions = _tiny().encode_with_unstable("hi he")
        >>> stable, [257] in completions, [258] in completions
        ([104, 105, 32], True, True)
        """
        allowed = self._allowed_after_check(text, allowed_special, disallowed_special)
        try:
            return self._encode_with_unstable(text, allowed)
        except UnicodeEncodeError:
            return self._encode_with_unstable(fix_surrogates(text), allowed)

    def _encode_with_unstable(
        self, text: str, allowed: frozenset[str]
    ) -> tuple[list[int], list[list[int]]]:
        ids, tail = self._ids_and_unstable_tail(text, allowed)
        if tail == 0:
            return ids, []
        unstable = self._tokenizer.decode_bytes(ids[-tail:])
        del ids[-tail:]
        completions: set[tuple[int, ...]] = set()
        # A single token that starts with the unstable bytes (or is them).
        completions.update((token_id,) for token_id in self._ids_starting_with(unstable))
        # A token that straddles the end: part of the unstable bytes, then more.
        for cut in range(1, len(unstable)):
            prefix = unstable[:cut]
            for token in self._tokens_starting_with(unstable[cut:]):
                candidate = prefix + token
                try:
                    candidate_ids = self._tokenizer.encode_ordinary(candidate.decode("utf-8"))
                except UnicodeDecodeError:
                    candidate_ids = self._tokenizer.encode_single_piece(candidate)
                completions.add(self._ids_covering(candidate_ids, len(unstable)))
        # A whitespace character at the end may split off once text follows it.
        last_char_size = _last_whitespace_char_size(unstable)
        if 0 < last_char_size < len(unstable):
            completions.add(
                (
                    *self._tokenizer.encode_single_piece(unstable[:-last_char_size]),
                    *self._tokenizer.encode_single_piece(unstable[-last_char_size:]),
                )
            )
        return ids, [list(sequence) for sequence in sorted(completions)]

    def _ids_covering(self, ids: list[int], length: int) -> tuple[int, ...]:
        """The shortest prefix of ``ids`` whose bytes are at least ``length`` long."""
        token_bytes = self._token_bytes
        covered = 0
        for count, token_id in enumerate(ids, start=1):
            covered += len(token_bytes[token_id])
            if covered >= length:
                return tuple(ids[:count])
        return tuple(ids)

    @functools.cached_property
    def _token_bytes(self) -> dict[int, bytes]:
        """Each ordinary token's bytes by id, for the unstable-tail search."""
        return {token_id: token for token, token_id in self._mergeable_ranks.items()}

    def _ids_and_unstable_tail(self, text: str, allowed: frozenset[str]) -> tuple[list[int], int]:
        """The ids of ``text``, and how many at the end are not yet final.

        Those are the ids of the last pattern piece after the last allowed
        special token (none when the text ends with a special token), widened
        over whitespace-only tokens before them: a pattern like cl100k's
        ``\\s*[\\r\\n]+`` may join those to what follows.
        """
        if allowed:
            ids = self._tokenizer.encode(text, allowed_special=allowed, disallowed_special=())
            matches = _scanner_for(allowed).matches(text)
            ordinary_start = matches[-1].end if matches else 0
        else:
            ids = self._tokenizer.encode_ordinary(text)
            ordinary_start = 0
        pieces = compile_pattern(self._tokenizer.pattern).finditer(text, ordinary_start)
        last_piece = deque(pieces, maxlen=1)
        if not last_piece:
            return ids, 0
        tail = len(self._tokenizer.encode_single_piece(last_piece[0].group().encode("utf-8")))
        if self._is_space_token(ids[-tail]):
            while tail < len(ids) and self._is_space_token(ids[-tail - 1]):
                tail += 1
        return ids, tail

    def _is_space_token(self, token_id: int) -> bool:
        token = self._token_bytes.get(token_id)
        return token is not None and not token.translate(None, _TAIL_SPACE_BYTES)

    @functools.cached_property
    def _sorted_token_bytes(self) -> list[bytes]:
        return sorted(self._mergeable_ranks)

    def _tokens_starting_with(self, prefix: bytes) -> list[bytes]:
        """The tokens that start with ``prefix``: a run of the sorted tokens, found by bisection."""
        tokens = self._sorted_token_bytes
        start = bisect.bisect_left(tokens, prefix)
        # Every token starting with ``prefix`` sorts below the prefix with its
        # last byte that is not 0xff raised by one.
        stem = prefix.rstrip(b"\xff")
        if not stem:
            return tokens[start:]
        beyond = stem[:-1] + bytes([stem[-1] + 1])
        return tokens[start : bisect.bisect_left(tokens, beyond, start)]

    def _ids_starting_with(self, prefix: bytes) -> list[int]:
        return [self._mergeable_ranks[token] for token in self._tokens_starting_with(prefix)]

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The id of a text or bytes that is exactly one token (special tokens too).

        Raises ``KeyError`` when it is not a token.

        >>> _tiny().encode_single_token("hel"), _tiny().encode_single_token("<|endoftext|>")
        (258, 256)
        """
        token = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else text_or_bytes
        token_id = self._mergeable_ranks.get(token)
        if token_id is not None:
            return token_id
        try:
            special_id = self._special_tokens.get(token.decode("utf-8"))
        except UnicodeDecodeError:
            special_id = None
        if special_id is None:
            raise KeyError(token)
        return special_id

    def _encode_single_piece(self, text_or_bytes: str | bytes) -> list[int]:
        """BPE on the whole text or bytes as one piece: no pattern split, no special tokens.

        >>> _tiny()._encode_single_piece("hel hel")
        [258, 32, 258]
        """
        piece = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else text_or_bytes
        return self._tokenizer.encode_single_piece(bytes(piece))

    def _encode_only_native_bpe(self, text: str) -> list[int]:
        """:meth:`encode_ordinary`, with the pattern split done by ``regex`` in Python.

        >>> _tiny()._encode_only_native_bpe("hel hel")
        [258, 32, 258]
        """
        ids: list[int] = []
        for piece in compile_pattern(self._pat_str).findall(text):
            ids += self._tokenizer.encode_single_piece(piece.encode("utf-8"))
        return ids

    def _encode_bytes(self, text: bytes) -> list[int]:
        """The ids of bytes that may end in (or hold) invalid UTF-8.

        Valid UTF-8 encodes as text. Otherwise the valid start encodes as text
        and its last piece, joined to every byte from the first invalid one
        on, is encoded as one piece.

        >>> _tiny()._encode_bytes(b"hel \\xff")
        [258, 32, 255]
        """
        try:
            return self._tokenizer.encode_ordinary(text.decode("utf-8"))
        except UnicodeDecodeError as exc:
            valid_end = exc.start
        ids, tail = self._ids_and_unstable_tail(text[:valid_end].decode("utf-8"), _NO_SPECIALS)
        rest = text[valid_end:]
        if tail:
            rest = self._tokenizer.decode_bytes(ids[-tail:]) + rest
            del ids[-tail:]
        return ids + self._tokenizer.encode_single_piece(rest)

    # ----------------------------------------------------------------- decoding

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """The bytes of ``tokens``; an id not in the vocabulary raises ``KeyError``.

        >>> _tiny().decode_bytes([258, 112])
        b'help'
        """
        return self._tokenizer.decode_bytes(tokens)

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """The text of ``tokens``; bytes that are not UTF-8 become U+FFFD unless ``errors`` says.

        >>> _tiny().decode([104, 105, 256])
        'hi<|endoftext|>'
        """
        return self._tokenizer.decode(tokens, errors=errors)

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one id (special tokens too); an unknown id raises ``KeyError``.

        >>> _tiny().decode_single_token_bytes(258)
        b'hel'
        """
        return self._tokenizer.decode_single_token_bytes(token)

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        """The bytes of each id, one entry per id.

        >>> _tiny().decode_tokens_bytes([258, 112])
        [b'hel', b'p']
        """
        return [self._tokenizer.decode_single_token_bytes(token) for token in tokens]

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """The text of ``tokens`` and the character offset where each token starts.

        A token that starts inside a character (its first byte continues a
        UTF-8 sequence) gets the offset of that character. Bytes that are not
        valid UTF-8 raise ``UnicodeDecodeError``.

        >>> _tiny().decode_with_offsets([258, 112, 32, 0xC3, 0xA9])
        ('help é', [0, 3, 4, 5, 5])
        """
        pieces = self.decode_tokens_bytes(tokens)
        offsets: list[int] = []
        characters = 0
        for piece in pieces:
            starts_inside = bool(piece) and 0x80 <= piece[0] < 0xC0
            offsets.append(max(0, characters - starts_inside))
            characters += len(piece.translate(None, _CONTINUATION_BYTES))
        return b"".join(pieces).decode("utf-8", errors="strict"), offsets

    def decode_batch(
        self, batch: Sequence[Sequence[int]], *, errors: str = "replace", num_threads: int = 8
    ) -> list[str]:
        """:meth:`decode` of each list of ids.

        Decoding holds the GIL, so threads would only add their start-up cost:
        ``num_threads`` is accepted and the lists are decoded in this thread.

        >>> _tiny().decode_batch([[104, 105], [258]])
        ['hi', 'hel']
        """
        return [self._tokenizer.decode(tokens, errors=errors) for tokens in batch]

    def decode_bytes_batch(
        self, batch: Sequence[Sequence[int]], *, num_threads: int = 8
    ) -> list[bytes]:
        """:meth:`decode_bytes` of each list of ids (in this thread; see :meth:`decode_batch`).

        >>> _tiny().decode_bytes_batch([[104, 105], [258]])
        [b'hi', b'hel']
        """
        return [self._tokenizer.decode_bytes(tokens) for tokens in batch]

    # ----------------------------------------------------------------- vocabulary

    def token_byte_values(self) -> list[bytes]:
        """The bytes of every ordinary token, sorted.

        >>> _tiny().token_byte_values()[104:107]
        [b'h', b'he', b'hel']
        """
        return list(self._sorted_token_bytes)

    @property
    def eot_token(self) -> int:
        """The id of ``<|endoftext|>``; ``KeyError`` when the encoding has none."""
        return self._special_tokens["<|endoftext|>"]

    @functools.cached_property
    def special_tokens_set(self) -> set[str]:
        """The special-token strings."""
        return set(self._special_tokens)

    def is_special_token(self, token: int) -> bool:
        """Whether ``token`` is the id of a special token.

        >>> _tiny().is_special_token(256), _tiny().is_special_token(255)
        (True, False)
        """
        if not isinstance(token, int):
            raise TypeError(f"is_special_token takes an int id, got {token!r}")
        return token in self._special_token_values

    @property
    def n_vocab(self) -> int:
        """One more than the largest id (``max_token_value + 1``)."""
        return self.max_token_value + 1

    # ----------------------------------------------------------------- special-token policy

    def _allowed_after_check(
        self, text: str, allowed_special: AllowedSpecial, disallowed_special: DisallowedSpecial
    ) -> frozenset[str]:
        """The special tokens to recognize, once ``text`` is known to hold no disallowed one.

        Names in ``allowed_special`` that are not special tokens of this
        encoding are ignored, as tiktoken ignores them.
        """
        require_text(text)
        if allowed_special is _NO_SPECIALS and disallowed_special == "all":
            # The default, and by far the most frequent call: nothing to work out.
            allowed = _NO_SPECIALS
            disallowed = self._special_names
        else:
            if allowed_special == "all":
                allowed = self._special_names
            else:
                allowed = self._special_names.intersection(allowed_special)
            if disallowed_special == "all":
                disallowed = self._special_names - allowed
            else:
                disallowed = frozenset(disallowed_special)
        if disallowed:
            found = _scanner_for(disallowed).first_match(text)
            if found is not None:
                raise _disallowed_special_error(found.token)
        return allowed

    # ----------------------------------------------------------------- pickling

    def __getstate__(self) -> dict[str, Any]:
        definition = _Definition(
            self.name, self._pat_str, self._mergeable_ranks, self._special_tokens
        )
        return definition._asdict()

    def __setstate__(self, state: dict[str, Any]) -> None:
        Encoding.__init__(self, **state)


def _check_ranks(
    name: str,
    mergeable_ranks: dict[bytes, int],
    special_tokens: dict[str, int],
    explicit_n_vocab: int | None,
) -> None:
    """tiktoken's checks of an encoding's ranks, as errors that say what is wrong."""
    if not mergeable_ranks:
        raise ParameterError(f"encoding {name!r} has no mergeable_ranks")
    repeat = first_repeat(mergeable_ranks)
    if repeat is not None:
        first, second, rank = repeat
        raise ParameterError(
            f"encoding {name!r}: tokens {first!r} and {second!r} both have rank "
            f"{rank}; each rank is a token id, so ranks must be distinct"
        )
    if explicit_n_vocab:
        count = len(mergeable_ranks) + len(special_tokens)
        largest = max(max(mergeable_ranks.values()), max(special_tokens.values(), default=0))
        if count != explicit_n_vocab or largest != explicit_n_vocab - 1:
            raise ParameterError(
                f"encoding {name!r} should have {explicit_n_vocab} tokens with ids up to "
                f"{explicit_n_vocab - 1} (explicit_n_vocab), but has {len(mergeable_ranks)} "
                f"mergeable and {len(special_tokens)} special tokens, the largest id {largest}"
            )


def _workers(num_threads: int) -> int:
    """The threads of a batch: ``num_threads``, but no more than the cores (see ``encode_batch``).

    >>> _workers(1)
    1
    """
    if num_threads < 1:
        raise ParameterError(f"num_threads must be at least 1, got {num_threads}")
    return min(num_threads, resolve_workers(None))


def _disallowed_special_error(token: str) -> ParameterError:
    # tiktoken's wording, so that code and people who know it recognize it.
    return ParameterError(
        f"Encountered text corresponding to disallowed special token {token!r}.\n"
        "If you want this text to be encoded as a special token, "
        f"pass it to `allowed_special`, e.g. `allowed_special={{{token!r}, ...}}`.\n"
        "If you want this text to be encoded as normal text, disable the check for this token "
        f"by passing `disallowed_special=(enc.special_tokens_set - {{{token!r}}})`.\n"
        "To disable this check for all special tokens, pass `disallowed_special=()`.\n"
    )


@functools.lru_cache(maxsize=128)
def _scanner_for(tokens: frozenset[str]) -> SpecialTokenScanner:
    # Sorted, so that one set always builds the same scanner.
    return SpecialTokenScanner(sorted(tokens))


def _last_whitespace_char_size(data: bytes) -> int:
    """The byte length of ``data``'s last character if it is whitespace, else 0.

    Whitespace as Unicode's White_Space property has it (Python's
    ``isspace`` also counts the separators U+001C to U+001F).

    >>> _last_whitespace_char_size("a\\u3000".encode()), _last_whitespace_char_size(b"a\\x1c")
    (3, 0)
    """
    for size in range(1, min(4, len(data)) + 1):
        if not 0x80 <= data[-size] < 0xC0:
            try:
                character = data[-size:].decode("utf-8")
            except UnicodeDecodeError:
                return 0
            return size if character.isspace() and character not in "\x1c\x1d\x1e\x1f" else 0
    return 0


def _tiny() -> Encoding:
    """A small encoding for the examples: bytes, ``he``, ``hel``, and ``<|endoftext|>``."""
    ranks = {bytes([i]): i for i in range(256)} | {b"he": 257, b"hel": 258}
    return Encoding(
        "tiny",
        pat_str=r"\w+|\W",
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": 256},
    )
