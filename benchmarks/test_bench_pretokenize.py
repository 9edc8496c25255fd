"""Pretokenizing alone: the compiled scanners against ``regex`` and against tiktoken's whole encode.

For each built-in pattern and each corpus (multilingual prose, source code;
the same texts as ``test_bench_encode.py``), in MiB/s:

- streambpe's compiled scanner building the list of pieces (``pieces``), and
  only counting them (``piece_count``, no str per piece);
- ``regex.findall`` with the same pattern: what a regex-based pretokenizer
  costs, and the ceiling it puts on any encoder built on it;
- tiktoken's whole ``encode_ordinary`` (pattern plus BPE) for the patterns
  whose vocabulary is available offline (gpt2 with r50k, cl100k): a scanner
  slower than that could never make an encoder faster than tiktoken.

The scanner's pieces are checked against ``regex.findall`` before any timing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
import regex
from corpus import source_code_text

from streambpe.patterns import CL100K, GPT2, O200K

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

native = pytest.importorskip("streambpe.core._native", reason="the compiled core is not built")

PATTERNS = {"gpt2": GPT2, "cl100k": CL100K, "o200k": O200K}
#: The vocabulary tiktoken encodes with, for the patterns that have one offline.
TIKTOKEN_FILES = {"gpt2": "r50k", "cl100k": "cl100k"}
CORPORA = ("prose", "code")
ROUNDS = 3


@pytest.fixture(scope="module")
def corpus_texts(encode_text: str) -> dict[str, str]:
    """The prose corpus, and source code of the same length."""
    return {"prose": encode_text, "code": source_code_text(len(encode_text))}


@pytest.fixture(scope="module")
def checked_patterns() -> set[tuple[str, str]]:
    """``(pattern, corpus)`` pairs whose native pieces were found equal to ``regex``'s."""
    return set()


def _check_once(checked: set[tuple[str, str]], pattern_name: str, corpus: str, text: str) -> None:
    if (pattern_name, corpus) in checked:
        return
    pattern = PATTERNS[pattern_name]
    assert native.Pretokenizer(pattern).pieces(text) == regex.findall(pattern, text), (
        f"the {pattern_name} scanner's pieces differ from regex.findall on the {corpus} text"
    )
    checked.add((pattern_name, corpus))


def _time(benchmark: Any, report: Report, group: str, call: Callable[[str], Any], text: str) -> Any:
    benchmark.group = group
    return benchmark.pedantic(report.timed(call), args=(text,), rounds=ROUNDS)


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("pattern_name", PATTERNS)
@pytest.mark.parametrize("output", ["pieces", "piece_count"])
def test_pretokenize_native(
    benchmark: Any,
    report: Report,
    corpus_texts: dict[str, str],
    checked_patterns: set[tuple[str, str]],
    pattern_name: str,
    corpus: str,
    output: str,
) -> None:
    text = corpus_texts[corpus]
    _check_once(checked_patterns, pattern_name, corpus, text)
    scanner = native.Pretokenizer(PATTERNS[pattern_name])
    _time(benchmark, report, f"pretokenize-{pattern_name}-{corpus}", getattr(scanner, output), text)
    report.finish(
        f"streambpe scanner {output}",
        ours=True,
        backend="native",
        input_bytes=len(text.encode("utf-8")),
    )


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("pattern_name", PATTERNS)
def test_pretokenize_regex(
    benchmark: Any, report: Report, corpus_texts: dict[str, str], pattern_name: str, corpus: str
) -> None:
    text = corpus_texts[corpus]
    compiled = regex.compile(PATTERNS[pattern_name])
    _time(benchmark, report, f"pretokenize-{pattern_name}-{corpus}", compiled.findall, text)
    report.finish("regex.findall", ours=False, input_bytes=len(text.encode("utf-8")))


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("pattern_name", TIKTOKEN_FILES)
def test_pretokenize_tiktoken_whole_encode(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    corpus_texts: dict[str, str],
    pattern_name: str,
    corpus: str,
) -> None:
    text = corpus_texts[corpus]
    encoding = encoding_files(TIKTOKEN_FILES[pattern_name]).tiktoken()
    _time(benchmark, report, f"pretokenize-{pattern_name}-{corpus}", encoding.encode_ordinary, text)
    report.finish(
        f"tiktoken whole encode_ordinary ({TIKTOKEN_FILES[pattern_name]})",
        ours=False,
        input_bytes=len(text.encode("utf-8")),
    )
