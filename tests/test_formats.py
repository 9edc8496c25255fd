"""Tests for the tokenizer file formats: GPT-2, tiktoken and Hugging Face ``tokenizer.json``.

Ground truth comes from outside streambpe: GPT-2's own files (the CS336
reference data in ``../shared/fixtures/cs336``), the r50k / cl100k
``.tiktoken`` files in the repository's ``fixtures/tiktoken``, tiktoken's loader and
encoder (the offline references in ``conftest.py``), ``tokenizers`` loading
what we write, and a deliberately slow BPE written here.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import tiktoken
import tiktoken.load
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

import streambpe
from streambpe.core.bpe import merge_piece
from streambpe.errors import FormatError
from streambpe.formats import FORMATS, TokenizerFiles, load_tokenizer, save_tokenizer
from streambpe.formats.byte_unicode import bytes_to_unicode, decode_token, encode_token
from streambpe.formats.gpt2 import read_gpt2, read_merges, write_gpt2
from streambpe.formats.hf_json import read_hf_json, write_hf_json
from streambpe.formats.tiktoken_file import (
    merges_from_ranks,
    read_tiktoken,
    write_tiktoken,
)
from streambpe.patterns import CL100K, GPT2, O200K

#: The .tiktoken files that ship with the repository (see fixtures/tiktoken/README.md).
TIKTOKEN_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tiktoken"
PARITY_TEXTS = ("address.txt", "german.txt", "tinystories_sample.txt")

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]

# Tokenizer-file round trips build small vocabs; many examples buy little.
ROUND_TRIPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_names_location(error: FormatError, path: Path, line: int | None) -> None:
    """A FormatError must say which file (and line, when it has one) to fix."""
    assert error.path == str(path)
    assert error.line_number == line
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert str(error).startswith(where)


def reference_rank_bpe(token: bytes, ranks: dict[bytes, int], below: int) -> list[bytes]:
    """tiktoken's BPE written the slow, obvious way: rescan every pair after every merge."""
    parts = [bytes([byte]) for byte in token]
    while True:
        candidates = [
            (ranks[left + right], index)
            for index, (left, right) in enumerate(itertools.pairwise(parts))
            if ranks.get(left + right, below) < below
        ]
        if not candidates:
            return parts
        _, index = min(candidates)  # lowest rank, then leftmost
        parts[index : index + 2] = [parts[index] + parts[index + 1]]


def byte_vocab(first_id: int = 0) -> Vocab:
    return {first_id + byte: bytes([byte]) for byte in range(256)}


# ---------------------------------------------------------------- strategies

special_text = st.text(st.characters(codec="utf-8"), min_size=1, max_size=6)


@st.composite
def arbitrary_files(draw: st.DrawFn) -> TokenizerFiles:
    """Any bytes at any ids (non-UTF-8 included), arbitrary merges, unicode specials."""
    drawn = draw(st.lists(st.binary(min_size=1, max_size=6), max_size=30))
    pieces = st.binary(min_size=1, max_size=4)
    merges = draw(st.lists(st.tuples(pieces, pieces), max_size=20))
    # Readers refuse a merge whose sides or result are not tokens.
    merged = [token for left, right in merges for token in (left, right, left + right)]
    tokens = list(dict.fromkeys([*drawn, *merged]))
    specials = [
        text
        for text in draw(st.lists(special_text, unique=True, max_size=3))
        if text.encode("utf-8") not in tokens
    ]
    ids = draw(
        st.lists(
            st.integers(0, 5000),
            unique=True,
            min_size=len(tokens) + len(specials),
            max_size=len(tokens) + len(specials),
        )
    )
    vocab = dict(zip(ids, [*tokens, *(text.encode("utf-8") for text in specials)], strict=True))
    pattern = draw(st.sampled_from([GPT2, CL100K, O200K, r"\w+|\s+|[^\w\s]+"]))
    return TokenizerFiles(
        vocab, merges, dict(zip(specials, ids[len(tokens) :], strict=True)), pattern
    )


@st.composite
def rank_consistent_files(draw: st.DrawFn) -> TokenizerFiles:
    """A vocab grown merge by merge, keeping only merges that tiktoken's BPE would make.

    Such a tokenizer means the same thing as a merge list and as tiktoken ranks.
    """
    special_first = draw(st.booleans())
    vocab = byte_vocab(first_id=1 if special_first else 0)
    ranks = {token: rank for rank, token in vocab.items()}
    pool = [b"a", b"b", b"c", b" ", b"\xc3", b"\xa9"]
    merges: Merges = []
    for left_pick, right_pick in draw(
        st.lists(st.tuples(st.integers(0, 99), st.integers(0, 99)), max_size=40)
    ):
        left, right = pool[left_pick % len(pool)], pool[right_pick % len(pool)]
        rank = max(vocab) + 1
        token = left + right
        if token in ranks or reference_rank_bpe(token, ranks, rank) != [left, right]:
            continue
        vocab[rank] = token
        ranks[token] = rank
        merges.append((left, right))
        pool.append(token)
    special = "<|é end|>"
    special_id = 0 if special_first else max(vocab) + 1
    vocab[special_id] = special.encode("utf-8")
    return TokenizerFiles(vocab, merges, {special: special_id}, GPT2)


