"""Decoding: the compiled kernel against the pure one and tiktoken, and the incremental decoder.

``decode_bytes`` runs through the active backend's decoding kernel
(:mod:`streambpe.core.token_decoder`, or the compiled ``TokenDecoder``);
both must give tiktoken's bytes for any ids it knows, accept any iterable
of integers or an integer array, and name an unknown id or a value that is
not an integer in the same errors. :class:`~streambpe.encode.decode_stream.DecodeStream`
must give, piece by piece, exactly the text of decoding all the ids at once.
"""

from __future__ import annotations

from array import array

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from streambpe.core import TokenDecoding, available_backends
from streambpe.core.token_decoder import TokenDecoder
from streambpe.errors import UnknownTokenError
from streambpe.tokenizer import Tokenizer

pytestmark = pytest.mark.usefixtures("backend")

TEXTS = st.lists(st.sampled_from([*"ab é€😀東京\n ", "<|endoftext|>"]), max_size=40).map("".join)


def kernels(decoder: dict[int, bytes]) -> list[TokenDecoding]:
    """Every backend's decoding kernel for ``decoder``."""
    found: list[TokenDecoding] = [TokenDecoder(decoder)]
    if "native" in available_backends():
        from streambpe.core import _native  # type: ignore[attr-defined]

        found.append(_native.TokenDecoder(decoder))
    return found


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 100_300), max_size=60))
def test_decode_bytes_matches_tiktoken(
    cl100k_tokenizer: Tokenizer, cl100k_reference: tiktoken.Encoding, ids: list[int]
) -> None:
    known = [i for i in ids if i in cl100k_tokenizer._decoder]
    assert cl100k_tokenizer.decode_bytes(known) == cl100k_reference.decode_bytes(known)
    assert cl100k_tokenizer.decode(known) == cl100k_reference.decode(known)


def test_long_input_matches_tiktoken(
    r50k_tokenizer: Tokenizer, r50k_reference: tiktoken.Encoding
) -> None:
    """Past the length where the compiled kernel lets go of the GIL."""
    ids = list(range(50_257)) * 2 + [50256]
    assert r50k_tokenizer.decode_bytes(ids) == r50k_reference.decode_bytes(ids)


def test_kernels_agree_on_every_input_form() -> None:
    decoder = {0: b"", 1: b"a", 2: b"bc", 7: b"x" * 40, 9: "é".encode()}
    ids = [1, 2, 7, 0, 9, 9, 1] * 3000
    expected = b"".join(decoder[i] for i in ids)
    for kernel in kernels(decoder):
        assert kernel.decode_bytes(ids) == expected
        assert kernel.decode_bytes(tuple(ids)) == expected
        assert kernel.decode_bytes(iter(ids)) == expected
        assert kernel.decode_bytes(array("I", ids)) == expected
        assert kernel.decode_bytes(array("q", ids)) == expected
        assert kernel.decode_bytes(np.array(ids, dtype=np.uint32)) == expected
        assert kernel.decode_bytes(np.array(ids, dtype=np.int64)) == expected
        assert kernel.decode_bytes([np.uint32(2), True, np.int64(1)]) == b"bcaa"
        assert kernel.decode_bytes([]) == b""


@pytest.mark.parametrize("bad", [3, 8, 10, -1, 2**32, 2**70, -(2**70)])
def test_kernels_raise_key_error_naming_an_unknown_id(bad: int) -> None:
    for kernel in kernels({0: b"a", 1: b"b", 7: b"c"}):
        with pytest.raises(KeyError) as raised:
            kernel.decode_bytes([0, 1, bad, 7])
        assert raised.value.args == (bad,)


@pytest.mark.parametrize("bad", [1.0, "1", None, b"\x01"])
def test_kernels_refuse_non_integers(bad: object) -> None:
    for kernel in kernels({0: b"a", 1: b"b"}):
        with pytest.raises(TypeError, match="token ids must be ints, got"):
            kernel.decode_bytes([0, bad])  # type: ignore[list-item]


@pytest.mark.parametrize("bad", [50257, 10**12, -1])
def test_decode_raises_unknown_token_error(r50k_tokenizer: Tokenizer, bad: int) -> None:
    with pytest.raises(UnknownTokenError) as raised:
        r50k_tokenizer.decode_bytes([15496, bad] * 10_000)
    assert raised.value.token_id == bad
    assert str(raised.value) == f"unknown token id {bad}: valid ids are 0..50256"


# --------------------------------------------------------------------------- DecodeStream


@settings(max_examples=150, deadline=None)
@given(TEXTS)
def test_stream_gives_the_text_piece_by_piece(cl100k_tokenizer: Tokenizer, text: str) -> None:
    ids = cl100k_tokenizer.encode(text)
    stream = cl100k_tokenizer.decode_stream()
    pieces = [stream.step(token_id) for token_id in ids]
    assert "".join(piece for piece in pieces if piece is not None) == text
    assert stream.finish() is None
    for piece in pieces:
        assert piece is None or "\ufffd" not in piece


def test_stream_holds_back_a_split_character_and_replaces_invalid_bytes() -> None:
    tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [])
    stream = tokenizer.decode_stream()
    assert [stream.step(i) for i in "😀".encode()] == [None, None, None, "😀"]
    assert stream.step(0x80) == "\ufffd"  # a lone continuation byte can never complete
    assert stream.step(0xE6) is None
    with pytest.raises(UnknownTokenError):
        stream.step(256)
    assert stream.step(0x9D) is None  # the unknown id left the held bytes alone
    assert stream.step(0xB1) == "東"
    assert stream.step(0xE6) is None
    assert stream.finish() == "\ufffd"


def test_stream_strict_errors() -> None:
    tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [])
    stream = tokenizer.decode_stream(errors="strict")
    assert stream.step(ord("a")) == "a"
    with pytest.raises(UnicodeDecodeError):
        stream.step(0xFF)
