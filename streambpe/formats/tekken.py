"""Mistral's ``tekken.json``: tiktoken-style ranks, a pattern and special tokens in one JSON file.

The layout, as ``mistral-common`` reads it:

- ``config``: ``pattern`` (the pre-tokenizer regex), ``default_vocab_size``
  (special tokens included) and ``default_num_special_tokens``;
- ``vocab``: a list of ``{"rank", "token_bytes" (base64), "token_str"}``,
  rank ``i`` at index ``i``, single bytes first; only the first
  ``default_vocab_size - default_num_special_tokens`` are used;
- ``special_tokens``: a list of ``{"rank", "token_str", "is_control"}``; files
  of version ``v7`` and older may leave it out and mean twenty fixed ones
  (``<unk>``, ``<s>``, ``</s>``, ``[INST]``...); the ranks up to
  ``default_num_special_tokens`` that no entry names are ``<SPECIAL_{rank}>``.

Special tokens take the ids ``0 .. default_num_special_tokens - 1`` (their
ranks); an ordinary token's id is its rank plus that number.
``mistral-common`` encodes special tokens' text as ordinary text, as
:meth:`~streambpe.tokenizer.Tokenizer.encode_ordinary` does; ``encode``
recognizes them, like every streambpe tokenizer.

>>> import base64, json, tempfile
>>> from pathlib import Path
>>> vocab = [{"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None}
...          for i in range(256)]
>>> config = {"pattern": r"\\S+|\\s+", "default_vocab_size": 259, "default_num_special_tokens": 3}
>>> specials = [{"rank": 1, "token_str": "<s>", "is_control": True}]
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = Path(tmp) / "tekken.json"
...     _ = path.write_text(json.dumps({"config": config, "vocab": vocab,
...                                     "special_tokens": specials}), encoding="utf-8")
...     spec = read_tekken(path)
>>> spec.special_tokens, spec.ranks[b"a"], spec.pattern
({'<SPECIAL_0>': 0, '<s>': 1, '<SPECIAL_2>': 2}, 100, '\\\\S+|\\\\s+')
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from pathlib import Path

import regex

from streambpe.formats.gpt2 import read_json_file
from streambpe.formats.hf.nodes import Node

#: The file name ``Tokenizer.load`` looks for in a folder.
TEKKEN_FILE = "tekken.json"

#: The special tokens of files that do not list theirs (versions up to v7), by rank.
_OLD_SPECIAL_TOKENS = (
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
)
_LISTS_SPECIALS_FROM = 8


@dataclass(frozen=True)
class TekkenSpec:
    """A ``tekken.json`` read: ranks (token bytes -> id), special tokens (text -> id), pattern."""

    ranks: dict[bytes, int]
    special_tokens: dict[str, int]
    pattern: str


def is_tekken_document(document: object) -> bool:
    """Whether a parsed JSON document has tekken's layout (a ``config`` and a ``vocab`` list)."""
    return (
        isinstance(document, dict)
        and isinstance(document.get("config"), dict)
        and isinstance(document.get("vocab"), list)
    )


def read_tekken(path: str | os.PathLike[str], document: object | None = None) -> TekkenSpec:
    """Read a ``tekken.json`` (``document``: parsed already); errors name the JSON path."""
    root = Node(read_json_file(Path(path)) if document is None else document, str(path))
    config = root.child("config")
    pattern = config.child("pattern").string()
    try:
        regex.compile(pattern)
    except regex.error as exc:
        raise config.child("pattern").fail(f"not a regex streambpe can run: {exc}") from exc
    vocab_size = config.child("default_vocab_size").integer()
    special_count = config.child("default_num_special_tokens").integer()
    entries = root.child("vocab")
    ordinary = vocab_size - special_count
    if not 256 <= ordinary <= len(entries.elements()):
        raise config.child("default_vocab_size").fail(
            f"{vocab_size} minus {special_count} special tokens must be between 256 and the "
            f"{len(entries.elements())} vocab entries"
        )
    ranks: dict[bytes, int] = {}
    for rank in range(ordinary):
        entry = entries.item(rank)
        if entry.child("rank").integer() != rank:
            raise entry.child("rank").fail(f"expected rank {rank} at index {rank}")
        try:
            token = base64.b64decode(entry.child("token_bytes").string(), validate=True)
        except binascii.Error as exc:
            raise entry.child("token_bytes").fail(f"not base64: {exc}") from exc
        if (rank < 256 and token != bytes([rank])) or not token or token in ranks:
            raise entry.child("token_bytes").fail(
                f"{token!r} cannot have rank {rank} (single bytes come first, each token once)"
            )
        ranks[token] = rank + special_count
    return TekkenSpec(ranks, _special_tokens(root, special_count), pattern)


def _special_tokens(root: Node, count: int) -> dict[str, int]:
    names: dict[int, str] = {}
    if root.has("special_tokens"):
        for entry in root.child("special_tokens").items():
            rank = entry.child("rank").integer()
            if rank >= count or rank in names:
                raise entry.child("rank").fail(f"rank {rank} is taken or not below {count}")
            names[rank] = entry.child("token_str").string()
    else:
        version = root.child("config").child("version").value
        if (
            isinstance(version, str)
            and version[1:].isdigit()
            and (int(version[1:]) >= _LISTS_SPECIALS_FROM)
        ):
            raise root.fail(f"a version {version} file must list its special_tokens")
        names = dict(enumerate(_OLD_SPECIAL_TOKENS[:count]))
    tokens = {names.get(rank, f"<SPECIAL_{rank}>"): rank for rank in range(count)}
    if len(tokens) != count:
        raise root.child("special_tokens").fail("two special tokens have the same text")
    return tokens
