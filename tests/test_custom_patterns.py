"""Encoding with custom patterns and split chains: the same ids on both backends and as tiktoken.

A custom pattern the compiler accepts is scanned natively in the fused
encoder, without the GIL (so ``releases_gil`` is true and batches use
threads); a pattern outside the subset falls back to ``regex`` and the
tokenizer says why. Ids are compared with tiktoken running the same pattern
over cl100k's ranks, and between backends; chains of split steps against
the pure reference.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import regex
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from streambpe import core
from streambpe.cli import main
from streambpe.core.split_steps import (
    BEHAVIORS,
    DigitsStep,
    SplitStep,
    SplitSteps,
    split_with_steps,
)
from streambpe.errors import ParameterError
from streambpe.streaming.worker_encoder import encoder_document, encoder_fingerprint
from streambpe.tokenizer import Tokenizer

pytestmark = pytest.mark.usefixtures("backend")

LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: Matches only letters and digits: findall leaves everything else out.
WITH_GAPS = r"\p{L}+|\p{N}{1,2}"
DEEPSEEK_V3: SplitSteps = (
    SplitStep(r"\p{N}{1,3}"),
    SplitStep(r"[一-龥\u3040-ゟ゠-ヿ]+"),  # noqa: RUF001
    SplitStep(
        r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
        r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    ),
)
MIXED_STEPS: SplitSteps = (
    SplitStep(r"[\r\n]"),
    SplitStep(r"\s?\p{L}+", "MergedWithNext"),
    SplitStep(r"\s+$", "Removed", invert=True),
    DigitsStep(individual_digits=True),
)

TEXT = (
    "Hello, wörld's 4242!\n\n  I'M here: 中文字 ひらがな ١٢٣٤ \t\r\n"
    "DeepSeek-V3 在2025年 'quoted' x+y=z  end  <|endoftext|>tail 12345678"
)

texts = st.lists(
    st.sampled_from([*"aZé 1٣\n\r\t'sS.-中ひ😀<|>", "<|endoftext|>", "'ll", "  "]),
    max_size=40,
).map("".join)


@pytest.fixture(scope="module")
def tokenizers(cl100k_ranks: dict[bytes, int]) -> dict[object, Tokenizer]:
    specials = {"<|endoftext|>": 100257}
    return {
        pattern: Tokenizer.from_ranks(cl100k_ranks, pattern=pattern, special_tokens=specials)
        for pattern in (LLAMA3, QWEN2, WITH_GAPS)
    }


@pytest.fixture(scope="module")
def references(cl100k_ranks: dict[bytes, int]) -> dict[str, tiktoken.Encoding]:
    return {
        pattern: tiktoken.Encoding(
            f"custom{index}",
            pat_str=pattern,
            mergeable_ranks=cl100k_ranks,
            special_tokens={"<|endoftext|>": 100257},
        )
        for index, pattern in enumerate((LLAMA3, QWEN2, WITH_GAPS))
    }


@pytest.mark.parametrize("pattern", [LLAMA3, QWEN2, WITH_GAPS], ids=["llama3", "qwen2", "gaps"])
@settings(max_examples=40, deadline=None)
@given(text=texts)
def test_custom_patterns_encode_like_tiktoken(
    tokenizers: dict[object, Tokenizer],
    references: dict[str, tiktoken.Encoding],
    pattern: str,
    text: str,
) -> None:
    tokenizer, reference = tokenizers[pattern], references[pattern]
    assert tokenizer.encode(text, allowed_special="all") == reference.encode(
        text, allowed_special="all"
    )
    assert tokenizer.encode_ordinary(text) == reference.encode_ordinary(text)


@pytest.mark.parametrize("pattern", [LLAMA3, QWEN2, WITH_GAPS], ids=["llama3", "qwen2", "gaps"])
def test_long_text_in_blocks(
    tokenizers: dict[object, Tokenizer],
    references: dict[str, tiktoken.Encoding],
    pattern: str,
) -> None:
    # Longer than one block of ids, so the scan pauses and resumes.
    text = TEXT * 1800
    expected = references[pattern].encode(text, allowed_special="all")
    tokenizer = tokenizers[pattern]
    assert tokenizer.encode(text, allowed_special="all") == expected
    assert list(tokenizer.encode_to_numpy(text, allowed_special="all")) == expected
    assert tokenizer.count_tokens(text, allowed_special="all") == len(expected)


def test_engine_is_reported(tokenizers: dict[object, Tokenizer]) -> None:
    tokenizer = tokenizers[LLAMA3]
    native = core.active_backend().name == "native"
    assert tokenizer.pretokenizer_engine == ("native" if native else "regex")
    assert tokenizer.releases_gil == native
    assert (tokenizer.pretokenizer_fallback is None) == native


def test_pattern_outside_the_subset_falls_back_and_says_why(
    cl100k_ranks: dict[bytes, int],
) -> None:
    pattern = r"\w+|\W"
    tokenizer = Tokenizer.from_ranks(cl100k_ranks, pattern=pattern)
    assert tokenizer.pretokenizer_engine == "regex"
    assert tokenizer.releases_gil is False
    if core.active_backend().name == "native":
        assert tokenizer.pretokenizer_fallback == (
            r"\w at offset 0 is outside the subset the native matcher runs"
        )
    reference = tiktoken.Encoding(
        "w", pat_str=pattern, mergeable_ranks=cl100k_ranks, special_tokens={}
    )
    assert tokenizer.encode(TEXT) == reference.encode(TEXT)


@pytest.fixture(scope="module")
def chain_tokenizers(cl100k_ranks: dict[bytes, int]) -> dict[SplitSteps, Tokenizer]:
    specials = {"<|endoftext|>": 100257}
    return {
        steps: Tokenizer.from_ranks(cl100k_ranks, pattern=steps, special_tokens=specials)
        for steps in (DEEPSEEK_V3, MIXED_STEPS)
    }


@pytest.fixture(scope="module")
def whole_pieces(cl100k_ranks: dict[bytes, int]) -> tiktoken.Encoding:
    """tiktoken with a pattern that takes any text as one piece: BPE of a piece alone."""
    return tiktoken.Encoding(
        "whole", pat_str=r"[\s\S]+", mergeable_ranks=cl100k_ranks, special_tokens={}
    )


def _expected_ids(whole: tiktoken.Encoding, steps: SplitSteps, text: str) -> list[int]:
    """The ids of the reference pieces of each document, special tokens between."""
    ids: list[int] = []
    for document in regex.split("(<\\|endoftext\\|>)", text):
        if document == "<|endoftext|>":
            ids.append(100257)
            continue
        for piece in split_with_steps(document, steps):
            ids += whole.encode_ordinary(piece)
    return ids


@pytest.mark.parametrize("steps", [DEEPSEEK_V3, MIXED_STEPS], ids=["deepseek_v3", "mixed"])
@settings(max_examples=40, deadline=None)
@given(text=texts)
def test_chains_encode_their_reference_pieces(
    chain_tokenizers: dict[SplitSteps, Tokenizer],
    whole_pieces: tiktoken.Encoding,
    steps: SplitSteps,
    text: str,
) -> None:
    expected = _expected_ids(whole_pieces, steps, text)
    assert chain_tokenizers[steps].encode(text, allowed_special="all") == expected


@pytest.mark.parametrize("steps", [DEEPSEEK_V3, MIXED_STEPS], ids=["deepseek_v3", "mixed"])
def test_long_chain_text_pauses_only_where_it_may(
    chain_tokenizers: dict[SplitSteps, Tokenizer],
    whole_pieces: tiktoken.Encoding,
    steps: SplitSteps,
) -> None:
    # Two windows of a chain's scan, paused at a first-step piece end.
    text = TEXT * 600
    tokenizer = chain_tokenizers[steps]
    expected = _expected_ids(whole_pieces, steps, text)
    assert tokenizer.encode(text, allowed_special="all") == expected
    assert tokenizer.count_tokens(text, allowed_special="all") == len(expected)
    assert tokenizer.encode_batch([text[:500], text], allowed_special="all")[1] == expected


def test_chain_tokenizer_pickles_fingerprints_and_refuses_save(tmp_path: Path) -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab"}
    tokenizer = Tokenizer(vocab, [(b"a", b"b")], ["<|endoftext|>"], pattern=MIXED_STEPS)
    copy = pickle.loads(pickle.dumps(tokenizer))
    assert copy.pattern == MIXED_STEPS
    assert copy.encode(TEXT, allowed_special="all") == tokenizer.encode(TEXT, allowed_special="all")
    assert b'"type":"Digits"' in encoder_document(tokenizer)
    other = Tokenizer(vocab, [(b"a", b"b")], ["<|endoftext|>"], pattern=DEEPSEEK_V3)
    assert encoder_fingerprint(tokenizer) != encoder_fingerprint(other)
    with pytest.raises(ParameterError, match="chain of split steps"):
        tokenizer.save(str(tmp_path), format="hf")
    assert "Split(" in repr(tokenizer)


def test_bad_chains_are_refused(cl100k_ranks: dict[bytes, int]) -> None:
    with pytest.raises(ParameterError, match="SplitStep and DigitsStep"):
        Tokenizer.from_ranks(cl100k_ranks, pattern=("a",))  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="at least one step"):
        Tokenizer.from_ranks(cl100k_ranks, pattern=())


@pytest.mark.parametrize(
    ("pattern", "engine"), [(LLAMA3, "native"), (r"\w+|\W", "regex")], ids=["llama3", "w"]
)
def test_info_shows_the_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pattern: str, engine: str
) -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab"}
    Tokenizer(vocab, [(b"a", b"b")], pattern=pattern).save(tmp_path / "tok")
    assert main(["info", str(tmp_path / "tok")]) == 0
    described = json.loads(capsys.readouterr().out)
    native = core.active_backend().name == "native"
    assert described["pattern"] == pattern
    assert described["pretokenizer_engine"] == (engine if native else "regex")
    assert ("pretokenizer_fallback" in described) == (described["pretokenizer_engine"] == "regex")


def test_tiktoken_face_refuses_a_chain() -> None:
    from streambpe.tiktoken import Encoding

    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab"}
    tokenizer = Tokenizer(vocab, [(b"a", b"b")], pattern=MIXED_STEPS)
    with pytest.raises(ParameterError, match="no single pattern"):
        Encoding.from_tokenizer(tokenizer, "chain")


@pytest.fixture(scope="module")
def small_ranks() -> dict[bytes, int]:
    """A few hundred merges learned from TEXT: a vocabulary cheap to build many times."""
    from streambpe.core.merge_loop import learn_merges

    counts: dict[str, int] = {}
    for word in regex.findall(LLAMA3, TEXT):
        counts[word] = counts.get(word, 0) + 1
    ranks = {bytes([i]): i for i in range(256)}
    for left, right in learn_merges(counts, 300):
        ranks[left + right] = len(ranks)
    return ranks


@pytest.mark.parametrize("behavior", BEHAVIORS)
def test_chain_pauses_keep_every_first_step_behavior(
    small_ranks: dict[bytes, int], behavior: str
) -> None:
    # A pause (past 64K characters of one stretch) falls after a piece of the
    # first step; the pieces after it must not depend on the merging state
    # before it. The oracle: tiktoken's BPE of each reference piece alone.
    steps: SplitSteps = (SplitStep(r" |\d", behavior), SplitStep(LLAMA3))
    whole = tiktoken.Encoding(
        "whole", pat_str=r"[\s\S]+", mergeable_ranks=small_ranks, special_tokens={}
    )
    # Only the compiled kernel pauses; the pure one gets a short text.
    repeats = 1300 if core.active_backend().name == "native" else 50
    text = TEXT.replace("<|endoftext|>", "") * repeats
    tokenizer = Tokenizer.from_ranks(small_ranks, pattern=steps)
    assert tokenizer.encode_ordinary(text) == _expected_ids(whole, steps, text)
