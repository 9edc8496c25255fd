"""Malformed tokenizer files: each is refused with a FormatError naming the file and the line.

Every case was checked against what tiktoken's ``load_tiktoken_bpe`` (and the
``Encoding`` built from it) or Hugging Face ``tokenizers`` do with the same
file: where they fail or would give silently wrong ids, the readers refuse the
file; where tiktoken is lenient and real files depend on it (an empty token
spelled ``=``, ranks with gaps), the readers accept it too.
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import pytest
import tiktoken
import tiktoken.load

from streambpe import Tokenizer
from streambpe.cli import main
from streambpe.errors import FormatError, UnknownTokenError
from streambpe.formats.byte_unicode import encode_token
from streambpe.formats.gpt2 import read_gpt2, write_gpt2
from streambpe.formats.tiktoken_file import read_tiktoken
from streambpe.patterns import GPT2

ALL_BYTES = b"".join(base64.b64encode(bytes([i])) + b" %d\n" % i for i in range(256))
#: Line number of the first line after ALL_BYTES.
AFTER_BYTES = 257


def byte_vocab() -> dict[int, bytes]:
    return {byte: bytes([byte]) for byte in range(256)}


def assert_located(error: FormatError, path: Path, line: int | None) -> None:
    assert error.path == str(path)
    assert error.line_number == line
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert str(error).startswith(where), str(error)


def tiktoken_file(tmp_path: Path, content: bytes) -> Path:
    path = tmp_path / "ranks.tiktoken"
    path.write_bytes(content)
    return path


# ----------------------------------------------------------------- .tiktoken


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        pytest.param(
            b"!!!! 257\n",
            AFTER_BYTES,
            "token b'!!!!' is not base64: Only base64 data is allowed",
            id="invalid-base64",
        ),
        pytest.param(
            b"YW$I= 256\n",
            AFTER_BYTES,
            "token b'YW$I=' is not base64: Only base64 data is allowed",
            id="junk-inside-base64",
        ),
        pytest.param(
            b"YWI 256\n",
            AFTER_BYTES,
            "token b'YWI' is not base64: Incorrect padding",
            id="truncated-base64",
        ),
        pytest.param(
            b"YWI= 99999999999999\n",
            AFTER_BYTES,
            "rank 99999999999999 is too large: ranks are 32-bit token ids below 2**32 - 1 "
            "= 4294967295 (tiktoken reserves 4294967295 for 'no merge')",
            id="rank-too-large",
        ),
        pytest.param(
            b"YWI= 4294967296\n", AFTER_BYTES, "rank 4294967296 is too large", id="rank-2**32"
        ),
        pytest.param(
            b"YWI= 4294967295\n", AFTER_BYTES, "rank 4294967295 is too large", id="rank-2**32-1"
        ),
        pytest.param(
            b"YWI= -3\n", AFTER_BYTES, "rank b'-3' is not a non-negative integer", id="negative"
        ),
        pytest.param(
            b"YWI= 256\nYWM= 256\n",
            AFTER_BYTES + 1,
            f"rank 256 already used on line {AFTER_BYTES}",
            id="duplicate-rank",
        ),
        pytest.param(
            b"YWI= 256\nYWI= 257\n",
            AFTER_BYTES + 1,
            "token b'ab' already has rank 256",
            id="duplicate-token",
        ),
        pytest.param(
            b"YWI= 256\nYW",
            AFTER_BYTES + 1,
            "expected 'base64-token rank', found 1 field(s)",
            id="truncated-line",
        ),
        pytest.param(
            b"YWI= 256\nYWM=",
            AFTER_BYTES + 1,
            "expected 'base64-token rank', found 1 field(s)",
            id="truncated-before-rank",
        ),
        pytest.param(
            b"YW\x00I= 256\n",
            AFTER_BYTES,
            f"NUL byte at byte offset {len(ALL_BYTES) + 2}: a .tiktoken file is ASCII text",
            id="nul-in-token",
        ),
        pytest.param(
            b"\x00" * 64,
            AFTER_BYTES,
            f"NUL byte at byte offset {len(ALL_BYTES)}",
            id="nul-padding",
        ),
    ],
)
def test_malformed_tiktoken_is_refused_at_its_line(
    tmp_path: Path, content: bytes, line: int, message: str
) -> None:
    path = tiktoken_file(tmp_path, ALL_BYTES + content)
    with pytest.raises(FormatError) as caught:
        read_tiktoken(path)
    assert_located(caught.value, path, line)
    assert message in str(caught.value)
    with pytest.raises(FormatError):
        Tokenizer.from_tiktoken(path, pattern=GPT2)


def test_tiktoken_reads_invalid_base64_as_an_empty_token(tmp_path: Path) -> None:
    """Why strict base64: tiktoken's loader turns ``!!!!`` into a silent empty token."""
    path = tiktoken_file(tmp_path, ALL_BYTES + b"!!!! 257\nYW\x00I= 256\n")
    loaded = tiktoken.load.load_tiktoken_bpe(str(path))
    assert loaded[b""] == 257
    assert loaded[b"ab"] == 256


