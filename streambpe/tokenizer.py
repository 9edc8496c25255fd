"""The :class:`Tokenizer`: text to ids and back, identical to tiktoken for the same vocabulary.

Encoding runs special-token scanning (:mod:`~streambpe.cutting.specials`), then the
regex pretokenizer, then for each piece a lookup in the :class:`PieceCache`,
which runs rank-based BPE (:mod:`~streambpe.core.bpe`) only on a miss.

>>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"he", 257: b"hel"}
>>> tok = Tokenizer(vocab, [(b"h", b"e"), (b"he", b"l")], ["<|endoftext|>"])
>>> tok.encode("help<|endoftext|>")
[257, 112, 258]
>>> tok.decode([257, 112, 258])
'help<|endoftext|>'
"""

from __future__ import annotations

import os
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from streambpe.core.bpe import merge_piece, ranks_from_merges
from streambpe.patterns import GPT2, SPACE_SPLITTABLE_PATTERNS, resolve_pattern
from streambpe.core.piece_cache import CacheInfo, PieceCache, TokenIds
from streambpe.encode.pretokenize import Pretokenizer
from streambpe.cutting.specials import SpecialTokenScanner, validate_special_tokens
from streambpe.cutting.splitter import StreamSplitter

if TYPE_CHECKING:
    from streambpe.streaming.file_encoding import EncodeStats

DEFAULT_CACHE_SIZE = 1 << 18
#: Pieces looked up per C-level call (a few milliseconds).
_LOOKUP_BATCH = 1 << 15
#: ``"all"`` or a collection of special-token strings.
SpecialSet = Literal["all"] | Collection[str]


