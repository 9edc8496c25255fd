"""Builders of ``tokenizer.json`` documents with the structures of real models, for the tests.

The vocabularies are small and trained here (never a real model's); the
structures (normalizers, pre-tokenizer chains, ``ignore_merges``, added-token
options, missing bytes, templates) are those of the models named.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from streambpe.formats.byte_unicode import encode_token

#: Pre-tokenizer regexes in the style of real models' files (Oniguruma dialect).
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
BYTE_LEVEL_ONLY = {
    "type": "ByteLevel",
    "add_prefix_space": False,
    "trim_offsets": True,
    "use_regex": False,
}
BYTE_LEVEL_DECODER = {
    "type": "ByteLevel",
    "add_prefix_space": True,
    "trim_offsets": True,
    "use_regex": True,
}

WORDS = (
    "the",
    "cat",
    "sat",
    "on",
    "mat",
    "running",
    "don't",
    "we'll",
    "THE",
    "Hello",
    "naïve",
    "café",
    "résumé",
    "Straße",
    "über",
    "Ωμέγα",
    "σοφία",
    "Привет",
    "мир",
    "日本語",
    "中文",
    "北京",
    "東京",
    "한국어",
    "안녕",
    "مرحبا",
    "שלום",
    "नमस्ते",
    "😀",
    "🚀",
    "x_y",
    "foo.bar",
)
ADVERSARIAL = (
    "",
    " ",
    "hello world",
    "  leading and trailing  ",
    "Cafe\u0301 na\u0131\u0308ve re\u0301sume\u0301 \u1100\u1161\u11a8",
    "ｶﾞｷﾞ ﬁ ① ²³ Ⅻ ㎏ \u212b\u0308",
    "mixed 日本語text with 123456789 and 3.14159, 1,000,000",
    "whitespace   runs\n\n\n  and\t\ttabs \r\n end   ",
    "CJK北京東京中文没有空格的句子很长很长",
    "DON'T we'll I'M THE'S",
    "emoji 😀🚀 and ZWJ 👩\u200d💻",
    "a\u0301\u0302\u0303 stacked marks \u0915\u094d\u0937",
)


def corpus(seed: int = 5, size: int = 40_000) -> str:
    """Seeded text of mixed scripts, digits and whitespace runs."""
    rng = random.Random(seed)
    parts: list[str] = []
    length = 0
    while length < size:
        kind = rng.random()
        if kind < 0.75:
            part = rng.choice(WORDS)
        elif kind < 0.85:
            part = str(rng.randint(0, 10 ** rng.randint(1, 7)))
        elif kind < 0.92:
            part = rng.choice(",.;:!?-()'\"")
        else:
            part = rng.choice(["\n", "\n\n", "  ", "\t"])
        parts.append(part)
        parts.append(" " if rng.random() < 0.8 else "")
        length += len(part) + 1
    return "".join(parts)


def texts(seed: int = 11, count: int = 30) -> list[str]:
    """Adversarial samples and random slices of generated text (NFD'd now and then)."""
    import unicodedata

    rng = random.Random(seed)
    text = corpus(seed, 6_000)
    samples = list(ADVERSARIAL)
    for _ in range(count):
        start = rng.randrange(len(text))
        piece = text[start : start + rng.randint(1, 200)]
        samples.append(unicodedata.normalize("NFD", piece) if rng.random() < 0.3 else piece)
    return samples


def added(content: str, token_id: int, **options: Any) -> dict[str, Any]:
    """One ``added_tokens`` entry; options default as real files spell them."""
    entry = {
        "id": token_id,
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": True,
    }
    entry.update(options)
    return entry


def split(
    pattern: str, behavior: str = "Isolated", invert: bool = False, *, string: bool = False
) -> dict[str, Any]:
    return {
        "type": "Split",
        "pattern": {"String" if string else "Regex": pattern},
        "behavior": behavior,
        "invert": invert,
    }


def document(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    *,
    pre_tokenizer: dict[str, Any] | None = None,
    normalizer: dict[str, Any] | None = None,
    added_tokens: list[dict[str, Any]] | None = None,
    ignore_merges: bool | None = None,
    merges_as_strings: bool = False,
    post_processor: dict[str, Any] | None = None,
    decoder: dict[str, Any] | None = BYTE_LEVEL_DECODER,
    missing_bytes: tuple[int, ...] = (),
) -> dict[str, Any]:
    """A ``tokenizer.json`` document over ``vocab`` and ``merges`` with the given components."""
    spelled = {encode_token(token): token_id for token_id, token in sorted(vocab.items())}
    if missing_bytes:
        # Ids stay contiguous without the missing bytes, so added tokens follow them.
        for byte in missing_bytes:
            del spelled[encode_token(bytes([byte]))]
        spelled = {spelling: i for i, spelling in enumerate(spelled)}
    pairs = [(encode_token(left), encode_token(right)) for left, right in merges]
    model: dict[str, Any] = {
        "type": "BPE",
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": False,
        "vocab": spelled,
        "merges": [f"{a} {b}" for a, b in pairs] if merges_as_strings else [list(p) for p in pairs],
    }
    if ignore_merges is not None:
        model["ignore_merges"] = ignore_merges
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added_tokens or [],
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer
        or {"type": "Sequence", "pretokenizers": [split(LLAMA3_PATTERN), BYTE_LEVEL_ONLY]},
        "post_processor": post_processor,
        "decoder": decoder,
        "model": model,
    }


def write(folder: Path, doc: dict[str, Any], name: str = "tokenizer.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path