# ---------------------------------------------------------------- byte_unicode


def test_byte_table_is_a_printable_bijection() -> None:
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256
    for char in table.values():
        assert len(char) == 1
        assert char.isprintable() and not char.isspace()


def test_byte_table_matches_gpt2_lore() -> None:
    table = bytes_to_unicode()
    assert all(table[byte] == chr(byte) for byte in range(ord("!"), ord("~") + 1))
    assert (table[ord(" ")], table[ord("\n")], table[0], table[0xAD]) == ("Ġ", "Ċ", "Ā", "Ń")


def test_byte_table_matches_gpt2_vocab_file(cs336_file: Callable[[str], Path]) -> None:
    # GPT-2's first 256 ids are exactly the single-byte tokens, one per mapped character.
    spelled = json.loads(cs336_file("gpt2_vocab.json").read_text(encoding="utf-8"))
    single = {spelling for spelling, token_id in spelled.items() if token_id < 256}
    assert single == set(bytes_to_unicode().values())


@given(st.binary())
def test_token_spelling_round_trips(token: bytes) -> None:
    spelling = encode_token(token)
    assert len(spelling) == len(token)
    assert " " not in spelling and "\n" not in spelling
    assert decode_token(spelling) == token


def test_decode_token_names_the_bad_character() -> None:
    with pytest.raises(ValueError, match=r"'€' \(U\+20AC\) at index 1"):
        decode_token("a€b")


# ---------------------------------------------------------------- GPT-2 files


@ROUND_TRIPS
@given(files=arbitrary_files(), header=st.booleans())
def test_gpt2_round_trip(
    tmp_path_factory: pytest.TempPathFactory, files: TokenizerFiles, header: bool
) -> None:
    folder = tmp_path_factory.mktemp("gpt2")
    vocab_path, merges_path = write_gpt2(folder, files.vocab, files.merges, header=header)
    assert read_gpt2(vocab_path, merges_path) == (files.vocab, files.merges)
    first_line = merges_path.read_text(encoding="utf-8").partition("\n")[0]
    assert (first_line == "#version: 0.2") == header


def test_gpt2_files_are_utf8_text_with_one_merge_a_line(tmp_path: Path) -> None:
    vocab = {0: b" ", 1: b"\xff", 2: "é".encode(), 3: b"<|end of text|>"}
    vocab_path, merges_path = write_gpt2(tmp_path, vocab, [(b" ", b"\xff")])
    assert json.loads(vocab_path.read_bytes().decode("utf-8")) == {
        "Ġ": 0,
        "ÿ": 1,
        "Ã©": 2,
        "<|endĠofĠtext|>": 3,
    }
    assert "Ã©" in vocab_path.read_text(encoding="utf-8")  # not escaped as \u00c3
    assert merges_path.read_text(encoding="utf-8") == "Ġ ÿ\n"


def test_gpt2_reader_tolerates_header_trailing_blanks_and_crlf(tmp_path: Path) -> None:
    vocab_path, _ = write_gpt2(tmp_path, byte_vocab() | {256: b" t", 257: b"he"}, [])
    merges_path = tmp_path / "merges.txt"
    merges_path.write_bytes("#version: 0.2\r\nĠ t\r\nh e\r\n\r\n\n".encode())
    assert read_gpt2(vocab_path, merges_path)[1] == [(b" ", b"t"), (b"h", b"e")]


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("Ġ t\nĠt\n", 2),  # one field
        ("Ġ t\nĠ t h\n", 2),  # three fields
        ("Ġ t\nĠ  t\n", 2),  # two spaces make three fields
        ("Ġ t\n\nh e\n", 2),  # blank line in the middle
        ("#version: 0.2\nĠ t\na €\n", 3),  # not a byte spelling
        ("a \n", 1),  # empty right side
    ],
)
def test_malformed_merges_name_file_and_line(tmp_path: Path, content: str, line: int) -> None:
    merges_path = tmp_path / "merges.txt"
    merges_path.write_text(content, encoding="utf-8")
    with pytest.raises(FormatError) as caught:
        read_merges(merges_path)
    assert_names_location(caught.value, merges_path, line)


