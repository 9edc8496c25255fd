"""Cut a stream of text chunks into pieces that can be encoded independently.

Feeding a text whole or in arbitrary slices must give the same ids (DESIGN
rule 4). :class:`StreamSplitter` buffers the incoming chunks and releases the
longest prefix that ends at a safe cut, carrying the unfinished tail into the
next chunk. A cut is safe at the start of a special token, or, under the
built-in patterns, at a cut of :mod:`~streambpe.cuts`; never
inside a special token, and never so close to the end of the buffer that a
special token could still be completing there.

>>> splitter = StreamSplitter(["<s>"], space_cuts=True, min_release=1)
>>> splitter.feed("a\\n\\n b"), splitter.feed("c d"), splitter.finish()
('', 'a\\n\\n bc', ' d')
"""

from __future__ import annotations

from collections.abc import Sequence

from .cuts import last_safe_cut
from .specials import SpecialTokenScanner

#: Buffer at least this many characters before looking for a cut, so that
#: line-by-line input is encoded in blocks rather than line by line.
DEFAULT_MIN_RELEASE = 64 * 1024


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
    ) -> None:
        self._scanner = SpecialTokenScanner(special_tokens)
        self._space_cuts = space_cuts
        self._min_release = min_release
        self._parts: list[str] = []
        self._buffered = 0
        # Buffer positions below this were searched and are not cuts, for good:
        # whether a position is a cut depends only on the text near it.
        self._searched = 0

    def feed(self, chunk: str) -> str:
        """Add ``chunk``; return the longest safely encodable prefix of the buffer (maybe ``""``)."""
        if not isinstance(chunk, str):
            raise TypeError(f"expected str chunks, got {type(chunk).__name__}")
        self._parts.append(chunk)
        self._buffered += len(chunk)
        if self._buffered < self._min_release:
            return ""
        # Search only the unsearched tail, with enough text before it to judge a cut.
        window_start = max(0, self._searched - max(self._scanner.max_length, 1))
        window = self._tail(self._buffered - window_start)
        limit = len(window) - max(self._scanner.max_length - 1, 0)
        cut, resume = self._last_safe_cut(window, self._searched - window_start, limit)
        if cut is None:
            self._searched = max(self._searched, window_start + resume)
            return ""
        buffer = "".join(self._parts)
        cut += window_start
        self._parts = [buffer[cut:]]
        self._buffered = len(buffer) - cut
        self._searched = 0
        return buffer[:cut]

    def finish(self) -> str:
        """Everything still buffered (the end of the stream)."""
        rest = "".join(self._parts)
        self._parts = []
        self._buffered = 0
        self._searched = 0
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

    def _spanned(self, text: str, position: int) -> bool:
        # A special-token occurrence that starts before ``position`` and ends after it.
        for token in self._scanner.tokens:
            found = text.find(token, max(0, position - len(token) + 1), position + len(token) - 1)
            if 0 <= found < position:
                return True
        return False

    def _last_safe_cut(self, window: str, first: int, limit: int) -> tuple[int | None, int]:
        """The last cut in ``window[first : limit + 1]`` (never position 0), or None; and
        where the next search may resume if there is none.

        A special token starting at or before ``limit`` lies wholly inside the
        window, so no text still to come can change how it matches. The scan for
        specials starts at ``first``, where no earlier match reaches: it then
        follows the same leftmost-longest parse as a scan of the whole buffer.
        """
        best: int | None = None
        resume = limit + 1
        lowest = max(first, 1)
        if self._space_cuts:
            best = last_safe_cut(window, lowest, limit)
            while best is not None and self._spanned(window, best):
                best = last_safe_cut(window, lowest, best - 1)
        if self._scanner:
            for match in reversed(self._scanner.matches(window, first)):
                if match.start > limit:
                    continue
                if match.start >= lowest:
                    best = match.start if best is None else max(best, match.start)
                else:  # a special at the very start: the next search resumes after it
                    resume = max(resume, match.end)
                break
        return best, resume
