"""Real models' ``tokenizer.json`` structures give Hugging Face ``tokenizers``' ids.

Each configuration copies a real model's structure (normalizer, pre-tokenizer,
``ignore_merges``, added tokens and their options, missing bytes, template)
over a small vocabulary trained here, with extra vocabulary tokens that no
merge makes and extra merges that cannot always fire. ``tokenizers`` reads
the same file and is the oracle, on adversarial text (NFD input, mixed
scripts, digits, CJK, whitespace runs, added tokens inside words).
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from hf_documents import (
    BYTE_LEVEL_ONLY,
    LLAMA3_PATTERN,
    QWEN_PATTERN,
    added,
    corpus,
    document,
    split,
    texts,
    write,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer

from streambpe import Tokenizer, train_bpe
from streambpe.formats.byte_unicode import encode_token

# The exactness tests run once per backend (docs/design.md, "Backends").
pytestmark = pytest.mark.usefixtures("backend")

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Vocab, Merges]:
    """A small trained vocabulary, plus tokens no merge makes and merges that rarely fire."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(corpus(), encoding="utf-8")
    vocab, merges = train_bpe(path, 700, workers=1)
    known = set(vocab.values())
    rng = random.Random(3)
    tokens = sorted(token for token in known if len(token) > 1)
    # Whole words that BPE on their bytes does not give (what ignore_merges decides).
    for word in ("running", " running", " Straße", "日本語", " mat", "naïve", "123"):
        if word.encode() not in known:
            vocab[len(vocab)] = word.encode()
            known.add(word.encode())
    # Merges of existing tokens, listed late: some can fire, some never can.
    for _ in range(40):
        left, right = rng.choice(tokens), rng.choice(tokens)
        if left + right not in known:
            vocab[len(vocab)] = left + right
            known.add(left + right)
        if (left, right) not in merges:
            merges.append((left, right))
    # Merges that can never fire: (a, bc) where (a, b) ranks below (b, c), so
    # "b" always joins "a" before it could join "c". Rank-based BPE over every
    # merge would still make "abc" out of "a" next to "bc".
    rank_of = {merge: rank for rank, merge in enumerate(merges)}
    blocked = [
        (a, b + c)
        for (a, b), first in list(rank_of.items())[:300]
        for (b2, c) in list(rank_of)[first + 1 : first + 200]
        if b2 == b and a + b + c not in known
    ][:12]
    for left, right in blocked:
        vocab[len(vocab)] = left + right
        known.add(left + right)
        merges.append((left, right))
    return vocab, merges


def llama3_specials(first_id: int) -> list[dict[str, Any]]:
    names = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|eot_id|>"]
    names += [f"<|reserved_special_token_{i}|>" for i in range(40)]
    return [added(name, first_id + i) for i, name in enumerate(names)]


BOS_TEMPLATE = {
    "type": "Sequence",
    "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
            ],
            "pair": [],
            "special_tokens": {
                "<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [0], "tokens": []}
            },
        },
    ],
}


def qwen_specials(first_id: int) -> list[dict[str, Any]]:
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    ordinary = ["<think>", "</think>", "<tool_call>"]
    return [added(name, first_id + i) for i, name in enumerate(specials)] + [
        added(name, first_id + 3 + i, special=False) for i, name in enumerate(ordinary)
    ]


def flagged_specials(first_id: int) -> list[dict[str, Any]]:
    return [
        added("<mask>", first_id, lstrip=True),
        added("<sep>", first_id + 1, rstrip=True),
        added("zebra", first_id + 2, single_word=True, special=False),
        added("<both>", first_id + 3, lstrip=True, rstrip=True, single_word=True),
        added("heLLo", first_id + 4, normalized=True, special=False, rstrip=True, single_word=True),
    ]


#: The bytes DeepSeek LLM's vocabulary lacks (they never occur in UTF-8).
MISSING_BYTES = (0xC0, 0xC1, *range(0xF5, 0x100))