@pytest.mark.parametrize(
    ("content", "line", "problem"),
    [
        ('["a", "b"]', None, "expected a JSON object"),
        ('{"a": "0"}', None, "ids must be non-negative integers"),
        ('{"a": 1.0}', None, "ids must be non-negative integers"),
        ('{"a": true}', None, "ids must be non-negative integers"),
        ('{"a": -1}', None, "ids must be non-negative integers"),
        ('{"a": 0, "b": 0}', None, "both have id 0"),
        ('{"a": 0,\n "a": 1}', None, "appears twice"),
        ('{"a b": 0}', None, "not in GPT-2's byte-to-unicode mapping"),
        ('{"": 0}', None, "empty token"),
        ('{"a": 0,\n "b": 1,\n}', 3, "invalid JSON"),
    ],
)
def test_malformed_vocab_json_names_the_file(
    tmp_path: Path, content: str, line: int | None, problem: str
) -> None:
    vocab_path = tmp_path / "vocab.json"
    vocab_path.write_text(content, encoding="utf-8")
    merges_path = tmp_path / "merges.txt"
    merges_path.write_text("", encoding="utf-8")
    with pytest.raises(FormatError, match=problem) as caught:
        read_gpt2(vocab_path, merges_path)
    assert_names_location(caught.value, vocab_path, line)


def test_invalid_utf8_names_line(tmp_path: Path) -> None:
    merges_path = tmp_path / "merges.txt"
    merges_path.write_bytes(b"a b\nc \xff\n")
    with pytest.raises(FormatError, match="byte offset 6") as caught:
        read_merges(merges_path)
    assert_names_location(caught.value, merges_path, 2)


def test_save_creates_the_directory_but_never_its_parents(tmp_path: Path) -> None:
    """A mistyped parent fails like ``cp``: FileNotFoundError naming it, nothing created."""
    files = TokenizerFiles({0: b"a", 1: b"b", 2: b"ab"}, [(b"a", b"b")])
    with pytest.raises(FileNotFoundError, match=f"parent directory {tmp_path / 'typo'} does not"):
        save_tokenizer(tmp_path / "typo" / "tok", files)
    assert list(tmp_path.iterdir()) == []
    assert load_tokenizer(save_tokenizer(tmp_path / "tok", files)) == files


def test_writers_refuse_what_the_files_cannot_hold(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="both have bytes"):
        write_gpt2(tmp_path, {0: b"a", 1: b"a"}, [])
    with pytest.raises(ValueError, match=r"cannot hold an empty token; .*format='tiktoken'"):
        write_gpt2(tmp_path, {0: b""}, [])
    with pytest.raises(ValueError, match="empty side"):
        write_gpt2(tmp_path, {0: b"a"}, [(b"a", b"")])


@pytest.fixture(scope="module")
def gpt2_files(cs336_file: Callable[[str], Path]) -> tuple[Vocab, Merges]:
    return read_gpt2(cs336_file("gpt2_vocab.json"), cs336_file("gpt2_merges.txt"))


def test_reads_gpt2_fixture(gpt2_files: tuple[Vocab, Merges], r50k_ranks: dict[bytes, int]) -> None:
    vocab, merges = gpt2_files
    assert len(vocab) == 50257 and sorted(vocab) == list(range(50257))
    assert len(merges) == 50000
    assert vocab[50256] == b"<|endoftext|>"
    # GPT-2 numbers each merge's result right after the 256 byte tokens.
    assert all(vocab[256 + i] == left + right for i, (left, right) in enumerate(merges))
    # tiktoken's own loader, on an independently shipped file, agrees on every token.
    assert {token: token_id for token_id, token in vocab.items() if token_id != 50256} == r50k_ranks


def test_rewriting_gpt2_fixture_reproduces_it(
    tmp_path: Path, gpt2_files: tuple[Vocab, Merges], cs336_file: Callable[[str], Path]
) -> None:
    vocab_path, merges_path = write_gpt2(tmp_path, *gpt2_files)
    original_vocab = cs336_file("gpt2_vocab.json")
    original_merges = cs336_file("gpt2_merges.txt")
    assert merges_path.read_bytes() == original_merges.read_bytes()
    # GPT-2 escaped non-ASCII (\u0120); we write it as UTF-8, so compare as JSON.
    assert json.loads(vocab_path.read_text(encoding="utf-8")) == json.loads(
        original_vocab.read_text(encoding="utf-8")
    )


# ---------------------------------------------------------------- tiktoken files


@ROUND_TRIPS
@given(files=arbitrary_files())
def test_tiktoken_file_round_trip(
    tmp_path_factory: pytest.TempPathFactory, files: TokenizerFiles
) -> None:
    path = tmp_path_factory.mktemp("tiktoken") / "t.tiktoken"
    write_tiktoken(path, files.vocab, files.special_tokens)
    expected = {
        token: token_id
        for token_id, token in files.vocab.items()
        if token_id not in files.special_tokens.values()
    }
    assert read_tiktoken(path) == expected
    # tiktoken's own loader reads what we wrote, and the lines go in rank order.
    assert tiktoken.load.load_tiktoken_bpe(str(path)) == expected
    ranks_in_file = [int(line.split()[1]) for line in path.read_text().splitlines()]
    assert ranks_in_file == sorted(expected.values())


