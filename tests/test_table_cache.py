"""The table cache: built tables kept on disk, never read when stale or damaged.

A tokenizer's compiled tables and the pretokenizer's character table are
written to the cache by the first process that builds them and read by later
ones (``docs/design.md``, "Cold start"). These tests check that a table read
back encodes exactly like one built afresh (against tiktoken and the pure
backend), that a file written by another build, a damaged file and a file of
another vocabulary are never used, and that the cache can be turned off.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
import tiktoken
from ab_vocabulary import ab_vocabulary

from streambpe import patterns
from streambpe._support import table_cache
from streambpe.core import unicode_classes
from streambpe.core.bpe import merge_piece
from streambpe.tokenizer import Tokenizer

native = pytest.importorskip(
    "streambpe.core._native", reason="the compiled core was not built (no C++ compiler at install)"
)

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "sample" / "tinytales.txt"


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty table cache for this test."""
    folder = tmp_path / "tables"
    monkeypatch.setenv("STREAMBPE_TABLE_CACHE", str(folder))
    return folder


def vocabulary_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("vocabulary-*"))


def r50k(ranks: dict[bytes, int]) -> Tokenizer:
    return Tokenizer.from_ranks(ranks, pattern="gpt2", special_tokens={"<|endoftext|>": 50256})


def sample_text() -> str:
    text = SAMPLE.read_text(encoding="utf-8")
    return text + " naïve café, Ωμέγα, 東京タワー 😀😀 ﷽ 12345 \r\n\t  x"


def test_round_trip_checks_tag_and_checksum(cache_dir: Path) -> None:
    key = table_cache.content_key("t", b"inputs")
    table_cache.write_table(key, "writer", b"x" * 1000)
    assert bytes(table_cache.read_table(key, "writer") or b"") == b"x" * 1000
    assert table_cache.read_table(key, "another writer") is None
    path = cache_dir / key
    damaged = bytearray(path.read_bytes())
    damaged[-1] ^= 1
    path.write_bytes(bytes(damaged))
    assert table_cache.read_table(key, "writer") is None
    path.write_bytes(bytes(damaged[:-10]))
    assert table_cache.read_table(key, "writer") is None


def test_keys_tell_inputs_apart() -> None:
    assert table_cache.content_key("t", b"ab", b"c") != table_cache.content_key("t", b"a", b"bc")
    assert table_cache.content_key("t", b"a") != table_cache.content_key("u", b"a")
    assert table_cache.content_key("t", b"a") == table_cache.content_key("t", b"a")


@pytest.mark.parametrize("setting", ["0", "off", "OFF", "false"])
def test_cache_can_be_turned_off(
    setting: str, monkeypatch: pytest.MonkeyPatch, r50k_ranks: dict[bytes, int], tmp_path: Path
) -> None:
    monkeypatch.setenv("STREAMBPE_TABLE_CACHE", setting)
    monkeypatch.setenv("STREAMBPE_CACHE_DIR", str(tmp_path))
    assert table_cache.table_cache_dir() is None
    table_cache.write_table("key", "tag", b"data")
    assert table_cache.read_table("key", "tag") is None
    r50k(r50k_ranks).encode("hello")
    assert list(tmp_path.iterdir()) == []


def test_unwritable_cache_only_costs_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, r50k_ranks: dict[bytes, int]
) -> None:
    blocker = tmp_path / "a file, not a folder"
    blocker.write_bytes(b"")
    monkeypatch.setenv("STREAMBPE_TABLE_CACHE", str(blocker / "tables"))
    table_cache.write_table("key", "tag", b"data")
    tokenizer = r50k(r50k_ranks)
    assert tokenizer.encode("hello world") == [31373, 995]


