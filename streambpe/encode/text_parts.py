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
from collections.abc import Callable, Sequence
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
    text: str,
    specials: list[SpecialSpan],
    *,
    part_chars: int,
    space_cuts: bool,
    share: int | None = None,
) -> list[tuple[int, int]]:
    """``(start, end)`` ranges covering ``text``, each about ``part_chars`` long or longer.

    Each cut is :func:`cut_after` its nominal place. A text with no cut at
    all is one part. With ``share``, each part is nominally the larger of
    ``part_chars`` and a ``share``-th of the text left (see :func:`_planned`).
    """
    return _planned(
        text,
        part_chars,
        share,
        lambda nominal: cut_after(text, specials, nominal, space_cuts=space_cuts),
    )


def cut_clear_of(text: str, tokens: Sequence[str], nominal: int) -> int:
    """The first safe cut at or after ``nominal`` that no occurrence of ``tokens`` spans.

    With no occurrence across it, the special tokens found on either side of
    the cut are those found in the whole text (matching is leftmost first, so
    a match that ends before the cut leaves the search there, and one that
    starts after it is the first the right part finds). ``len(text)`` if
    there is no such cut.

    >>> cut_clear_of("ab <x y> cd", ["<x y>"], 4)
    8
    """
    cut = next_safe_cut(text, nominal)
    while cut < len(text):
        past = _end_of_occurrences_across(text, tokens, cut)
        if past == cut:
            return cut
        cut = next_safe_cut(text, past)
    return len(text)


def _end_of_occurrences_across(text: str, tokens: Sequence[str], cut: int) -> int:
    """The furthest end of a leftmost occurrence of a token spanning ``cut``; ``cut`` if none.

    An occurrence spans the cut if it starts before it and ends after it:
    it lies within ``len(token) - 1`` characters of the cut on either side.
    """
    past = cut
    for token in tokens:
        found = text.find(token, max(0, cut - len(token) + 1), cut + len(token) - 1)
        if 0 <= found < cut:
            past = max(past, found + len(token))
    return past


def plan_parts_clear_of(
    text: str, tokens: Sequence[str], *, part_chars: int, share: int | None = None
) -> list[tuple[int, int]]:
    """:func:`plan_parts` for parts that find their special tokens (``tokens``) themselves.

    Each cut is :func:`cut_clear_of` its nominal place: only safe cuts, so
    a text without one is a single part (:func:`plan_parts` also cuts at the
    ends of special tokens, which it has found).

    >>> plan_parts_clear_of("ab <x y> cd ef", ["<x y>"], part_chars=4)
    [(0, 8), (8, 14)]
    >>> plan_parts_clear_of("a b c d e f g h i j k l", [], part_chars=2, share=3)
    [(0, 7), (7, 13), (13, 17), (17, 19), (19, 21), (21, 23)]
    """
    return _planned(text, part_chars, share, lambda nominal: cut_clear_of(text, tokens, nominal))


def _planned(
    text: str, part_chars: int, share: int | None, cut_at: Callable[[int], int]
) -> list[tuple[int, int]]:
    """Parts each cut where ``cut_at`` moves its nominal place.

    A part is nominally ``part_chars`` long or, with ``share``, the larger
    of that and a ``share``-th of the text not yet planned: parts that
    shrink towards the end, for threads that take the next part when they
    are done. The last parts are then short, so the threads finish close
    together: with equal parts, a thread whose part was slower kept the
    other idle for a tenth of a two-thread encode of 8 MiB of prose.
    """
    length = len(text)
    bounds = [0]
    while True:
        left = length - bounds[-1]
        nominal = max(part_chars, left // share) if share else part_chars
        if left <= nominal:
            break
        cut = cut_at(bounds[-1] + nominal)
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
