"""Every exception and warning streambpe raises on purpose, each saying how to fix the call.

All errors derive from :class:`StreamBPEError`, and also from the built-in type a
caller would expect (``ValueError``, ``KeyError``, ``RuntimeError``), so both
``except StreamBPEError`` and ``except ValueError`` work. The command line
reports these (and ``OSError``) as one line; anything else is a bug and shows
its traceback.

Errors that suggest a different setting carry it as ``fix = (option, value)``,
so the message can be spelled for Python (``dtype='uint32'``) or for the
command line (``--dtype uint32``):

>>> error = ParameterError("ids do not fit uint16", fix=("dtype", "uint32"))
>>> str(error), error.for_cli()
("ids do not fit uint16; use dtype='uint32'", 'ids do not fit uint16; use --dtype uint32')
"""

from __future__ import annotations

from typing import Any, ClassVar

#: An option name and the value that fixes the call.
Fix = tuple[str, str]


class StreamBPEError(Exception):
    """Base class for every error streambpe raises on purpose."""

    #: The arguments ``__init__`` takes, in order, each kept as an attribute of
    #: that name: pickling rebuilds the error from them, so an error raised in a
    #: worker process reaches the caller with its fields.
    _fields: ClassVar[tuple[str, ...]] = ()

    def for_cli(self) -> str:
        """The message as the command line shows it."""
        return str(self)

    def __reduce__(self) -> str | tuple[Any, ...]:
        if not self._fields:
            return super().__reduce__()
        return (type(self), tuple(getattr(self, name) for name in self._fields))


class ParameterError(StreamBPEError, ValueError):
    """An argument is invalid (vocab size, special tokens, pattern, dtype, error policy...)."""

    def __init__(self, problem: str, *, fix: Fix | None = None) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(self._spell(python=True))

    def _spell(self, *, python: bool) -> str:
        if self.fix is None:
            return self.problem
        option, value = self.fix
        python_value = value if value.isdigit() else repr(value)
        hint = f"{option}={python_value}" if python else f"--{option.replace('_', '-')} {value}"
        return f"{self.problem}; use {hint}"

    def for_cli(self) -> str:
        return self._spell(python=False)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_parameter_error, (self.problem, self.fix))


def _rebuild_parameter_error(problem: str, fix: Fix | None) -> ParameterError:
    return ParameterError(problem, fix=fix)


class EmptyInputError(StreamBPEError, ValueError):
    """The input holds no bytes, so there is nothing to train on or encode."""

    _fields = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: input file is empty; there is nothing to process")


class InvalidUTF8Error(StreamBPEError, ValueError):
    """Input bytes are not valid UTF-8.

    ``path`` and ``byte_offset`` locate the first bad byte in the *file*
    (not in a chunk), so the caller can inspect or repair it.
    """

    _fields = ("path", "byte_offset", "reason")

    def __init__(self, path: str, byte_offset: int, reason: str) -> None:
        self.path = path
        self.byte_offset = byte_offset
        self.reason = reason
        super().__init__(
            f"{path}: invalid UTF-8 at byte offset {byte_offset} ({reason}); "
            "fix the file, or pass errors='replace' (CLI: --errors replace) "
            "to substitute U+FFFD for bad bytes"
        )

    def for_cli(self) -> str:
        return (
            f"{self.path}: invalid UTF-8 at byte offset {self.byte_offset} ({self.reason}); "
            "fix the file, or pass --errors replace to substitute U+FFFD for bad bytes"
        )


class UnknownTokenError(StreamBPEError, KeyError):
    """A token id given to decode is not in the vocabulary."""

    _fields = ("token_id", "n_vocab")

    def __init__(self, token_id: object, n_vocab: int) -> None:
        self.token_id = token_id
        self.n_vocab = n_vocab
        super().__init__(f"unknown token id {token_id!r}: valid ids are 0..{n_vocab - 1}")

    def __str__(self) -> str:
        # KeyError would show the message in quotes.
        return str(self.args[0])


class WorkerError(StreamBPEError, RuntimeError):
    """A worker process died or failed; the pool was shut down and nothing was written."""


class FormatError(StreamBPEError, ValueError):
    """A tokenizer file is malformed; the message names the file and the line."""

    _fields = ("path", "line_number", "problem")

    def __init__(self, path: str, line_number: int | None, problem: str) -> None:
        self.path = path
        self.line_number = line_number
        self.problem = problem
        where = f"{path}:{line_number}" if line_number is not None else path
        super().__init__(f"{where}: {problem}")


class MissingDependencyError(StreamBPEError, ImportError):
    """An optional feature needs a package that is not installed; the message names the extra.

    >>> str(MissingDependencyError("reading 's3://b/x.txt'", "fsspec", "remote"))
    "reading 's3://b/x.txt' needs fsspec, which is not installed: pip install 'streambpe[remote]'"
    """

    _fields = ("what", "package", "extra")

    def __init__(self, what: str, package: str, extra: str) -> None:
        self.what = what
        self.package = package
        self.extra = extra
        super().__init__(
            f"{what} needs {package}, which is not installed: pip install 'streambpe[{extra}]'",
            name=package,
        )


class VocabularyFileError(StreamBPEError, OSError):
    """A vocabulary file could not be downloaded (and no cached copy exists) or cached.

    The message names the file, the URL and where a copy would be found
    (the cache folder and the environment variable that moves it).
    """


class HashMismatchError(StreamBPEError, ValueError):
    """A vocabulary file's SHA-256 is not the one published for it; nothing was cached.

    >>> str(HashMismatchError("https://x/a.tiktoken", "00", "ff"))[:60]
    'Hash mismatch for data downloaded from https://x/a.tiktoken '
    """

    _fields = ("source", "expected", "actual")

    def __init__(self, source: str, expected: str, actual: str) -> None:
        self.source = source
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"Hash mismatch for data downloaded from {source} (expected {expected}, got "
            f"{actual}). This may indicate a corrupted or interrupted download; nothing was "
            "cached. Please try again."
        )


class VocabSizeWarning(UserWarning):
    """The corpus ran out of pairs before ``vocab_size`` was reached."""