def byte_spelled_tokens(first_id: int) -> list[dict[str, Any]]:
    """Non-special added tokens spelled like the missing bytes, as DeepSeek LLM has them."""
    return [
        added(encode_token(bytes([byte])), first_id + i, special=False, normalized=True)
        for i, byte in enumerate(MISSING_BYTES)
    ] + [added("<\uff5cbegin\u2581of\u2581sentence\uff5c>", first_id + len(MISSING_BYTES))]


SEQUENCE_NORMALIZER = {
    "type": "Sequence",
    "normalizers": [
        {"type": "NFKC"},
        {"type": "Replace", "pattern": {"Regex": r"\s{3,}"}, "content": "  "},
        {"type": "Replace", "pattern": {"String": "ß"}, "content": "ss"},
        {"type": "Replace", "pattern": {"Regex": "[ \t]+$"}, "content": "|"},
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Lowercase"},
    ],
}

DEEPSEEK_V3_STEPS = [
    split(r"\p{N}{1,3}"),
    split("[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"),
    split(
        r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
        r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    ),
]
DEEPSEEK_LLM_STEPS = [
    split(r"[\r\n]"),
    split(r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-Ⴥ]+"),
    split("\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"),
    split(r"\s+$"),
    split(r"[一-龥ࠀ-一가-퟿]+"),
    {"type": "Digits", "individual_digits": True},
]
BEHAVIOR_STEPS = [
    split(" ", "Removed", string=True),
    split("-", "MergedWithPrevious", string=True),
    split(",", "MergedWithNext", string=True),
    split(r"\p{N}", "Contiguous"),
    split(r"\p{Han}+", invert=True),
    {"type": "Digits", "individual_digits": False},
]


def chain(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"type": "Sequence", "pretokenizers": [*steps, BYTE_LEVEL_ONLY]}


#: name -> (document options, added tokens builder), each a real model's structure.
CONFIGURATIONS: dict[str, tuple[dict[str, Any], Callable[[int], list[dict[str, Any]]] | None]] = {
    "llama3": ({"ignore_merges": True, "post_processor": BOS_TEMPLATE}, llama3_specials),
    "llama3.2": ({"post_processor": BOS_TEMPLATE}, llama3_specials),
    "qwen3": (
        {
            "normalizer": {"type": "NFC"},
            "pre_tokenizer": {
                "type": "Sequence",
                "pretokenizers": [split(QWEN_PATTERN), BYTE_LEVEL_ONLY],
            },
        },
        qwen_specials,
    ),
    "minimax": ({"normalizer": {"type": "NFC"}, "ignore_merges": False}, qwen_specials),
    "glm4": ({"merges_as_strings": True, "ignore_merges": False}, qwen_specials),
    "gpt2": (
        {
            "pre_tokenizer": {
                "type": "ByteLevel",
                "add_prefix_space": False,
                "trim_offsets": True,
                "use_regex": True,
            }
        },
        lambda first: [added("<|endoftext|>", first)],
    ),
    "roberta-prefix-space": (
        {
            "pre_tokenizer": {
                "type": "ByteLevel",
                "add_prefix_space": True,
                "trim_offsets": True,
                "use_regex": True,
            }
        },
        flagged_specials,
    ),
    "nfkc": ({"normalizer": {"type": "NFKC"}}, None),
    "nfd": ({"normalizer": {"type": "NFD"}}, None),
    "nfkd": ({"normalizer": {"type": "NFKD"}, "ignore_merges": True}, None),
    "normalizer-sequence": ({"normalizer": SEQUENCE_NORMALIZER}, flagged_specials),
    "added-token-options": ({"normalizer": {"type": "Lowercase"}}, flagged_specials),
    "deepseek-llm-missing-bytes": ({"missing_bytes": MISSING_BYTES}, byte_spelled_tokens),
    "deepseek-v3": ({"pre_tokenizer": chain(*DEEPSEEK_V3_STEPS)}, qwen_specials),
    "deepseek-llm": (
        {"pre_tokenizer": chain(*DEEPSEEK_LLM_STEPS), "missing_bytes": MISSING_BYTES},
        byte_spelled_tokens,
    ),
    "split-behaviors": ({"pre_tokenizer": chain(*BEHAVIOR_STEPS)}, None),
    "whitespace": ({"pre_tokenizer": chain({"type": "Whitespace"})}, None),
    "digits-then-byte-level-regex": (
        {
            "pre_tokenizer": {
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Digits", "individual_digits": True},
                    dict(BYTE_LEVEL_ONLY, use_regex=True),
                ],
            }
        },
        None,
    ),
    "byte-level-whole-stretch": (
        {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [BYTE_LEVEL_ONLY]}},
        qwen_specials,
    ),
}


