"""Saving and loading a tokenizer directory: the chosen format's files plus ``streambpe.json``.

A saved tokenizer is a directory holding the format's files plus
``streambpe.json``, a small record of what the format itself cannot hold
(which format it is, the pretokenization pattern, the special tokens):

- ``gpt2``: ``vocab.json`` and ``merges.txt`` (:mod:`streambpe.formats.gpt2`)
- ``tiktoken``: ``tokenizer.tiktoken`` (:mod:`streambpe.formats.tiktoken_file`)
- ``hf``: ``tokenizer.json`` (:mod:`streambpe.formats.hf_json`)

:func:`load_tokenizer` also reads directories that other tools wrote, with no
``streambpe.json``: a lone ``tokenizer.json``, or ``vocab.json`` with ``merges.txt``.

>>> import tempfile
>>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"<|endoftext|>", 257: b"ab"}
>>> files = TokenizerFiles(vocab, [(b"a", b"b")], {"<|endoftext|>": 256})
>>> with tempfile.TemporaryDirectory() as tmp:
...     _ = save_tokenizer(tmp, files, format="tiktoken")
...     load_tokenizer(tmp) == files
True
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from pathlib import Path

from streambpe._support.utf8 import NEVER_IN_UTF8
from streambpe.cutting.specials import validate_special_tokens
from streambpe.errors import FormatError
from streambpe.formats.gpt2 import read_gpt2, read_json_file, write_gpt2
from streambpe.formats.hf_json import read_hf_json, write_hf_json
from streambpe.formats.tiktoken_file import merges_from_ranks, read_tiktoken, write_tiktoken
from streambpe.patterns import GPT2

#: Format names accepted by :func:`save_tokenizer`.
FORMATS = ("gpt2", "tiktoken", "hf")

METADATA_FILE = "streambpe.json"
GPT2_VOCAB_FILE = "vocab.json"
GPT2_MERGES_FILE = "merges.txt"
TIKTOKEN_FILE = "tokenizer.tiktoken"
HF_FILE = "tokenizer.json"

_METADATA_VERSION = 1


@dataclass(frozen=True)
class TokenizerFiles:
    """Everything a tokenizer's files hold: vocab, merges, special tokens and pattern.

    ``vocab`` maps ids to token bytes, ``merges`` lists merges in the order they
    were learned, and each special token also sits in ``vocab`` as its UTF-8
    bytes; a special token whose id holds other bytes raises ``ValueError``.

    >>> files = TokenizerFiles({0: b"a", 1: b"b", 2: b"ab", 3: b"<s>"}, [(b"a", b"b")],
    ...                        {"<s>": 3})
    >>> files.pattern == GPT2
    True
    >>> TokenizerFiles({0: b"a"}, [], {"<s>": 0})
    Traceback (most recent call last):
    ...
    ValueError: special token '<s>' has id 0, but vocab[0] is b'a'; it must be b'<s>'
    """

    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    special_tokens: dict[str, int] = field(default_factory=dict)
    pattern: str = GPT2

    def __post_init__(self) -> None:
        validate_special_tokens(self.special_tokens)
        for token, token_id in self.special_tokens.items():
            expected = token.encode("utf-8")
            if self.vocab.get(token_id) != expected:
                raise ValueError(
                    f"special token {token!r} has id {token_id}, but vocab[{token_id}] is "
                    f"{self.vocab.get(token_id)!r}; it must be {expected!r}"
                )


def save_tokenizer(
    directory: str | os.PathLike[str], files: TokenizerFiles, format: str = "gpt2"
) -> Path:
    """Write ``files`` into ``directory`` in ``format``; return the directory.

    ``directory`` is created if missing, but never its parents: as with ``cp``,
    a mistyped path raises ``FileNotFoundError`` naming the missing parent
    instead of silently growing a tree.

    Every file is first written in a hidden folder inside ``directory`` and
    only then renamed into place, so an interrupted save never leaves a
    half-written file under a final name, and a failure while producing any
    file leaves all the old ones untouched. ``streambpe.json`` is renamed last.
    The tiktoken format keeps no merges, only ranks (the ids); a tokenizer
    whose merges do not follow from its ids raises ``ValueError`` instead of
    being saved in a form that would tokenize differently.

    >>> import tempfile
    >>> files = TokenizerFiles({0: b"a", 1: b"b", 2: b"ab"}, [(b"a", b"b")])
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     sorted(p.name for p in save_tokenizer(tmp, files, format="hf").iterdir())
    ['streambpe.json', 'tokenizer.json']
    """
    if format not in FORMATS:
        raise ValueError(f"unknown tokenizer format {format!r}; choose one of {', '.join(FORMATS)}")
    folder = Path(directory)
    check_creatable(folder)
    folder.mkdir(exist_ok=True)
    metadata = {
        "format": format,
        "pattern": files.pattern,
        "special_tokens": dict(sorted(files.special_tokens.items(), key=lambda item: item[1])),
        "version": _METADATA_VERSION,
    }
    # A hidden directory inside the target keeps the renames on one file system,
    # which is what makes os.replace atomic.
    staging = Path(tempfile.mkdtemp(prefix=".streambpe-save-", dir=folder))
    try:
        if format == "gpt2":
            write_gpt2(staging, files.vocab, files.merges)
        elif format == "tiktoken":
            write_tiktoken(staging / TIKTOKEN_FILE, files.vocab, files.special_tokens)
            _check_merges_follow_ranks(files)
        else:
            write_hf_json(
                staging / HF_FILE, files.vocab, files.merges, files.special_tokens, files.pattern
            )
        (staging / METADATA_FILE).write_text(
            json.dumps(metadata, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
        )
        # Metadata last, so it never names a format whose files are not all in place.
        written = sorted(path.name for path in staging.iterdir() if path.name != METADATA_FILE)
        for name in [*written, METADATA_FILE]:
            os.replace(staging / name, folder / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def check_creatable(directory: str | os.PathLike[str]) -> None:
    """Raise ``FileNotFoundError`` naming the missing parent if ``directory`` cannot be created.

    Only the last path component is ever created; callers check first so that a
    typo fails before any long work, not after it.

    >>> check_creatable("/no-such-parent/tokenizer")
    Traceback (most recent call last):
    ...
    FileNotFoundError: cannot create /no-such-parent/tokenizer: its parent directory /no-such-parent does not exist
    """
    folder = Path(directory)
    if not folder.parent.is_dir():
        raise FileNotFoundError(
            f"cannot create {folder}: its parent directory {folder.parent} does not exist"
        )


def check_byte_level(
    tokens: Iterable[bytes] | Mapping[bytes, object], path: str | os.PathLike[str]
) -> None:
    """Raise :class:`FormatError` naming ``path`` unless ``tokens`` hold all 256 single bytes.

    Byte-level BPE starts every piece from its bytes, so a vocabulary without
    one of them cannot encode text containing it (tiktoken panics there);
    saying so when the file is loaded names the file at fault. Bytes that
    UTF-8 never holds (0xC0, 0xC1, 0xF5-0xFF) may be missing, as the encoder
    allows. A mapping (its keys) or a set is asked for the 256 bytes, any
    other iterable is read through.

    >>> check_byte_level([bytes([i]) for i in range(0xF5)], "ok.tiktoken")
    >>> check_byte_level({bytes([i]): i for i in range(0xF5)}, "ok.tiktoken")
    >>> check_byte_level({b"a": 0, b"b": 1, b"ab": 2}, "tiny.tiktoken")
    Traceback (most recent call last):
    ...
    streambpe.errors.FormatError: tiny.tiktoken: the vocabulary lacks 241 single-byte token(s) \
