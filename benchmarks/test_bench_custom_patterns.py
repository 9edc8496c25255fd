"""Real models' pre-tokenizers: streambpe against Hugging Face ``tokenizers`` and tiktoken's cl100k.

Three configurations, each over cl100k's vocabulary so that every
implementation encodes the same text to comparable ids:

- ``llama3``: Llama 3's pattern (cl100k's, spelled differently);
- ``qwen2``: Qwen2's pattern (single digits);
- ``deepseek_v3``: DeepSeek V3's chain of three ``Split`` steps.

For each, in MiB/s on the same prose, single-threaded ``encode_ordinary``:

- streambpe with that pattern or chain (once per backend; on the compiled
  one it must run on the native matcher, never on ``regex``);
- a Hugging Face ``tokenizers.Tokenizer`` with the same pre-tokenizer (the
  ``Split`` steps, then ``ByteLevel`` without its regex) and a BPE model
  holding cl100k's vocabulary and merges (``ignore_merges`` as Llama 3's);
- tiktoken's own cl100k_base on the same text: the yardstick (the goal is
  1.5x its speed or better).

Ids are checked before anything is timed: ours against tiktoken running the
same pattern (for the two patterns) and against Hugging Face's (all three).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from streambpe import core
from streambpe.core.split_steps import SplitStep, SplitSteps
from streambpe.formats.byte_unicode import encode_token
from streambpe.formats.tiktoken_file import merges_from_ranks
from streambpe.tokenizer import Tokenizer

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

hf = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers (the test extra)")

LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
DEEPSEEK_V3: SplitSteps = (
    SplitStep(r"\p{N}{1,3}"),
    SplitStep(r"[一-龥\u3040-ゟ゠-ヿ]+"),  # noqa: RUF001
    SplitStep(
        r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
        r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    ),
)
CONFIGURATIONS: dict[str, str | SplitSteps] = {
    "llama3": LLAMA3,
    "qwen2": QWEN2,
    "deepseek_v3": DEEPSEEK_V3,
}
ROUNDS = 3


def _steps(pretokenization: str | SplitSteps) -> SplitSteps:
    return (SplitStep(pretokenization),) if isinstance(pretokenization, str) else pretokenization


@pytest.fixture(scope="module")
def cl100k(encoding_files: Callable[[str], EncodingFiles]) -> EncodingFiles:
    return encoding_files("cl100k")


@pytest.fixture(scope="module")
def cl100k_ranks(cl100k: EncodingFiles) -> dict[bytes, int]:
    import tiktoken.load

    ranks: dict[bytes, int] = tiktoken.load.load_tiktoken_bpe(str(cl100k.path))
    return ranks


@pytest.fixture(scope="module")
def hf_tokenizers(cl100k_ranks: dict[bytes, int]) -> Callable[[str], Any]:
    """``hf_tokenizers(configuration)``: a Hugging Face tokenizer with its pre-tokenizer."""
    vocab = {encode_token(token): rank for token, rank in cl100k_ranks.items()}
    merges = [(encode_token(a), encode_token(b)) for a, b in merges_from_ranks(cl100k_ranks)]
    built: dict[str, Any] = {}

    def build(name: str) -> Any:
        if name not in built:
            from tokenizers import Regex, Tokenizer, models, pre_tokenizers

            tokenizer = Tokenizer(models.BPE(vocab, merges, ignore_merges=True))
            splits = [
                pre_tokenizers.Split(Regex(step.pattern), "isolated", invert=step.invert)
                for step in _steps(CONFIGURATIONS[name])
                if isinstance(step, SplitStep)
            ]
            tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
                [*splits, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
            )
            built[name] = tokenizer
        return built[name]

    return build


@pytest.fixture(scope="module")
def checked(
    encode_text: str,
    cl100k: EncodingFiles,
    cl100k_ranks: dict[bytes, int],
    hf_tokenizers: Callable[[str], Any],
) -> Callable[[str], list[int]]:
    """``checked(configuration)``: our ids on the text, once checked against the references."""
    import tiktoken

    ids: dict[str, list[int]] = {}

    def check(name: str) -> list[int]:
        if name not in ids:
            pretokenization = CONFIGURATIONS[name]
            ours = Tokenizer.from_ranks(cl100k_ranks, pattern=pretokenization).encode_ordinary(
                encode_text
            )
            if isinstance(pretokenization, str):
                same_pattern = tiktoken.Encoding(
                    name, pat_str=pretokenization, mergeable_ranks=cl100k_ranks, special_tokens={}
                )
                assert ours == same_pattern.encode_ordinary(encode_text), (
                    f"{name}: streambpe's ids differ from tiktoken running the same pattern"
                )
            theirs = hf_tokenizers(name).encode(encode_text, add_special_tokens=False).ids
            assert ours == theirs, f"{name}: streambpe's ids differ from Hugging Face's"
            ids[name] = ours
        return ids[name]

    return check


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_custom_pattern_streambpe(
    benchmark: Any,
    report: Report,
    backend: str,
    encode_text: str,
    cl100k_ranks: dict[bytes, int],
    checked: Callable[[str], list[int]],
    name: str,
) -> None:
    expected = checked(name)
    tokenizers = []
    with core.using_backend(backend):
        for _ in range(ROUNDS):
            tokenizer = Tokenizer.from_ranks(cl100k_ranks, pattern=CONFIGURATIONS[name])
            tokenizer.encode_ordinary("warm the kernel up")
            tokenizers.append(tokenizer)
        if backend == "native":
            assert tokenizers[0].pretokenizer_engine == "native", tokenizers[
                0
            ].pretokenizer_fallback
        benchmark.group = f"custom-{name}"
        rounds = iter(tokenizers)
        result = benchmark.pedantic(
            report.timed(lambda text: next(rounds).encode_ordinary(text)),
            args=(encode_text,),
            rounds=ROUNDS,
        )
    assert result == expected
    report.finish(
        f"streambpe {name}",
        ours=True,
        backend=backend,
        input_bytes=len(encode_text.encode("utf-8")),
        tokens=len(expected),
        engine=tokenizers[0].pretokenizer_engine,
    )


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_custom_pattern_hf_tokenizers(
    benchmark: Any,
    report: Report,
    encode_text: str,
    hf_tokenizers: Callable[[str], Any],
    checked: Callable[[str], list[int]],
    name: str,
) -> None:
    checked(name)
    tokenizer = hf_tokenizers(name)
    benchmark.group = f"custom-{name}"
    benchmark.pedantic(
        report.timed(lambda text: tokenizer.encode(text, add_special_tokens=False)),
        args=(encode_text,),
        rounds=1,
    )
    report.finish("HF tokenizers encode", ours=False, input_bytes=len(encode_text.encode("utf-8")))


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_custom_pattern_tiktoken_cl100k(
    benchmark: Any, report: Report, encode_text: str, cl100k: EncodingFiles, name: str
) -> None:
    encoding = cl100k.tiktoken()
    benchmark.group = f"custom-{name}"
    benchmark.pedantic(report.timed(encoding.encode_ordinary), args=(encode_text,), rounds=ROUNDS)
    report.finish(
        "tiktoken cl100k_base encode_ordinary",
        ours=False,
        input_bytes=len(encode_text.encode("utf-8")),
    )
