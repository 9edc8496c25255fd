"""Pre-tokenizer step chains: Hugging Face's ``Split`` and ``Digits``, applied in order.

A ``tokenizer.json`` may cut text with a ``Sequence`` of pre-tokenizers
instead of one pattern (DeepSeek V3 chains three ``Split``\\ s, DeepSeek LLM
five plus ``Digits``). Each step cuts every piece the previous step left,
on its own: a later step's pattern sees one piece as its whole text, so its
``$`` and look-aheads stop at the piece's end. :func:`split_with_steps` is
the reference, with exactly the semantics of Hugging Face ``tokenizers``:

- the pattern is searched the way ``tokenizers`` iterates Oniguruma's
  matches (an empty match right where the previous match ended is skipped,
  and the search moves on one character);
- ``$`` is Oniguruma's: the end of the text or the end of any line (before
  a ``"\\n"``), so it is run here as ``regex``'s ``(?m:$)``;
- the matches and the text between them become pieces according to
  ``behavior``; ``invert`` swaps which is which first; empty pieces are
  dropped;
- ``Digits`` is a split on every character of ``\\p{N}``, each one alone
  (``individual_digits``) or in runs.

One difference is left: Oniguruma folds case fully under ``(?i)`` (``(?i:ss)``
matches ``"ß"``), ``regex`` simply; no contraction pattern of a real model
meets it.

>>> steps = (SplitStep(r"\\p{N}{1,3}"), SplitStep(r"\\s+", "MergedWithNext"))
>>> split_with_steps("abc 12345 x", steps)
['abc', ' ', '123', '45', ' x']
>>> split_with_steps("a1b22", (DigitsStep(individual_digits=True),))
['a', '1', 'b', '2', '2']
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

import regex

from streambpe.errors import ParameterError

#: Hugging Face's names for what a split does with the matches (``SplitDelimiterBehavior``).
BEHAVIORS: tuple[str, ...] = (
    "Isolated",
    "Removed",
    "MergedWithPrevious",
    "MergedWithNext",
    "Contiguous",
)


@dataclass(frozen=True)
class SplitStep:
    """Hugging Face's ``Split`` pre-tokenizer: cut each piece at the matches of ``pattern``.

    ``pattern`` is a regex in the Oniguruma dialect ``tokenizers`` speaks (a
    ``"String"`` pattern is passed as ``regex.escape(...)``); ``behavior`` is
    one of :data:`BEHAVIORS`; ``invert`` makes the text between matches the
    delimiters instead.

    >>> SplitStep(" ", "Removed")
    SplitStep(pattern=' ', behavior='Removed', invert=False)
    >>> SplitStep("a", "Isolate")
    Traceback (most recent call last):
    streambpe.errors.ParameterError: unknown split behavior 'Isolate'; use one of Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous
    """

    pattern: str
    behavior: str = "Isolated"
    invert: bool = False

    def __post_init__(self) -> None:
        if self.behavior not in BEHAVIORS:
            raise ParameterError(
                f"unknown split behavior {self.behavior!r}; use one of {', '.join(BEHAVIORS)}"
            )
        try:
            compile_step_pattern(self.pattern)
        except regex.error as exc:
            raise ParameterError(
                f"split pattern {self.pattern!r} is not a valid regex: {exc}"
            ) from exc


@dataclass(frozen=True)
class DigitsStep:
    """Hugging Face's ``Digits`` pre-tokenizer: numbers (``\\p{N}``) apart from the rest.

    Each number character is a piece of its own with ``individual_digits``;
    otherwise each run of them is.
    """

    individual_digits: bool

    def as_split(self) -> SplitStep:
        """The :class:`SplitStep` that cuts exactly like this step.

        >>> DigitsStep(individual_digits=False).as_split()
        SplitStep(pattern='\\\\p{N}+', behavior='Isolated', invert=False)
        """
        return SplitStep(r"\p{N}" if self.individual_digits else r"\p{N}+")


#: A chain of steps, applied in order.
SplitSteps = tuple[SplitStep | DigitsStep, ...]

#: A text cut into ``(start, end, is_match)`` spans that cover it, in order.
Spans = list[tuple[int, int, bool]]


def python_dialect(pattern: str) -> str:
    """``pattern`` (Oniguruma's dialect) spelled for ``regex``: each ``$`` becomes ``(?m:$)``.

    A ``$`` that is escaped or inside a character class is left alone.

    >>> python_dialect(r"\\s+$|[$]\\$")
    '\\\\s+(?m:$)|[$]\\\\$'
    """
    out: list[str] = []
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if in_class:
            # A "]" right after "[" or "[^" is a member, not the end.
            if char == "]" and not (
                pattern[index - 1] == "[" or pattern[index - 2 : index] == "[^"
            ):
                in_class = False
        elif char == "[":
            in_class = True
        elif char == "$":
            out.append("(?m:$)")
            index += 1
            continue
        out.append(char)
        index += 1
    return "".join(out)


@cache
def compile_step_pattern(pattern: str) -> regex.Pattern[str]:
    """The ``regex`` object that matches like Oniguruma matches ``pattern`` (memoized)."""
    return regex.compile(python_dialect(pattern))


def match_spans(step: SplitStep, text: str) -> Spans:
    """``text`` cut into matches of ``step.pattern`` and the stretches between them.

    Matches are found as ``tokenizers`` iterates them; each span says whether
    it is a match (after ``invert``). An empty text is one empty non-match.

    >>> match_spans(SplitStep("x*"), "axb")
    [(0, 0, True), (0, 1, False), (1, 2, True), (2, 3, False), (3, 3, True)]
    """
    if not text:
        return [(0, 0, step.invert)]
    compiled = compile_step_pattern(step.pattern)
    spans: Spans = []
    previous_end = 0
    search_from = 0
    last_match_end = -1
    length = len(text)
    while search_from <= length:
        found = compiled.search(text, search_from)
        if found is None:
            break
        start, end = found.span()
        if start == end and end == last_match_end:
            search_from += 1
            continue
        if previous_end != start:
            spans.append((previous_end, start, step.invert))
        spans.append((start, end, not step.invert))
        previous_end = search_from = last_match_end = end
    if previous_end != length:
        spans.append((previous_end, length, step.invert))
    return spans


def apply_behavior(spans: Spans, behavior: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` of the pieces that ``behavior`` makes of ``spans`` (empty ones too).

    >>> spans = [(0, 1, False), (1, 2, True), (2, 3, True), (3, 4, False)]
    >>> apply_behavior(spans, "MergedWithPrevious")
    [(0, 2), (2, 3), (3, 4)]
    >>> apply_behavior(spans, "Contiguous")
    [(0, 1), (1, 3), (3, 4)]
    """
    if behavior == "Isolated":
        return [(start, end) for start, end, _ in spans]
    if behavior == "Removed":
        return [(start, end) for start, end, is_match in spans if not is_match]
    pieces: list[list[int]] = []
    previous_match = False
    if behavior == "MergedWithNext":
        for start, end, is_match in reversed(spans):
            if is_match and not previous_match and pieces:
                pieces[-1][0] = start
            else:
                pieces.append([start, end])
            previous_match = is_match
        pieces.reverse()
    else:
        # A match joins the piece before it: always when contiguous with a
        # match before it; when merged with the previous, if it follows text.
        contiguous = behavior == "Contiguous"
        for start, end, is_match in spans:
            joins = is_match == previous_match if contiguous else is_match and not previous_match
            if joins and pieces:
                pieces[-1][1] = end
            else:
                pieces.append([start, end])
            previous_match = is_match
    return [(start, end) for start, end in pieces]


def split_once(text: str, step: SplitStep | DigitsStep) -> list[str]:
    """The non-empty pieces one step cuts ``text`` into.

    >>> split_once("a--b", SplitStep("-", "Contiguous"))
    ['a', '--', 'b']
    """
    split = step.as_split() if isinstance(step, DigitsStep) else step
    return [
        text[start:end]
        for start, end in apply_behavior(match_spans(split, text), split.behavior)
        if end > start
    ]


def split_with_steps(text: str, steps: SplitSteps) -> list[str]:
    """The pieces of ``text`` after every step in turn, as Hugging Face's ``Sequence`` gives them.

    >>> split_with_steps("I'm 2 hot", (SplitStep(" ", "Removed"), SplitStep("'", "MergedWithNext")))
    ['I', "'m", '2', 'hot']
    """
    pieces = [text] if text else []
    for step in steps:
        pieces = [part for piece in pieces for part in split_once(piece, step)]
    return pieces


def describe_steps(steps: SplitSteps) -> str:
    """A one-line summary of a chain, for ``repr`` and ``streambpe info``.

    >>> describe_steps((SplitStep("a", "Removed", True), DigitsStep(True)))
    "Split('a', Removed, invert) > Digits(individual)"
    """
    parts = []
    for step in steps:
        if isinstance(step, DigitsStep):
            parts.append(f"Digits({'individual' if step.individual_digits else 'runs'})")
        else:
            invert = ", invert" if step.invert else ""
            parts.append(f"Split({step.pattern!r}, {step.behavior}{invert})")
    return " > ".join(parts)


#: What a pretokenizer is given: a pattern string, or a chain of steps.
Pretokenization = str | SplitSteps


def checked_steps(steps: object) -> SplitSteps:
    """``steps`` as a :data:`SplitSteps` tuple, or a ParameterError saying what is wrong.

    >>> checked_steps([DigitsStep(True)])
    (DigitsStep(individual_digits=True),)
    >>> checked_steps(("a",))
    Traceback (most recent call last):
    streambpe.errors.ParameterError: a chain of steps holds SplitStep and DigitsStep objects, not 'a'
    """
    if isinstance(steps, str) or not isinstance(steps, (tuple, list)):
        raise ParameterError(f"split steps must be a tuple of steps, not {steps!r}")
    for step in steps:
        if not isinstance(step, (SplitStep, DigitsStep)):
            raise ParameterError(
                f"a chain of steps holds SplitStep and DigitsStep objects, not {step!r}"
            )
    if not steps:
        raise ParameterError("a chain of split steps needs at least one step")
    return tuple(steps)


def steps_to_data(steps: SplitSteps) -> list[dict[str, object]]:
    """The chain as JSON-ready dicts, spelled like ``tokenizer.json``'s pre-tokenizers.

    >>> steps_to_data((SplitStep("a"), DigitsStep(False)))
    [{'type': 'Split', 'pattern': 'a', 'behavior': 'Isolated', 'invert': False}, {'type': 'Digits', 'individual_digits': False}]
    """
    return [
        {"type": "Digits", "individual_digits": step.individual_digits}
        if isinstance(step, DigitsStep)
        else {
            "type": "Split",
            "pattern": step.pattern,
            "behavior": step.behavior,
            "invert": step.invert,
        }
        for step in steps
    ]


def steps_from_data(data: object) -> SplitSteps:
    """The chain that :func:`steps_to_data` wrote; ParameterError for anything else.

    >>> steps = (SplitStep("a", "Removed", True), DigitsStep(True))
    >>> steps_from_data(steps_to_data(steps)) == steps
    True
    """
    if not isinstance(data, list):
        raise ParameterError(f"split steps must be a list of objects, not {data!r}")
    steps: list[SplitStep | DigitsStep] = []
    for item in data:
        if isinstance(item, dict) and item.get("type") == "Digits":
            steps.append(DigitsStep(bool(item.get("individual_digits"))))
        elif isinstance(item, dict) and item.get("type") == "Split":
            pattern, behavior = item.get("pattern"), item.get("behavior", "Isolated")
            if not isinstance(pattern, str) or not isinstance(behavior, str):
                raise ParameterError(f"a Split step needs a string pattern and behavior: {item!r}")
            steps.append(SplitStep(pattern, behavior, bool(item.get("invert", False))))
        else:
            raise ParameterError(f"unknown split step {item!r}; expected a Split or Digits object")
    return checked_steps(steps)


class StepsPretokenizer:
    """The pure-Python pretokenizer of a chain: :func:`split_with_steps` per text.

    >>> StepsPretokenizer((SplitStep(" ", "Removed"),)).pieces("a b")
    ['a', 'b']
    """

    def __init__(self, steps: SplitSteps) -> None:
        self.pattern = steps

    def pieces(self, text: str) -> list[str]:
        """All pieces of ``text``, in order."""
        return split_with_steps(text, self.pattern)

    def count_into(self, texts: Iterable[str], counts: dict[str, int]) -> None:
        """Add how often each piece of the strs ``texts`` occurs to ``counts``.

        >>> counts = {"a": 1}
        >>> StepsPretokenizer((DigitsStep(True),)).count_into(["a1", "1"], counts)
        >>> sorted(counts.items())
        [('1', 2), ('a', 2)]
        """
        for text in texts:
            for piece in split_with_steps(text, self.pattern):
                counts[piece] = counts.get(piece, 0) + 1


def describe_pattern(pattern: Pretokenization) -> str:
    """A pattern string as it is; a chain as :func:`describe_steps` spells it.

    >>> describe_pattern(r"\\s+"), describe_pattern((DigitsStep(True),))
    ('\\\\s+', 'Digits(individual)')
    """
    return pattern if isinstance(pattern, str) else describe_steps(pattern)
