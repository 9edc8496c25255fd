"""The pattern compiler and the native matcher against the ``regex`` module.

* Property tests: for real models' patterns and patterns built to hit each
  construct, the native matcher finds exactly ``regex.findall``'s pieces on
  random adversarial text (mixed scripts, combining marks, digits of many
  scripts, every kind of whitespace, apostrophes in both cases, CJK), stored
  as 1-, 2- and 4-byte strs.
* Chains: the native chain splits like the pure reference
  (:func:`streambpe.core.split_steps.split_with_steps`, itself checked
  against Hugging Face in ``test_split_steps.py``).
* Classes: each kind of class matches the same code points as ``regex``,
  over every code point.
* The parser: every construct compiles, anything outside the subset raises
  :class:`UnsupportedPatternError` saying where.
"""

from __future__ import annotations

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from streambpe.core.pattern_compiler import (
    UnsupportedPatternError,
    compile_pattern,
    compile_pretokenizer,
    native_support,
)
from streambpe.core.split_steps import (
    BEHAVIORS,
    DigitsStep,
    SplitStep,
    SplitSteps,
    split_with_steps,
)
from streambpe.core.unicode_classes import all_code_points
from streambpe.errors import ParameterError
from streambpe.patterns import CL100K, GPT2, O200K

native = pytest.importorskip("streambpe.core._native", reason="the compiled core was not built")

#: Real models' pre-tokenizer patterns (regex strings only, no vocabularies).
MODEL_PATTERNS = {
    "llama3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen35": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "tekken": r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "deepseek_v3_1": r"\p{N}{1,3}",
    "deepseek_v3_2": r"[一-龥\u3040-ゟ゠-ヿ]+",  # noqa: RUF001
    "deepseek_v3_3": r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"
    r"|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "deepseek_llm_2": r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕ]+",
    "deepseek_llm_3": r"\s?[!-/:-~！-／：-～‘-‟　-。]+",  # noqa: RUF001
    "deepseek_llm_5": r"[一-龥ࠀ-一가-퟿]+",
    # The built-ins, in a group so that they take the compiled path.
    "gpt2": f"(?:{GPT2})",
    "cl100k": f"(?:{CL100K})",
    "o200k": f"(?:{O200K})",
}

#: One pattern per construct of the subset, each where backtracking matters.
CONSTRUCT_PATTERNS = [
    r"\p{L}+?\p{N}|\p{L}",  # lazy
    r"\p{L}{2,4}?'|.",  # lazy counted
    r"(?:\p{L}\p{N})+|.",  # repeated group
    r"(?:ab|a)(?:bc)?c|[\s\S]",  # alternation order and backtracking into groups
    r"(?>a+)a|[\s\S]",  # atomic: never matches "a+a"
    r"(?:a|ab)++b|[\s\S]",  # possessive group
    r"\s+(?=\p{L})|\s+$|\s",  # positive look-ahead, $
    r"\p{L}+(?!\p{N}|')|\S",  # look-ahead of an alternation
    r"\p{L}+(?m:$)|[\s\S]",  # $ at any line end
    r"(?i:[a-c]+|'S)|[\s\S]",  # case-insensitive ranges
    r"(?i)s+|[\s\S]",  # a leading flag
    r"[^\d\s]+|\d{2}|\D",  # \d and negations
    r"\U0001F600|\u00e9+|\x41|[\s\S]",  # escapes
    r"(?:\p{Lu}\p{Ll}*){1,2}+|x\p{N}{,2}|[\s\S]",  # possessive counted group, {,n}
    r"[\p{P}\p{S}]+|[^\p{P}\p{S}]",
    r"\P{L}+|\p{^N}",
    r"a{|[\s\S]",  # a "{" that is not a quantifier is a literal
    r".+|\n",
]

#: Characters on the edges of the patterns: letters in both cases (and the
#: long s and Kelvin sign, which fold to s and k), marks, digits of several
#: scripts and numbers that are not digits, whitespace of every kind,
#: apostrophes, punctuation and symbols, CJK and kana, an emoji, a surrogate.
ALPHABET = [
    *"aAbBcCsS\u017ftTK\u212akéÉ\u0301\u0345\u0131\u0130ß",
    *"09٣४\u09edⅧ½²",
    *" \t\n\r\x0b\x0c\x85\xa0\u2028\u3000",
    *"'\u2019.,!?-/_`@#[]\\",
    *"中文日本ひらカタ한😀",
    "\ud800",
    "'s",
    "'LL",
    "\r\n",
    "  ",
    "ab",
]


def texts(max_size: int = 30) -> st.SearchStrategy[str]:
    items = st.sampled_from(ALPHABET) | st.characters(max_codepoint=0x2FFFF)
    return st.lists(items, max_size=max_size).map("".join)


ALL_PATTERNS = [*MODEL_PATTERNS.values(), *CONSTRUCT_PATTERNS]
_BUILT: dict[object, object] = {}


def _native(pattern: str | SplitSteps) -> object:
    """One native pretokenizer per pattern for the whole module (building one takes a while)."""
    if pattern not in _BUILT:
        _BUILT[pattern] = native.Pretokenizer(pattern)
    return _BUILT[pattern]


IDS = [*MODEL_PATTERNS, *(f"construct{i}" for i in range(len(CONSTRUCT_PATTERNS)))]