def test_tiktoken_refuses_ranks_beyond_32_bits(tmp_path: Path) -> None:
    """tiktoken fails on such a rank when it builds the encoder; the reader says where."""
    path = tiktoken_file(tmp_path, ALL_BYTES + b"YWI= 4294967296\n")
    ranks = tiktoken.load.load_tiktoken_bpe(str(path))
    with pytest.raises(OverflowError):
        tiktoken.Encoding("big", pat_str=GPT2, mergeable_ranks=ranks, special_tokens={})


def test_tiktoken_gives_other_ids_for_rank_2_32_minus_1(tmp_path: Path) -> None:
    """tiktoken's "no merge" rank: the token is found whole but never merged, so refuse it."""
    path = tiktoken_file(tmp_path, ALL_BYTES + b"YWI= 4294967295\n")
    reference = tiktoken.Encoding(
        "edge",
        pat_str=GPT2,
        mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(path)),
        special_tokens={},
    )
    assert reference.encode("ab") == [4294967295]
    assert reference.encode(" ab") == [32, 97, 98]


def test_largest_allowed_rank_encodes_like_tiktoken(tmp_path: Path) -> None:
    path = tiktoken_file(tmp_path, ALL_BYTES + b"YWI= 4294967294\n")
    reference = tiktoken.Encoding(
        "edge",
        pat_str=GPT2,
        mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(path)),
        special_tokens={},
    )
    tokenizer = Tokenizer.from_tiktoken(path, pattern=GPT2)
    text = "ab cab abab"
    assert tokenizer.encode(text) == reference.encode(text)
    assert tokenizer.encode_to_array(text).tolist() == reference.encode(text)
    assert tokenizer.encode(text).count(4294967294) == 4


def test_rank_gaps_are_accepted_like_tiktoken(tmp_path: Path) -> None:
    """tiktoken allows gaps between ranks (ids nobody produces); so do we, with the same ids."""
    path = tiktoken_file(tmp_path, ALL_BYTES + b"YWI= 300\nYWJj 1000\n")
    reference = tiktoken.Encoding(
        "gaps",
        pat_str=GPT2,
        mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(path)),
        special_tokens={},
    )
    tokenizer = Tokenizer.from_tiktoken(path, pattern=GPT2)
    text = "abc ab abcab"
    assert tokenizer.encode(text) == reference.encode(text) == [1000, 32, 300, 32, 1000, 300]
    with pytest.raises(UnknownTokenError, match="unknown token id 500"):
        tokenizer.decode([500])