def build(folder: Path, trained: tuple[Vocab, Merges], name: str) -> Path:
    vocab, merges = trained
    options, specials = CONFIGURATIONS[name]
    first_id = len(vocab) - len(options.get("missing_bytes", ()))
    added_tokens = specials(first_id) if specials else []
    if options.get("post_processor") is BOS_TEMPLATE:
        options = dict(options)
        template = json.loads(json.dumps(BOS_TEMPLATE))
        template["processors"][1]["special_tokens"]["<|begin_of_text|>"]["ids"] = [len(vocab)]
        options["post_processor"] = template
    return write(folder, document(vocab, merges, added_tokens=added_tokens, **options))


def special_samples() -> list[str]:
    """Added tokens inside words, next to whitespace, and overlapping each other."""
    return [
        "a<|begin_of_text|>b <|eot_id|> <|reserved_special_token_3|>x",
        "word<mask> word <mask>  spaced<sep>   after <both> x<both>y zebra zebras _zebra zebra\u0301 zebra",
        "HELLO hello Hello<|im_start|>user\nhi<|im_end|><think>x</think>",
        "<|endoftext|><|endoftext|> <|im_start|><|im_start",
        "ÀÁ Àx õ ÿ ü <\uff5cbegin\u2581of\u2581sentence\uff5c>hi",
        "path, math, atrium and baths",
        "trailing blanks  \nnext line\t\nlast",
        "",
    ]


@pytest.mark.parametrize("name", sorted(CONFIGURATIONS))
def test_configuration_gives_tokenizers_ids(
    tmp_path: Path, trained: tuple[Vocab, Merges], name: str
) -> None:
    path = build(tmp_path, trained, name)
    reference = HFTokenizer.from_file(str(path))
    ours = Tokenizer.load(path)
    for text in [*texts(), *special_samples()]:
        expected = reference.encode(text, add_special_tokens=False).ids
        assert ours.encode(text) == expected, (name, text)
        with_template = reference.encode(text, add_special_tokens=True).ids
        assert ours.encode(text, add_special_tokens=True) == with_template, (name, text)
        assert ours.decode(expected) == reference.decode(expected, skip_special_tokens=False)
        assert ours.decode(expected, skip_special_tokens=True) == reference.decode(
            expected, skip_special_tokens=True
        )


def test_the_samples_need_dropped_merges_and_ignore_merges(
    tmp_path: Path, trained: tuple[Vocab, Merges]
) -> None:
    """Guards the test data: with every merge kept, or ignore_merges read the
    other way, some sample would get other ids."""
    vocab, merges = trained
    samples = [*texts(), "path, math, atrium and baths"]
    whole = write(tmp_path, document(vocab, merges, ignore_merges=True), "true.json")
    reference = HFTokenizer.from_file(str(whole))
    every_merge = Tokenizer(vocab, merges, pattern=LLAMA3_PATTERN)
    assert any(every_merge.encode(t) != reference.encode(t).ids for t in samples)
    merged = HFTokenizer.from_file(str(build(tmp_path, trained, "llama3.2")))
    read_as_true = Tokenizer.load(whole)
    assert any(read_as_true.encode(t) != merged.encode(t).ids for t in samples)


