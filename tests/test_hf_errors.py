"""A ``tokenizer.json`` or ``tekken.json`` that streambpe would not encode exactly fails to load.

Every error is a :class:`~streambpe.errors.FormatError` naming the file, the
JSON path of the component or option, and what is wrong with it.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hf_documents import BYTE_LEVEL_ONLY, added, document, split, write

from streambpe import Tokenizer
from streambpe.errors import FormatError
from streambpe.formats.byte_unicode import encode_token

VOCAB = {i: bytes([i]) for i in range(256)} | {256: b"ab"}
MERGES = [(b"a", b"b")]

Change = Callable[[dict[str, Any]], None]


def pre(*steps: dict[str, Any]) -> Change:
    def change(doc: dict[str, Any]) -> None:
        doc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": list(steps)}

    return change


def setting(*keys: str | int, value: object) -> Change:
    def change(doc: dict[str, Any]) -> None:
        node: Any = doc
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    return change


def drop_byte(byte: int) -> Change:
    def change(doc: dict[str, Any]) -> None:
        del doc["model"]["vocab"][encode_token(bytes([byte]))]

    return change


def collide(doc: dict[str, Any]) -> None:
    # 257 entries, so tokenizers gives the first added token id 257: another token's.
    doc["model"]["vocab"] = {encode_token(bytes([i])): i for i in range(256)} | {"ab": 257}
    doc["model"]["merges"] = [["a", "b"]]
    doc["added_tokens"] = [added("<s>", 257)]


TEMPLATE_WITH_B = {
    "type": "TemplateProcessing",
    "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {},
}

CASES: list[tuple[str, Change, str]] = [
    (
        "bert-normalizer",
        setting("normalizer", value={"type": "BertNormalizer"}),
        r"normalizer\.type: normalizer 'BertNormalizer' is not supported",
    ),
    (
        "sequence-normalizer",
        setting(
            "normalizer",
            value={"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "StripAccents"}]},
        ),
        r"normalizer\.normalizers\[1\]\.type: normalizer 'StripAccents' is not supported",
    ),
    (
        "replace-pattern",
        setting("normalizer", value={"type": "Replace", "pattern": "x", "content": ""}),
        r"normalizer\.pattern: expected an object",
    ),
    (
        "null-pre-tokenizer",
        setting("pre_tokenizer", value=None),
        r"pre_tokenizer: is null: tokenizers would give the model characters",
    ),
    (
        "metaspace",
        setting("pre_tokenizer", value={"type": "Metaspace"}),
        r"pre_tokenizer: not a byte-level tokenizer",
    ),
    (
        "unknown-step",
        pre(split("a"), {"type": "Punctuation"}, BYTE_LEVEL_ONLY),
        r"pre_tokenizer\.pretokenizers\[1\]\.type: pre-tokenizer 'Punctuation' is not supported",
    ),
    (
        "behavior",
        pre(split("a", "Isolate"), BYTE_LEVEL_ONLY),
        r"pre_tokenizer\.pretokenizers\[0\]\.behavior: unknown split behavior 'Isolate'",
    ),
    (
        "possessive-interval",
        pre(split(r"\d{1,3}+"), BYTE_LEVEL_ONLY),
        r"pre_tokenizer\.pretokenizers\[0\]\.pattern: a repeat like X\{1,3\}\+",
    ),
    (
        "bad-regex",
        pre(split("(a"), BYTE_LEVEL_ONLY),
        r"pre_tokenizer\.pretokenizers\[0\]\.pattern\.Regex: not a regex",
    ),
    (
        "prefix-space-after-split",
        pre(split("a"), dict(BYTE_LEVEL_ONLY, add_prefix_space=True)),
        r"pre_tokenizer\.pretokenizers\[1\]\.add_prefix_space: add_prefix_space after other",
    ),
    (
        "byte-level-first",
        pre(BYTE_LEVEL_ONLY, split("a"), BYTE_LEVEL_ONLY),
        r"pre_tokenizer\.pretokenizers\[0\]: ByteLevel must be the last pre-tokenizer",
    ),
    (
        "word-piece",
        setting("model", "type", value="WordPiece"),
        r"model\.type: model 'WordPiece' \(only BPE is\) is not supported",
    ),
    ("dropout", setting("model", "dropout", value=0.1), r"model\.dropout: BPE dropout"),
    (
        "subword-prefix",
        setting("model", "continuing_subword_prefix", value="##"),
        r"model\.continuing_subword_prefix: a non-empty continuing_subword_prefix",
    ),
    (
        "word-suffix",
        setting("model", "end_of_word_suffix", value="</w>"),
        r"model\.end_of_word_suffix: a non-empty end_of_word_suffix",
    ),
    (
        "vocab-id",
        setting("model", "vocab", "ab", value="x"),
        r"model\.vocab\['ab'\]: expected a non-negative integer, found 'x'",
    ),
    (
        "merge-shape",
        setting("model", "merges", value=["a b c"]),
        r"model\.merges\[0\]: expected two non-empty tokens",
    ),
    (
        "merge-type",
        setting("model", "merges", value=[7]),
        r"model\.merges\[0\]: expected \"left right\" or \[left, right\], found 7",
    ),
    (
        "merge-out-of-vocab",
        setting("model", "merges", value=[["a", "zz"]]),
        r"model\.merges\[0\]: 'zz' is not in model\.vocab",
    ),
    (
        "missing-byte",
        drop_byte(0x41),
        r"model\.vocab: lacks 1 single byte\(s\) that text can hold \(first: 0x41",
    ),
    (
        "byte-fallback",
        lambda d: (drop_byte(0xFF)(d), setting("model", "byte_fallback", value=True)(d)),
        r"model\.byte_fallback: byte_fallback with bytes missing",
    ),
    (
        "added-id",
        setting("added_tokens", value=[added("<s>", 300)]),
        r"added_tokens\[0\]\.id: '<s>' is given id 300, but tokenizers gives it 257",
    ),
    (
        "added-content",
        setting("added_tokens", value=[{"id": 257, "content": 5}]),
        r"added_tokens\[0\]\.content: expected a string, found 5",
    ),
    (
        "added-twice",
        setting("added_tokens", value=[added("<s>", 257), added("<s>", 258)]),
        r"added_tokens\[1\]\.content: '<s>' is listed twice",
    ),
    ("added-collides", collide, r"added_tokens\[0\]: '<s>' gets id 257, which model\.vocab gives"),
    (
        "added-flag",
        setting("added_tokens", value=[added("<s>", 257, lstrip="yes")]),
        r"added_tokens\[0\]\.lstrip: expected true or false, found 'yes'",
    ),
    (
        "roberta",
        setting("post_processor", value={"type": "RobertaProcessing"}),
        r"post_processor\.type: post-processor 'RobertaProcessing' is not supported",
    ),
    (
        "template-b",
        setting("post_processor", value=TEMPLATE_WITH_B),
        r"post_processor\.single\[1\]: a single-sequence template with other than one \$A",
    ),
    (
        "decoder",
        setting("decoder", value={"type": "WordPiece"}),
        r"decoder\.type: decoder 'WordPiece' is not supported",
    ),
    (
        "decoder-sequence",
        setting(
            "decoder",
            value={"type": "Sequence", "decoders": [{"type": "ByteLevel"}, {"type": "Fuse"}]},
        ),
        r"decoder\.decoders\[1\]\.type: decoder 'Fuse' is not supported",
    ),
    (
        "truncation",
        setting("truncation", value={"max_length": 5}),
        r"truncation: truncation \(it changes what encode returns\) is not supported",
    ),
]


@pytest.mark.parametrize(("change", "problem"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_unsupported_or_malformed_component_names_its_path(
    tmp_path: Path, change: Change, problem: str
) -> None:
    doc = document(VOCAB, MERGES)
    change(doc)
    path = write(tmp_path, doc)
    with pytest.raises(FormatError, match=problem) as caught:
        Tokenizer.load(path)
    assert caught.value.path == str(path)


def test_top_level_must_be_an_object(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(FormatError, match="the top level: expected an object, found list"):
        Tokenizer.load(path)


def test_a_folder_is_searched_for_tokenizer_json(tmp_path: Path) -> None:
    write(tmp_path, document(VOCAB, MERGES, added_tokens=[added("<s>", 257)]))
    assert Tokenizer.load(tmp_path).encode("ab<s>") == [256, 257]


def tekken(**changes: Any) -> dict[str, Any]:
    vocab = [
        {"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None}
        for i in range(256)
    ]
    doc: dict[str, Any] = {
        "config": {
            "pattern": r"\S+|\s+",
            "default_vocab_size": 259,
            "default_num_special_tokens": 3,
            "version": "v7",
        },
        "vocab": vocab,
        "special_tokens": [{"rank": 0, "token_str": "<unk>", "is_control": True}],
    }
    for keys, value in changes.items():
        node = doc
        *path, last = keys.split("__")
        for key in path:
            node = node[int(key) if key.isdigit() else key]
        node[int(last) if last.isdigit() else last] = value
    return doc


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        (tekken(config__pattern="(x"), r"config\.pattern: not a regex"),
        (tekken(config__default_vocab_size=9999), r"config\.default_vocab_size: 9999 minus 3"),
        (tekken(vocab__3__rank=4), r"vocab\[3\]\.rank: expected rank 3 at index 3"),
        (tekken(vocab__3__token_bytes="!!"), r"vocab\[3\]\.token_bytes: not base64"),
        (
            tekken(vocab__3__token_bytes="AA=="),
            r"vocab\[3\]\.token_bytes: b'\\x00' cannot have rank 3",
        ),
        (
            tekken(special_tokens=[{"rank": 5, "token_str": "<x>"}]),
            r"special_tokens\[0\]\.rank: rank 5",
        ),
        (
            {k: v for k, v in tekken(config__version="v11").items() if k != "special_tokens"},
            "a version v11 file must list its special_tokens",
        ),
    ],
)
def test_malformed_tekken_names_its_path(tmp_path: Path, doc: dict[str, Any], problem: str) -> None:
    path = tmp_path / "tekken.json"
    path.write_text(json.dumps(copy.deepcopy(doc)), encoding="utf-8")
    with pytest.raises(FormatError, match=problem):
        Tokenizer.load(path)


def test_paths_in_messages_are_json_paths() -> None:
    """Guards the table above: every expected message starts with a JSON path."""
    for name, _, problem in CASES:
        assert re.match(r"[a-z_]+(\\\.|\\\[|:| )", problem), name
