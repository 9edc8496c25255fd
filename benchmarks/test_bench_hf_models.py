"""Real models' ``tokenizer.json`` structures: streambpe against Hugging Face ``tokenizers`` and tiktoken.

Each configuration is a ``tokenizer.json`` with a real model's structure over
cl100k's vocabulary (its merges derived from the ranks, once per session):

- ``llama3``: one ``Split`` with Llama 3's pattern, ``ignore_merges: true``,
  256 special added tokens and a BOS template;
- ``qwen3``: the ``NFC`` normalizer, Qwen's pattern, ``ignore_merges`` absent
  (so false), special and non-special added tokens;
- ``deepseek-v3``: a chain of three ``Split`` steps, ``ignore_merges`` absent.

For each, on the same text (the generated prose of ``--bench-encode-mb``):
streambpe's ``encode`` (compiled backend, one thread, cold piece cache),
``tokenizers``' ``encode(text, add_special_tokens=False)`` (one call, one
thread) and tiktoken's cl100k ``encode_ordinary``, the speed the issue
measures against. streambpe's ids are checked against ``tokenizers``' first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from peers import first_difference

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN_PATTERN = LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")
DEEPSEEK_V3_STEPS = [
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
    r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
]
CONFIGURATIONS = ("llama3", "qwen3", "deepseek-v3")
BYTE_LEVEL = {
    "type": "ByteLevel",
    "add_prefix_space": False,
    "trim_offsets": True,
    "use_regex": False,
}
ROUNDS = 3


def _split(pattern: str) -> dict[str, Any]:
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}


def _added(content: str, token_id: int, special: bool = True) -> dict[str, Any]:
    return {
        "id": token_id,
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": special,
    }


def _document(files: EncodingFiles, name: str, merges: list[list[str]]) -> dict[str, Any]:
    from streambpe.formats.byte_unicode import encode_token
    from streambpe.formats.tiktoken_file import read_tiktoken

    vocab = {encode_token(token): rank for token, rank in read_tiktoken(files.path).items()}
    first = len(vocab)
    model: dict[str, Any] = {
        "type": "BPE",
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": False,
        "vocab": vocab,
        "merges": merges,
    }
    document: dict[str, Any] = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "normalizer": None,
        "post_processor": None,
        "decoder": dict(BYTE_LEVEL, add_prefix_space=True, use_regex=True),
        "model": model,
    }
    if name == "llama3":
        model["ignore_merges"] = True
        names = ["<|begin_of_text|>", "<|end_of_text|>"]
        names += [f"<|reserved_special_token_{i}|>" for i in range(254)]
        document["added_tokens"] = [_added(token, first + i) for i, token in enumerate(names)]
        steps = [_split(LLAMA3_PATTERN)]
    elif name == "qwen3":
        document["normalizer"] = {"type": "NFC"}
        names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        document["added_tokens"] = [_added(token, first + i) for i, token in enumerate(names)]
        document["added_tokens"] += [_added("<think>", first + 3, special=False)]
        steps = [_split(QWEN_PATTERN)]
    else:
        document["added_tokens"] = [_added("<\uff5cbegin\u2581of\u2581sentence\uff5c>", first)]
        steps = [_split(pattern) for pattern in DEEPSEEK_V3_STEPS]
    document["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [*steps, BYTE_LEVEL]}
    return document


@pytest.fixture(scope="module")
def model_files(
    tmp_path_factory: pytest.TempPathFactory, encoding_files: Callable[[str], EncodingFiles]
) -> dict[str, Path]:
    """Each configuration's ``tokenizer.json``, over cl100k's vocabulary."""
    from streambpe.formats.byte_unicode import encode_token
    from streambpe.formats.tiktoken_file import merges_from_ranks, read_tiktoken

    files = encoding_files("cl100k")
    merges = [
        [encode_token(left), encode_token(right)]
        for left, right in merges_from_ranks(read_tiktoken(files.path))
    ]
    folder = tmp_path_factory.mktemp("hf-models")
    paths = {}
    for name in CONFIGURATIONS:
        path = folder / f"{name}.json"
        path.write_text(json.dumps(_document(files, name, merges)), encoding="utf-8")
        paths[name] = path
    return paths


@pytest.fixture(scope="module")
def hf_ids() -> dict[str, list[int]]:
    """``tokenizers``' ids per configuration, filled by its own benchmark or on demand."""
    return {}


def _reference_ids(
    cache: dict[str, list[int]], model_files: dict[str, Path], name: str, text: str
) -> list[int]:
    if name not in cache:
        from tokenizers import Tokenizer as HFTokenizer

        reference = HFTokenizer.from_file(str(model_files[name]))
        cache[name] = reference.encode(text, add_special_tokens=False).ids
    return cache[name]


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_hf_model_tokenizers(
    benchmark: Any,
    report: Report,
    model_files: dict[str, Path],
    hf_ids: dict[str, list[int]],
    encode_text: str,
    name: str,
) -> None:
    from tokenizers import Tokenizer as HFTokenizer

    benchmark.group = f"hf-model-{name}"
    reference = HFTokenizer.from_file(str(model_files[name]))

    def run(text: str) -> list[int]:
        return reference.encode(text, add_special_tokens=False).ids  # type: ignore[no-any-return]

    hf_ids[name] = benchmark.pedantic(report.timed(run), args=(encode_text,), rounds=1)
    report.finish("tokenizers encode (1 call)", ours=False, input_bytes=len(encode_text.encode()))


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_hf_model_streambpe(
    benchmark: Any,
    report: Report,
    model_files: dict[str, Path],
    hf_ids: dict[str, list[int]],
    encode_text: str,
    name: str,
) -> None:
    from streambpe import Tokenizer
    from streambpe.core import available_backends, using_backend

    if "native" not in available_backends():
        pytest.skip("the compiled core is not built")
    benchmark.group = f"hf-model-{name}"
    tokenizer = Tokenizer.load(model_files[name])
    expected = _reference_ids(hf_ids, model_files, name, encode_text)
    with using_backend("native"):
        difference = first_difference(expected, tokenizer.encode(encode_text))
        assert difference is None, f"{name}: ids differ from tokenizers' ({difference})"

        def cold() -> tuple[tuple[str], dict[str, Any]]:
            tokenizer.clear_cache()
            return (encode_text,), {}

        ids = benchmark.pedantic(report.timed(tokenizer.encode), setup=cold, rounds=ROUNDS)
    report.finish(
        "streambpe encode",
        ours=True,
        backend="native",
        input_bytes=len(encode_text.encode()),
        tokens=len(ids),
        engine=tokenizer.pretokenizer_engine,
    )


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_hf_model_tiktoken_cl100k(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    encode_text: str,
    name: str,
) -> None:
    benchmark.group = f"hf-model-{name}"
    encoding = encoding_files("cl100k").tiktoken()
    benchmark.pedantic(report.timed(encoding.encode_ordinary), args=(encode_text,), rounds=ROUNDS)
    report.finish(
        "tiktoken cl100k encode_ordinary (1 thread)",
        ours=False,
        input_bytes=len(encode_text.encode()),
    )