TEKKEN_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def test_tekken_layout_gives_mistral_common_ids(
    tmp_path: Path, trained: tuple[Vocab, Merges]
) -> None:
    """mistral-common encodes with tiktoken over the first ranks, then shifts past the specials."""
    vocab, _ = trained
    tokens = [vocab[i] for i in sorted(vocab)]
    specials, used = 100, len(tokens) - 10
    doc = {
        "config": {
            "pattern": TEKKEN_PATTERN,
            "default_vocab_size": specials + used,
            "default_num_special_tokens": specials,
            "version": "v13",
        },
        "vocab": [
            {"rank": rank, "token_bytes": base64.b64encode(token).decode(), "token_str": None}
            for rank, token in enumerate(tokens)
        ],
        "special_tokens": [
            {"rank": rank, "token_str": name, "is_control": True}
            for rank, name in enumerate(["<unk>", "<s>", "</s>", "[INST]"])
        ],
    }
    path = write(tmp_path, doc, "tekken.json")
    reference = tiktoken.Encoding(
        "tekken-test",
        pat_str=TEKKEN_PATTERN,
        mergeable_ranks={token: rank for rank, token in enumerate(tokens[:used])},
        special_tokens={},
    )
    ours = Tokenizer.load(path)
    for text in [*texts(), "[INST] hi [/INST]"]:
        expected = [i + specials for i in reference.encode(text, disallowed_special=())]
        assert ours.encode_ordinary(text) == expected
        assert ours.decode(expected) == reference.decode([i - specials for i in expected])
    assert ours.encode("[INST]hi") == [3, *ours.encode_ordinary("hi")]
    assert ours.special_tokens["<SPECIAL_99>"] == 99 and ours.n_vocab == specials + used


def test_saved_tokenizer_json_loads_alike_in_tokenizers(
    tmp_path: Path, trained: tuple[Vocab, Merges]
) -> None:
    ours = Tokenizer.load(build(tmp_path, trained, "added-token-options"))
    folder = ours.save(tmp_path / "saved", format="hf")
    reference = HFTokenizer.from_file(str(folder / "tokenizer.json"))
    again = Tokenizer.load(folder)
    for text in [*texts(), *special_samples()]:
        assert again.encode(text) == ours.encode(text) == reference.encode(text).ids
    Tokenizer(trained[0], trained[1]).save(tmp_path / "over", format="gpt2")
    ours.save(tmp_path / "over", format="hf")
    assert Tokenizer.load(tmp_path / "over").encode("heLLo <mask>") == ours.encode("heLLo <mask>")
    with pytest.raises(ValueError, match="saves only as format='hf'"):
        ours.save(tmp_path / "gpt2", format="gpt2")


@st.composite
def merge_lists(draw: st.DrawFn) -> tuple[Vocab, Merges]:
    """Random merge lists over three letters, fireable or not, plus tokens no merge makes."""
    vocab: Vocab = {i: bytes([i]) for i in range(256)}
    tokens = [b"a", b"b", b"c"]
    merges: Merges = []
    for _ in range(draw(st.integers(0, 14))):
        pair = (draw(st.sampled_from(tokens)), draw(st.sampled_from(tokens)))
        if pair in merges:
            continue
        merges.append(pair)
        if pair[0] + pair[1] not in vocab.values():
            vocab[len(vocab)] = pair[0] + pair[1]
            tokens.append(pair[0] + pair[1])
    for extra in draw(st.lists(st.text("abc", min_size=2, max_size=4), max_size=3)):
        if extra.encode() not in vocab.values():
            vocab[len(vocab)] = extra.encode()
    return vocab, merges


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=merge_lists(),
    ignore_merges=st.booleans(),
    samples=st.lists(st.text("abc", max_size=12), min_size=1, max_size=6),
)
def test_random_merge_lists_give_tokenizers_ids(
    tmp_path_factory: pytest.TempPathFactory,
    model: tuple[Vocab, Merges],
    ignore_merges: bool,
    samples: list[str],
) -> None:
    """Whole texts as one piece: only the BPE model decides, against merge-list BPE."""
    vocab, merges = model
    whole = {"type": "Sequence", "pretokenizers": [BYTE_LEVEL_ONLY]}
    doc = document(vocab, merges, pre_tokenizer=whole, ignore_merges=ignore_merges)
    path = write(tmp_path_factory.mktemp("random"), doc)
    reference = HFTokenizer.from_file(str(path))
    ours = Tokenizer.load(path)
    for text in samples:
        assert ours.encode(text) == reference.encode(text).ids, (text, merges)