@pytest.mark.parametrize(
    ("content", "missing", "first"),
    [
        pytest.param(b"YWI= 0\n", 243, "0x00", id="no-single-bytes"),
        pytest.param(ALL_BYTES.replace(b"QQ== 65\n", b""), 1, "0x41", id="one-missing"),
        pytest.param(b"", 243, "0x00", id="empty-file"),
    ],
)
def test_tiktoken_without_every_single_byte_names_the_file(
    tmp_path: Path, content: bytes, missing: int, first: str
) -> None:
    """tiktoken loads such a file and panics when a text needs the missing byte."""
    path = tiktoken_file(tmp_path, content)
    with pytest.raises(FormatError) as caught:
        Tokenizer.from_tiktoken(path, pattern=GPT2)
    assert_located(caught.value, path, None)
    assert f"lacks {missing} single-byte token(s) (first: byte {first})" in str(caught.value)


# ----------------------------------------------------------------- GPT-2 files


def gpt2_files(
    tmp_path: Path, vocab: object, merges: str, *, raw_vocab: bytes | None = None
) -> tuple[Path, Path]:
    vocab_path = tmp_path / "vocab.json"
    merges_path = tmp_path / "merges.txt"
    vocab_path.write_bytes(
        raw_vocab if raw_vocab is not None else json.dumps(vocab).encode("utf-8")
    )
    merges_path.write_bytes(merges.encode("utf-8"))
    return vocab_path, merges_path


def spelled_vocab(extra: dict[str, object]) -> dict[str, object]:
    """GPT-2's spelled byte vocabulary plus ``extra`` entries."""
    spelled: dict[str, object] = {encode_token(bytes([i])): i for i in range(256)}
    spelled.update(extra)
    return spelled


@pytest.mark.parametrize(
    ("merges", "line", "message"),
    [
        pytest.param(
            "a b\nab c\n",
            2,
            "merge ab c uses token 'abc' (b'abc'), which is not in vocab.json",
            id="result-unknown",
        ),
        pytest.param(
            "#version: 0.2\na b\nxy z\n",
            3,
            "merge xy z uses token 'xy' (b'xy'), which is not in vocab.json",
            id="side-unknown",
        ),
        pytest.param("a b\nab", 2, "found 1 field(s) in 'ab'", id="truncated-line"),
        pytest.param("a b\na\x00b\n", 2, "NUL byte at byte offset 5", id="nul"),
    ],
)
def test_malformed_merges_are_refused_at_their_line(
    tmp_path: Path, merges: str, line: int, message: str
) -> None:
    vocab_path, merges_path = gpt2_files(tmp_path, spelled_vocab({"ab": 256}), merges)
    with pytest.raises(FormatError) as caught:
        read_gpt2(vocab_path, merges_path)
    assert_located(caught.value, merges_path, line)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param(
            {"ab": 2**32},
            "token 'ab' has id 4294967296, which does not fit 32 bits",
            id="id-too-large",
        ),
        pytest.param({"ab": -1}, "ids must be non-negative integers", id="negative-id"),
        pytest.param({"ab": "256"}, "has id '256'; ids must be", id="id-is-a-string"),
        pytest.param({"ab": 256.0}, "has id 256.0; ids must be", id="id-is-a-float"),
        pytest.param({"ab": True}, "has id True; ids must be", id="id-is-a-boolean"),
        pytest.param({"ab": None}, "has id None; ids must be", id="id-is-null"),
        pytest.param(
            {"ab": 5},
            f"tokens {encode_token(bytes([5]))!r} and 'ab' both have id 5",
            id="duplicate-id",
        ),
    ],
)
def test_wrong_vocab_values_name_the_file(
    tmp_path: Path, extra: dict[str, object], message: str
) -> None:
    vocab_path, merges_path = gpt2_files(tmp_path, spelled_vocab(extra), "")
    with pytest.raises(FormatError) as caught:
        read_gpt2(vocab_path, merges_path)
    assert_located(caught.value, vocab_path, None)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("raw", "line", "message"),
    [
        pytest.param(b'["a", "b"]', None, "found an array", id="array"),
        pytest.param(b'"vocab"', None, "found a string", id="string"),
        pytest.param(b'{"a": 0,\n "b": 1,\n "ab', 3, "invalid JSON: Unterminated string", id="cut"),
        pytest.param(b"", 1, "invalid JSON: Expecting value", id="empty"),
        pytest.param(b'{"a": 0,\n"b\x00": 1}', 2, "NUL byte at byte offset 11", id="nul"),
    ],
)
def test_malformed_vocab_json_names_file_and_line(
    tmp_path: Path, raw: bytes, line: int | None, message: str
) -> None:
    vocab_path, merges_path = gpt2_files(tmp_path, None, "", raw_vocab=raw)
    with pytest.raises(FormatError) as caught:
        read_gpt2(vocab_path, merges_path)
    assert_located(caught.value, vocab_path, line)
    assert message in str(caught.value)


