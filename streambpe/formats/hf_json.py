"""Writing ``tokenizer.json`` files, and reading back the ones streambpe writes.

A model's own ``tokenizer.json``, with its normalizer, pre-tokenizer chain,
added-token options and template, is read by :mod:`streambpe.formats.hf`
(through ``Tokenizer.load``); this module holds the simple face used by
:func:`streambpe.formats.save_tokenizer` and :func:`~streambpe.formats.load_tokenizer`.

A ``tokenizer.json`` describes a whole pipeline. streambpe writes the one that
reproduces tiktoken's ids: no normalizer; a pre-tokenizer that splits text with
the pattern (``Split``, ``Isolated``) and then spells bytes GPT-2 style
(``ByteLevel`` without its own regex); a ``BPE`` model with
``ignore_merges: true`` (a piece that is itself in the vocab becomes that
token, as in tiktoken); special tokens as ``added_tokens``; a ``ByteLevel``
decoder.

Two quirks of ``tokenizers`` shape the file. It ignores the ids written in
``added_tokens``: it gives an added token the model's id for the same string,
or else the next free id. So each special token is also listed in the model's
vocab, under its literal text rather than its byte spelling, which pins its id.
And its regex engine (Oniguruma, Ruby syntax) reads ``X{1,3}+`` as "one or more
runs of one to three X", not as a possessive ``X{1,3}``; cl100k's pattern is
therefore written with an equivalent atomic group and read back as cl100k's.

>>> import tempfile
>>> from pathlib import Path
>>> from streambpe.patterns import GPT2
>>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: "<|é|>".encode()}
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = write_hf_json(Path(tmp) / "tokenizer.json", vocab, [(b"a", b"b")],
...                          {"<|é|>": 257}, GPT2)
...     read_hf_json(path) == (vocab, [(b"a", b"b")], {"<|é|>": 257}, GPT2)
True
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from streambpe._support.atomic import atomic_write
from streambpe.cutting.specials import validate_special_tokens
from streambpe.errors import FormatError
from streambpe.formats.gpt2 import (
    decode_merge,
    decode_vocab,
    encode_merges,
    encode_vocab,
    parse_merge_line,
    read_json_file,
)
from streambpe.formats.hf.pre_tokenizers import ONIGURUMA_SPELLINGS, POSSESSIVE_INTERVAL
from streambpe.patterns import GPT2

# ByteLevel options that leave bytes-to-characters spelling as the only job:
# no prefix space (it would change ids) and no built-in GPT-2 regex (the Split
# step before it already applied the pattern).
_BYTE_LEVEL = {"add_prefix_space": False, "trim_offsets": False, "use_regex": False}

_FROM_ONIGURUMA = {spelling: pattern for pattern, spelling in ONIGURUMA_SPELLINGS.items()}


def write_hf_json(
    path: str | os.PathLike[str],
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[bytes, bytes]],
    special_tokens: Mapping[str, int],
    pattern: str,
) -> Path:
    """Write a byte-level BPE ``tokenizer.json`` that ``tokenizers.Tokenizer.from_file`` loads.

    Special tokens go into ``added_tokens`` and, under their literal text, into
    the model's vocab (see the module docstring). A custom ``pattern`` using a
    possessive interval such as ``X{1,3}+`` raises ``ValueError``, since
    ``tokenizers`` would read it differently; spell it ``(?>X{1,3})``. The file
    is written whole or not at all (see :mod:`streambpe._support.atomic`).

    >>> import tempfile
    >>> from streambpe.patterns import GPT2
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_hf_json(Path(tmp) / "tokenizer.json", {0: b"a", 1: b"b", 2: b"ab"},
    ...                          [(b"a", b"b")], {}, GPT2)
    ...     model = json.loads(path.read_text(encoding="utf-8"))["model"]
    >>> model["vocab"], model["merges"]
    ({'a': 0, 'b': 1, 'ab': 2}, [['a', 'b']])
    """
    validate_special_tokens(special_tokens)
    special_ids = set(special_tokens.values())
    model_vocab = encode_vocab({i: token for i, token in vocab.items() if i not in special_ids})
    for token, token_id in special_tokens.items():
        # The literal text shares the key space with byte spellings. A clash with a
        # vocab entry cannot be written; other overlaps need a mojibake special
        # such as "Ã©" (the spelling of "é"), which ignore_merges would match.
        if token in model_vocab:
            raise ValueError(
                f"special token {token!r} reads the same as the byte spelling of token id "
                f"{model_vocab[token]}; tokenizer.json cannot tell them apart"
            )
        model_vocab[token] = token_id
    model_vocab = dict(sorted(model_vocab.items(), key=lambda item: item[1]))
    oniguruma_pattern = _oniguruma_spelling(pattern)
    document = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": token_id,
                "content": token,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for token, token_id in sorted(special_tokens.items(), key=lambda item: item[1])
        ],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": oniguruma_pattern},
                    "behavior": "Isolated",
                    "invert": False,
                },
                {"type": "ByteLevel", **_BYTE_LEVEL},
            ],
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", **_BYTE_LEVEL},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": model_vocab,
            "merges": [[left, right] for left, right in encode_merges(merges)],
        },
    }
    target = Path(path)
    with atomic_write(target) as file:
        file.write((json.dumps(document, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))
    return target


def read_hf_json(
    path: str | os.PathLike[str],
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]], dict[str, int], str | None]:
    """Read a byte-level BPE ``tokenizer.json`` into ``(vocab, merges, special_tokens, pattern)``.

    Merges may be ``"left right"`` strings (older files) or ``[left, right]``
    lists. Every added token counts as a special token: ``tokenizers`` cuts all
    of them out of the text before the model runs, which is exactly what
    streambpe does with special tokens. ``pattern`` is the ``Split`` regex, or
    GPT-2's pattern for a ``ByteLevel`` pre-tokenizer that uses its built-in
    regex, or ``None`` when the pre-tokenizer says neither.

    >>> import tempfile
    >>> document = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
    ...                       "merges": ["a b"]},
    ...             "pre_tokenizer": {"type": "ByteLevel", "use_regex": True},
    ...             "added_tokens": [{"id": 3, "content": "<s>", "special": True}]}
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "tokenizer.json"
    ...     _ = path.write_text(json.dumps(document), encoding="utf-8")
    ...     vocab, merges, specials, pattern = read_hf_json(path)
    >>> vocab, merges, specials, pattern == GPT2
    ({0: b'a', 1: b'b', 2: b'ab', 3: b'<s>'}, [(b'a', b'b')], {'<s>': 3}, True)
    """
    source = Path(path)
    name = str(source)
    document = read_json_file(source)
    if not isinstance(document, dict):
        raise FormatError(name, None, "expected a JSON object at the top level")
    model = document.get("model")
    if not isinstance(model, dict) or model.get("type", "BPE") != "BPE":
        raise FormatError(name, None, "model: expected a BPE model ({'type': 'BPE', ...})")
    for option in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(option):
            # Such affixes are glued onto vocab spellings and are not bytes of the token.
            raise FormatError(name, None, f"model.{option} is set; byte-level BPE has none")
    steps = _pre_tokenizer_steps(document.get("pre_tokenizer"))
    decoder = document.get("decoder")
    is_byte_level = any(step.get("type") == "ByteLevel" for step in steps) or (
        isinstance(decoder, dict) and decoder.get("type") == "ByteLevel"
    )
    if not is_byte_level:
        raise FormatError(
            name, None, "not a byte-level tokenizer: neither pre_tokenizer nor decoder is ByteLevel"
        )
    specials = _read_added_tokens(name, document.get("added_tokens", []))
    spelled = model.get("vocab")
    if isinstance(spelled, dict):
        # Specials sit in the model's vocab under their literal text, not a byte spelling.
        listed = set(specials)
        spelled = {key: value for key, value in spelled.items() if (key, value) not in listed}
    try:
        vocab = decode_vocab(spelled)
    except ValueError as exc:
        raise FormatError(name, None, f"model.vocab: {exc}") from exc
    for token, token_id in specials:
        encoded = token.encode("utf-8")
        existing = vocab.get(token_id)
        if existing is not None and existing != encoded:
            raise FormatError(
                name,
                None,
                f"added_tokens: {token!r} has id {token_id}, "
                f"which model.vocab gives to {existing!r}",
            )
        vocab[token_id] = encoded
    merges = _read_merges(name, model.get("merges"))
    return vocab, merges, dict(specials), _pattern_of(steps)


def _read_merges(name: str, entries: object) -> list[tuple[bytes, bytes]]:
    if not isinstance(entries, list):
        raise FormatError(name, None, "model.merges: expected an array")
    merges: list[tuple[bytes, bytes]] = []
    for index, entry in enumerate(entries):
        try:
            if isinstance(entry, str):
                merges.append(parse_merge_line(entry))
            elif (
                isinstance(entry, list)
                and len(entry) == 2
                and all(isinstance(side, str) for side in entry)
            ):
                merges.append(decode_merge(entry[0], entry[1]))
            else:
                raise ValueError(f'expected "left right" or [left, right], found {entry!r}')
        except ValueError as exc:
            raise FormatError(name, None, f"model.merges[{index}]: {exc}") from exc
    return merges


def _read_added_tokens(name: str, entries: object) -> list[tuple[str, int]]:
    """Return the ``(content, id)`` of every added token, checked like special tokens."""
    if not isinstance(entries, list):
        raise FormatError(name, None, "added_tokens: expected an array")
    specials: list[tuple[str, int]] = []
    for index, entry in enumerate(entries):
        token = entry.get("content") if isinstance(entry, dict) else None
        token_id = entry.get("id") if isinstance(entry, dict) else None
        if (
            not isinstance(token, str)
            or isinstance(token_id, bool)
            or not isinstance(token_id, int)
        ):
            raise FormatError(
                name, None, f"added_tokens[{index}]: expected {{'id': int, 'content': str, ...}}"
            )
        specials.append((token, token_id))
    try:
        validate_special_tokens(token for token, _ in specials)
    except ValueError as exc:
        raise FormatError(name, None, f"added_tokens: {exc}") from exc
    return specials


def _pre_tokenizer_steps(pre_tokenizer: object) -> list[dict[str, object]]:
    if not isinstance(pre_tokenizer, dict):
        return []
    if pre_tokenizer.get("type") == "Sequence":
        inner = pre_tokenizer.get("pretokenizers")
        return [step for step in inner if isinstance(step, dict)] if isinstance(inner, list) else []
    return [pre_tokenizer]


def _pattern_of(steps: list[dict[str, object]]) -> str | None:
    regexes = [
        regex
        for step in steps
        if step.get("type") == "Split"
        and isinstance(pattern := step.get("pattern"), dict)
        and isinstance(regex := pattern.get("Regex"), str)
    ]
    if len(regexes) == 1:
        return _FROM_ONIGURUMA.get(regexes[0], regexes[0])
    if not regexes and any(
        step.get("type") == "ByteLevel" and step.get("use_regex", True) for step in steps
    ):
        # ByteLevel's built-in regex is GPT-2's original spelling of the pattern,
        # which tiktoken's GPT2 pattern matches piece for piece.
        return GPT2
    return None


def _oniguruma_spelling(pattern: str) -> str:
    spelling = ONIGURUMA_SPELLINGS.get(pattern, pattern)
    if POSSESSIVE_INTERVAL.search(spelling):
        raise ValueError(
            f"pattern {pattern!r} has a possessive interval like X{{1,3}}+, which tokenizers' "
            "regex engine reads as (X{1,3})+; write it as the atomic group (?>X{1,3})"
        )
    return spelling
