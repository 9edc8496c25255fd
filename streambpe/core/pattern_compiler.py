"""Compiles a pretokenization regex into a small program for the native matcher.

Real models' pre-tokenizers use a small part of regex syntax. A pattern in
that part is parsed here, once, into a :class:`Program`: a list of character
classes and a list of instructions that ``_pattern_compiler_impl.hpp`` interprets
with exactly the ``regex`` module's semantics (leftmost match; the first
alternative that matches wins; greedy and lazy quantifiers backtrack,
possessive ones and atomic groups do not). The subset:

- alternation ``a|b`` and groups ``(?:...)``, ``(?i:...)``, atomic ``(?>...)``;
  a capturing group only where captures do not matter (``captures_ok``:
  ``findall`` returns the groups instead of the matches);
- character classes ``[...]`` with ranges, negation, escapes (``\\r``,
  ``\\u3040``, ``\\U0001F600``), ``\\p{..}`` / ``\\P{..}`` of general categories,
  ``\\s``, ``\\d`` and their negations, and ``.``;
- quantifiers ``? * + {m} {m,} {m,n} {,n}``, each greedy, lazy (``?``) or
  possessive (``+``);
- look-ahead ``(?=...)`` and ``(?!...)``; ``$`` (``regex``'s: the end, or
  before a final ``"\\n"``) and ``(?m:$)`` (before any ``"\\n"``).

A pattern that could match the empty string is refused too (``findall``
would return empty pieces, and a scan could not resume after one). Anything
else raises :class:`UnsupportedPatternError`, and the caller falls back to
``regex``.

Character classes are described by the general category and White_Space
property of each code point (:func:`~streambpe.core.unicode_classes.base_table`,
read from ``regex`` itself) plus explicit ranges; case-insensitive letters
become the set of characters ``regex`` matches for them.

>>> program = compile_pattern(r"\\p{L}+|\\s+(?!\\S)|\\s")
>>> len(program.classes), len(program.branches)
(3, 3)
>>> compile_pattern(r"a\\b")
Traceback (most recent call last):
streambpe.core.pattern_compiler.UnsupportedPatternError: \\b at offset 1 is outside the subset the native matcher runs
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import cache

import regex

from streambpe.core.split_steps import (
    BEHAVIORS,
    DigitsStep,
    SplitSteps,
    python_dialect,
)
from streambpe.core.unicode_classes import GENERAL_CATEGORIES, SPACE_BASE, case_fold_sets
from streambpe.errors import ParameterError

#: Most classes one program may hold: one bit each in the native class table.
MAX_CLASSES = 32
#: Most instructions in one program (bounds the unrolling of counted groups).
MAX_CODE = 1 << 16
#: Largest range that is expanded character by character under ``(?i)``.
MAX_FOLDED_RANGE = 512
#: ``max`` of an unbounded repeat.
UNBOUNDED = 0xFFFFFFFF

# Instructions; the numbers must match ``Op`` in ``_pattern_compiler_impl.hpp``.
OP_CLASS = 0  # CLASS k: one character of class k
OP_RUN = 1  # RUN k min max mode: a repeat of class k
OP_SPLIT = 2  # SPLIT a b: try a, then b
OP_JMP = 3  # JMP a
OP_ATOMIC = 4  # ATOMIC end, body..., SUCCEED: the body's first match, never revisited
OP_LOOK = 5  # LOOK negative end, body..., SUCCEED: a look-ahead
OP_DOLLAR = 6  # DOLLAR multiline
OP_SUCCEED = 7

GREEDY, LAZY, POSSESSIVE = 0, 1, 2

# General-category names ``regex`` accepts in \p{..}, and their members.
_GROUPS: dict[str, tuple[str, ...]] = {
    letter: tuple(gc for gc in GENERAL_CATEGORIES if gc[0] == letter) for letter in "LMNPSZC"
}
_GROUPS["LC"] = _GROUPS["L&"] = ("Lu", "Ll", "Lt")


class UnsupportedPatternError(ParameterError):
    """The pattern is valid, but outside the subset the native matcher runs."""


@dataclass(frozen=True)
class CharClass:
    """A set of code points: ``(bit base(cp) of base_mask or cp in ranges) != negated``.

    ``base(cp)`` is the general-category index of ``cp``, plus
    :data:`~streambpe.core.unicode_classes.SPACE_BASE` if it is whitespace.
    """

    base_mask: int
    ranges: tuple[tuple[int, int], ...]
    negated: bool


@dataclass
class Program:
    """A compiled pattern: classes, instructions, and each top-level branch's entry.

    ``branches`` holds ``(first_mask, start)``: a match of the branch can only
    begin with a character in one of the classes of ``first_mask``, and its
    code starts at ``code[start]``.
    """

    pattern: str
    classes: list[CharClass] = field(default_factory=list)
    code: list[int] = field(default_factory=list)
    branches: list[tuple[int, int]] = field(default_factory=list)


# ----------------------------------------------------------------- syntax tree


@dataclass(frozen=True)
class _Class:
    klass: CharClass


@dataclass(frozen=True)
class _Seq:
    items: tuple[_Node, ...]


@dataclass(frozen=True)
class _Alt:
    branches: tuple[_Node, ...]


@dataclass(frozen=True)
class _Repeat:
    body: _Node
    min: int
    max: int  # UNBOUNDED for none
    mode: int


@dataclass(frozen=True)
class _Atomic:
    body: _Node


@dataclass(frozen=True)
class _Look:
    body: _Node
    negative: bool


@dataclass(frozen=True)
class _Dollar:
    multiline: bool


_Node = _Class | _Seq | _Alt | _Repeat | _Atomic | _Look | _Dollar

_ALL_BASES = (1 << 64) - 1


def _category_mask(names: tuple[str, ...]) -> int:
    mask = 0
    for name in names:
        index = GENERAL_CATEGORIES.index(name)
        mask |= (1 << index) | (1 << (index | SPACE_BASE))
    return mask


_SPACE_MASK = sum(1 << (index | SPACE_BASE) for index in range(len(GENERAL_CATEGORIES)))
_DIGIT_MASK = _category_mask(("Nd",))
_ESCAPED_CHARS = {"r": "\r", "n": "\n", "t": "\t", "f": "\f", "v": "\v", "a": "\a", "e": "\x1b"}


def _literal(char: int) -> CharClass:
    return CharClass(0, ((char, char),), False)


def _ranges_of(code_points: set[int]) -> tuple[tuple[int, int], ...]:
    ranges: list[list[int]] = []
    for cp in sorted(code_points):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return tuple((low, high) for low, high in ranges)


class _Parser:
    """A recursive-descent parser of the subset into a :data:`_Node` tree."""

    def __init__(
        self, pattern: str, *, captures_ok: bool, folds: dict[int, frozenset[int]] | None
    ) -> None:
        self.pattern = pattern
        self.position = 0
        self.captures_ok = captures_ok
        # None on a first pass that only collects the characters to fold.
        self.folds = folds
        self.fold_requests: set[str] = set()

    def unsupported(self, what: str, at: int | None = None) -> UnsupportedPatternError:
        where = self.position if at is None else at
        return UnsupportedPatternError(
            f"{what} at offset {where} is outside the subset the native matcher runs"
        )

    def peek(self, ahead: int = 0) -> str:
        index = self.position + ahead
        return self.pattern[index] if index < len(self.pattern) else ""

    def parse(self) -> _Node:
        # A leading "(?i)" or "(?m)" sets the flag for the whole pattern.
        flags = regex.match(r"\(\?([im]+)\)", self.pattern)
        if flags is not None:
            self.position = flags.end()
        on = flags[1] if flags is not None else ""
        node = self.alternation(ignore_case="i" in on, multiline="m" in on)
        if self.position != len(self.pattern):
            raise self.unsupported(f"unbalanced {self.peek()!r}")
        return node

    def alternation(self, *, ignore_case: bool, multiline: bool) -> _Node:
        branches = [self.sequence(ignore_case=ignore_case, multiline=multiline)]
        while self.peek() == "|":
            self.position += 1
            branches.append(self.sequence(ignore_case=ignore_case, multiline=multiline))
        return branches[0] if len(branches) == 1 else _Alt(tuple(branches))

    def sequence(self, *, ignore_case: bool, multiline: bool) -> _Node:
        items: list[_Node] = []
        while self.peek() not in ("", "|", ")"):
            start = self.position
            atom = self.atom(ignore_case=ignore_case, multiline=multiline)
            items.append(self.quantified(atom, start))
        return items[0] if len(items) == 1 else _Seq(tuple(items))

    def quantified(self, atom: _Node, start: int) -> _Node:
        char = self.peek()
        if char == "?":
            low, high = 0, 1
        elif char == "*":
            low, high = 0, UNBOUNDED
        elif char == "+":
            low, high = 1, UNBOUNDED
        elif char == "{":
            counted = regex.match(r"\{(\d*)(?:(,)(\d*))?\}", self.pattern, pos=self.position)
            if counted is None or (counted[1] == "" and counted[2] is None):
                return atom  # not a quantifier: regex reads "{" as a literal
            low = int(counted[1] or 0)
            high = low if counted[2] is None else int(counted[3]) if counted[3] else UNBOUNDED
            if high < low:
                raise self.unsupported("a {min,max} with max < min")
            self.position = counted.end() - 1
        else:
            return atom
        self.position += 1
        mode = GREEDY
        if self.peek() == "?":
            mode = LAZY
            self.position += 1
        elif self.peek() == "+":
            mode = POSSESSIVE
            self.position += 1
        if self.peek() in ("?", "*", "+") or (
            self.peek() == "{" and regex.match(r"\{\d*,?\d*\}", self.pattern, pos=self.position)
        ):
            raise self.unsupported("a repeated quantifier")
        if isinstance(atom, (_Look, _Dollar)):
            raise self.unsupported("a quantified zero-width item", start)
        return _Repeat(atom, low, high, mode)

    def atom(self, *, ignore_case: bool, multiline: bool) -> _Node:
        char = self.peek()
        start = self.position
        if char == "(":
            return self.group(ignore_case=ignore_case, multiline=multiline)
        if char == "[":
            return _Class(self.char_class(ignore_case=ignore_case))
        if char == "\\":
            return _Class(self.escape(ignore_case=ignore_case, in_class=False))
        self.position += 1
        if char == "$":
            return _Dollar(multiline)
        if char == ".":
            return _Class(CharClass(0, ((10, 10),), True))
        if char in "^*+?":
            raise self.unsupported(repr(char), start)
        return _Class(self.literal(ord(char), ignore_case=ignore_case))

    def group(self, *, ignore_case: bool, multiline: bool) -> _Node:
        start = self.position
        self.position += 1
        if self.peek() != "?":
            if not self.captures_ok:
                raise self.unsupported("a capturing group (findall would return its text)", start)
            return self.group_body(start, ignore_case=ignore_case, multiline=multiline)
        self.position += 1
        kind = self.peek()
        if kind in (":", ">", "=", "!"):
            self.position += 1
            body = self.group_body(start, ignore_case=ignore_case, multiline=multiline)
            if kind == ">":
                return _Atomic(body)
            if kind in ("=", "!"):
                return _Look(body, negative=kind == "!")
            return body
        flags = regex.match(r"([imx]*)(?:-([imx]*))?:", self.pattern, pos=self.position)
        if flags is None or "x" in flags[0]:
            raise self.unsupported("this group", start)
        on, off = flags[1], flags[2] or ""
        self.position = flags.end()
        return self.group_body(
            start,
            ignore_case=(ignore_case or "i" in on) and "i" not in off,
            multiline=(multiline or "m" in on) and "m" not in off,
        )

    def group_body(self, start: int, *, ignore_case: bool, multiline: bool) -> _Node:
        body = self.alternation(ignore_case=ignore_case, multiline=multiline)
        if self.peek() != ")":
            raise self.unsupported("an unclosed group", start)
        self.position += 1
        return body

    def literal(self, char: int, *, ignore_case: bool) -> CharClass:
        if not ignore_case:
            return _literal(char)
        if self.folds is None:
            self.fold_requests.add(chr(char))
            return _literal(char)
        return CharClass(0, _ranges_of(set(self.folds[char])), False)

    def escape(self, *, ignore_case: bool, in_class: bool) -> CharClass:
        start = self.position
        char = self.peek(1)
        self.position += 2
        if char in "pP":
            return self.property(start, negated=char == "P", ignore_case=ignore_case)
        if char in "sS":
            return CharClass(_SPACE_MASK, (), char == "S")
        if char in "dD":
            return CharClass(_DIGIT_MASK, (), char == "D")
        if char in _ESCAPED_CHARS:
            return self.literal(ord(_ESCAPED_CHARS[char]), ignore_case=ignore_case)
        if char in "xuU":
            return self.literal(self.code_point(char, start), ignore_case=ignore_case)
        if char == "b" and in_class:
            return self.literal(8, ignore_case=ignore_case)
        if char == "" or char.isalnum():
            raise self.unsupported(f"\\{char}", start)
        return self.literal(ord(char), ignore_case=ignore_case)

    def code_point(self, kind: str, start: int) -> int:
        digits = {"x": r"\{([0-9A-Fa-f]{1,6})\}|([0-9A-Fa-f]{2})", "u": "([0-9A-Fa-f]{4})"}
        spelled = regex.match(digits.get(kind, "([0-9A-Fa-f]{8})"), self.pattern, pos=self.position)
        if spelled is None:
            raise self.unsupported(f"a malformed \\{kind} escape", start)
        self.position = spelled.end()
        value = int(next(group for group in spelled.groups() if group), 16)
        if value > sys.maxunicode:
            raise self.unsupported("a code point past U+10FFFF", start)
        return value

    def property(self, start: int, *, negated: bool, ignore_case: bool) -> CharClass:
        name = regex.match(r"\{(\^?)([A-Za-z&_]+)\}", self.pattern, pos=self.position)
        if name is None:
            raise self.unsupported("this \\p escape", start)
        self.position = name.end()
        if ignore_case:
            raise self.unsupported("a \\p class under (?i)", start)
        categories = _GROUPS.get(name[2], (name[2],) if name[2] in GENERAL_CATEGORIES else None)
        if categories is None:
            raise self.unsupported(f"the property {name[2]!r} (only general categories)", start)
        return CharClass(_category_mask(categories), (), negated != (name[1] == "^"))

    def char_class(self, *, ignore_case: bool) -> CharClass:
        start = self.position
        self.position += 1
        negated = self.peek() == "^"
        if negated:
            self.position += 1
        base_mask = 0
        members: set[int] = set()
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            char = self.peek()
            if char == "":
                raise self.unsupported("an unclosed class", start)
            if char == "]" and not first:
                self.position += 1
                break
            if (
                char == "["
                or (char == "-" and self.peek(1) == "-")
                or (char in "&|~" and self.peek(1) == char)
            ):
                raise self.unsupported("a nested class or set operation", self.position)
            first = False
            item, low = self.class_item(ignore_case=ignore_case)
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                dash = self.position
                self.position += 1
                _, high = self.class_item(ignore_case=False)
                if low is None or high is None or high < low:
                    raise self.unsupported("this range", dash)
                if ignore_case:
                    if high - low > MAX_FOLDED_RANGE:
                        raise self.unsupported("a long range under (?i)", dash)
                    for cp in range(low, high + 1):
                        for fold_low, fold_high in self.literal(cp, ignore_case=True).ranges:
                            members.update(range(fold_low, fold_high + 1))
                else:
                    ranges.append((low, high))
                continue
            if item.negated:
                # \S, \D or \P{..} inside a class: the bases outside its mask.
                if item.ranges:
                    raise self.unsupported("a negated item with ranges", self.position)
                base_mask |= _ALL_BASES & ~item.base_mask
            else:
                base_mask |= item.base_mask
                for low, high in item.ranges:
                    ranges.append((low, high))
        merged = _merge_ranges([*ranges, *((cp, cp) for cp in members)])
        return CharClass(base_mask, merged, negated)

    def class_item(self, *, ignore_case: bool) -> tuple[CharClass, int | None]:
        """One member of a class, and its code point if it is one character (before folding)."""
        char = self.peek()
        if char == "\\":
            start = self.position
            item = self.escape(ignore_case=False, in_class=True)
            single = item.ranges[0][0] if not item.base_mask and not item.negated else None
            if ignore_case:
                self.position = start
                item = self.escape(ignore_case=True, in_class=True)
            return item, single
        self.position += 1
        return self.literal(ord(char), ignore_case=ignore_case), ord(char)


def _merge_ranges(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[list[int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    return tuple((low, high) for low, high in merged)


# ----------------------------------------------------------------- code generation


class _Emitter:
    """Turns a tree into instructions, numbering its distinct classes."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.class_index: dict[CharClass, int] = {}

    def klass(self, klass: CharClass) -> int:
        index = self.class_index.get(klass)
        if index is None:
            index = len(self.program.classes)
            if index == MAX_CLASSES:
                raise UnsupportedPatternError(
                    f"the pattern has more than {MAX_CLASSES} distinct character classes"
                )
            self.class_index[klass] = index
            self.program.classes.append(klass)
        return index

    def emit(self, *words: int) -> int:
        code = self.program.code
        if len(code) + len(words) > MAX_CODE:
            raise UnsupportedPatternError("the pattern compiles to too many instructions")
        code.extend(words)
        return len(code) - len(words)

    def node(self, node: _Node) -> None:
        code = self.program.code
        if isinstance(node, _Class):
            self.emit(OP_CLASS, self.klass(node.klass))
        elif isinstance(node, _Seq):
            for item in node.items:
                self.node(item)
        elif isinstance(node, _Alt):
            jumps = []
            for index, branch in enumerate(node.branches):
                if index < len(node.branches) - 1:
                    split = self.emit(OP_SPLIT, 0, 0)
                    code[split + 1] = len(code)
                    self.node(branch)
                    jumps.append(self.emit(OP_JMP, 0))
                    code[split + 2] = len(code)
                else:
                    self.node(branch)
            for jump in jumps:
                code[jump + 1] = len(code)
        elif isinstance(node, _Repeat):
            self.repeat(node)
        elif isinstance(node, _Atomic):
            self.wrapped(OP_ATOMIC, (), node.body)
        elif isinstance(node, _Look):
            self.wrapped(OP_LOOK, (int(node.negative),), node.body)
        else:
            self.emit(OP_DOLLAR, int(node.multiline))

    def wrapped(self, op: int, operands: tuple[int, ...], body: _Node) -> None:
        at = self.emit(op, *operands, 0)
        self.node(body)
        self.emit(OP_SUCCEED)
        self.program.code[at + 1 + len(operands)] = len(self.program.code)

    def repeat(self, node: _Repeat) -> None:
        code = self.program.code
        if isinstance(node.body, _Class):
            self.emit(OP_RUN, self.klass(node.body.klass), node.min, node.max, node.mode)
            return
        if node.mode == POSSESSIVE:
            self.wrapped(OP_ATOMIC, (), _Repeat(node.body, node.min, node.max, GREEDY))
            return
        if node.max == UNBOUNDED and _nullable(node.body):
            raise UnsupportedPatternError(
                "a repeated group that can match the empty string is outside the subset"
            )
        for _ in range(node.min):
            self.node(node.body)
        lazy = node.mode == LAZY
        if node.max == UNBOUNDED:
            loop = self.emit(OP_SPLIT, 0, 0)
            self.node(node.body)
            self.emit(OP_JMP, loop)
            body, done = loop + 3, len(code)
            code[loop + 1], code[loop + 2] = (done, body) if lazy else (body, done)
            return
        splits = []
        for _ in range(node.max - node.min):
            split = self.emit(OP_SPLIT, 0, 0)
            splits.append(split)
            self.node(node.body)
        done = len(code)
        for split in splits:
            body = split + 3
            code[split + 1], code[split + 2] = (done, body) if lazy else (body, done)