def test_vocabulary_read_back_encodes_like_tiktoken(
    cache_dir: Path, r50k_ranks: dict[bytes, int], r50k_reference: tiktoken.Encoding
) -> None:
    text = sample_text()
    expected = r50k_reference.encode(text, allowed_special="all")
    first = r50k(r50k_ranks)
    assert first.encode(text) == expected
    [image] = vocabulary_files(cache_dir)
    written = image.stat().st_mtime_ns
    second = r50k(r50k_ranks)
    assert second.encode(text) == expected
    assert image.stat().st_mtime_ns == written, "a valid image is read, not rewritten"


def test_damaged_or_foreign_image_is_rebuilt(
    cache_dir: Path,
    r50k_ranks: dict[bytes, int],
    r50k_reference: tiktoken.Encoding,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = sample_text()
    expected = r50k_reference.encode(text, allowed_special="all")
    r50k(r50k_ranks).encode("x")
    [image] = vocabulary_files(cache_dir)
    good = image.read_bytes()

    damaged = bytearray(good)
    damaged[len(damaged) // 2] ^= 0xFF
    image.write_bytes(bytes(damaged))
    assert r50k(r50k_ranks).encode(text) == expected
    assert image.read_bytes() == good, "the damaged image is replaced by a whole one"

    # An image written by another build of the module is not read, whatever it holds.
    monkeypatch.setattr(native, "_IMAGE_TAG", "another build")
    assert r50k(r50k_ranks).encode(text) == expected
    assert image.read_bytes() != good
    assert len(vocabulary_files(cache_dir)) == 1, "rewritten in place, under the same key"


def test_an_image_only_serves_its_own_vocabulary(
    cache_dir: Path, r50k_ranks: dict[bytes, int], r50k_reference: tiktoken.Encoding
) -> None:
    text = sample_text()
    r50k(r50k_ranks).encode("x")
    # The same tokens with two ranks swapped: another vocabulary, another key.
    swapped = dict(r50k_ranks)
    swapped[b" the"], swapped[b" and"] = r50k_ranks[b" and"], r50k_ranks[b" the"]
    tokenizer = r50k(swapped)
    reference = tiktoken.Encoding(
        "swapped",
        pat_str=patterns.GPT2,
        mergeable_ranks=swapped,
        special_tokens={"<|endoftext|>": 50256},
    )
    assert tokenizer.encode(text) == reference.encode(text, allowed_special="all")
    assert len(vocabulary_files(cache_dir)) == 2


@pytest.mark.parametrize("ties", [False, True])
def test_many_split_vocabulary_matches_pure_after_read_back(
    ties: bool, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every string of two to five letters over "ab" is a token, in random rank order or
    with many ties: every piece of up to nine letters, through a read-back image, gets
    the pure backend's ids."""
    monkeypatch.setattr(native, "IMAGE_MIN_TOKENS", 0)
    rng = random.Random(11)
    encoder, ranks = ab_vocabulary(rng, ties=ties)
    native.PieceEncoder(encoder, ranks, 0)
    [image] = vocabulary_files(cache_dir)
    written = image.stat().st_mtime_ns
    read_back = native.PieceEncoder(encoder, ranks, 0)
    assert image.stat().st_mtime_ns == written
    for length in range(1, 10):
        for letters in itertools.product("ab", repeat=length):
            piece = "".join(letters).encode()
            whole = encoder.get(piece)
            expected = (
                [whole] if whole is not None else [encoder[p] for p in merge_piece(piece, ranks)]
            )
            assert read_back.encode_bytes(piece) == expected, piece


def test_class_table_read_back_equals_built(cache_dir: Path) -> None:
    built = unicode_classes.build_class_table()
    unicode_classes.class_table.cache_clear()
    try:
        assert unicode_classes.class_table() == built  # built and stored
        [stored] = cache_dir.glob("classes-*")
        unicode_classes.class_table.cache_clear()
        assert unicode_classes.class_table() == built  # read back
        data = bytearray(stored.read_bytes())
        data[-3] ^= 0x10
        stored.write_bytes(bytes(data))
        unicode_classes.class_table.cache_clear()
        assert unicode_classes.class_table() == built  # damaged: built again
    finally:
        unicode_classes.class_table.cache_clear()
