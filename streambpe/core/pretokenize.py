"""Pretokenization: cut text into pieces with a pattern, fast on ASCII.

The ``regex`` module is needed for ``\\p{L}`` and friends, but the standard
library's ``re`` runs the same pattern about three times faster when every
class is a plain ASCII range. On ASCII text, ``\\p{L}`` *is* ``[A-Za-z]``,
``\\p{N}`` is ``[0-9]`` and ``\\s`` is ``[\\t-\\r ]`` (Unicode White_Space), so
an ASCII spelling of each built-in pattern finds exactly the same pieces there.
:class:`Pretokenizer` cuts long text into blocks at safe cuts (see
:mod:`~streambpe.cutting.rule`) and uses the ASCII
spelling on every block that is pure ASCII. Tests check the equivalence.

>>> Pretokenizer(GPT2).pieces("Hello, wörld's 42!")
['Hello', ',', ' wörld', "'s", ' 42', '!']
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from functools import partial

from streambpe._support.text_input import require_text
from streambpe.cutting.rule import next_safe_cut
from streambpe.patterns import CL100K, GPT2, O200K, compile_pattern

_WS = r"\t-\r "  # ASCII White_Space: \t \n \v \f \r and space, as a class body

#: ASCII spellings of the built-in patterns, equivalent on ASCII-only text.
ASCII_EQUIVALENTS: dict[str, str] = {
    GPT2: (
        rf"""'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]++| ?[0-9]++| ?[^{_WS}A-Za-z0-9]++"""
        rf"""|[{_WS}]++$|[{_WS}]+(?![^{_WS}])|[{_WS}]"""
    ),
    CL100K: (
        rf"""'(?i:[sdmt]|ll|ve|re)|[^\r\nA-Za-z0-9]?+[A-Za-z]++|[0-9]{{1,3}}+"""
        rf"""| ?[^{_WS}A-Za-z0-9]++[\r\n]*+|[{_WS}]++$|[{_WS}]*[\r\n]|[{_WS}]+(?![^{_WS}])|[{_WS}]"""
    ),
    O200K: "|".join(
        [
            r"""[^\r\nA-Za-z0-9]?[A-Z]*[a-z]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\nA-Za-z0-9]?[A-Z]+[a-z]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[0-9]{1,3}""",
            rf""" ?[^{_WS}A-Za-z0-9]+[\r\n/]*""",
            rf"""[{_WS}]*[\r\n]+""",
            rf"""[{_WS}]+(?![^{_WS}])""",
            rf"""[{_WS}]+""",
        ]
    ),
}

#: Characters per block when mixed text is cut up to find its ASCII stretches.
BLOCK_SIZE = 2048
#: Largest block handed to a regex engine in one call, where the text can be cut.
MAX_BLOCK_SIZE = 64 * 1024

FindAll = Callable[[str], list[str]]


class Pretokenizer:
    """Cuts text into pieces with ``pattern``; the same pieces as ``regex.findall``, faster.

    Each call into a regex engine covers a bounded block (at most
    :data:`MAX_BLOCK_SIZE` characters where the text allows a cut), and the
    ``regex`` module runs with ``concurrent=True``, which releases the GIL: a
    thread encoding a long text does not stall the other threads for long.
    """

    def __init__(self, pattern: str, *, block_size: int = BLOCK_SIZE) -> None:
        self.pattern = pattern
        self._findall: FindAll = partial(compile_pattern(pattern).findall, concurrent=True)
        ascii_pattern = ASCII_EQUIVALENTS.get(pattern)
        self._ascii_findall: FindAll | None = (
            re.compile(ascii_pattern).findall if ascii_pattern is not None else None
        )
        self.block_size = block_size

    def pieces(self, text: str) -> list[str]:
        """All pieces of ``text``, in order."""
        require_text(text)
        ascii_findall = self._ascii_findall
        findall = self._findall
        if ascii_findall is None:
            return findall(text)
        if len(text) <= self.block_size:
            return ascii_findall(text) if text.isascii() else findall(text)
        pieces: list[str] = []
        start = 0
        length = len(text)
        size = self.block_size
        while start < length:
            end = next_safe_cut(text, start + size)
            block = text[start:end]
            if block.isascii():
                pieces += ascii_findall(block)
                # ASCII stretches tend to continue: grow the blocks to save calls.
                size = min(size * 2, MAX_BLOCK_SIZE)
            else:
                pieces += findall(block)
                size = self.block_size
            start = end
        return pieces

    def count_into(self, texts: Iterable[str], counts: dict[str, int]) -> None:
        """Add how often each piece of the strs ``texts`` occurs to ``counts`` (``{piece: count}``).

        Each text is cut on its own (one document each: no piece spans two).

        >>> counts = {"the": 1}
        >>> Pretokenizer(GPT2).count_into(["the cat", "the"], counts)
        >>> sorted(counts.items())
        [(' cat', 1), ('the', 3)]
        """
        tally: Counter[str] = counts if isinstance(counts, Counter) else Counter()
        for text in texts:
            tally.update(self.pieces(text))
        if tally is not counts:
            for piece, count in tally.items():
                counts[piece] = counts.get(piece, 0) + count