def test_gpt2_files_without_every_single_byte_name_the_vocab(tmp_path: Path) -> None:
    vocab_path, merges_path = gpt2_files(tmp_path, {"a": 0, "b": 1, "ab": 2}, "a b\n")
    with pytest.raises(FormatError) as caught:
        Tokenizer.from_files(vocab_path, merges_path)
    assert_located(caught.value, vocab_path, None)
    assert "lacks 241 single-byte token(s) (first: byte 0x00)" in str(caught.value)


def test_saved_directory_without_every_single_byte_is_named(tmp_path: Path) -> None:
    write_gpt2(tmp_path, {0: b"a", 1: b"b", 2: b"ab"}, [(b"a", b"b")])
    with pytest.raises(FormatError) as caught:
        Tokenizer.load(tmp_path)
    assert_located(caught.value, tmp_path, None)
    assert "lacks 241 single-byte token(s)" in str(caught.value)


def test_consistent_gpt2_files_still_load(tmp_path: Path) -> None:
    vocab = byte_vocab() | {256: b"ab", 257: b"abc", 258: b"<|endoftext|>"}
    vocab_path, merges_path = write_gpt2(tmp_path, vocab, [(b"a", b"b"), (b"ab", b"c")])
    tokenizer = Tokenizer.from_files(vocab_path, merges_path, ["<|endoftext|>"])
    assert tokenizer.encode("abc ab<|endoftext|>", allowed_special="all") == [257, 32, 256, 258]


# ----------------------------------------------------------------- .bin ids


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    """A tokenizer of 257 ids, so ``.bin`` files default to uint16."""
    return Tokenizer(byte_vocab() | {256: b"ab"}, [(b"a", b"b")]).save(tmp_path / "tok")


def error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(
            struct.pack("<3H", 97, 300, 98),
            "give id 300 at position 1 (byte offset 2), but this tokenizer's ids end at 256",
            id="id-out-of-range",
        ),
        pytest.param(
            struct.pack("<2H", 97, 256) + b"\x62",
            "end with 1 stray byte(s) at byte offset 4, not a whole id (truncated",
            id="truncated",
        ),
        pytest.param(
            b"97 256 98\n", "are digits and whitespace: ids written as text", id="text-ids"
        ),
    ],
)
def test_malformed_bin_names_the_byte_offset(
    tokenizer_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    message: str,
) -> None:
    ids_path = tmp_path / "ids.bin"
    ids_path.write_bytes(content)
    out = tmp_path / "out.txt"
    assert main(["decode", "--tokenizer", str(tokenizer_dir), str(ids_path), "-o", str(out)]) == 1
    line = error_line(capsys.readouterr().err)
    assert line.startswith(f"streambpe: error: {ids_path}: does not look like a .bin of ids")
    assert message in line
    assert not out.exists()


def test_bin_of_nul_bytes_is_ids_zero(tokenizer_dir: Path, tmp_path: Path) -> None:
    """NUL bytes are legitimate in a ``.bin``: they are id 0, which decodes to byte 0."""
    ids_path = tmp_path / "zeros.bin"
    ids_path.write_bytes(b"\x00" * 6)
    out = tmp_path / "out.txt"
    assert main(["decode", "--tokenizer", str(tokenizer_dir), str(ids_path), "-o", str(out)]) == 0
    assert out.read_bytes() == b"\x00" * 3
