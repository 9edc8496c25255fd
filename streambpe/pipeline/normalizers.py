"""Normalizers: the text rewrites a ``tokenizer.json`` applies before pre-tokenizing.

Each is a small frozen object with ``normalize(text) -> str``, applied exactly
as Hugging Face ``tokenizers`` applies it: the Unicode forms through
:func:`unicodedata.normalize`, ``Lowercase`` one character at a time (no
final-sigma rule, as in ``tokenizers``), ``Replace`` on every non-overlapping
match, ``Prepend`` only to a non-empty text, ``NormalizerSequence`` in order.

A normalizer runs on each stretch of text between added tokens separately,
so streaming may cut text only where normalizing the two sides apart gives
the same result as normalizing the whole: :meth:`~Normalizer.cuts_inside`
says whether the normalizer allows cuts inside a stretch at all, and
:meth:`~Normalizer.is_safe_start` whether a cut may fall before a character
(``docs/design.md``, "Normalizers").

>>> steps = NormalizerSequence((UnicodeForm("NFC"), Lowercase(), Replace(" ", "\u2581")))
>>> steps.normalize("Cafe\\u0301 Ol\\u00c9")
'café▁olé'
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

import regex

#: The Unicode normalization forms a ``tokenizer.json`` may name.
UNICODE_FORMS = ("NFC", "NFD", "NFKC", "NFKD")


class Normalizer(Protocol):
    """What every normalizer offers."""

    def normalize(self, text: str) -> str: ...

    def cuts_inside(self) -> bool:
        """Whether text may be cut inside a stretch at all (see :meth:`is_safe_start`)."""
        ...

    def is_safe_start(self, char: str) -> bool:
        """Whether normalizing text cut just before ``char`` equals normalizing it whole.

        Always, for a normalizer that rewrites each character or match on its
        own (those that subclass :class:`Normalizer` inherit this answer).
        """
        return True


@dataclass(frozen=True)
class UnicodeForm:
    """``NFC``, ``NFD``, ``NFKC`` or ``NFKD``.

    >>> UnicodeForm("NFD").normalize("é") == "e\\u0301"
    True
    >>> UnicodeForm("NFC").is_safe_start("a"), UnicodeForm("NFC").is_safe_start("\\u0301")
    (True, False)
    """

    form: str

    def normalize(self, text: str) -> str:
        return unicodedata.normalize(self.form, text)  # type: ignore[arg-type]

    def cuts_inside(self) -> bool:
        return True

    def is_safe_start(self, char: str) -> bool:
        return is_stable_starter(char, self.form)


@dataclass(frozen=True)
class Lowercase(Normalizer):
    """Each character lowercased on its own, as ``tokenizers`` does.

    >>> Lowercase().normalize("ΟΔΟΣ İ")  # no final sigma; dotted I keeps its dot
    'οδοσ i̇'
    """

    def normalize(self, text: str) -> str:
        if text.isascii():
            return text.lower()
        return "".join([char.lower() for char in text])

    def cuts_inside(self) -> bool:
        return True


@dataclass(frozen=True)
class Replace(Normalizer):
    """Every non-overlapping match of ``pattern`` (a regex) replaced by ``content``, literally.

    A ``tokenizer.json`` ``String`` pattern arrives here escaped.

    >>> Replace(" +", "_").normalize("a  b c")
    'a_b_c'
    """

    pattern: str
    content: str

    def normalize(self, text: str) -> str:
        content = self.content
        return _compiled(self.pattern).sub(lambda _: content, text)

    def cuts_inside(self) -> bool:
        # A one-character literal cannot match across a cut; anything longer might.
        pattern = self.pattern
        if len(pattern) == 2 and pattern[0] == "\\":
            return not pattern[1].isalnum()
        return len(pattern) == 1 and pattern not in "^$.|()[]{}*+?\\"


@dataclass(frozen=True)
class Prepend(Normalizer):
    """``prefix`` put in front of a non-empty text.

    >>> Prepend("\\u2581").normalize("hi"), Prepend("\\u2581").normalize("")
    ('▁hi', '')
    """

    prefix: str

    def normalize(self, text: str) -> str:
        return self.prefix + text if text else text

    def cuts_inside(self) -> bool:
        # Each cut would start a new text, and so a new prefix.
        return False


@dataclass(frozen=True)
class NormalizerSequence:
    """Normalizers applied in order.

    >>> NormalizerSequence((Prepend("x"), Lowercase())).normalize("AB")
    'xab'
    """

    steps: tuple[Normalizer, ...]

    def normalize(self, text: str) -> str:
        for step in self.steps:
            text = step.normalize(text)
        return text

    def cuts_inside(self) -> bool:
        return all(step.cuts_inside() for step in self.steps)

    def is_safe_start(self, char: str) -> bool:
        # A later step sees the earlier steps' output; the forms never turn a
        # stable starter into anything else, and the other steps act per character.
        return all(step.is_safe_start(char) for step in self.steps)


#: Each one-step normalizer by its class name, the name a pipeline's JSON form gives it
#: (:mod:`~streambpe.pipeline.documents`).
NORMALIZER_TYPES: dict[str, type[Any]] = {
    kind.__name__: kind for kind in (UnicodeForm, Lowercase, Replace, Prepend)
}


@cache
def _compiled(pattern: str) -> regex.Pattern[str]:
    return regex.compile(pattern)


def is_stable_starter(char: str, form: str) -> bool:
    """Whether ``form`` normalizes text cut just before ``char`` as it normalizes the whole.

    True for a character whose decomposition starts with a starter (canonical
    combining class 0) that no composition takes as its second part, and that
    the form leaves as it is: Unicode's "quick check is Yes and the class is
    0" condition, computed from :mod:`unicodedata`.

    >>> [is_stable_starter(c, "NFC") for c in ("a", " ", "\\u0301", "\\u1161", "\\uff9e")]
    [True, True, False, False, True]
    >>> is_stable_starter("\\uff9e", "NFKC")  # halfwidth voiced mark: NFKC makes it combining
    False
    """
    if char.isascii():
        return True
    if unicodedata.combining(char) or not unicodedata.is_normalized(form, char):  # type: ignore[arg-type]
        return False
    if form in ("NFD", "NFKD"):
        return True
    first = unicodedata.normalize("NFKD" if form == "NFKC" else "NFD", char)[0]
    return unicodedata.combining(first) == 0 and first not in _second_parts()


@cache
def _second_parts() -> frozenset[str]:
    """Every starter that a canonical composition takes as its second character.

    Built once from the decompositions of all code points (about 0.3 s), and
    only when a composing form meets non-ASCII text in a stream.
    """
    seconds: set[str] = set()
    for code_point in range(0x110000):
        decomposition = unicodedata.decomposition(chr(code_point))
        if not decomposition or decomposition.startswith("<"):
            continue
        parts = decomposition.split()
        if len(parts) != 2:
            continue
        first, second = (chr(int(part, 16)) for part in parts)
        # Excluded compositions decompose but never compose again.
        if unicodedata.normalize("NFC", first + second) == chr(code_point):
            seconds.add(second)
    # Hangul vowels and trailing consonants compose algorithmically, not by table.
    seconds.update(chr(c) for c in range(0x1161, 0x1176))
    seconds.update(chr(c) for c in range(0x11A8, 0x11C3))
    return frozenset(char for char in seconds if unicodedata.combining(char) == 0)