(first: byte 0x00); a byte-level BPE vocabulary needs every byte that UTF-8 text can hold
    >>> check_byte_level([b"a", b"b", b"ab"], "tiny/vocab.json")
    Traceback (most recent call last):
    ...
    streambpe.errors.FormatError: tiny/vocab.json: the vocabulary lacks 241 single-byte token(s) \
(first: byte 0x00); a byte-level BPE vocabulary needs every byte that UTF-8 text can hold
    """
    if isinstance(tokens, (Mapping, Set)):
        # 256 lookups instead of a pass over the whole vocabulary: the pass
        # was 37 ms of the 0.39 s that importing streambpe, loading o200k
        # and a first encode take (cProfile).
        present = {byte for byte in range(256) if bytes([byte]) in tokens}
    else:
        present = {token[0] for token in tokens if len(token) == 1}
    missing = [byte for byte in range(256) if byte not in present and byte not in NEVER_IN_UTF8]
    if missing:
        raise FormatError(
            str(path),
            None,
            f"the vocabulary lacks {len(missing)} single-byte token(s) (first: byte "
            f"0x{missing[0]:02x}); a byte-level BPE vocabulary needs every byte that UTF-8 "
            "text can hold",
        )


def load_tokenizer(directory: str | os.PathLike[str]) -> TokenizerFiles:
    """Read a tokenizer directory written by :func:`save_tokenizer` or by other tools.

    With ``streambpe.json`` present, it says which files to read. Without it,
    a ``tokenizer.json`` is read (its added tokens become the special tokens),
    or else ``vocab.json`` and ``merges.txt`` with GPT-2's pattern and no
    special tokens.

    >>> import tempfile
    >>> files = TokenizerFiles({0: b"a", 1: b"b", 2: b"ab"}, [(b"a", b"b")])
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     load_tokenizer(save_tokenizer(tmp, files)) == files
    True
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise FileNotFoundError(f"tokenizer directory {str(folder)!r} does not exist")
    metadata_path = folder / METADATA_FILE
    if metadata_path.exists():
        return _load_described(folder, metadata_path)
    if (folder / HF_FILE).exists():
        vocab, merges, special_tokens, pattern = read_hf_json(folder / HF_FILE)
        if pattern is None:
            raise FormatError(
                str(folder / HF_FILE),
                None,
                "its pre_tokenizer has neither one Split regex nor ByteLevel's built-in regex, "
                f"so the pattern is unknown; add a {METADATA_FILE} naming it",
            )
        return _checked(folder / HF_FILE, vocab, merges, special_tokens, pattern)
    if (folder / GPT2_VOCAB_FILE).exists() and (folder / GPT2_MERGES_FILE).exists():
        vocab, merges = read_gpt2(folder / GPT2_VOCAB_FILE, folder / GPT2_MERGES_FILE)
        return TokenizerFiles(vocab, merges, {}, GPT2)
    raise FileNotFoundError(
        f"no tokenizer in {str(folder)!r}: expected {METADATA_FILE}, {HF_FILE}, "
        f"or {GPT2_VOCAB_FILE} with {GPT2_MERGES_FILE}"
    )


