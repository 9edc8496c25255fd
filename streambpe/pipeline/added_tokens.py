"""Added tokens: cut out of the text before the model, with Hugging Face's options.

An added token of a ``tokenizer.json`` is found leftmost-longest, like a
special token (:class:`~streambpe.cutting.specials.SpecialTokenScanner`),
and then its options apply exactly as ``tokenizers`` applies them:

- ``single_word``: an occurrence touching a word character (``\\w``) on
  either side is not a match, and the scan goes on after it;
- ``lstrip`` / ``rstrip``: the whitespace before / after an occurrence
  belongs to it (never whitespace an earlier match already took);
- ``normalized``: the token is looked for in the normalized text, under
  its normalized spelling; the others in the raw text, first;
- ``special``: only decoding cares (``skip_special_tokens``).

>>> splitter = AddedTokenSplitter([AddedToken("<m>", 5, lstrip=True, rstrip=True)])
>>> splitter.split("a <m>  b")
[('a', None), (' <m>  ', 5), ('b', None)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import regex

from streambpe.cutting.specials import SpecialTokenScanner

# The definitions of the regex crate, which tokenizers uses for these checks.
_WORD_CHAR = regex.compile(r"[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]")
_SPACE = regex.compile(r"\p{White_Space}")
_LEADING_SPACE = regex.compile(r"\p{White_Space}*")


@dataclass(frozen=True)
class AddedToken:
    """One entry of ``added_tokens``: its text, id and options."""

    content: str
    id: int
    special: bool = True
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = False

    @property
    def looks_around(self) -> bool:
        """Whether matching it depends on the text next to it."""
        return self.single_word or self.lstrip or self.rstrip


#: A stretch of text and the id of the added token it is, or None for ordinary text.
Split = tuple[str, int | None]


class AddedTokenSplitter:
    """Cuts text at the occurrences of a set of added tokens, searched under ``patterns``.

    ``patterns`` is what is looked for in the text for each token (its
    normalized spelling for a normalized token); by default, its content.
    """

    def __init__(self, tokens: Sequence[AddedToken], patterns: Sequence[str] | None = None) -> None:
        spelled = list(patterns) if patterns is not None else [t.content for t in tokens]
        self._by_pattern = dict(zip(spelled, tokens, strict=True))
        self._scanner = SpecialTokenScanner(spelled)
        self._plain = not any(token.looks_around for token in tokens)

    def __bool__(self) -> bool:
        return bool(self._scanner)

    @property
    def plain(self) -> bool:
        """Whether no token looks at the text around it (every occurrence is a match as found)."""
        return self._plain

    def spans(self, text: str) -> list[tuple[int, int, int]]:
        """``(start, end, id)`` of each occurrence, for a :attr:`plain` splitter.

        >>> AddedTokenSplitter([AddedToken("<s>", 5)]).spans("a<s>b<s>")
        [(1, 4, 5), (5, 8, 5)]
        """
        if not self._scanner:
            return []
        by_pattern = self._by_pattern
        return [(m.start, m.end, by_pattern[m.token].id) for m in self._scanner.matches(text)]

    def split(self, text: str) -> list[Split]:
        """``text`` cut into ordinary stretches and added tokens (``tokenizers``' ``find_matches``).

        Ordinary stretches are never empty, except for an empty ``text``,
        which is one empty stretch.
        """
        if not text:
            return [("", None)]
        splits: list[Split] = []
        taken = 0
        for match in self._scanner.matches(text) if self._scanner else ():
            token = self._by_pattern[match.token]
            start, end = match.start, match.end
            if token.single_word and (
                (start > 0 and _WORD_CHAR.match(text, start - 1))
                or (end < len(text) and _WORD_CHAR.match(text, end))
            ):
                continue
            if token.lstrip:
                # Never into whitespace that an earlier match already took.
                while start > taken and _SPACE.match(text, start - 1):
                    start -= 1
            if token.rstrip:
                found = _LEADING_SPACE.match(text, end)
                end = found.end() if found else end
            if taken < start:
                splits.append((text[taken:start], None))
            splits.append((text[start:end], token.id))
            taken = end
        if taken != len(text):
            splits.append((text[taken:], None))
        return splits
