"""In-memory encoding: streambpe against tiktoken on the same multilingual text.

Both tokenizers are built offline from the same ``.tiktoken`` files (r50k, the
GPT-2 encoding, and cl100k). streambpe starts every round with a fresh
``Tokenizer``, so its piece cache is cold: the time includes filling it, and
the reported hit rate says how much the cache then saved. tiktoken has no such
cache; ``encode`` and ``encode_ordinary`` run single-threaded.

``encode`` lets ``<|endoftext|>`` through as a special token on both sides
(tiktoken's ``allowed_special="all"``); ``encode_ordinary`` treats it as text.
Every streambpe result is checked against tiktoken's ids: a fast wrong answer
would make the ratio meaningless.

``encode_batch`` takes the same text cut into about 1000 documents; tiktoken's
version spreads them over threads, ours over whatever it uses.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

ENCODING_NAMES = ("r50k", "cl100k")
METHODS = ("encode", "encode_ordinary")
ROUNDS = 3


def ids_digest(ids: Sequence[int]) -> str:
    """A short fingerprint of a token list, to compare results without keeping them."""
    return hashlib.blake2b(array("I", ids).tobytes(), digest_size=16).hexdigest()


def tiktoken_call(encoding: Any, method: str) -> Callable[[str], list[int]]:
    """tiktoken's counterpart of our ``method``."""
    if method == "encode":
        return lambda text: encoding.encode(text, allowed_special="all")
    return encoding.encode_ordinary  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def reference_digests() -> dict[tuple[str, str], str]:
    """tiktoken results by ``(encoding, method)``, computed once per module."""
    return {}


def tiktoken_digest(
    digests: dict[tuple[str, str], str], files: EncodingFiles, method: str, text: str
) -> str:
    key = (files.name, method)
    if key not in digests:
        digests[key] = ids_digest(tiktoken_call(files.tiktoken(), method)(text))
    return digests[key]


def cache_hit_rate(tokenizer: Any) -> float | None:
    """Share of pieces answered by the piece cache, if the tokenizer reports it."""
    if not hasattr(tokenizer, "cache_info"):
        return None
    info = tokenizer.cache_info()
    lookups = info.hits + info.misses
    return round(info.hits / lookups, 4) if lookups else None


def fresh_tokenizer(streambpe_api: Callable[..., Any], files: EncodingFiles) -> Any:
    tokenizer_class = streambpe_api("Tokenizer")
    return tokenizer_class.from_tiktoken(
        files.path, pattern=files.pattern, special_tokens=files.special_tokens
    )


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_streambpe(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    encoding_files: Callable[[str], EncodingFiles],
    reference_digests: dict[tuple[str, str], str],
    encode_text: str,
    name: str,
    method: str,
) -> None:
    files = encoding_files(name)
    benchmark.group = f"{method}-{name}"
    tokenizers: list[Any] = []

    def cold_tokenizer() -> tuple[tuple[Any, str], dict[str, Any]]:
        tokenizers.append(fresh_tokenizer(streambpe_api, files))
        return (tokenizers[-1], encode_text), {}

    def run(tokenizer: Any, text: str) -> list[int]:
        return getattr(tokenizer, method)(text)  # type: ignore[no-any-return]

    ids = benchmark.pedantic(report.timed(run), setup=cold_tokenizer, rounds=ROUNDS)
    matches = ids_digest(ids) == tiktoken_digest(reference_digests, files, method, encode_text)
    report.finish(
        f"streambpe {method}",
        ours=True,
        input_bytes=len(encode_text.encode("utf-8")),
        tokens=len(ids),
        cache_hit_rate=cache_hit_rate(tokenizers[-1]),
        matches_tiktoken=matches,
    )
    assert matches, f"streambpe {method} ids differ from tiktoken's for {name}"


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_tiktoken(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    reference_digests: dict[tuple[str, str], str],
    encode_text: str,
    name: str,
    method: str,
) -> None:
    files = encoding_files(name)
    benchmark.group = f"{method}-{name}"
    call = tiktoken_call(files.tiktoken(), method)
    ids = benchmark.pedantic(report.timed(call), args=(encode_text,), rounds=ROUNDS)
    reference_digests[(name, method)] = ids_digest(ids)
    report.finish(
        f"tiktoken {method} (1 thread)",
        ours=False,
        input_bytes=len(encode_text.encode("utf-8")),
        tokens=len(ids),
    )


@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_batch_streambpe(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    encoding_files: Callable[[str], EncodingFiles],
    encode_documents: list[str],
    name: str,
) -> None:
    files = encoding_files(name)
    streambpe_api("Tokenizer", "encode_batch")
    benchmark.group = f"encode_batch-{name}"

    def cold_tokenizer() -> tuple[tuple[Any, list[str]], dict[str, Any]]:
        return (fresh_tokenizer(streambpe_api, files), encode_documents), {}

    def run(tokenizer: Any, documents: list[str]) -> list[list[int]]:
        return tokenizer.encode_batch(documents)  # type: ignore[no-any-return]

    batches = benchmark.pedantic(report.timed(run), setup=cold_tokenizer, rounds=ROUNDS)
    report.finish(
        "streambpe encode_batch",
        ours=True,
        input_bytes=sum(len(document.encode("utf-8")) for document in encode_documents),
        tokens=sum(map(len, batches)),
        documents=len(encode_documents),
    )


@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_batch_tiktoken(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    encode_documents: list[str],
    name: str,
) -> None:
    files = encoding_files(name)
    benchmark.group = f"encode_batch-{name}"
    encoding = files.tiktoken()
    batches = benchmark.pedantic(
        report.timed(encoding.encode_batch), args=(encode_documents,), rounds=ROUNDS
    )
    report.finish(
        "tiktoken encode_batch (8 threads)",
        ours=False,
        input_bytes=sum(len(document.encode("utf-8")) for document in encode_documents),
        tokens=sum(map(len, batches)),
        documents=len(encode_documents),
    )
