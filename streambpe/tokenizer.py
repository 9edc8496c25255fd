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

import os
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from streambpe._support.progress import ProgressReporter
from streambpe._support.utf8 import DecodeErrors
from streambpe.core.bpe import ranks_from_merges
from streambpe.encode.encoder import DEFAULT_CACHE_SIZE, UNSET, Encoder, SpecialSet
from streambpe.formats import TokenizerFiles, check_byte_level, load_tokenizer, save_tokenizer
from streambpe.formats.gpt2 import read_gpt2
from streambpe.formats.tiktoken_file import merges_from_ranks, read_tiktoken
from streambpe.patterns import GPT2
from streambpe.sources.inputs import Inputs
from streambpe.streaming import aio, batch, file_encoding, sharded
from streambpe.streaming.file_encoding import DEFAULT_ENCODE_CHUNK_SIZE, EncodeStats
from streambpe.streaming.sharded import DEFAULT_SHARD_BYTES, EncodeFilesStats


class Tokenizer(Encoder):
    """A byte-level BPE tokenizer; ids identical to tiktoken's for the same vocabulary.

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
        super().__init__(
            vocab,
            ranks_from_merges(merge_list),
            special_tokens,
            pattern=pattern,
            cache_size=cache_size,
        )
        # None: derived from the ranks when first asked for (tiktoken-loaded tokenizers).
        self._merges: list[tuple[bytes, bytes]] | None = merge_list

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
        ranks = read_tiktoken(path)
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
        vocab = {rank: token for token, rank in ranks.items()}
        Encoder.__init__(
            tokenizer, vocab, ranks, special_tokens or {}, pattern=pattern, cache_size=cache_size
        )
        tokenizer._merges = None
        return tokenizer

    @classmethod
    def load(
        cls, directory: str | os.PathLike[str], *, cache_size: int = DEFAULT_CACHE_SIZE
    ) -> Tokenizer:
        """Load a directory written by :meth:`save` or ``streambpe train`` (any format)."""
        files = load_tokenizer(directory)
        special_ids = set(files.special_tokens.values())
        check_byte_level(
            (token for token_id, token in files.vocab.items() if token_id not in special_ids),
            directory,
        )
        return cls(
            files.vocab,
            files.merges,
            files.special_tokens,
            pattern=files.pattern,
            cache_size=cache_size,
        )

    def save(self, directory: str | os.PathLike[str], *, format: str = "gpt2") -> Path:
        """Write this tokenizer to ``directory`` as ``"gpt2"``, ``"tiktoken"`` or ``"hf"``."""
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
            self._merges = merges_from_ranks(self._ranks)
        return list(self._merges)

    # ----------------------------------------------------------------- pickling

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "merges": self._merges}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._merges = state["merges"]

    # ----------------------------------------------------------------- streaming

    def encode_batch(
        self,
        texts: Sequence[str],
        *,
        allowed_special: SpecialSet | object = UNSET,
        disallowed_special: SpecialSet | object = UNSET,
        workers: int | None = None,
    ) -> list[list[int]]:
        """Encode many texts (keywords as in :meth:`encode`); large batches use worker processes.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).encode_batch(["a", "b"])
        [[97], [98]]
        """
        return batch.encode_batch(
            self,
            texts,
            allowed_special=allowed_special,
            disallowed_special=disallowed_special,
            workers=workers,
        )

    def aencode_iterable(
        self, source: AsyncIterable[str] | Iterable[str]
    ) -> AsyncIterator[list[int]]:
        """Async form of :meth:`encode_iterable`: an async iterator of id *batches*.

        Batches keep the per-``await`` cost small; :func:`streambpe.streaming.aio.flatten`
        turns them into single ids. See :mod:`streambpe.streaming.aio`.
        """
        return aio.aencode_iterable(self, source)

    def encode_file(
        self,
        input_path: Inputs,
        output_path: str | os.PathLike[str],
        *,
        workers: int | None = None,
        dtype: str | None = None,
        chunk_size: int = DEFAULT_ENCODE_CHUNK_SIZE,
        errors: DecodeErrors = "strict",
        progress: bool | ProgressReporter = False,
        executor: Executor | None = None,
    ) -> EncodeStats:
        """Encode a file of any size (or several: a list, a glob, URLs) into raw ids, in constant memory.

        See :func:`streambpe.streaming.file_encoding.encode_file` for the arguments.
        A failure or Ctrl-C leaves no file under ``output_path`` and no worker processes.
        """
        return file_encoding.encode_file(
            self,
            input_path,
            output_path,
            workers=workers,
            dtype=dtype,
            chunk_size=chunk_size,
            errors=errors,
            progress=progress,
            executor=executor,
        )

    def iter_file_ids(
        self,
        input_path: Inputs,
        *,
        workers: int | None = None,
        chunk_size: int = DEFAULT_ENCODE_CHUNK_SIZE,
        errors: DecodeErrors = "strict",
        progress: bool | ProgressReporter = False,
        executor: Executor | None = None,
    ) -> Iterator[list[int]]:
        """The ids of a file, a chunk at a time (lists of ints), in order, in constant memory."""
        return file_encoding.iter_file_ids(
            self,
            input_path,
            workers=workers,
            chunk_size=chunk_size,
            errors=errors,
            progress=progress,
            executor=executor,
        )

    async def aencode_file(
        self,
        input_path: Inputs,
        output_path: str | os.PathLike[str],
        *,
        workers: int | None = None,
        dtype: str | None = None,
        chunk_size: int = DEFAULT_ENCODE_CHUNK_SIZE,
        errors: DecodeErrors = "strict",
        progress: bool | ProgressReporter = False,
        executor: Executor | None = None,
    ) -> EncodeStats:
        """Async form of :meth:`encode_file`; cancelling it stops the workers, keeps no output."""
        return await aio.aencode_file(
            self,
            input_path,
            output_path,
            workers=workers,
            dtype=dtype,
            chunk_size=chunk_size,
            errors=errors,
            progress=progress,
            executor=executor,
        )

    def encode_files(
        self,
        inputs: Inputs,
        out_dir: str | os.PathLike[str],
        *,
        executor: Executor | None = None,
        workers: int | None = None,
        shard_bytes: int = DEFAULT_SHARD_BYTES,
        dtype: str | None = None,
        chunk_size: int = DEFAULT_ENCODE_CHUNK_SIZE,
        errors: DecodeErrors = "strict",
        progress: bool | ProgressReporter = False,
    ) -> EncodeFilesStats:
        """Encode many inputs (paths, a glob, URLs) into ``.bin`` shards and an ``index.json``.

        The shards, in index order, hold the bytes :meth:`encode_file` writes
        for each input in turn; rerunning after a failure keeps the complete
        shards. See :mod:`streambpe.streaming.sharded` for the layout.

        >>> import pathlib, tempfile
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "a.txt").write_text("hello world")
        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
        >>> tok.encode_files([folder / "a.txt"], folder / "ids", workers=1).tokens
        11
        """
        return sharded.encode_files(
            self,
            inputs,
            out_dir,
            executor=executor,
            workers=workers,
            shard_bytes=shard_bytes,
            dtype=dtype,
            chunk_size=chunk_size,
            errors=errors,
            progress=progress,
        )

    def __repr__(self) -> str:
        return (
            f"Tokenizer(n_vocab={self.n_vocab}, special_tokens={len(self._special_ids)}, "
            f"pattern={self.pattern[:24]!r}...)"
        )
