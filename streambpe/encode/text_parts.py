"""One text cut into parts that encode independently: for several threads, or for bounded blocks.

A long text can be encoded on several cores at once only if it is cut where
no piece can cross the cut, and the ids of the parts, joined, are then
exactly the ids of the whole (``docs/design.md``, "One long text on all
cores"). Two kinds of position qualify: a safe cut of the built-in patterns
(:mod:`streambpe.cutting.rule`) that is not inside a special token, and
either end of a special token (the kernel encodes the text between special
tokens stretch by stretch anyway). The special tokens are found once, in
the whole text, and each part gets its own, shifted.

>>> text = "one two three<s> four five"
>>> specials = [(13, 16, 99)]
>>> plan_parts(text, specials, part_chars=6, space_cuts=True)
[(0, 7), (7, 16), (16, 26)]
>>> part_specials(specials, 7, 16)
[(6, 9, 99)]
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import pairwise

from streambpe.core import SpecialSpan
from streambpe.cutting.rule import next_safe_cut


def _outside_specials(position: int, specials: list[SpecialSpan], starts: list[int]) -> int:
    """``position``, or the end of the special token it falls inside."""
    index = bisect_right(starts, position) - 1
    if index >= 0 and specials[index][0] < position < specials[index][1]:
        return specials[index][1]
    return position


def cut_after(text: str, specials: list[SpecialSpan], nominal: int, *, space_cuts: bool) -> int:
    """The first cut at or after ``nominal`` (``len(text)`` if none).

    The first safe cut (with ``space_cuts``; otherwise only special-token
    ends cut), moved past any special token it falls in, or the end of the
    first special token ending after ``nominal``, whichever comes first.
    ``specials`` must hold every special token that starts before the cut.

    >>> cut_after("ab cd<s>ef", [(5, 8, 9)], 4, space_cuts=False)
    8
    """
    starts = [span[0] for span in specials]
    ends = [span[1] for span in specials]
    candidates = []
    if space_cuts:
        candidates.append(_outside_specials(next_safe_cut(text, nominal), specials, starts))
    following = bisect_right(ends, nominal - 1)
    if following < len(ends):
        candidates.append(ends[following])
    return min(candidates, default=len(text))


def plan_parts(
    text: str, specials: list[SpecialSpan], *, part_chars: int, space_cuts: bool
) -> list[tuple[int, int]]:
    """``(start, end)`` ranges covering ``text``, each about ``part_chars`` long or longer.

    Each cut is :func:`cut_after` its nominal place. A text with no cut at
    all is one part.
    """
    length = len(text)
    bounds = [0]
    while length - bounds[-1] > part_chars:
        cut = cut_after(text, specials, bounds[-1] + part_chars, space_cuts=space_cuts)
        if cut >= length:
            break
        bounds.append(cut)
    bounds.append(length)
    return list(pairwise(bounds))


def part_specials(specials: list[SpecialSpan], start: int, end: int) -> list[SpecialSpan]:
    """The special tokens starting in ``[start, end)`` (a planned part holds them whole),
    with offsets relative to ``start``."""
    inside = specials[bisect_left(specials, (start,)) : bisect_left(specials, (end,))]
    return [(first - start, last - start, token_id) for first, last, token_id in inside]
