"""Errors cross process boundaries whole: a pickled error comes back with its type and fields."""

from __future__ import annotations

import pickle

import pytest

from streambpe.core.pattern_compiler import UnsupportedPatternError
from streambpe.errors import (
    EmptyInputError,
    FormatError,
    HashMismatchError,
    InvalidUTF8Error,
    MissingDependencyError,
    ParameterError,
    StreamBPEError,
    UnknownTokenError,
    VocabularyFileError,
    WorkerError,
)

ERRORS = [
    ParameterError("ids do not fit uint16", fix=("dtype", "uint32")),
    EmptyInputError("empty.txt"),
    InvalidUTF8Error("bad.txt", 17, "invalid start byte"),
    UnknownTokenError(99, 10),
    WorkerError("worker 3 died"),
    FormatError("vocab.json", 4, "expected an object"),
    FormatError("tokenizer.json", None, "model.type: expected 'BPE'"),
    MissingDependencyError("reading 's3://b/x.txt'", "fsspec", "remote"),
    VocabularyFileError("cannot download https://x/a.tiktoken"),
    HashMismatchError("https://x/a.tiktoken", "00", "ff"),
]

#: The fields each error keeps, as given to its constructor above.
FIELDS: dict[type[StreamBPEError], dict[str, object]] = {
    EmptyInputError: {"path": "empty.txt"},
    InvalidUTF8Error: {"path": "bad.txt", "byte_offset": 17, "reason": "invalid start byte"},
    UnknownTokenError: {"token_id": 99, "n_vocab": 10},
    MissingDependencyError: {
        "what": "reading 's3://b/x.txt'",
        "package": "fsspec",
        "extra": "remote",
    },
    HashMismatchError: {"source": "https://x/a.tiktoken", "expected": "00", "actual": "ff"},
}


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: type(error).__name__)
def test_pickled_error_keeps_type_message_and_fields(error: StreamBPEError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.for_cli() == error.for_cli()
    for name, value in FIELDS.get(type(error), {}).items():
        assert getattr(copy, name) == value


def test_pickled_format_error_keeps_its_line() -> None:
    copy = pickle.loads(pickle.dumps(FormatError("merges.txt", 3, "expected two tokens")))
    assert (copy.path, copy.line_number, copy.problem) == ("merges.txt", 3, "expected two tokens")
    assert str(copy) == "merges.txt:3: expected two tokens"


def test_pickled_parameter_error_keeps_its_fix() -> None:
    copy = pickle.loads(
        pickle.dumps(ParameterError("ids do not fit uint16", fix=("dtype", "uint32")))
    )
    assert copy.fix == ("dtype", "uint32")
    assert copy.for_cli() == "ids do not fit uint16; use --dtype uint32"


def test_pattern_error_pickles_as_a_parameter_error() -> None:
    # ParameterError rebuilds itself from its problem and fix, subclasses included.
    copy = pickle.loads(pickle.dumps(UnsupportedPatternError("a lookbehind")))
    assert isinstance(copy, ParameterError)
    assert str(copy) == "a lookbehind"
