"""Exceptions raised by streambpe, each carrying what a caller needs to fix the call."""

from __future__ import annotations


class StreamBPEError(Exception):
    """Base class for every error streambpe raises on purpose."""


class InvalidUTF8Error(StreamBPEError, ValueError):
    """Input bytes are not valid UTF-8.

    ``path`` and ``byte_offset`` locate the first bad byte in the *file*
    (not in a chunk), so the caller can inspect or repair it.
    """

    def __init__(self, path: str, byte_offset: int, reason: str) -> None:
        self.path = path
        self.byte_offset = byte_offset
        self.reason = reason
        super().__init__(
            f"{path}: invalid UTF-8 at byte offset {byte_offset} ({reason}); "
            "fix the file, or pass errors='replace' (CLI: --errors replace) "
            "to substitute U+FFFD for bad bytes"
        )

    def __reduce__(self) -> tuple[type[InvalidUTF8Error], tuple[str, int, str]]:
        # Raised inside worker processes: keep it picklable with its fields.
        return (type(self), (self.path, self.byte_offset, self.reason))


class WorkerError(StreamBPEError, RuntimeError):
    """A worker process died or failed; the pool was shut down and nothing was written."""


class FormatError(StreamBPEError, ValueError):
    """A tokenizer file is malformed; the message names the file and the line."""

    def __init__(self, path: str, line_number: int | None, problem: str) -> None:
        self.path = path
        self.line_number = line_number
        self.problem = problem
        where = f"{path}:{line_number}" if line_number is not None else path
        super().__init__(f"{where}: {problem}")

    def __reduce__(self) -> tuple[type[FormatError], tuple[str, int | None, str]]:
        return (type(self), (self.path, self.line_number, self.problem))