def test_read_tiktoken_matches_tiktoken_loader(r50k_ranks: dict[bytes, int]) -> None:
    assert read_tiktoken(TIKTOKEN_FIXTURES / "r50k_base.tiktoken") == r50k_ranks


@pytest.mark.parametrize(
    ("content", "line", "problem"),
    [
        (b"YQ== 0\nYg==\n", 2, "found 1 field"),
        (b"YQ== 0\nYg== 1 2\n", 2, "found 3 field"),
        (b"YQ== 0\nY!== 1\n", 2, "not base64"),
        (b"YQ== 0\nYg== one\n", 2, "not a non-negative integer"),
        (b"YQ== 0\nYg== -1\n", 2, "not a non-negative integer"),
        (b"YQ== 0\nYg== +1\n", 2, "not a non-negative integer"),
        (b"YQ== 0\nYg== 1\nYw== 1\n", 3, "rank 1 already used on line 2"),
        (b"YQ== 0\n\nYQ== 1\n", 3, "already has rank 0"),
    ],
)
def test_malformed_tiktoken_names_file_and_line(
    tmp_path: Path, content: bytes, line: int, problem: str
) -> None:
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(content)
    with pytest.raises(FormatError, match=problem) as caught:
        read_tiktoken(path)
    assert_names_location(caught.value, path, line)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"YQ== 0\n= 1\n", id="empty-token-as-padding"),
        pytest.param(b"YQ== 0\n==== 1\n", id="empty-token-long-padding"),
        pytest.param(b"YQ== 0\r\nYg== 1\r\n", id="crlf"),
        pytest.param(b"  YQ==\t 0  \n\n\nYg== 1", id="spacing-and-no-final-newline"),
    ],
)
def test_read_tiktoken_accepts_what_tiktoken_accepts(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "ok.tiktoken"
    path.write_bytes(content)
    assert read_tiktoken(path) == tiktoken.load.load_tiktoken_bpe(str(path))


@pytest.mark.parametrize("content", [b"YQ== 0\nY!== 1\n", b"YQ== 0\nYg 1\n", b"YQ== 0\nYWJjZ 1\n"])
def test_base64_tiktoken_rejects_names_file_and_line(tmp_path: Path, content: bytes) -> None:
    """Base64 that tiktoken's loader cannot decode either is a FormatError at its line."""
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="Error parsing line"):
        tiktoken.load.load_tiktoken_bpe(str(path))
    with pytest.raises(FormatError, match="is not base64") as caught:
        read_tiktoken(path)
    assert_names_location(caught.value, path, 2)


@pytest.fixture(scope="module")
def empty_token_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """r50k's ranks plus ``= 50256``: the shape of Whisper's multilingual vocabulary."""
    path = tmp_path_factory.mktemp("whisper-like") / "multilingual.tiktoken"
    ranks = (TIKTOKEN_FIXTURES / "r50k_base.tiktoken").read_bytes().rstrip(b"\n")
    path.write_bytes(ranks + b"\n= 50256\n")
    return path


def test_empty_token_loads_encodes_and_decodes_like_tiktoken(
    empty_token_file: Path, tmp_path: Path
) -> None:
    """An empty token keeps its id, decodes to "", is never produced, and survives a save."""
    specials = {"<|endoftext|>": 50257}
    reference = tiktoken.Encoding(
        "whisper_like",
        pat_str=GPT2,
        mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(empty_token_file)),
        special_tokens=specials,
    )
    tokenizer = streambpe.Tokenizer.from_tiktoken(
        empty_token_file, pattern=GPT2, special_tokens=specials
    )
    text = "".join(SAMPLE_TEXTS) + " = == ===\n\n<|endoftext|>=\t= "
    ids = tokenizer.encode(text, allowed_special="all")
    assert ids == reference.encode(text, allowed_special="all")
    assert 50256 not in ids
    assert tokenizer.decode([50256]) == reference.decode([50256]) == ""
    assert tokenizer.decode([31373, 50256, 995]) == reference.decode([31373, 50256, 995])
    tokenizer.save(tmp_path / "saved", format="tiktoken")
    assert b"\n= 50256\n" in (tmp_path / "saved" / "tokenizer.tiktoken").read_bytes()
    reloaded = streambpe.Tokenizer.load(tmp_path / "saved")
    assert reloaded.encode(text, allowed_special="all") == ids
    assert reloaded.decode([50256]) == ""


