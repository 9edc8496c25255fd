"""Special-token scanning: find special tokens in text, leftmost-longest.

Special tokens are never split and never merged. When several occurrences
overlap, the leftmost wins; at the same start, the longest wins
(``docs/design.md``, "Special tokens").

pyahocorasick's ``iter_long`` drops valid matches (at the end of the input and
after some failed partial matches), so the scanner asks ``iter()`` for *every*
occurrence and selects greedily itself.

>>> scanner = SpecialTokenScanner(["<|endoftext|>", "<|endoftext|><|endoftext|>"])
>>> [m.token for m in scanner.matches("a<|endoftext|><|endoftext|>b<|endoftext|>")]
['<|endoftext|><|endoftext|>', '<|endoftext|>']
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol

import ahocorasick

from streambpe.errors import ParameterError

#: Characters searched per window: a bounded time holding the GIL.
_SCAN_WINDOW = 1 << 16

#: Up to this many special tokens, each is looked for with ``str.find``, which
#: skips through text several times faster than pyahocorasick's pass (20 MB
#: of prose: 0.017 s against 0.088 s for one token); more tokens share that pass.
_FIND_MAX_TOKENS = 8


class Searchable(Protocol):
    """``str``, ``bytes`` or an ``mmap``: anything with ``find`` over its own kind of string."""

    def find(self, sub: Any, start: int = ..., end: int = ..., /) -> int: ...


def spanned_by_special(text: Searchable, position: int, tokens: Sequence[Any]) -> bool:
    """True when an occurrence of one of ``tokens`` starts before ``position`` and ends after it.

    A cut there would split that occurrence. ``text`` and ``tokens`` are both
    ``str``, or both bytes-like (then positions are byte offsets).

    >>> spanned_by_special("a<s>b", 2, ["<s>"]), spanned_by_special(b"a<s>b", 1, [b"<s>"])
    (True, False)
    """
    for token in tokens:
        found = text.find(token, max(0, position - len(token) + 1), position + len(token) - 1)
        if 0 <= found < position:
            return True
    return False


class SpecialMatch(NamedTuple):
    """One special token found in a text: ``text[start:end] == token``."""

    start: int
    end: int
    token: str


def validate_special_tokens(tokens: Iterable[str] | None) -> list[str]:
    """Check a list of special tokens and return it as a list, in the given order.

    >>> validate_special_tokens(["<|endoftext|>"])
    ['<|endoftext|>']
    >>> validate_special_tokens(["<s>", "<s>"])
    Traceback (most recent call last):
    ...
    streambpe.errors.ParameterError: duplicate special token '<s>'; list each special token once
    """
    if tokens is None:
        return []
    if isinstance(tokens, str):
        raise TypeError(
            f"special_tokens must be a list of strings, not the string {tokens!r}; "
            f"write [{tokens!r}]"
        )
    checked: list[str] = []
    seen: set[str] = set()
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(f"special token {token!r} is not a str")
        if token == "":
            raise ParameterError(
                "empty special token: a special token needs at least one character"
            )
        if token in seen:
            raise ParameterError(f"duplicate special token {token!r}; list each special token once")
        seen.add(token)
        checked.append(token)
    return checked


class SpecialTokenScanner:
    """Finds special tokens in a ``str``, leftmost-longest, without overlaps.

    Files are cut without it: :mod:`~streambpe.cutting.chunks` looks for each special
    token's UTF-8 bytes near a cut with ``bytes.find``, which needs no decoding.
    """

    def __init__(self, tokens: Iterable[str]) -> None:
        self.tokens: tuple[str, ...] = tuple(validate_special_tokens(tokens))
        self.max_length = max((len(t) for t in self.tokens), default=0)
        self._automaton: ahocorasick.Automaton | None = None
        if len(self.tokens) > _FIND_MAX_TOKENS:
            automaton = ahocorasick.Automaton()
            for token in self.tokens:
                automaton.add_word(token, token)
            automaton.make_automaton()
            self._automaton = automaton

    def __bool__(self) -> bool:
        return bool(self.tokens)

    def __getstate__(self) -> tuple[str, ...]:
        # Automatons pickle slowly and bulkily; rebuilding one is cheap.
        return self.tokens

    def __setstate__(self, tokens: tuple[str, ...]) -> None:
        self.__init__(tokens)  # type: ignore[misc]

    def _occurrences(
        self, text: str, start: int, stop: int
    ) -> Iterator[list[tuple[int, int, str]]]:
        """Every occurrence starting in ``text[start:stop]``, one window at a time, as
        ``(start, -length, token)`` lists (sorted, that is leftmost-longest order).

        A window reaches ``max_length - 1`` characters past its end, so a match
        that starts in it is seen whole.
        """
        if not self.tokens:
            return
        reach = self.max_length - 1
        for window_start in range(start, stop, _SCAN_WINDOW):
            window_stop = min(window_start + _SCAN_WINDOW, stop)
            yield self._window_occurrences(
                text, window_start, window_stop, min(stop, window_stop + reach)
            )

    def _window_occurrences(
        self, text: str, window_start: int, window_stop: int, window_end: int
    ) -> list[tuple[int, int, str]]:
        """The occurrences in ``text[window_start:window_end]`` starting before ``window_stop``.

        pyahocorasick is handed the window as its own slice: given the whole
        text with bounds, it converts the whole text on every call, which made
        scanning quadratic. ``str.find`` takes bounds without copying.
        """
        found = []
        if self._automaton is None:
            for token in self.tokens:
                begin = text.find(token, window_start, window_end)
                while 0 <= begin < window_stop:
                    found.append((begin, -len(token), token))
                    begin = text.find(token, begin + 1, window_end)
        else:
            for last, token in self._automaton.iter(text[window_start:window_end]):
                begin = window_start + last + 1 - len(token)
                if begin < window_stop:
                    found.append((begin, -len(token), token))
        found.sort()
        return found

    def matches(self, text: str, start: int = 0, end: int | None = None) -> list[SpecialMatch]:
        """All non-overlapping matches in ``text[start:end]``, leftmost-longest, in order.

        Offsets are relative to ``text``.

        >>> SpecialTokenScanner(["ab", "abc", "bcd"]).matches("xabcd")
        [SpecialMatch(start=1, end=4, token='abc')]
        """
        stop = len(text) if end is None else end
        selected: list[SpecialMatch] = []
        cursor = start
        for found in self._occurrences(text, start, stop):
            for begin, negative_length, token in found:
                if begin >= cursor:
                    cursor = begin - negative_length
                    selected.append(SpecialMatch(begin, cursor, token))
        return selected

    def first_match(self, text: str) -> SpecialMatch | None:
        """The leftmost-longest match in ``text``, or None; stops scanning once found.

        >>> SpecialTokenScanner(["<s>", "<s><s>"]).first_match("a<s><s>")
        SpecialMatch(start=1, end=7, token='<s><s>')
        """
        if self._automaton is None:
            # Most texts hold none: one str search per token says so, where the
            # windows' generators and lists cost more than encoding a chat
            # message (2.6 of 4.1 us for tiktoken's default encode of one).
            for token in self.tokens:
                if token in text:
                    break
            else:
                return None
        for found in self._occurrences(text, 0, len(text)):
            if found:
                begin, negative_length, token = found[0]
                return SpecialMatch(begin, begin - negative_length, token)
        return None

    def split(self, text: str) -> Iterator[tuple[str, str | None]]:
        """Yield ``(ordinary_text, special_or_None)`` pairs covering ``text`` in order.

        Every special token comes with the ordinary text before it; the last
        pair carries the remaining text and ``None``.

        >>> list(SpecialTokenScanner(["<s>"]).split("a<s>b"))
        [('a', '<s>'), ('b', None)]
        """
        cursor = 0
        for match in self.matches(text):
            yield text[cursor : match.start], match.token
            cursor = match.end
        yield text[cursor:], None
