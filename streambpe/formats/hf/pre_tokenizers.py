"""The ``pre_tokenizer`` of a ``tokenizer.json``: JSON nodes to a pattern or a chain of splits.

A byte-level BPE pre-tokenizer is a list of steps ending in ``ByteLevel``,
which spells bytes as characters (and, with ``use_regex``, first splits
with GPT-2's pattern). The steps before it are ``Split`` (a ``String`` or
``Regex`` pattern, any ``behavior``, ``invert``), ``Digits`` and
``Whitespace``, run as :mod:`streambpe.core.split_steps` chains. One
``Isolated`` split that is not inverted is an ordinary pattern, which the
compiled scanner may know.

``ByteLevel``'s ``add_prefix_space`` puts a space in front of every piece it
gets; streambpe supports it where those pieces are the stretches between
added tokens, that is when ``ByteLevel`` is the only step.
``trim_offsets`` changes only offsets, which streambpe does not report.

>>> spec = read_pre_tokenizer(Node({"type": "ByteLevel", "add_prefix_space": True,
...                                 "use_regex": True}, "t.json", "pre_tokenizer"))
>>> spec.pattern == GPT2, spec.prefix_space
(True, True)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from streambpe.core.split_steps import DigitsStep, SplitStep, SplitSteps, python_dialect
from streambpe.formats.hf.nodes import Node
from streambpe.formats.hf.normalizers import read_pattern
from streambpe.patterns import BUILT_IN_PATTERNS, CL100K, GPT2

#: The pattern ``ByteLevel`` splits with when ``use_regex`` is on (GPT-2's, as tiktoken spells it).
BYTE_LEVEL_PATTERN = GPT2

#: How ``Whitespace`` cuts: runs of word characters and runs of other non-space characters.
WHITESPACE_STEP = SplitStep(r"\w+|[^\w\s]+", "Removed", invert=True)

#: How ``tokenizers`` (Oniguruma) must spell built-in patterns it would read differently:
#: it reads ``X{1,3}+`` as ``(X{1,3})+``, where ``regex`` reads a possessive ``X{1,3}``.
ONIGURUMA_SPELLINGS = {CL100K: CL100K.replace(r"\p{N}{1,3}+", r"(?>\p{N}{1,3})")}
_FROM_ONIGURUMA = {spelling: pattern for pattern, spelling in ONIGURUMA_SPELLINGS.items()}

#: A possessive interval, ``X{m,n}+``, which the two engines read differently.
POSSESSIVE_INTERVAL = re.compile(r"(?<!\\)\{\d+(?:,\d*)?\}\+")


@dataclass(frozen=True)
class PreTokenizerSpec:
    """How text is cut into pieces: a pattern or a chain of steps, and the prefix space."""

    pattern: str | SplitSteps
    prefix_space: bool


def read_pre_tokenizer(node: Node) -> PreTokenizerSpec:
    """The pattern or steps and prefix space that ``node`` describes."""
    if node.value is None:
        raise node.fail(
            "is null: tokenizers would give the model characters, not bytes; "
            "streambpe reads byte-level BPE tokenizers only"
        )
    nodes = list(node.child("pretokenizers").items()) if node.type_name() == "Sequence" else [node]
    if not nodes or nodes[-1].type_name() != "ByteLevel":
        raise node.fail(
            "not a byte-level tokenizer: its last pre-tokenizer must be ByteLevel, "
            "which spells bytes as characters"
        )
    *split_nodes, byte_level = nodes
    steps: list[SplitStep | DigitsStep] = [_read_step(step) for step in split_nodes]
    prefix_space = byte_level.child("add_prefix_space").boolean(default=True)
    if prefix_space and steps:
        raise byte_level.child("add_prefix_space").unsupported(
            "add_prefix_space after other pre-tokenizers (a space before every piece)"
        )
    if byte_level.child("use_regex").boolean(default=True):
        steps.append(SplitStep(BYTE_LEVEL_PATTERN))
    return PreTokenizerSpec(_as_pattern(steps), prefix_space)


def _read_step(node: Node) -> SplitStep | DigitsStep:
    return node.read_by_type(_STEP_READERS, "pre-tokenizer")


def _read_split(node: Node) -> SplitStep:
    pattern = read_pattern(node.child("pattern"))
    if POSSESSIVE_INTERVAL.search(pattern) and pattern not in _FROM_ONIGURUMA:
        raise node.child("pattern").unsupported(
            "a repeat like X{1,3}+ (tokenizers reads it as (X{1,3})+)"
        )
    behavior = node.child("behavior").string()
    try:
        return SplitStep(
            _FROM_ONIGURUMA.get(pattern, pattern), behavior, node.child("invert").boolean(False)
        )
    except ValueError as exc:
        raise node.child("behavior").fail(str(exc)) from exc


def _misplaced_byte_level(node: Node) -> NoReturn:
    raise node.fail("ByteLevel must be the last pre-tokenizer")


#: The pre-tokenizer types that may come before ``ByteLevel``, each to its step.
_STEP_READERS: dict[str, Callable[[Node], SplitStep | DigitsStep]] = {
    "Split": _read_split,
    "Digits": lambda node: DigitsStep(node.child("individual_digits").boolean(default=False)),
    "Whitespace": lambda node: WHITESPACE_STEP,
    "ByteLevel": _misplaced_byte_level,
}


def _as_pattern(steps: list[SplitStep | DigitsStep]) -> str | SplitSteps:
    if not steps:
        # Each stretch between added tokens is one piece.
        return r"[\s\S]+"
    if len(steps) == 1:
        step = steps[0]
        if (
            isinstance(step, SplitStep)
            and step.behavior == "Isolated"
            and not step.invert
            # A built-in's "$" follows possessive whitespace, where both dialects agree.
            and (step.pattern in BUILT_IN_PATTERNS or python_dialect(step.pattern) == step.pattern)
        ):
            return step.pattern
    return tuple(steps)