def test_merges_from_r50k_ranks_are_gpt2_merges(
    r50k_ranks: dict[bytes, int],
    gpt2_merges_reader: Callable[[Path], Merges],
    cs336_file: Callable[[str], Path],
) -> None:
    # The merges file is read by conftest's own reader, not by the code under test.
    expected = gpt2_merges_reader(cs336_file("gpt2_merges.txt"))
    assert len(expected) == 50_000
    assert merges_from_ranks(r50k_ranks) == expected


def test_merges_from_cl100k_ranks_are_well_formed(cl100k_ranks: dict[bytes, int]) -> None:
    merges = merges_from_ranks(cl100k_ranks)
    multi_byte = sorted((rank, token) for token, rank in cl100k_ranks.items() if len(token) > 1)
    assert len(merges) == len(multi_byte) == 100_000
    for (rank, token), (left, right) in zip(multi_byte, merges, strict=True):
        assert left + right == token
        assert cl100k_ranks[left] < rank and cl100k_ranks[right] < rank


def test_merges_from_ranks_picks_leftmost_on_ties() -> None:
    # "aaa" holds the pair "aa" twice with one rank; BPE merges the left one first.
    assert merges_from_ranks({b"a": 0, b"aa": 1, b"aaa": 2}) == [(b"a", b"a"), (b"aa", b"a")]


