"""Cut a stream of text chunks into pieces that can be encoded independently.

Feeding a text whole or in arbitrary slices must give the same ids (DESIGN
rule 4). :class:`StreamSplitter` buffers the incoming chunks and releases the
longest prefix that ends at a safe cut, carrying the unfinished tail into the
next chunk. A cut is safe at the start of a special token, or, under the
built-in patterns, at a space that follows a non-whitespace character; never
inside a special token, and never so close to the end of the buffer that a
special token could still be completing there.

>>> splitter = StreamSplitter(["<s>"], space_cuts=True, min_release=1)
>>> splitter.feed("a\\n\\n b"), splitter.feed("c d"), splitter.finish()
('', 'a\\n\\n bc', ' d')
"""

from __future__ import annotations

from collections.abc import Sequence

import regex

from .specials import SpecialTokenScanner

_WHITESPACE = regex.compile(r"\s")

#: Buffer at least this many characters before looking for a cut, so that
#: line-by-line input is encoded in blocks rather than line by line.
DEFAULT_MIN_RELEASE = 64 * 1024


class StreamSplitter:
    """Buffers text chunks; :meth:`feed` returns text that is safe to encode now."""

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

    def feed(self, chunk: str) -> str:
        """Add ``chunk``; return the longest safely encodable prefix of the buffer (maybe ``""``)."""
        if not isinstance(chunk, str):
            raise TypeError(f"expected str chunks, got {type(chunk).__name__}")
        self._parts.append(chunk)
        self._buffered += len(chunk)
        if self._buffered < self._min_release:
            return ""
        buffer = "".join(self._parts)
        cut = self._last_safe_cut(buffer)
        if cut <= 0:
            self._parts = [buffer]
            return ""
        self._parts = [buffer[cut:]]
        self._buffered = len(buffer) - cut
        return buffer[:cut]

    def finish(self) -> str:
        """Everything still buffered (the end of the stream)."""
        rest = "".join(self._parts)
        self._parts = []
        self._buffered = 0
        return rest

    def _spanned(self, text: str, position: int) -> bool:
        # A special-token occurrence that starts before ``position`` and ends after it.
        for token in self._scanner.tokens:
            found = text.find(token, max(0, position - len(token) + 1), position + len(token) - 1)
            if 0 <= found < position:
                return True
        return False

    def _last_safe_cut(self, buffer: str) -> int:
        # A special token starting at or before ``limit`` lies wholly inside the
        # buffer, so no text still to come can change how it matches.
        limit = len(buffer) - max(self._scanner.max_length - 1, 0)
        best = 0
        if self._space_cuts:
            position = buffer.rfind(" ", 0, limit + 1)
            while position > 0:
                if _WHITESPACE.match(buffer, position - 1) is None and not self._spanned(
                    buffer, position
                ):
                    best = position
                    break
                position = buffer.rfind(" ", 0, position)
        if self._scanner:
            # Cut before the last match that starts at or before ``limit``.
            for match in reversed(self._scanner.matches(buffer)):
                if match.start <= limit:
                    best = max(best, match.start)
                    break
        return best
