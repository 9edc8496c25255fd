"""Pre-tokenizer step chains against Hugging Face ``tokenizers``' own pre-tokenizers.

:func:`streambpe.core.split_steps.split_with_steps` is the reference for
chains of ``Split`` and ``Digits`` steps; here it is compared with
``tokenizers.pre_tokenizers.Split`` / ``Digits`` / ``Sequence`` run through
``pre_tokenize_str``, on adversarial text: empty matches, every behavior with
and without ``invert``, ``$`` at line ends, digits of many scripts.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streambpe.core.split_steps import (
    BEHAVIORS,
    DigitsStep,
    SplitStep,
    SplitSteps,
    split_with_steps,
)
from streambpe.errors import ParameterError

pre_tokenizers = pytest.importorskip("tokenizers.pre_tokenizers")
tokenizers = pytest.importorskip("tokenizers")

#: Characters that sit on the edges of the patterns below: digits of several
#: scripts (and number characters that are not digits), spaces and line ends
#: of every kind, letters with and without case, marks, CJK, punctuation.
ALPHABET = [
    *"aZé\u0301\u017f'sStT1٣४9Ⅷ½ \t\n\r\u3000\u00a0\u2028-.!?/中文日本ひらカタ한국",
    *["\r\n", " \n", "'s", "'LL", "  ", "\n\n"],
]

#: Patterns of real models' ``Split`` steps and ones built to hit edge cases
#: (empty matches, ``$``, look-ahead, alternation order).
STEP_PATTERNS = [
    r"\p{N}{1,3}",
    r"[一-龥\u3040-ゟ゠-ヿ]+",  # noqa: RUF001
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
    r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    r"[\r\n]",
    r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓ]+",
    r"\s?[!-/:-~！-／：-～‘-‟　-。]+",  # noqa: RUF001
    r"\s+$",
    r"[一-龥ࠀ-一가-퟿]+",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    r"x*",
    r"\d*",
    r"a|",
    r"\p{L}+$",
    r" ",
    r"-",
]

texts = st.lists(st.sampled_from(ALPHABET), max_size=24).map("".join)


def hf_pieces(steps: SplitSteps, text: str) -> list[str]:
    """What ``tokenizers`` gives for ``steps`` as a ``Sequence``."""
    built = []
    for step in steps:
        if isinstance(step, DigitsStep):
            built.append(pre_tokenizers.Digits(individual_digits=step.individual_digits))
        else:
            snake = "".join("_" + c.lower() if c.isupper() else c for c in step.behavior)[1:]
            built.append(
                pre_tokenizers.Split(tokenizers.Regex(step.pattern), snake, invert=step.invert)
            )
    return [piece for piece, _ in pre_tokenizers.Sequence(built).pre_tokenize_str(text)]


steps_strategy = st.lists(
    st.one_of(
        st.builds(
            SplitStep,
            st.sampled_from(STEP_PATTERNS),
            st.sampled_from(BEHAVIORS),
            st.booleans(),
        ),
        st.builds(DigitsStep, st.booleans()),
    ),
    min_size=1,
    max_size=3,
).map(tuple)


@settings(max_examples=400, deadline=None)
@given(steps=steps_strategy, text=texts)
def test_chains_split_like_tokenizers(steps: SplitSteps, text: str) -> None:
    assert split_with_steps(text, steps) == hf_pieces(steps, text)


@pytest.mark.parametrize("behavior", BEHAVIORS)
@pytest.mark.parametrize("invert", [False, True])
@pytest.mark.parametrize("pattern", [r"-", r"x*", r"\s+$", r"-+|x"])
@pytest.mark.parametrize("text", ["a--b-c-", "-", "", "x-x", "ab  \ncd  \n", "--ax--"])
def test_each_behavior_like_tokenizers(
    behavior: str, invert: bool, pattern: str, text: str
) -> None:
    steps = (SplitStep(pattern, behavior, invert),)
    assert split_with_steps(text, steps) == hf_pieces(steps, text)


def test_deepseek_v3_chain_like_tokenizers() -> None:
    steps = (SplitStep(STEP_PATTERNS[0]), SplitStep(STEP_PATTERNS[1]), SplitStep(STEP_PATTERNS[2]))
    text = "DeepSeek-V3 在2025年發布了 671B 參數 model's,\n\n  'Hello' ひらがな123456 end.  "
    assert split_with_steps(text, steps) == hf_pieces(steps, text)


def test_dollar_is_the_end_of_any_line() -> None:
    steps = (SplitStep(r"\p{L}+$"),)
    assert split_with_steps("ab\ncd\r\nef", steps) == ["ab", "\ncd\r\n", "ef"]


def test_bad_steps_are_refused() -> None:
    with pytest.raises(ParameterError, match="unknown split behavior"):
        SplitStep("a", "isolated")
    with pytest.raises(ParameterError, match="not a valid regex"):
        SplitStep("(a")


def test_steps_are_hashable_values() -> None:
    assert {SplitStep("a"), SplitStep("a")} == {SplitStep("a")}
    assert DigitsStep(True) != DigitsStep(False)
