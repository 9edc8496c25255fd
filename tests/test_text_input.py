"""What every encoding entry takes as its text: any str, subclasses included, and nothing else.

tiktoken and HF ``tokenizers`` encode a ``numpy.str_`` (what indexing an
array of strings gives) like the plain str with its characters; so do we, on
both backends and through every output. Anything that is not a str is a
``TypeError`` that names what was passed, and an ``encode_into`` list is
left as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tiktoken

from streambpe import Tokenizer
from streambpe.patterns import GPT2
from streambpe.tiktoken import Encoding

pytestmark = pytest.mark.usefixtures("backend")

TEXT = "Hello world's  end<|endoftext|> 12345 naïve ünïcode\n\n  x"
EOT = "<|endoftext|>"


class TitledStr(str):
    """A str subclass whose ``__str__`` lies: its characters must still be what counts."""

    def __str__(self) -> str:
        return "something else"


def subclassed_texts() -> list[str]:
    return [np.str_(TEXT), TitledStr(TEXT)]


@pytest.fixture(scope="module")
def tokenizer(r50k_ranks: dict[bytes, int]) -> Tokenizer:
    """A tokenizer of this module's backend (a shared one may hold another backend's kernels)."""
    return Tokenizer.from_ranks(r50k_ranks, pattern=GPT2, special_tokens={EOT: 50256})


@pytest.fixture(scope="module")
def oracle(r50k_reference: tiktoken.Encoding) -> tiktoken.Encoding:
    return r50k_reference


OUTPUTS: dict[str, Callable[[Tokenizer, Any], list[int]]] = {
    "encode": lambda tok, text: tok.encode(text),
    "encode with keywords": lambda tok, text: tok.encode(text, allowed_special="all"),
    "encode on one thread": lambda tok, text: tok.encode(text, threads=1),
    "encode_ordinary": lambda tok, text: tok.encode_ordinary(text),
    "encode_to_array": lambda tok, text: tok.encode_to_array(text).tolist(),
    "encode_to_numpy": lambda tok, text: tok.encode_to_numpy(text).tolist(),
    "encode_into": lambda tok, text: _appended(tok, text),
    "encode_batch": lambda tok, text: tok.encode_batch([text, text])[1],
    "encode_iterable": lambda tok, text: list(tok.encode_iterable([text])),
}


def _appended(tokenizer: Tokenizer, text: Any) -> list[int]:
    out = [7]
    tokenizer.encode_into(text, out)
    return out[1:]


def _expected(oracle: tiktoken.Encoding, name: str) -> list[int]:
    if name == "encode_ordinary":
        return oracle.encode_ordinary(TEXT)
    return oracle.encode(TEXT, allowed_special="all")


@pytest.mark.parametrize("name", OUTPUTS)
@pytest.mark.parametrize("make", [np.str_, TitledStr], ids=["numpy.str_", "subclass"])
def test_a_str_subclass_encodes_as_its_characters(
    tokenizer: Tokenizer, oracle: tiktoken.Encoding, name: str, make: Callable[[str], str]
) -> None:
    assert OUTPUTS[name](tokenizer, make(TEXT)) == _expected(oracle, name)


@pytest.mark.parametrize("make", [np.str_, TitledStr], ids=["numpy.str_", "subclass"])
def test_a_str_subclass_is_counted_as_its_characters(
    tokenizer: Tokenizer, oracle: tiktoken.Encoding, make: Callable[[str], str]
) -> None:
    assert tokenizer.count_tokens(make(TEXT)) == len(oracle.encode(TEXT, allowed_special="all"))


def test_a_long_str_subclass_encodes_in_parts_as_its_characters(
    tokenizer: Tokenizer, oracle: tiktoken.Encoding
) -> None:
    """Past PARALLEL_MIN_CHARS the text is cut and its parts encoded on threads."""
    from streambpe.encode.encoder import PARALLEL_MIN_CHARS

    text = (TEXT * (PARALLEL_MIN_CHARS // len(TEXT) + 2)).replace(EOT, " ")
    expected = oracle.encode_ordinary(text)
    assert tokenizer.encode(np.str_(text), threads=2) == expected
    assert tokenizer.encode_ordinary(np.str_(text)) == expected


NOT_TEXT = [b"Hello", 12, None, ["Hello"]]
ENTRIES: dict[str, Callable[[Tokenizer, Any], object]] = {
    "encode": lambda tok, text: tok.encode(text),
    "encode with keywords": lambda tok, text: tok.encode(text, disallowed_special=()),
    "encode_ordinary": lambda tok, text: tok.encode_ordinary(text),
    "encode_to_array": lambda tok, text: tok.encode_to_array(text),
    "encode_to_numpy": lambda tok, text: tok.encode_to_numpy(text),
    "count_tokens": lambda tok, text: tok.count_tokens(text),
    "encode_batch": lambda tok, text: tok.encode_batch(["fine", text]),
}


@pytest.mark.parametrize("name", ENTRIES)
@pytest.mark.parametrize("value", NOT_TEXT, ids=lambda value: type(value).__name__)
def test_anything_but_a_str_is_a_type_error_that_names_it(
    tokenizer: Tokenizer, name: str, value: object
) -> None:
    with pytest.raises(TypeError, match=f"text must be a str, got {type(value).__name__}$"):
        ENTRIES[name](tokenizer, value)


@pytest.mark.parametrize("value", NOT_TEXT, ids=lambda value: type(value).__name__)
def test_encode_into_refuses_anything_but_a_str_and_keeps_the_list(
    tokenizer: Tokenizer, value: object
) -> None:
    out = [1, 2]
    with pytest.raises(TypeError, match=f"text must be a str, got {type(value).__name__}$"):
        tokenizer.encode_into(value, out)  # type: ignore[arg-type]
    assert out == [1, 2]


def test_the_tiktoken_face_takes_a_str_subclass_and_refuses_bytes(
    r50k_ranks: dict[bytes, int], oracle: tiktoken.Encoding
) -> None:
    face = Encoding(
        "r50k_face", pat_str=GPT2, mergeable_ranks=r50k_ranks, special_tokens={EOT: 50256}
    )
    for text in subclassed_texts():
        assert face.encode(text, allowed_special="all") == oracle.encode(
            TEXT, allowed_special="all"
        )
        assert face.encode_ordinary(text) == oracle.encode_ordinary(TEXT)
        assert face.encode_batch([text], disallowed_special=()) == oracle.encode_batch(
            [TEXT], disallowed_special=()
        )
    for method in (face.encode, face.encode_ordinary):
        with pytest.raises(TypeError, match=r"text must be a str, got bytes$"):
            method(b"Hello")  # type: ignore[arg-type]
