"""The public :class:`Tokenizer`: the encoding engine plus loading, saving and streaming.

The encoding itself lives in :class:`~streambpe.encode.encoder.Encoder`; this
class adds the ways users get a tokenizer (train output, GPT-2 files, tiktoken
ranks, a saved directory) and the streaming entry points of
:mod:`streambpe.streaming` as methods, so there is one spelling for each.

>>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"he", 257: b"hel"}
>>> tok = Tokenizer(vocab, [(b"h", b"e"), (b"he", b"l")], ["<|endoftext|>"])
>>> tok.encode("help<|endoftext|>")
[257, 112, 258]
>>> tok.decode([257, 112, 258])
'help<|endoftext|>'
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from streambpe._support.atomic import atomic_write
from streambpe.core.bpe import ranks_from_merges
from streambpe.core.split_steps import Pretokenization, describe_pattern, describe_steps
from streambpe.encode.encoder import DEFAULT_CACHE_SIZE, Encoder
from streambpe.errors import ParameterError
from streambpe.formats import (
    TokenizerFiles,
    check_byte_level,
    check_creatable,
    load_tokenizer,
    save_tokenizer,
)
from streambpe.formats.cached_ranks import read_tiktoken_cached
from streambpe.formats.directory import HF_FILE, METADATA_FILE
from streambpe.formats.gpt2 import read_gpt2, read_json_file
from streambpe.formats.hf import read_hf_tokenizer
from streambpe.formats.tekken import TEKKEN_FILE, is_tekken_document, read_tekken
from streambpe.formats.tiktoken_file import merges_from_ranks
from streambpe.patterns import GPT2
from streambpe.pipeline.text import TextPipeline
from streambpe.streaming import aio, batch, file_encoding, sharded


class Tokenizer(Encoder):
    """A byte-level BPE tokenizer; ids identical to tiktoken's for the same vocabulary.

    Args:
        vocab: id -> token bytes; must contain all 256 single bytes.
        merges: merged pairs in creation order; a token's rank is the index of
            the merge that made it (ids need not follow merge order).
        special_tokens: strings never split or merged. A list takes the ids the
            vocab already has for them, appending any missing one with the next
            free id; a mapping gives each its id.
        pattern: pretokenization regex or name (``"gpt2"``, ``"cl100k"``, ``"o200k"``),
            or a chain of split steps (:data:`~streambpe.core.split_steps.SplitSteps`).
            :attr:`pretokenizer_engine` says whether the compiled matcher runs it.
        cache_size: piece-cache capacity in entries (0 disables the cache).
        pipeline: a ``tokenizer.json``'s steps around the model (see :meth:`load`).
    """

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Sequence[str] | Mapping[str, int] | None = None,
        *,
        pattern: Pretokenization = GPT2,
        cache_size: int = DEFAULT_CACHE_SIZE,
        pipeline: TextPipeline | None = None,
    ) -> None:
        merge_list = list(merges)
        super().__init__(
            vocab,
            ranks_from_merges(merge_list),
            special_tokens,
            pattern=pattern,
            cache_size=cache_size,
            pipeline=pipeline,
        )
        # None: derived from the ranks when first asked for (tiktoken-loaded tokenizers).
        self._merges: list[tuple[bytes, bytes]] | None = merge_list
        # The tokenizer.json it was loaded from, which save(format="hf") writes back.
        self._hf_document: dict[str, object] | None = None

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
        vocab, merges = read_gpt2(vocab_path, merges_path)
        check_byte_level(vocab.values(), vocab_path)
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
        ranks = read_tiktoken_cached(path)
        check_byte_level(ranks, path)
        return cls.from_ranks(
            ranks,
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
        vocab = dict(zip(ranks.values(), ranks.keys(), strict=True))
        Encoder.__init__(
            tokenizer,
            vocab,
            ranks,
            special_tokens or {},
            pattern=pattern,
            cache_size=cache_size,
            token_ids=ranks,
        )
        tokenizer._merges = None
        tokenizer._hf_document = None
        return tokenizer

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, cache_size: int = DEFAULT_CACHE_SIZE
    ) -> Tokenizer:
        """Load a saved directory, a model's ``tokenizer.json`` or Mistral's ``tekken.json``.

        ``path`` is a file, or a directory holding ``streambpe.json`` (written by
        :meth:`save` or ``streambpe train``), else ``tokenizer.json``, else
        ``tekken.json``, else GPT-2's ``vocab.json`` and ``merges.txt``. A
        ``tokenizer.json`` brings its whole pipeline (normalizer, pre-tokenizer,
        added tokens and their options, post-processor, decoder): ``encode``
        gives Hugging Face ``tokenizers``' ids, and a setting streambpe cannot
        reproduce fails with :class:`~streambpe.errors.FormatError` naming its
        JSON path. See the README, "Loading a model's tokenizer.json".

        >>> import json, pathlib, tempfile
        >>> from streambpe.formats.byte_unicode import encode_token
        >>> vocab = {encode_token(bytes([i])): i for i in range(256)} | {"Ġh": 256, "Ġhi": 257}
        >>> document = {
        ...     "added_tokens": [{"id": 258, "content": "<s>", "single_word": False,
        ...                       "lstrip": False, "rstrip": False, "normalized": False,
        ...                       "special": True}],
        ...     "normalizer": {"type": "NFC"},
        ...     "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "use_regex": True},
        ...     "model": {"type": "BPE", "vocab": vocab, "merges": ["Ġ h", "Ġh i"]},
        ... }
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "tokenizer.json"
        >>> _ = path.write_text(json.dumps(document), encoding="utf-8")
        >>> tok = Tokenizer.load(path)
        >>> tok.encode("hi<s>hi"), tok.decode([257, 258], skip_special_tokens=True)
        ([257, 258, 257], ' hi')
        """
        target = Path(path)
        if target.is_dir():
            if (target / METADATA_FILE).exists():
                return cls._from_files(load_tokenizer(target), cache_size, target)
            for name in (HF_FILE, TEKKEN_FILE):
                if (target / name).exists():
                    return cls._from_json_file(target / name, cache_size)
            return cls._from_files(load_tokenizer(target), cache_size, target)
        if not target.exists():
            raise FileNotFoundError(f"tokenizer path {str(target)!r} does not exist")
        return cls._from_json_file(target, cache_size)

    @classmethod
    def _from_files(cls, files: TokenizerFiles, cache_size: int, where: Path) -> Tokenizer:
        special_ids = set(files.special_tokens.values())
        check_byte_level(
            (token for token_id, token in files.vocab.items() if token_id not in special_ids),
            where,
        )
        return cls(
            files.vocab,
            files.merges,
            files.special_tokens,
            pattern=files.pattern,
            cache_size=cache_size,
        )

    @classmethod
    def _from_json_file(cls, path: Path, cache_size: int) -> Tokenizer:
        """A ``tokenizer.json`` or a ``tekken.json``, told apart by their layout."""
        document = read_json_file(path)
        if path.name == TEKKEN_FILE or is_tekken_document(document):
            spec = read_tekken(path, document)
            return cls.from_ranks(
                spec.ranks,
                pattern=spec.pattern,
                special_tokens=spec.special_tokens,
                cache_size=cache_size,
            )
        hf = read_hf_tokenizer(path, document)
        tokenizer = cls(
            hf.vocab,
            hf.merges,
            hf.special_tokens,
            pattern=hf.pattern,
            cache_size=cache_size,
            pipeline=hf.pipeline,
        )
        tokenizer._hf_document = hf.document
        return tokenizer

    def save(self, directory: str | os.PathLike[str], *, format: str = "gpt2") -> Path:
        """Write this tokenizer to ``directory`` as ``"gpt2"``, ``"tiktoken"`` or ``"hf"``.

        A tokenizer loaded from a ``tokenizer.json`` saves only as ``"hf"``: its
        ``tokenizer.json`` again, which the other formats cannot express. Any
        other tokenizer whose pre-tokenizer is a chain of split steps has no
        single pattern to write, and raises ``ParameterError``.
        """
        if self.pipeline is not None:
            return self._save_pipeline(directory, format)
        if not isinstance(self.pattern, str):
            raise ParameterError(
                f"this tokenizer cuts text with a chain of split steps "
                f"({describe_steps(self.pattern)}), which the {format!r} format cannot hold; "
                "save it with a single pattern instead"
            )
        files = TokenizerFiles(
            vocab=dict(self._decoder),
            merges=self.merges,
            special_tokens=dict(self._special_ids),
            pattern=self.pattern,
        )
        return save_tokenizer(directory, files, format=format)

    def _save_pipeline(self, directory: str | os.PathLike[str], format: str) -> Path:
        if format != "hf" or self._hf_document is None:
            raise ValueError(
                "a tokenizer with a tokenizer.json pipeline (normalizer, added-token options, "
                "template) saves only as format='hf', from the tokenizer it was loaded as"
            )
        folder = Path(directory)
        check_creatable(folder)
        folder.mkdir(exist_ok=True)
        # A streambpe.json left by an earlier save would be read first, and name other files.
        (folder / METADATA_FILE).unlink(missing_ok=True)
        document = json.dumps(self._hf_document, ensure_ascii=False, indent=1) + "\n"
        with atomic_write(folder / HF_FILE) as file:
            file.write(document.encode("utf-8"))
        return folder

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges in rank order (derived from the ranks for tiktoken-loaded tokenizers)."""
        if self._merges is None:
            self._merges = merges_from_ranks(self._ranks)
        return list(self._merges)

    def tiktoken_ranks(self) -> dict[bytes, int]:
        """tiktoken's ``mergeable_ranks`` for this tokenizer: each ordinary token's bytes -> id.

        tiktoken merges the pair whose token has the lowest id, so this holds
        only when ids follow merge order and every multi-byte token comes from
        a merge: true of ``train_bpe`` output, GPT-2 and anything loaded from
        tiktoken ranks. Otherwise ``ParameterError`` names the first token out
        of place.

        >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"<s>", 257: b"ab"}
        >>> Tokenizer(vocab, [(b"a", b"b")], ["<s>"]).tiktoken_ranks()[b"ab"]
        257
        """
        previous = -1
        for token, _rank in sorted(self._ranks.items(), key=lambda item: item[1]):
            if len(token) < 2:
                continue
            token_id = self._encoder[token]
            if token_id <= previous:
                raise ParameterError(
                    f"token {token!r} has id {token_id}, below the id of a token merged "
                    "before it; tiktoken ranks are ids, so these ids cannot be tiktoken ranks"
                )
            previous = token_id
        unmerged = next((t for t in self._encoder if len(t) > 1 and t not in self._ranks), None)
        if unmerged is not None:
            raise ParameterError(
                f"token {unmerged!r} is in the vocabulary but no merge makes it; tiktoken "
                "would merge into it, so this vocabulary cannot be tiktoken ranks"
            )
        return dict(self._encoder)

    # ----------------------------------------------------------------- pickling

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "merges": self._merges, "hf_document": self._hf_document}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._merges = state["merges"]
        self._hf_document = state.get("hf_document")

    # ----------------------------------------------------------------- streaming

    # The streaming entry points are the functions of :mod:`streambpe.streaming`,
    # bound as methods (``self`` is their ``encoder``): one signature and one
    # docstring for each, however it is called.

    encode_batch = batch.encode_batch
    #: Async twin of :meth:`iter_id_batches`: an async iterator of id *batches*
    #: (:func:`streambpe.flatten` turns them into single ids).
    aiter_id_batches = aio.aiter_id_batches
    #: The same as :meth:`aiter_id_batches`, under the name the README advertises.
    aencode_iterable = aio.aiter_id_batches
    encode_file = file_encoding.encode_file
    aencode_file = aio.aencode_file
    iter_file_id_batches = file_encoding.iter_file_id_batches
    #: Deprecated: the old name of :meth:`iter_file_id_batches`.
    iter_file_ids = file_encoding.iter_file_ids
    encode_files = sharded.encode_files

    def __repr__(self) -> str:
        return (
            f"Tokenizer(n_vocab={self.n_vocab}, special_tokens={len(self._special_ids)}, "
            f"pattern={describe_pattern(self.pattern)[:24]!r}...)"
        )