def test_merges_from_ranks_follows_rank_order_not_length() -> None:
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"bc": 4, b"abc": 5}
    assert merges_from_ranks(ranks) == [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c")]


def test_unmergeable_rank_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "holes.tiktoken"
    with pytest.raises(FormatError, match=r"b'abc' \(rank 3\) splits into 3 parts") as caught:
        merges_from_ranks({b"a": 0, b"b": 1, b"c": 2, b"abc": 3}, path=path)
    assert_names_location(caught.value, path, None)


@settings(max_examples=200, deadline=None)
@given(
    token=st.binary(min_size=1, max_size=12),
    extra=st.lists(st.binary(min_size=2, max_size=4), unique=True, max_size=40),
    below=st.integers(0, 400),
)
def test_merge_piece_below_a_rank_matches_the_obvious_algorithm(
    token: bytes, extra: list[bytes], below: int
) -> None:
    ranks = {bytes([byte]): byte for byte in range(256)}
    for token_bytes in extra:
        ranks.setdefault(token_bytes, len(ranks))
    assert merge_piece(token, ranks, below=below) == reference_rank_bpe(token, ranks, below)


@ROUND_TRIPS
@given(files=rank_consistent_files())
def test_merges_from_ranks_recovers_rank_consistent_merges(files: TokenizerFiles) -> None:
    special_ids = set(files.special_tokens.values())
    ranks = {token: i for i, token in files.vocab.items() if i not in special_ids}
    assert merges_from_ranks(ranks) == files.merges


# ---------------------------------------------------------------- Hugging Face tokenizer.json


@ROUND_TRIPS
@given(files=arbitrary_files())
def test_hf_json_round_trip(
    tmp_path_factory: pytest.TempPathFactory, files: TokenizerFiles
) -> None:
    spellings = {encode_token(token) for token in files.vocab.values()}
    assume(not spellings & set(files.special_tokens))
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    write_hf_json(path, files.vocab, files.merges, files.special_tokens, files.pattern)
    assert read_hf_json(path) == (files.vocab, files.merges, files.special_tokens, files.pattern)


def test_hf_json_accepts_merges_as_strings(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    write_hf_json(path, byte_vocab() | {256: b" t"}, [(b" ", b"t")], {}, GPT2)
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["model"]["merges"] == [["Ġ", "t"]]
    document["model"]["merges"] = ["Ġ t"]
    path.write_text(json.dumps(document), encoding="utf-8")
    assert read_hf_json(path)[1] == [(b" ", b"t")]


def test_hf_json_pipeline_settings(tmp_path: Path) -> None:
    path = write_hf_json(tmp_path / "tokenizer.json", byte_vocab(), [], {}, CL100K)
    document = json.loads(path.read_text(encoding="utf-8"))
    model = document["model"]
    assert model["type"] == "BPE" and model["ignore_merges"] is True
    assert model["byte_fallback"] is False and model["dropout"] is None
    split, byte_level = document["pre_tokenizer"]["pretokenizers"]
    assert (split["type"], split["behavior"], split["invert"]) == ("Split", "Isolated", False)
    assert byte_level == {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": False,
        "use_regex": False,
    }
    assert document["normalizer"] is None and document["decoder"]["type"] == "ByteLevel"
    # Oniguruma would read cl100k's possessive "\p{N}{1,3}+" as "(\p{N}{1,3})+".
    assert r"\p{N}{1,3}+" not in split["pattern"]["Regex"]


def test_hf_json_refuses_possessive_intervals_it_cannot_translate(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="atomic group"):
        write_hf_json(tmp_path / "tokenizer.json", byte_vocab(), [], {}, r"\d{1,3}+|\D")


def build_tiktoken(files: TokenizerFiles) -> tiktoken.Encoding:
    """A tiktoken reference built offline from the same vocab (ids as ranks)."""
    special_ids = set(files.special_tokens.values())
    return tiktoken.Encoding(
        "streambpe-test",
        pat_str=files.pattern,
        mergeable_ranks={t: i for i, t in files.vocab.items() if i not in special_ids},
        special_tokens=files.special_tokens,
    )


SAMPLE_TEXTS = (
    "",
    "the theatre in the thing, bathe the other",
    "  leading spaces\n\nand\ttabs  \n",
    "café, naïve, 😀 and 中文 text",
    "<|endoftext|>the end<|endoftext|><|endoftext|>",
    "digits 1234567 and 've 'll DON'T",
)


@pytest.mark.parametrize(
    ("special", "special_id"),
    [("<|endoftext|>", 262), ("<|endoftext|>", 0), ("<|é end|>", 100)],
    ids=["special-last", "special-first", "special-in-the-middle"],
)
def test_hf_matches_tiktoken_on_a_small_vocab(
    tmp_path: Path, special: str, special_id: int
) -> None:
    merges = [(b" ", b"t"), (b"h", b"e"), (b" t", b"he"), (b"i", b"n"), (b"in", b"g"), (b"e", b"r")]
    tokens = [bytes([byte]) for byte in range(256)] + [left + right for left, right in merges]
    ids = [i for i in range(len(tokens) + 1) if i != special_id]
    vocab = dict(zip(ids, tokens, strict=False)) | {special_id: special.encode("utf-8")}
    files = TokenizerFiles(vocab, merges, {special: special_id}, GPT2)
    path = write_hf_json(
        tmp_path / "tokenizer.json", files.vocab, merges, files.special_tokens, GPT2
    )
    hf = Tokenizer.from_file(str(path))
    reference = build_tiktoken(files)
    for text in (*SAMPLE_TEXTS, f"a{special}b {special}"):
        assert hf.encode(text).ids == reference.encode(text, allowed_special="all"), text


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=rank_consistent_files(), text=st.text(alphabet="abcé <|endoftext|>\n", max_size=40))
def test_hf_matches_tiktoken_on_rank_consistent_vocabs(
    tmp_path_factory: pytest.TempPathFactory, files: TokenizerFiles, text: str
) -> None:
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    write_hf_json(path, files.vocab, files.merges, files.special_tokens, files.pattern)
    hf = Tokenizer.from_file(str(path))
    special = next(iter(files.special_tokens))
    for sample in (text, f"{text}{special}{text}"):
        assert hf.encode(sample).ids == build_tiktoken(files).encode(sample, allowed_special="all")


@pytest.fixture(scope="module")
def parity_texts(cs336_file: Callable[[str], Path]) -> list[str]:
    """Real-world texts from the CS336 reference data."""
    return [cs336_file(name).read_text(encoding="utf-8") for name in PARITY_TEXTS]


def special_ids_of(encoding: tiktoken.Encoding) -> dict[str, int]:
    return {token: encoding.encode_single_token(token) for token in encoding.special_tokens_set}


def test_hf_gpt2_matches_tiktoken_r50k(
    tmp_path: Path,
    gpt2_files: tuple[Vocab, Merges],
    r50k_reference: tiktoken.Encoding,
    parity_texts: list[str],
) -> None:
    vocab, merges = gpt2_files
    specials = special_ids_of(r50k_reference)
    path = write_hf_json(tmp_path / "tokenizer.json", vocab, merges, specials, GPT2)
    hf = Tokenizer.from_file(str(path))
    for text in [*parity_texts, *SAMPLE_TEXTS]:
        assert hf.encode(text).ids == r50k_reference.encode(text, allowed_special="all")
    assert read_hf_json(path) == (vocab, merges, specials, GPT2)


def test_hf_cl100k_from_derived_merges_matches_tiktoken(
    tmp_path: Path,
    cl100k_ranks: dict[bytes, int],
    cl100k_reference: tiktoken.Encoding,
    parity_texts: list[str],
) -> None:
    specials = special_ids_of(cl100k_reference)
    vocab = {rank: token for token, rank in cl100k_ranks.items()}
    vocab |= {token_id: token.encode() for token, token_id in specials.items()}
    merges = merges_from_ranks(cl100k_ranks)
    path = write_hf_json(tmp_path / "tokenizer.json", vocab, merges, specials, CL100K)
    hf = Tokenizer.from_file(str(path))
    for text in [*parity_texts, *SAMPLE_TEXTS, "1234567890 12 123456"]:
        assert hf.encode(text).ids == cl100k_reference.encode(text, allowed_special="all")
    assert read_hf_json(path)[3] == CL100K


def hf_document(**changes: object) -> dict[str, object]:
    document: dict[str, object] = {
        "added_tokens": [{"id": 2, "content": "<s>", "special": True}],
        "pre_tokenizer": {"type": "ByteLevel", "use_regex": True},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": [["a", "b"]]},
    }
    document.update(changes)
    return document


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ([1, 2], "expected a JSON object"),
        (hf_document(model={"type": "WordPiece", "vocab": {}}), "expected a BPE model"),
        (
            hf_document(pre_tokenizer={"type": "Metaspace"}, decoder=None),
            "not a byte-level tokenizer",
        ),
        (
            hf_document(model={"type": "BPE", "vocab": {"a": "x"}, "merges": []}),
            r"model\.vocab: token 'a' has id 'x'",
        ),
        (
            hf_document(model={"type": "BPE", "vocab": {"a": 0}, "merges": [["a"]]}),
            r"model\.merges\[0\]",
        ),
        (
            hf_document(model={"type": "BPE", "vocab": {"a": 0}, "merges": ["a", "a b c"]}),
            r"model\.merges\[0\]: expected two tokens",
        ),
        (
            hf_document(
                model={"type": "BPE", "vocab": {}, "merges": [], "end_of_word_suffix": "</w>"}
            ),
            "end_of_word_suffix",
        ),
        (hf_document(added_tokens=[{"content": "<s>"}]), r"added_tokens\[0\]"),
        (
            hf_document(added_tokens=[{"id": 2, "content": "<s>"}, {"id": 3, "content": "<s>"}]),
            "duplicate special token",
        ),
        (hf_document(added_tokens=[{"id": 0, "content": "<s>"}]), "model.vocab gives to b'a'"),
    ],
)
def test_malformed_hf_json_names_the_file(tmp_path: Path, document: object, problem: str) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(FormatError, match=problem) as caught:
        read_hf_json(path)
    assert_names_location(caught.value, path, None)


