"""Decoding (issue 25, goal 6): ids back to text, at once and one id at a time.

* ``decode-o200k``: ``decode_bytes`` and ``decode`` of the ids of the
  ``--bench-encode-mb`` prose (tiktoken's ids of it, o200k), by streambpe per
  backend, tiktoken and fastokens; every result is checked against the text.
  Goal: ours at least tiktoken's speed.
* ``decode-stream-o200k``: the first ``STREAM_IDS`` of those ids fed one at a
  time, as a model generates them, through ``Tokenizer.decode_stream`` and
  through what a tiktoken user writes (``decode_single_token_bytes`` into a
  ``codecs`` incremental UTF-8 decoder); the text must come out whole.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

ROUNDS = 3
STREAM_IDS = 200_000


@pytest.fixture(scope="module")
def o200k(encoding_files: Callable[[str], EncodingFiles]) -> EncodingFiles:
    return encoding_files("o200k")


@pytest.fixture(scope="module")
def reference(o200k: EncodingFiles) -> Any:
    return o200k.tiktoken()


@pytest.fixture(scope="module")
def prose_ids(reference: Any, encode_text: str) -> list[int]:
    return reference.encode(encode_text, allowed_special="all")  # type: ignore[no-any-return]


def _ours(streambpe_api: Callable[..., Any], files: EncodingFiles) -> Any:
    return streambpe_api("Tokenizer").from_tiktoken(
        files.path, pattern=files.pattern, special_tokens=files.special_tokens
    )


@pytest.mark.parametrize("method", ["decode_bytes", "decode"])
def test_decode_streambpe(
    benchmark: Any,
    report: Report,
    backend: str,
    method: str,
    o200k: EncodingFiles,
    prose_ids: list[int],
    encode_text: str,
    streambpe_api: Callable[..., Any],
) -> None:
    from streambpe.core import using_backend

    benchmark.group = f"{method}-o200k"
    tokenizer = _ours(streambpe_api, o200k)
    with using_backend(backend):
        getattr(tokenizer, method)(prose_ids[:10])  # builds the kernel, untimed
        result = benchmark.pedantic(
            report.timed(getattr(tokenizer, method)), args=(prose_ids,), rounds=ROUNDS
        )
    expected = encode_text if method == "decode" else encode_text.encode("utf-8")
    assert result == expected
    report.finish(
        f"streambpe {method}", ours=True, backend=backend, input_bytes=len(encode_text.encode())
    )


@pytest.mark.parametrize("method", ["decode_bytes", "decode"])
def test_decode_tiktoken(
    benchmark: Any,
    report: Report,
    method: str,
    reference: Any,
    prose_ids: list[int],
    encode_text: str,
) -> None:
    benchmark.group = f"{method}-o200k"
    result = benchmark.pedantic(
        report.timed(getattr(reference, method)), args=(prose_ids,), rounds=ROUNDS
    )
    assert result == (encode_text if method == "decode" else encode_text.encode("utf-8"))
    report.finish(f"tiktoken {method}", ours=False, input_bytes=len(encode_text.encode()))


def test_decode_fastokens(
    benchmark: Any,
    report: Report,
    o200k: EncodingFiles,
    prose_ids: list[int],
    encode_text: str,
) -> None:
    fastokens = pytest.importorskip("fastokens", reason="pip install -e '.[bench]'")
    benchmark.group = "decode-o200k"
    tokenizer = fastokens.Tokenizer.from_tiktoken(
        str(o200k.path), pattern=o200k.pattern, special_tokens=o200k.special_tokens
    )
    result = benchmark.pedantic(report.timed(tokenizer.decode), args=(prose_ids,), rounds=ROUNDS)
    exact = result == encode_text
    report.finish(
        "fastokens decode", ours=False, exact=exact, input_bytes=len(encode_text.encode())
    )


def _streamed(step: Callable[[int], str | None], ids: list[int]) -> str:
    pieces = [step(token_id) for token_id in ids]
    return "".join(piece for piece in pieces if piece)


def test_decode_stream_streambpe(
    benchmark: Any,
    report: Report,
    backend: str,
    o200k: EncodingFiles,
    prose_ids: list[int],
    reference: Any,
    streambpe_api: Callable[..., Any],
) -> None:
    from streambpe.core import using_backend

    benchmark.group = "decode-stream-o200k"
    ids = prose_ids[:STREAM_IDS]
    tokenizer = _ours(streambpe_api, o200k)

    def run() -> str:
        stream = tokenizer.decode_stream()
        return _streamed(stream.step, ids) + (stream.finish() or "")

    with using_backend(backend):
        result = benchmark.pedantic(report.timed(run), rounds=ROUNDS)
    assert result == reference.decode(ids)
    report.finish("streambpe decode_stream", ours=True, backend=backend, tokens=len(ids))
    report.note(
        f"decode one id at a time [{backend}]: "
        f"{report.best_seconds / len(ids) * 1e9:.0f} ns per id (streambpe decode_stream)"
    )


def test_decode_stream_tiktoken(
    benchmark: Any, report: Report, prose_ids: list[int], reference: Any
) -> None:
    benchmark.group = "decode-stream-o200k"
    ids = prose_ids[:STREAM_IDS]

    def run() -> str:
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

        def step(token_id: int) -> str | None:
            return utf8.decode(reference.decode_single_token_bytes(token_id)) or None

        return _streamed(step, ids) + utf8.decode(b"", final=True)

    result = benchmark.pedantic(report.timed(run), rounds=ROUNDS)
    assert result == reference.decode(ids)
    report.finish("tiktoken decode_single_token_bytes + codecs", ours=False, tokens=len(ids))
    report.note(
        f"decode one id at a time: {report.best_seconds / len(ids) * 1e9:.0f} ns per id "
        "(tiktoken decode_single_token_bytes + codecs incremental decoder)"
    )