def _load_described(folder: Path, metadata_path: Path) -> TokenizerFiles:
    """Load the files that ``streambpe.json`` describes; its pattern and specials are final."""
    format, pattern, special_tokens = _read_metadata(metadata_path)
    if format == "gpt2":
        vocab, merges = read_gpt2(folder / GPT2_VOCAB_FILE, folder / GPT2_MERGES_FILE)
    elif format == "hf":
        vocab, merges, _, _ = read_hf_json(folder / HF_FILE)
    else:
        ranks = read_tiktoken(folder / TIKTOKEN_FILE)
        vocab = {rank: token for token, rank in ranks.items()}
        for token, token_id in special_tokens.items():
            if token_id in vocab:
                raise FormatError(
                    str(metadata_path),
                    None,
                    f"special token {token!r} has id {token_id}, which {TIKTOKEN_FILE} "
                    f"gives to {vocab[token_id]!r}",
                )
            vocab[token_id] = token.encode("utf-8")
        merges = merges_from_ranks(ranks, path=folder / TIKTOKEN_FILE)
    return _checked(metadata_path, vocab, merges, special_tokens, pattern)


def _read_metadata(path: Path) -> tuple[str, str, dict[str, int]]:
    metadata = read_json_file(path)
    if not isinstance(metadata, dict):
        raise FormatError(str(path), None, "expected a JSON object")
    version = metadata.get("version")
    if version != _METADATA_VERSION:
        raise FormatError(
            str(path),
            None,
            f"version {version!r} is not {_METADATA_VERSION}; "
            "it was written by another streambpe version",
        )
    format = metadata.get("format")
    if format not in FORMATS:
        raise FormatError(str(path), None, f"format {format!r} is not one of {', '.join(FORMATS)}")
    pattern = metadata.get("pattern")
    if not isinstance(pattern, str):
        raise FormatError(str(path), None, f"pattern {pattern!r} is not a string")
    special_tokens = metadata.get("special_tokens")
    if not isinstance(special_tokens, dict) or not all(
        isinstance(token_id, int) and not isinstance(token_id, bool)
        for token_id in special_tokens.values()
    ):
        raise FormatError(
            str(path), None, "special_tokens must be an object mapping each token to an integer id"
        )
    return format, pattern, special_tokens


def _checked(
    path: Path,
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: dict[str, int],
    pattern: str,
) -> TokenizerFiles:
    """Build :class:`TokenizerFiles`, reporting inconsistent files as a :class:`FormatError`."""
    try:
        return TokenizerFiles(vocab, merges, special_tokens, pattern)
    except ValueError as exc:
        raise FormatError(str(path), None, str(exc)) from exc


def _check_merges_follow_ranks(files: TokenizerFiles) -> None:
    special_ids = set(files.special_tokens.values())
    ranks = {token: i for i, token in files.vocab.items() if i not in special_ids}
    try:
        implied = merges_from_ranks(ranks)
    except FormatError as exc:
        raise ValueError(
            f"this tokenizer cannot be saved as tiktoken ranks ({exc}); "
            "use format='gpt2' or format='hf'"
        ) from exc
    for number, (given, derived) in enumerate(zip(files.merges, implied, strict=False), start=1):
        if given != derived:
            raise ValueError(
                f"merge {number} is {given!r}, but the ids' rank order implies {derived!r}, so "
                "tiktoken would tokenize differently; use format='gpt2' or format='hf'"
            )
    if len(files.merges) != len(implied):
        raise ValueError(
            f"the tokenizer has {len(files.merges)} merges but its vocab implies "
            f"{len(implied)}; tiktoken ranks cannot hold it, use format='gpt2' or format='hf'"
        )