def test_hf_json_syntax_error_names_line(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text('{\n  "model": {\n    "type": "BPE",,\n  }\n}\n', encoding="utf-8")
    with pytest.raises(FormatError, match="invalid JSON") as caught:
        read_hf_json(path)
    assert_names_location(caught.value, path, 3)


def test_hf_pattern_sources(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(hf_document()), encoding="utf-8")
    assert read_hf_json(path)[3] == GPT2  # ByteLevel's built-in regex is GPT-2's
    path.write_text(json.dumps(hf_document(pre_tokenizer=None)), encoding="utf-8")
    assert read_hf_json(path)[3] is None


# ---------------------------------------------------------------- save / load


@ROUND_TRIPS
@given(files=arbitrary_files(), format=st.sampled_from(["gpt2", "hf"]))
def test_save_load_round_trip(
    tmp_path_factory: pytest.TempPathFactory, files: TokenizerFiles, format: str
) -> None:
    spellings = {encode_token(token) for token in files.vocab.values()}
    assume(not spellings & set(files.special_tokens))
    folder = tmp_path_factory.mktemp("saved")
    assert save_tokenizer(folder, files, format=format) == folder
    assert load_tokenizer(folder) == files


@ROUND_TRIPS
@given(files=rank_consistent_files(), format=st.sampled_from(FORMATS))
def test_save_load_round_trip_rank_consistent(
    tmp_path_factory: pytest.TempPathFactory, files: TokenizerFiles, format: str
) -> None:
    folder = tmp_path_factory.mktemp("saved")
    save_tokenizer(folder, files, format=format)
    assert load_tokenizer(folder) == files


def test_save_writes_metadata_and_nothing_else(tmp_path: Path) -> None:
    files = TokenizerFiles(byte_vocab() | {256: b"<|x|>"}, [], {"<|x|>": 256}, CL100K)
    expected = {
        "gpt2": {"vocab.json", "merges.txt"},
        "tiktoken": {"tokenizer.tiktoken"},
        "hf": {"tokenizer.json"},
    }
    for format, names in expected.items():
        folder = tmp_path / format
        save_tokenizer(folder, files, format=format)
        assert {path.name for path in folder.iterdir()} == names | {"streambpe.json"}
        metadata = json.loads((folder / "streambpe.json").read_text(encoding="utf-8"))
        assert metadata == {
            "format": format,
            "pattern": CL100K,
            "special_tokens": {"<|x|>": 256},
            "version": 1,
        }


def test_failed_save_leaves_previous_files_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = TokenizerFiles(byte_vocab(), [])
    save_tokenizer(tmp_path, old, format="hf")
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}

    def crash_midway(path: Path, *args: object) -> Path:
        path.write_text('{"model": {"vocab": {', encoding="utf-8")
        raise RuntimeError("disk full")

    monkeypatch.setattr("streambpe.formats.directory.write_hf_json", crash_midway)
    new = TokenizerFiles(byte_vocab() | {256: b"ab"}, [(b"a", b"b")])
    with pytest.raises(RuntimeError, match="disk full"):
        save_tokenizer(tmp_path, new, format="hf")
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before
    assert load_tokenizer(tmp_path) == old


