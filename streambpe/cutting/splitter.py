"""Cut a stream of text chunks into pieces that can be encoded independently.

Feeding a text whole or in arbitrary slices must give the same ids
(``docs/design.md``, "Streams are chunk-agnostic"). :class:`StreamSplitter`
buffers the incoming chunks and releases the longest prefix that ends at a safe cut, carrying the unfinished tail into the
next chunk. A cut is safe at the start of a special token, or, under the
built-in patterns, at a cut of :mod:`~streambpe.cutting.rule`; never
inside a special token, and never so close to the end of the buffer that a
special token could still be completing there.

A ``tokenizer.json``'s normalizer narrows the cuts further: a cut inside
text must fall before a character that ``safe_start`` accepts (one that
normalization never joins to what precedes it), and only the special
tokens in ``cut_tokens`` start a cut (``docs/design.md``, "Normalizers").

>>> splitter = StreamSplitter(["<s>"], space_cuts=True, min_release=1)
>>> splitter.feed("a\\n\\n b"), splitter.feed("c d"), splitter.finish()
('', 'a\\n\\n bc', ' d')
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence

from streambpe.cutting.rule import last_safe_cut
from streambpe.cutting.specials import SpecialTokenScanner, spanned_by_special

#: Buffer at least this many characters before looking for a cut, so that
#: line-by-line input is encoded in blocks rather than line by line.
DEFAULT_MIN_RELEASE = 64 * 1024


def bounded_chunks(chunks: Iterable[str], most: int) -> Iterator[str]:
    """The chunks in order, each one longer than ``most`` characters as slices of at most ``most``.

    A stream that arrives as one huge chunk then reaches :meth:`StreamSplitter.feed`
    a slice at a time, so its first ids wait for one slice, not for a search
    of the whole text; the slices are the chunk's characters, copied once.
    Anything that is not a ``str`` passes through, for ``feed`` to refuse.

    >>> list(bounded_chunks(["abcde", "f"], 2))
    ['ab', 'cd', 'e', 'f']
    """
    for chunk in chunks:
        if isinstance(chunk, str) and len(chunk) > most:
            for start in range(0, len(chunk), most):
                yield chunk[start : start + most]
        else:
            yield chunk


def _check_chunk(chunk: object) -> None:
    if not isinstance(chunk, str):
        raise TypeError(f"expected str chunks, got {type(chunk).__name__}")


class StreamSplitter:
    """Buffers text chunks; :meth:`feed` returns text that is safe to encode now.

    Each buffered character is searched for a cut once: a stretch with no safe
    cut (text without spaces, say) is not rescanned on every feed, so the work
    stays linear in the input.
    """

    def __init__(
        self,
        special_tokens: Sequence[str],
        *,
        space_cuts: bool,
        min_release: int = DEFAULT_MIN_RELEASE,
        cut_tokens: Collection[str] | None = None,
        safe_start: Callable[[str], bool] | None = None,
    ) -> None:
        self._scanner = SpecialTokenScanner(special_tokens)
        # None: every special token starts a cut.
        self._cut_tokens = None if cut_tokens is None else frozenset(cut_tokens)
        self._safe_start = safe_start
        self._space_cuts = space_cuts
        self._min_release = min_release
        self._parts: list[str] = []
        self._buffered = 0
        # Buffer positions below this were searched and are not cuts, for good:
        # whether a position is a cut depends only on the text near it.
        self._searched = 0
        # A buffer position where the leftmost-longest parse of special tokens is
        # settled (no match spans it, and no text still to come can change the
        # matches before it): scanning for specials may restart there.
        self._settled = 0

    def feed(self, chunk: str) -> str:
        """Add ``chunk``; return the longest safely encodable prefix of the buffer (maybe ``""``)."""
        # Called once per line by line-by-line callers: no list of one chunk.
        _check_chunk(chunk)
        self._parts.append(chunk)
        self._buffered += len(chunk)
        return self._release()

    def feed_all(self, chunks: Sequence[str]) -> str:
        """Add ``chunks`` in order, like :meth:`feed` on their concatenation, without joining them first.

        A chunk that is not a ``str`` raises ``TypeError`` before any is added.

        >>> splitter = StreamSplitter([], space_cuts=True, min_release=1)
        >>> splitter.feed_all(["a b", "c d"]), splitter.finish()
        ('a bc', ' d')
        """
        for chunk in chunks:
            _check_chunk(chunk)
        self._parts.extend(chunks)
        self._buffered += sum(map(len, chunks))
        return self._release()

    def _release(self) -> str:
        """The longest safely encodable prefix of the buffer, taken out of it (maybe ``""``)."""
        if self._buffered < self._min_release:
            return ""
        # Search only the unsearched tail, with enough text before it to judge a cut
        # (two characters for the cut rule, a special token's length for spanning).
        context = max(self._scanner.max_length, 2)
        window_start = min(self._settled, max(0, self._searched - context))
        window = self._tail(self._buffered - window_start)
        limit = len(window) - max(self._scanner.max_length - 1, 0)
        cut, settled = self._last_safe_cut(
            window, self._searched - window_start, self._settled - window_start, limit
        )
        if cut is None:
            self._searched = max(self._searched, window_start + limit + 1, window_start + settled)
            self._settled = window_start + settled
            return ""
        # A window from the start is the whole buffer, already joined: a prose
        # batch is copied once less.
        buffer = window if window_start == 0 else "".join(self._parts)
        cut += window_start
        self._parts = [buffer[cut:]]
        self._buffered = len(buffer) - cut
        self._searched = 0
        self._settled = 0
        return buffer[:cut]

    def finish(self) -> str:
        """Everything still buffered (the end of the stream)."""
        rest = "".join(self._parts)
        self._parts = []
        self._buffered = 0
        self._searched = 0
        self._settled = 0
        return rest

    def _tail(self, size: int) -> str:
        # The last ``size`` characters, joining only the parts that hold them.
        taken: list[str] = []
        length = 0
        for part in reversed(self._parts):
            if length >= size:
                break
            taken.append(part)
            length += len(part)
        taken.reverse()
        joined = "".join(taken)
        return joined[len(joined) - size :]

    def _last_safe_cut(
        self, window: str, first: int, settled: int, limit: int
    ) -> tuple[int | None, int]:
        """The last cut in ``window[first : limit + 1]`` (never position 0), or None; and
        the next settled position.

        A special token starting before ``limit`` lies wholly inside the window,
        so no text still to come can change how it matches. The scan for specials
        starts at ``settled``, where no match reaches across: it then follows the
        same leftmost-longest parse as a scan of the whole buffer.
        """
        best: int | None = None
        lowest = max(first, 1)
        tokens = self._scanner.tokens
        if self._space_cuts:
            best = last_safe_cut(window, lowest, limit)
            while best is not None and (
                spanned_by_special(window, best, tokens)
                or (self._safe_start is not None and not self._safe_start(window[best]))
            ):
                best = last_safe_cut(window, lowest, best - 1)
        next_settled = max(limit, settled)
        if self._scanner:
            matches = self._scanner.matches(window, settled)
            for match in reversed(matches):
                if match.start >= limit:
                    continue
                # The last match that starts before ``limit`` is final: the parse is
                # settled at its end if it reaches past ``limit``.
                next_settled = max(next_settled, match.end)
                break
            for match in reversed(matches):
                if match.start > limit:
                    continue
                if self._cut_tokens is not None and match.token not in self._cut_tokens:
                    continue
                if match.start >= lowest:
                    best = match.start if best is None else max(best, match.start)
                break
        return best, next_settled