def _nullable(node: _Node) -> bool:
    """Whether ``node`` can match the empty string."""
    if isinstance(node, _Class):
        return False
    if isinstance(node, _Seq):
        return all(_nullable(item) for item in node.items)
    if isinstance(node, _Alt):
        return any(_nullable(branch) for branch in node.branches)
    if isinstance(node, _Repeat):
        return node.min == 0 or _nullable(node.body)
    if isinstance(node, _Atomic):
        return _nullable(node.body)
    return True


def _first(node: _Node, emitter: _Emitter) -> int:
    """The classes (as a bit mask) a non-empty match of ``node`` can start with."""
    if isinstance(node, _Class):
        return 1 << emitter.klass(node.klass)
    if isinstance(node, _Seq):
        mask = 0
        for item in node.items:
            mask |= _first(item, emitter)
            if not _nullable(item):
                break
        return mask
    if isinstance(node, _Alt):
        mask = 0
        for branch in node.branches:
            mask |= _first(branch, emitter)
        return mask
    if isinstance(node, (_Repeat, _Atomic)):
        return _first(node.body, emitter)
    return 0


def compile_pattern(pattern: str, *, captures_ok: bool = False) -> Program:
    """Compile ``pattern`` into a :class:`Program`, or raise :class:`UnsupportedPatternError`.

    ``captures_ok`` accepts capturing groups (as non-capturing): right for a
    split, where only the whole match counts, wrong for ``findall``.

    >>> compile_pattern(r"\\p{N}{1,3}").code
    [1, 0, 1, 3, 0, 7]
    >>> compile_pattern(r"\\s*")
    Traceback (most recent call last):
    streambpe.core.pattern_compiler.UnsupportedPatternError: the pattern can match the empty string, which is outside the subset the native matcher runs
    """
    try:
        regex.compile(pattern)
    except regex.error as exc:
        raise ParameterError(f"pattern {pattern!r} is not a valid regex: {exc}") from exc
    first_pass = _Parser(pattern, captures_ok=captures_ok, folds=None)
    tree = first_pass.parse()
    if first_pass.fold_requests:
        folds = case_fold_sets(frozenset(first_pass.fold_requests))
        tree = _Parser(pattern, captures_ok=captures_ok, folds=folds).parse()
    if _nullable(tree):
        raise UnsupportedPatternError(
            "the pattern can match the empty string, which is outside the subset the native "
            "matcher runs"
        )
    program = Program(pattern)
    emitter = _Emitter(program)
    for branch in tree.branches if isinstance(tree, _Alt) else (tree,):
        start = len(program.code)
        emitter.node(branch)
        emitter.emit(OP_SUCCEED)
        program.branches.append((_first(branch, emitter), start))
    return program