@pytest.mark.parametrize("pattern", ALL_PATTERNS, ids=IDS)
@settings(max_examples=60, deadline=None)
@given(text=texts())
def test_native_finds_what_regex_finds(pattern: str, text: str) -> None:
    pretokenizer: native.Pretokenizer = _native(pattern)
    # The text as it came, then stored with 2- and 4-byte code units.
    for variant in (text, text + "\u0100", text + "\U0001f600"):
        assert pretokenizer.pieces(variant) == regex.findall(pattern, variant)


@pytest.mark.parametrize("pattern", ALL_PATTERNS, ids=IDS)
def test_every_pattern_of_the_list_compiles(pattern: str) -> None:
    assert native_support(pattern) is None


def test_long_runs_backtrack_without_recursion() -> None:
    pattern = MODEL_PATTERNS["llama3"]
    text = "a" * 200_000 + " " * 100_000 + "b" + "٣" * 10_000
    assert native.Pretokenizer(pattern).pieces(text) == regex.findall(pattern, text)


steps_strategy = st.lists(
    st.one_of(
        st.builds(
            SplitStep,
            st.sampled_from([*list(MODEL_PATTERNS.values())[:10], r"\s+$", r"[\r\n]", r"'"]),
            st.sampled_from(BEHAVIORS),
            st.booleans(),
        ),
        st.builds(DigitsStep, st.booleans()),
    ),
    min_size=1,
    max_size=3,
).map(tuple)


@settings(max_examples=150, deadline=None)
@given(steps=steps_strategy, text=texts())
def test_native_chains_split_like_the_reference(steps: SplitSteps, text: str) -> None:
    assert _native(steps).pieces(text) == split_with_steps(text, steps)  # type: ignore[attr-defined]


CLASS_PATTERNS = [
    r"\p{L}",
    r"\p{N}",
    r"\s",
    r"[^\r\n\p{L}\p{N}]",
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]",
    r"\p{P}",
    r"\p{S}",
    r"\d",
    r"\S",
    r"[一-龥\u3040-ゟ]",
    r"(?i:[sk])",
    r"[^\s\p{L}\p{M}\p{N}]",
    r".",
]


@pytest.fixture(scope="module")
def every_code_point() -> str:
    return all_code_points()


@pytest.mark.parametrize("klass", CLASS_PATTERNS)
def test_classes_agree_with_regex_on_every_code_point(klass: str, every_code_point: str) -> None:
    runs = f"(?:{klass})+"
    found = native.Pretokenizer(runs).pieces(every_code_point)
    assert found == regex.findall(runs, every_code_point)


@pytest.mark.parametrize(
    ("pattern", "where"),
    [
        (r"a\b", r"\b at offset 1"),
        (r"\w+", r"\w at offset 0"),
        (r"(a)b", "capturing group"),
        (r"(?<=a)b", "this group at offset 0"),
        (r"^a", "'^' at offset 0"),
        (r"a\Z", r"\Z at offset 1"),
        (r"[[a]b]", "nested class"),
        (r"\p{Han}", "property 'Han'"),
        (r"(?i:\p{Lu})", "under (?i)"),
        (r"(?:a?)*b", "empty string"),
        (r"a?", "empty string"),
        (r"\s+(?!\S)|", "empty string"),
        (r"(?=a)", "empty string"),
        (r"$+a", "quantified zero-width"),
        ("|".join(f"\\u{0x4E00 + i:04x}\\p{{L}}" for i in range(40)), "more than 32"),
    ],
)
def test_constructs_outside_the_subset_are_refused(pattern: str, where: str) -> None:
    with pytest.raises(UnsupportedPatternError, match=regex.escape(where)):
        compile_pattern(pattern)
    assert native_support(pattern) is not None


def test_invalid_patterns_are_parameter_errors() -> None:
    with pytest.raises(ParameterError, match="not a valid regex"):
        compile_pattern("(a")


def test_capturing_groups_are_fine_in_splits() -> None:
    steps = (SplitStep(r"(\p{N})+"),)
    assert compile_pretokenizer(steps).steps == ((0, 0, False),)
    assert native.Pretokenizer(steps).pieces("a12b") == ["a", "12", "b"]


def test_unsupported_step_names_the_step() -> None:
    with pytest.raises(UnsupportedPatternError, match=r"split step '\\\\w\+'"):
        compile_pretokenizer((SplitStep(r"\w+"),))


def test_native_pretokenizer_refuses_what_it_cannot_compile() -> None:
    with pytest.raises(UnsupportedPatternError):
        native.Pretokenizer(r"\w+")


def test_counting_and_piece_count_use_the_program() -> None:
    pattern = MODEL_PATTERNS["qwen2"]
    pretokenizer = native.Pretokenizer(pattern)
    texts_ = ["I'm 123 here", "", "中文 123"]
    counts: dict[str, int] = {}
    pretokenizer.count_into(texts_, counts)
    expected: dict[str, int] = {}
    for text in texts_:
        for piece in regex.findall(pattern, text):
            expected[piece] = expected.get(piece, 0) + 1
    assert counts == expected
    assert pretokenizer.piece_count("I'm 123 here") == len(regex.findall(pattern, "I'm 123 here"))
