"""Cut a byte buffer into chunks at places where a cut cannot change any result.

Two kinds of place are safe (``docs/design.md``, "Safe cuts"):

* the start of a special token, unless another special-token occurrence spans
  that position (the leftmost-longest parse would then differ across the cut);
* inside a document, and only under the built-in GPT-2/cl100k/o200k patterns,
  the cuts of :mod:`~streambpe.cutting.rule` (a space after a non-whitespace character,
  a letter after a newline after a non-whitespace character).

A chunk never ends inside a UTF-8 character: every cut sits before a space, a
whole letter, or a special token's first byte.

>>> data = b"one two<|endoftext|>three four"
>>> find_chunk_boundaries(data, 5, ["<|endoftext|>"], space_cuts=True)
[0, 7, 25, 30]
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence

from streambpe.cutting.rule import ByteBuffer, next_safe_byte_cut
from streambpe.cutting.specials import spanned_by_special

#: Bytes searched per step for a cut. The result never depends on it (each step finds
#: the first cut of either kind in its stretch); it bounds how far past a cut the
#: searches for a newline or a special token look, which is what a planner reading
#: a remote file pays for.
CUT_SEARCH_WINDOW = 16 * 1024
#: Cut searches between two releases of a memory map's pages (see find_chunk_boundaries).
UNMAP_EVERY = 64
_CAN_RELEASE = hasattr(mmap, "MADV_DONTNEED")  # not on Windows


def _next_special_start(
    data: ByteBuffer, start: int, end: int, specials: Sequence[bytes]
) -> int | None:
    """The first position in ``[start, end)`` where a special token starts, or None."""
    best: int | None = None
    for special in specials:
        found = data.find(special, start, min(len(data), end + len(special) - 1))
        if found >= 0 and (best is None or found < best):
            best = found
    return best


def next_chunk_cut(
    data: ByteBuffer,
    start: int,
    specials: Sequence[bytes],
    *,
    space_cuts: bool,
    window: int,
) -> int | None:
    """The first safe cut at or after ``start`` (see the module docstring), or None before EOF.

    Searches ``window`` bytes at a time so a cut near ``start`` is found without
    scanning the rest of the file.

    >>> next_chunk_cut(b"ab  cd ef", 1, [], space_cuts=True, window=4)
    2
    """
    length = len(data)
    position = max(start, 1)
    while position < length:
        end = min(length, position + window)
        best: int | None = None
        if space_cuts:
            best = next_safe_byte_cut(data, position, end)
            while best is not None and spanned_by_special(data, best, specials):
                best = next_safe_byte_cut(data, best + 1, end)
        # Only a special token starting before the cut found so far can win, so the
        # search for specials stops there: most cuts are found within a few bytes.
        special_end = end if best is None else best
        special_start = _next_special_start(data, position, special_end, specials)
        while special_start is not None and spanned_by_special(data, special_start, specials):
            special_start = _next_special_start(data, special_start + 1, special_end, specials)
        if special_start is not None:
            best = special_start
        if best is not None:
            return best
        position = end
    return None


def cut_at_or_after(
    data: ByteBuffer, offset: int, specials: Sequence[bytes], *, space_cuts: bool
) -> int:
    """The first safe cut at or after ``offset``: 0 at the start, ``len(data)`` if none is left.

    It depends only on the bytes, so two tasks given the same nominal offset
    agree on the cut without talking to each other, and the search reads only
    the bytes up to the cut (plus a little look-back and look-ahead).

    >>> data = b"one two<|endoftext|>three four"
    >>> [cut_at_or_after(data, offset, [b"<|endoftext|>"], space_cuts=True) for offset in (0, 2, 5, 26)]
    [0, 3, 7, 30]
    """
    if offset <= 0:
        return 0
    if offset >= len(data):
        return len(data)
    cut = next_chunk_cut(data, offset, specials, space_cuts=space_cuts, window=CUT_SEARCH_WINDOW)
    return len(data) if cut is None else cut


def find_chunk_boundaries(
    data: ByteBuffer,
    chunk_size: int,
    special_tokens: Sequence[str],
    *,
    space_cuts: bool,
) -> list[int]:
    """Offsets ``[0, ..., len(data)]`` cutting ``data`` into chunks of about ``chunk_size`` bytes.

    Each chunk is at least ``chunk_size`` bytes long (except the last) and ends at
    the first safe cut after that; a stretch with no safe cut stays in one chunk.

    >>> find_chunk_boundaries(b"aaaa bbbb cccc", 4, [], space_cuts=True)
    [0, 4, 9, 14]
    >>> find_chunk_boundaries(b"aaaa bbbb cccc", 4, [], space_cuts=False)
    [0, 14]
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1 byte, got {chunk_size}")
    specials = [token.encode("utf-8") for token in special_tokens]
    boundaries = [0]
    length = len(data)
    while boundaries[-1] + chunk_size < length:
        if _CAN_RELEASE and isinstance(data, mmap.mmap) and len(boundaries) % UNMAP_EVERY == 0:
            # Each search faults in a few pages, and the kernel maps their
            # neighbours too: on a 1 GiB file that added up to hundreds of MiB
            # of RSS. Dropping the mapped pages (the file's cache stays) keeps
            # the planner's footprint flat.
            data.madvise(mmap.MADV_DONTNEED)
        cut = next_chunk_cut(
            data,
            boundaries[-1] + chunk_size,
            specials,
            space_cuts=space_cuts,
            window=min(chunk_size, CUT_SEARCH_WINDOW),
        )
        if cut is None:
            break
        boundaries.append(cut)
    if length > 0:
        boundaries.append(length)
    return boundaries