@dataclass(frozen=True)
class CompiledPretokenizer:
    """What the native pretokenizer runs: one program found like ``findall``, or a chain.

    ``steps`` is empty for a single pattern; for a chain it holds, per step,
    ``(program index, behavior index in BEHAVIORS, invert)``.
    """

    programs: tuple[Program, ...]
    steps: tuple[tuple[int, int, bool], ...]


@cache
def compile_pretokenizer(pattern: str | SplitSteps) -> CompiledPretokenizer:
    """Compile a pattern string or a chain of split steps (memoized).

    A chain's step patterns are in Hugging Face's dialect
    (:func:`~streambpe.core.split_steps.python_dialect`); a ``Digits`` step is
    its equivalent split.

    >>> from streambpe.core.split_steps import SplitStep
    >>> chain = compile_pretokenizer((SplitStep(" ", "Removed"), DigitsStep(True)))
    >>> len(chain.programs), chain.steps
    (2, ((0, 1, False), (1, 0, False)))
    """
    if isinstance(pattern, str):
        return CompiledPretokenizer((compile_pattern(pattern),), ())
    programs: list[Program] = []
    steps: list[tuple[int, int, bool]] = []
    for step in pattern:
        split = step.as_split() if isinstance(step, DigitsStep) else step
        try:
            program = compile_pattern(python_dialect(split.pattern), captures_ok=True)
        except UnsupportedPatternError as exc:
            raise UnsupportedPatternError(f"split step {split.pattern!r}: {exc}") from exc
        steps.append((len(programs), BEHAVIORS.index(split.behavior), split.invert))
        programs.append(program)
    if not steps:
        raise UnsupportedPatternError("an empty chain of split steps")
    return CompiledPretokenizer(tuple(programs), tuple(steps))


def native_support(pattern: str | SplitSteps) -> str | None:
    """None if the native matcher runs ``pattern``, else why not (for ``streambpe info``).

    >>> native_support(r"\\w+") is None, native_support(r"\\p{L}+")
    (False, None)
    """
    try:
        compile_pretokenizer(pattern)
    except UnsupportedPatternError as exc:
        return str(exc)
    return None