def _fix_surrogates(text: str) -> str:
    # tiktoken's rule: lone surrogates become U+FFFD, and a valid surrogate pair
    # becomes the character it spells.
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class Tokenizer:
    """A byte-level BPE tokenizer.

    Args:
        vocab: id -> token bytes; must contain all 256 single bytes.
        merges: merged pairs in creation order; a token's rank is the index of
            the merge that made it (ids need not follow merge order).
        special_tokens: strings never split or merged. A list takes the ids the
            vocab already has for them, appending any missing one with the next
            free id; a mapping gives each its id.
        pattern: pretokenization regex or name (``"gpt2"``, ``"cl100k"``, ``"o200k"``).
        cache_size: piece-cache capacity in entries (0 disables the cache).
    """

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Sequence[str] | Mapping[str, int] | None = None,
        *,
        pattern: str = GPT2,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        merge_list = list(merges)
        self._setup(dict(vocab), ranks_from_merges(merge_list), special_tokens, pattern, cache_size)
        self._merges: list[tuple[bytes, bytes]] | None = merge_list

    def _setup(
        self,
        vocab: dict[int, bytes],
        ranks: dict[bytes, int],
        special_tokens: Sequence[str] | Mapping[str, int] | None,
        pattern: str,
        cache_size: int,
    ) -> None:
        self.pattern = resolve_pattern(pattern)
        self._findall = Pretokenizer(self.pattern).pieces
        self._ranks = ranks
        self._decoder: dict[int, bytes] = dict(vocab)
        self._special_ids = self._assign_special_ids(vocab, special_tokens)
        special_id_set = set(self._special_ids.values())
        # Special tokens are reachable only through the scanner, never as ordinary text.
        self._ordinary_vocab = {i: b for i, b in vocab.items() if i not in special_id_set}
        self._encoder: dict[bytes, int] = {}
        for token_id in sorted(self._ordinary_vocab):
            self._encoder.setdefault(vocab[token_id], token_id)
        missing = [byte for byte in range(256) if bytes([byte]) not in self._encoder]
        if missing:
            raise ValueError(
                f"the vocabulary lacks {len(missing)} single-byte token(s) (first: byte "
                f"0x{missing[0]:02x}); a byte-level BPE vocabulary needs all 256"
            )
        for token, token_id in self._special_ids.items():
            self._decoder[token_id] = token.encode("utf-8")
        self._scanner = SpecialTokenScanner(self._special_ids)
        self._cache = PieceCache(self._encode_piece, cache_size)

    @staticmethod
    def _assign_special_ids(
        vocab: Mapping[int, bytes], special_tokens: Sequence[str] | Mapping[str, int] | None
    ) -> dict[str, int]:
        if isinstance(special_tokens, Mapping):
            validate_special_tokens(special_tokens)
            for token, token_id in special_tokens.items():
                known = vocab.get(token_id)
                if known is not None and known != token.encode("utf-8"):
                    raise ValueError(
                        f"special token {token!r} is given id {token_id}, which the vocabulary "
                        f"already uses for {known!r}"
                    )
            return dict(special_tokens)
        ids: dict[str, int] = {}
        next_id = max(vocab, default=-1) + 1
        # A single byte stays an ordinary token: a special spelled like one gets a new id.
        id_of = {token: token_id for token_id, token in vocab.items() if len(token) > 1}
        for token in validate_special_tokens(special_tokens):
            existing = id_of.get(token.encode("utf-8"))
            if existing is None:
                existing, next_id = next_id, next_id + 1
            ids[token] = existing
        return ids

    # ----------------------------------------------------------------- loaders

    @classmethod
    def from_files(
        cls,
        vocab_path: str | os.PathLike[str],
        merges_path: str | os.PathLike[str],
        special_tokens: Sequence[str] | None = None,
        *,
        pattern: str = GPT2,
    ) -> Tokenizer:
        """Load GPT-2 style ``vocab.json`` and ``merges.txt`` (``#version`` header optional)."""
        from streambpe.formats.gpt2 import read_gpt2

        vocab, merges = read_gpt2(vocab_path, merges_path)
        return cls(vocab, merges, special_tokens, pattern=pattern)

    @classmethod
    def from_tiktoken(
        cls,
        path: str | os.PathLike[str],
        *,
        pattern: str,
        special_tokens: Mapping[str, int] | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> Tokenizer:
        """Load a tiktoken ``.tiktoken`` ranks file; ids are the ranks.

        >>> import base64, pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "tiny.tiktoken"
        >>> ranks = [bytes([i]) for i in range(256)] + [b"hi"]
        >>> _ = path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\\n" for r, t in enumerate(ranks)))
        >>> tok = Tokenizer.from_tiktoken(path, pattern="gpt2", special_tokens={"<|endoftext|>": 257})
        >>> tok.encode("hi<|endoftext|>")
        [256, 257]
        """
        from streambpe.formats.tiktoken_file import read_tiktoken

        return cls.from_ranks(
            read_tiktoken(path),
            pattern=pattern,
            special_tokens=special_tokens,
            cache_size=cache_size,
        )

    @classmethod
    def from_ranks(
        cls,
        ranks: Mapping[bytes, int],
        *,
        pattern: str,
        special_tokens: Mapping[str, int] | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> Tokenizer:
        """Build from tiktoken-style ``mergeable_ranks`` (token bytes -> rank = id)."""
        tokenizer = cls.__new__(cls)
        vocab = {rank: token for token, rank in ranks.items()}
        tokenizer._setup(vocab, dict(ranks), special_tokens or {}, pattern, cache_size)
        tokenizer._merges = None  # derived from the ranks only if a format needs them
        return tokenizer

    @classmethod
    def load(
        cls, directory: str | os.PathLike[str], *, cache_size: int = DEFAULT_CACHE_SIZE
    ) -> Tokenizer:
        """Load a directory written by :meth:`save` or ``streambpe train`` (any format)."""
        from streambpe.formats import load_tokenizer

        files = load_tokenizer(directory)
        return cls(
            files.vocab,
            files.merges,
            files.special_tokens,
            pattern=files.pattern,
            cache_size=cache_size,
        )

    def save(self, directory: str | os.PathLike[str], *, format: str = "gpt2") -> Path:
        """Write this tokenizer to ``directory`` as ``"gpt2"``, ``"tiktoken"`` or ``"hf"``."""
        from streambpe.formats import TokenizerFiles, save_tokenizer

        files = TokenizerFiles(
            vocab=dict(self._decoder),
            merges=self.merges,
            special_tokens=dict(self._special_ids),
            pattern=self.pattern,
        )
        return save_tokenizer(directory, files, format=format)

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges in rank order (derived from the ranks for tiktoken-loaded tokenizers)."""
        if self._merges is None:
            from streambpe.formats.tiktoken_file import merges_from_ranks

            self._merges = merges_from_ranks(self._ranks)
        return list(self._merges)

    # ----------------------------------------------------------------- pickling

    def __getstate__(self) -> dict[str, Any]:
        # Send what rebuilds the tokenizer, not its cache or compiled objects.
        return {
            "vocab": self._ordinary_vocab,
            "ranks": self._ranks,
            "special_tokens": self._special_ids,
            "pattern": self.pattern,
            "cache_size": self._cache.maxsize,
            "merges": self._merges,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._setup(
            state["vocab"],
            state["ranks"],
            state["special_tokens"],
            state["pattern"],
            state["cache_size"],
        )
        self._merges = state["merges"]

    # ----------------------------------------------------------------- properties

    @property
    def special_tokens(self) -> dict[str, int]:
        """Special token -> id."""
        return dict(self._special_ids)

    @property
    def special_tokens_set(self) -> set[str]:
        """The special-token strings (tiktoken's name)."""
        return set(self._special_ids)

    @property
    def n_vocab(self) -> int:
        """One more than the largest id (tiktoken's definition)."""
        return max(self._decoder) + 1

    @property
    def eot_token(self) -> int | None:
        """The id of ``<|endoftext|>``, or None if this tokenizer has no such special token."""
        return self._special_ids.get("<|endoftext|>")

    def cache_info(self) -> CacheInfo:
        """Piece-cache hits, misses and size."""
        return self._cache.info()

    def clear_cache(self) -> None:
        """Empty the piece cache and zero its counts (for cold-cache measurements)."""
        self._cache.reset()

    # ----------------------------------------------------------------- encoding

    def _encode_piece(self, piece: str) -> TokenIds:
        data = piece.encode("utf-8")
        whole = self._encoder.get(data)
        if whole is not None:
            return (whole,)
        encoder = self._encoder
        return tuple([encoder[part] for part in merge_piece(data, self._ranks)])

    def _encode_ordinary_into(self, text: str, out: list[int]) -> None:
        pieces = self._findall(text)
        cache = self._cache
        cache.lookups += len(pieces)
        lookup = cache.__getitem__
        if len(pieces) <= _LOOKUP_BATCH:
            out.extend(chain.from_iterable(map(lookup, pieces)))
            return
        # One C-level extend holds the GIL throughout: keep each one short.
        for start in range(0, len(pieces), _LOOKUP_BATCH):
            out.extend(chain.from_iterable(map(lookup, pieces[start : start + _LOOKUP_BATCH])))

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode ``text`` treating special tokens as plain text.

        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
        >>> tok.encode_ordinary("hi")
        [104, 105]
        """
        out: list[int] = []
        try:
            self._encode_ordinary_into(text, out)
        except UnicodeEncodeError:
            out.clear()
            self._encode_ordinary_into(_fix_surrogates(text), out)
        return out

    def _allowed_scanner(self, allowed_special: SpecialSet) -> SpecialTokenScanner:
        if allowed_special == "all":
            return self._scanner
        allowed = frozenset(allowed_special)
        unknown = allowed - self._special_ids.keys()
        if unknown:
            raise ValueError(
                f"allowed_special names {sorted(unknown)!r}, which are not special tokens of "
                f"this tokenizer (it has {sorted(self._special_ids)!r})"
            )
        return _scanner_for(allowed)

    def _check_disallowed(
        self, text: str, allowed_special: SpecialSet, disallowed_special: SpecialSet
    ) -> None:
        if disallowed_special == "all":
            allowed = self._special_ids.keys() if allowed_special == "all" else set(allowed_special)
            disallowed = frozenset(self._special_ids.keys() - allowed)
        else:
            disallowed = frozenset(disallowed_special)
        if not disallowed:
            return
        found = _scanner_for(disallowed).matches(text)
        if found:
            token = found[0].token
            raise ValueError(
                f"the text contains the special token {token!r}, which is disallowed.\n"
                f"To encode it as a special token, pass allowed_special={{{token!r}}} "
                "(or allowed_special='all').\n"
                "To encode it as ordinary text, pass disallowed_special=() "
                f"(or leave {token!r} out of disallowed_special)."
            )

    def encode(
        self,
        text: str,
        *,
        allowed_special: SpecialSet = "all",
        disallowed_special: SpecialSet = (),
    ) -> list[int]:
        """Encode ``text``; the tokenizer's special tokens are recognized by default.

        With tiktoken's keywords the behaviour is tiktoken's: special tokens not
        in ``allowed_special`` are plain text, and any in ``disallowed_special``
        (``"all"`` = every special not allowed) raise ``ValueError``.

        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<s>"])
        >>> tok.encode("a<s>"), tok.encode("a<s>", allowed_special=set())
        ([97, 256], [97, 60, 115, 62])
        """
        self._check_disallowed(text, allowed_special, disallowed_special)
        scanner = self._allowed_scanner(allowed_special)
        try:
            return self._encode_with(scanner, text)
        except UnicodeEncodeError:
            return self._encode_with(scanner, _fix_surrogates(text))

    def _encode_with(self, scanner: SpecialTokenScanner, text: str) -> list[int]:
        out: list[int] = []
        if not scanner:
            self._encode_ordinary_into(text, out)
            return out
        special_ids = self._special_ids
        for ordinary, special in scanner.split(text):
            if ordinary:
                self._encode_ordinary_into(ordinary, out)
            if special is not None:
                out.append(special_ids[special])
        return out

    def encode_batch(
        self,
        texts: Sequence[str],
        *,
        allowed_special: SpecialSet = "all",
        disallowed_special: SpecialSet = (),
        workers: int | None = None,
    ) -> list[list[int]]:
        """Encode many texts; large batches are spread over worker processes.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).encode_batch(["a", "b"])
        [[97], [98]]
        """
        from streambpe.streaming.batch import encode_batch

        return encode_batch(
            self,
            texts,
            allowed_special=allowed_special,
            disallowed_special=disallowed_special,
            workers=workers,
        )

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Lazily encode a stream of text chunks (a file object, lines, any slices).

        Memory stays bounded and the ids equal ``encode`` of the concatenated text,
        however the text is sliced.

        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
        >>> list(tok.encode_iterable(["a\\n", "\\n b"])) == tok.encode("a\\n\\n b")
        True
        """
        for batch in self.iter_id_batches(iterable):
            yield from batch

    def iter_id_batches(self, iterable: Iterable[str]) -> Iterator[list[int]]:
        """Like :meth:`encode_iterable`, but yields the ids a block of text at a time."""
        splitter = self.stream_splitter()
        for chunk in iterable:
            ready = splitter.feed(chunk)
            if ready:
                yield self.encode(ready)
        rest = splitter.finish()
        if rest:
            yield self.encode(rest)

    def stream_splitter(self) -> StreamSplitter:
        """A :class:`StreamSplitter` matching this tokenizer's specials and pattern."""
        return StreamSplitter(
            list(self._special_ids), space_cuts=self.pattern in SPACE_SPLITTABLE_PATTERNS
        )

    def aencode_iterable(
        self, source: AsyncIterable[str] | Iterable[str]
    ) -> AsyncIterator[list[int]]:
        """Async form of :meth:`encode_iterable`: an async iterator of id *batches*.

        Batches keep the per-``await`` cost small; :func:`streambpe.streaming.aio.flatten`
        turns them into single ids. See :mod:`streambpe.streaming.aio`.
        """
        from streambpe.streaming.aio import aencode_iterable

        return aencode_iterable(self, source)

    def encode_file(
        self,
        input_path: str | os.PathLike[str],
        output_path: str | os.PathLike[str],
        **options: Any,
    ) -> EncodeStats:
        """Encode a file of any size into raw little-endian ids; see :func:`streambpe.streaming.file_encoding.encode_file`."""
        from streambpe.streaming.file_encoding import encode_file

        return encode_file(self, input_path, output_path, **options)

    async def aencode_file(
        self,
        input_path: str | os.PathLike[str],
        output_path: str | os.PathLike[str],
        **options: Any,
    ) -> EncodeStats:
        """Async form of :meth:`encode_file`; the event loop stays free while it runs."""
        from streambpe.streaming.aio import aencode_file

        return await aencode_file(self, input_path, output_path, **options)

    # ----------------------------------------------------------------- decoding

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of ``ids``; an unknown id raises ``KeyError`` naming it.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).decode_bytes([104, 105])
        b'hi'
        """
        decoder = self._decoder
        try:
            return b"".join(map(decoder.__getitem__, ids))
        except KeyError as exc:
            raise KeyError(
                f"unknown token id {exc.args[0]!r}: valid ids are 0..{self.n_vocab - 1}"
            ) from None
        except TypeError:
            bad = next(i for i in ids if not isinstance(i, int))
            raise TypeError(f"token ids must be ints, got {bad!r}") from None

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """The text of ``ids``; bytes that are not valid UTF-8 become U+FFFD by default."""
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token id."""
        return self.decode_bytes([token_id])

    def __repr__(self) -> str:
        return (
            f"Tokenizer(n_vocab={self.n_vocab}, special_tokens={len(self._special_ids)}, "
            f"pattern={self.pattern[:24]!r}...)"
        )


@lru_cache(maxsize=64)
def _scanner_for(tokens: frozenset[str]) -> SpecialTokenScanner:
    # Sorted so that the same set always builds the same automaton.
    return SpecialTokenScanner(sorted(tokens))