def test_tiktoken_save_refuses_merges_ranks_cannot_express(tmp_path: Path) -> None:
    # Rank order makes "abc" from "ab" + "c", but this tokenizer built it from "a" + "bc".
    vocab = byte_vocab() | {256: b"ab", 257: b"bc", 258: b"abc"}
    files = TokenizerFiles(vocab, [(b"a", b"b"), (b"b", b"c"), (b"a", b"bc")])
    with pytest.raises(ValueError, match=r"merge 3 .* implies \(b'ab', b'c'\)"):
        save_tokenizer(tmp_path / "t", files, format="tiktoken")
    assert not (tmp_path / "t" / "tokenizer.tiktoken").exists()
    save_tokenizer(tmp_path / "g", files, format="gpt2")  # a merge list holds it fine
    assert load_tokenizer(tmp_path / "g") == files


def test_unknown_format_lists_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="gpt2, tiktoken, hf"):
        save_tokenizer(tmp_path, TokenizerFiles(byte_vocab(), []), format="sentencepiece")


def test_missing_directory_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_tokenizer(missing)
    with pytest.raises(FileNotFoundError, match=r"expected streambpe\.json"):
        load_tokenizer(tmp_path)


def test_loads_bare_gpt2_directory(tmp_path: Path) -> None:
    vocab = byte_vocab() | {256: b"<|endoftext|>"}
    write_gpt2(tmp_path, vocab, [])
    assert load_tokenizer(tmp_path) == TokenizerFiles(vocab, [], {}, GPT2)


def test_loads_bare_hf_directory(tmp_path: Path) -> None:
    vocab = byte_vocab() | {256: b" t", 257: "<|é|>".encode()}
    write_hf_json(tmp_path / "tokenizer.json", vocab, [(b" ", b"t")], {"<|é|>": 257}, O200K)
    assert load_tokenizer(tmp_path) == TokenizerFiles(vocab, [(b" ", b"t")], {"<|é|>": 257}, O200K)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"version": 2}, "version 2"),
        ({"format": "bpe"}, "format 'bpe' is not one of"),
        ({"pattern": None}, "pattern None"),
        ({"special_tokens": {"<|x|>": "256"}}, "special_tokens must be"),
        ({"special_tokens": {"<|y|>": 256}}, "vocab\\[256\\] is b'<\\|x\\|>'"),
    ],
)
def test_malformed_metadata_names_the_file(
    tmp_path: Path, change: dict[str, object], problem: str
) -> None:
    files = TokenizerFiles(byte_vocab() | {256: b"<|x|>"}, [], {"<|x|>": 256})
    save_tokenizer(tmp_path, files)
    metadata_path = tmp_path / "streambpe.json"
    metadata = json.loads(metadata_path.read_text(encoding="utf-8")) | change
    metadata_path.write_text(json.dumps(metadata), encoding="utf-8")
    with pytest.raises(FormatError, match=problem) as caught:
        load_tokenizer(tmp_path)
    assert_names_location(caught.value, metadata_path, None)


def test_tiktoken_special_clashing_with_a_rank_is_reported(tmp_path: Path) -> None:
    files = TokenizerFiles(byte_vocab() | {256: b"<|x|>"}, [], {"<|x|>": 256})
    save_tokenizer(tmp_path, files, format="tiktoken")
    metadata_path = tmp_path / "streambpe.json"
    metadata = json.loads(metadata_path.read_text(encoding="utf-8"))
    metadata["special_tokens"] = {"<|x|>": 65}
    metadata_path.write_text(json.dumps(metadata), encoding="utf-8")
    with pytest.raises(FormatError, match="gives to b'A'") as caught:
        load_tokenizer(tmp_path)
    assert_names_location(caught.value, metadata_path, None)


def test_tokenizer_files_checks_special_tokens() -> None:
    with pytest.raises(ValueError, match="vocab\\[1\\] is None"):
        TokenizerFiles({0: b"a"}, [], {"<s>": 1})
    with pytest.raises(ValueError, match="empty special token"):
        TokenizerFiles({0: b""}, [], {"": 0})


def test_tiktoken_lines_are_base64_and_rank(tmp_path: Path) -> None:
    path = write_tiktoken(tmp_path / "t.tiktoken", {5: b"\x00\xff", 2: b" ", 9: b"<s>"}, {"<s>": 9})
    lines = path.read_text(encoding="ascii").splitlines()
    assert [line.split() for line in lines] == [
        [base64.b64encode(b" ").decode(), "2"],
        [base64.b64encode(b"\x00\xff").decode(), "5"],
    ]
