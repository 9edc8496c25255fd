"""The compiled core against the pure-Python reference: same merges, same ids.

``streambpe.core._native`` must reproduce, for every input, the merge loop of
``streambpe.core.merge_loop`` and the piece encoding of ``streambpe.core.bpe``
plus an encoder lookup, behind a bounded cache of its own. Hypothesis compares them on
small alphabets (so count and rank ties are frequent), multi-byte characters,
and pieces long enough to take the heap path; real r50k ranks are checked
against tiktoken. Also here: ``bpe_long.merge_long_piece`` against
``merge_piece``. The module is skipped when the extension was not built.
"""

from __future__ import annotations

import base64
import itertools
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import regex
import tiktoken
from ab_vocabulary import ab_vocabulary
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from piece_oracle import pure_encode

from streambpe import patterns
from streambpe.core import merge_loop
from streambpe.core.bpe import merge_piece
from streambpe.core.bpe_long import merge_long_piece
from streambpe.train.counting import count_words_in_text

native = pytest.importorskip(
    "streambpe.core._native", reason="the compiled core was not built (no C++ compiler at install)"
)

Vocabulary = tuple[dict[bytes, int], dict[bytes, int]]  # (encoder, ranks)

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "sample" / "tinytales.txt"
# Small, with a two-byte character (é) and a three-byte one (€), so ties and
# splits inside a character both happen.
LETTERS = "abé€ "


# --------------------------------------------------------------------------- the merge loop

words = st.one_of(
    st.text(alphabet=LETTERS, max_size=8),
    st.builds(str.__mul__, st.sampled_from("ab€"), st.integers(1, 12)),  # "aaaa", runs of a pair
)
counts = st.one_of(st.integers(1, 4), st.just(1), st.integers(1, 10**15))
word_counts = st.dictionaries(words, counts, max_size=25)


@settings(max_examples=300, deadline=None)
@given(word_counts, st.integers(0, 60))
def test_learn_merges_matches_pure(counts_by_word: dict[str, int], max_merges: int) -> None:
    """Same merges in the same order, including tie-breaks and early stops."""
    expected = merge_loop.learn_merges(dict(counts_by_word), max_merges)
    assert native.learn_merges(dict(counts_by_word), max_merges) == expected


def test_learn_merges_on_real_text() -> None:
    """A realistic vocabulary: the pretokenized sample text, 400 merges."""
    counts_by_word = count_words_in_text(SAMPLE.read_text(encoding="utf-8"), patterns.GPT2, [])
    expected = merge_loop.learn_merges(dict(counts_by_word), 400)
    assert native.learn_merges(dict(counts_by_word), 400) == expected


def test_learn_merges_matches_cs336_reference(
    cs336_dir: Path, gpt2_spelling_decoder: Callable[[str], bytes]
) -> None:
    """The native loop alone reproduces the CS336 reference merges (docs/design.md, "The tie-break")."""
    lines = (cs336_dir / "train-bpe-reference-merges.txt").read_text(encoding="utf-8").splitlines()
    reference = [tuple(map(gpt2_spelling_decoder, line.split(" "))) for line in lines if line]
    text = (cs336_dir / "corpus.en").read_text(encoding="utf-8")
    counts_by_word = count_words_in_text(text, patterns.GPT2, ["<|endoftext|>"])
    assert native.learn_merges(counts_by_word, len(reference)) == reference


def test_learn_merges_consumes_the_counts() -> None:
    counts_by_word = {"ab": 2, "abc": 1, "x": 5}
    assert native.learn_merges(counts_by_word, 10) == [(b"a", b"b"), (b"ab", b"c")]
    assert counts_by_word == {}


def test_on_merge_is_called_once_per_merge() -> None:
    calls: list[None] = []
    merges = native.learn_merges({"abcd": 1}, 10, lambda: calls.append(None))
    assert len(merges) == 3
    assert len(calls) == 3


def test_on_merge_exception_stops_the_loop() -> None:
    class Cancelled(Exception):
        pass

    calls: list[None] = []

    def cancel_on_third() -> None:
        calls.append(None)
        if len(calls) == 3:
            raise Cancelled

    with pytest.raises(Cancelled):
        native.learn_merges({"abcdefgh": 1}, 100, cancel_on_third)
    assert len(calls) == 3


@pytest.mark.parametrize("count", [0, -1])
def test_non_positive_counts_are_rejected(count: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        native.learn_merges({"ab": count}, 1)


def test_counts_that_overflow_int64_are_rejected() -> None:
    with pytest.raises(OverflowError):
        native.learn_merges({"ab": 2**62, "cd": 2**62}, 1)


def test_lone_surrogate_in_a_word_raises() -> None:
    with pytest.raises(UnicodeEncodeError):
        native.learn_merges({"a\ud800": 1}, 1)


# --------------------------------------------------------------------------- piece encoding


def outcome(encode: Callable[..., list[int]], *args: Any) -> list[int] | tuple[str, bytes]:
    """``encode(*args)``, or ``("KeyError", missing part)`` if it raised KeyError."""
    try:
        return encode(*args)
    except KeyError as error:
        return ("KeyError", error.args[0])


@st.composite
def vocabularies(draw: st.DrawFn) -> Vocabulary:
    """Ranks and an encoder over LETTERS' bytes, built to stress the corner cases.

    Ranked tokens are concatenations of earlier tokens (reachable by merges)
    plus a few arbitrary strings (possibly unreachable); rank values are
    shuffled (not in merge order) and may repeat; some ranked tokens may be
    missing from the encoder (their use raises KeyError), and the encoder may
    hold tokens that no merge makes.
    """
    known = sorted({bytes([byte]) for byte in LETTERS.encode()})
    index = st.integers(0, 999)
    for left, right in draw(st.lists(st.tuples(index, index), max_size=40)):
        token = known[left % len(known)] + known[right % len(known)]
        if token not in known:
            known.append(token)
    arbitrary = st.text(alphabet="abcd", min_size=2, max_size=6).map(str.encode)
    mergeable = list(dict.fromkeys(known + draw(st.lists(arbitrary, max_size=4))))
    size = len(mergeable)
    if draw(st.booleans()):
        rank_values = draw(st.permutations(range(size)))
    else:  # frequent ties, and the largest rank allowed
        rank = st.integers(0, 8) | st.just(2**32 - 1)
        rank_values = draw(st.lists(rank, min_size=size, max_size=size))
    ranks = dict(zip(mergeable, rank_values, strict=True))
    missing = set(draw(st.lists(st.sampled_from(mergeable), max_size=2)))
    vocab_only = draw(st.lists(st.text(alphabet=LETTERS, min_size=2, max_size=6), max_size=4))
    tokens = [bytes([byte]) for byte in range(256)]
    tokens += [token for token in mergeable if len(token) > 1 and token not in missing]
    tokens += [word.encode() for word in vocab_only]
    unique = list(dict.fromkeys(tokens))
    encoder = dict(zip(unique, draw(st.permutations(range(len(unique)))), strict=True))
    return encoder, ranks


# Pieces of up to 24 parts merge in a linked list, longer ones in arrays that
# close up, and pieces past 96 bytes take the native heap path.
pieces = st.one_of(
    st.text(alphabet=LETTERS, max_size=20),
    st.text(alphabet=LETTERS, min_size=21, max_size=96),
    st.text(alphabet=LETTERS, min_size=100, max_size=300),
    st.builds(str.__mul__, st.sampled_from(["a", "ab", "aab", "é"]), st.integers(1, 200)),
)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_every_short_string_matches_pure_when_tokens_have_many_splits(
    seed: int, ties: bool
) -> None:
    """Every string of up to ten letters over "ab", against the pure oracle.

    Every string of two to five letters is a ranked token, in a random rank
    order (or with many ties), so nearly every token can be split into two
    ranked parts in several ways, and many tokens cannot be formed by BPE at
    all. The native pair table keeps one pair per token (the last merge of its
    own BPE); this checks that no other split could ever have merged first.
    """
    rng = random.Random(seed)
    encoder, ranks = ab_vocabulary(rng, ties=ties)
    encoding = native.PieceEncoder(encoder, ranks, 0)
    for length in range(1, 11):
        for letters in itertools.product("ab", repeat=length):
            piece = "".join(letters).encode()
            assert encoding.encode_bytes(piece) == pure_encode(piece, encoder, ranks), piece


@pytest.mark.parametrize("ties", [False, True])
def test_pieces_on_both_sides_of_the_linked_merge_limit_match_pure(ties: bool) -> None:
    """Strings of 18 to 30 letters over "ab", against the pure oracle.

    The compiled BPE merges a piece of up to 24 parts in a linked list and a
    longer one in arrays that close up after each merge; both must give pure
    BPE's ids, with distinct ranks and with many ties.
    """
    rng = random.Random(11)
    encoder, ranks = ab_vocabulary(rng, ties=ties)
    encoding = native.PieceEncoder(encoder, ranks, 0)
    for _ in range(600):
        piece = "".join(rng.choices("ab", k=rng.randint(18, 30))).encode()
        assert encoding.encode_bytes(piece) == pure_encode(piece, encoder, ranks), piece


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(vocabularies(), st.lists(pieces, max_size=8))
def test_encode_bytes_matches_pure(vocabulary: Vocabulary, texts: list[str]) -> None:
    encoder, ranks = vocabulary
    encoding = native.PieceEncoder(encoder, ranks, 0)
    for piece in (text.encode() for text in texts):
        expected = outcome(pure_encode, piece, encoder, ranks)
        assert outcome(encoding.encode_bytes, piece) == expected


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    vocabularies(), st.lists(st.text(alphabet="abé", max_size=4), max_size=40), st.integers(0, 6)
)
def test_encode_pieces_match_pure_and_cache_counts(
    vocabulary: Vocabulary, texts: list[str], cache_size: int
) -> None:
    """Ids equal pure BPE's at every cache size; every lookup counts once; the cache is bounded."""
    encoder, ranks = vocabulary
    encoding = native.PieceEncoder(encoder, ranks, cache_size)

    def encode_one(text: str) -> list[int]:
        out: list[int] = []
        encoding.encode_pieces([text], out)
        return out

    for number, text in enumerate(texts, start=1):
        assert outcome(encode_one, text) == outcome(pure_encode, text.encode(), encoder, ranks)
        hits, misses, maxsize, currsize = encoding.cache_info()
        assert hits + misses == number
        assert maxsize == cache_size
        assert currsize <= maxsize
    encoding.clear_cache()
    assert encoding.cache_info() == (0, 0, cache_size, 0)


def test_a_repeated_piece_is_a_hit_and_whole_tokens_never_run_bpe() -> None:
    encoder = {bytes([byte]): byte for byte in range(256)} | {b"ab": 300}
    encoding = native.PieceEncoder(encoder, {b"ab": 0}, 16)
    out = [7]
    # "ab" is a token (a hit without BPE); "abc" runs BPE once, then is cached;
    # "" runs an empty BPE, which is not worth a cache line.
    encoding.encode_pieces(["ab", "abc", "", "abc", "ab"], out)
    assert out == [7, 300, 300, 99, 300, 99, 300]
    assert encoding.cache_info() == (3, 2, 16, 1)


@pytest.mark.parametrize("cache_size", [0, 1, 3, 10, 1000])
def test_cache_stays_bounded(cache_size: int) -> None:
    encoding = native.PieceEncoder({bytes([byte]): byte for byte in range(256)}, {}, cache_size)
    encoding.encode_pieces([str(number) for number in range(100, 5000)], [])
    hits, misses, maxsize, currsize = encoding.cache_info()
    assert (hits, misses, maxsize) == (0, 4900, cache_size)
    assert currsize <= cache_size
    assert (currsize > 0) == (cache_size > 0)


def test_recently_used_pieces_survive_eviction() -> None:
    """A piece looked up between every two new pieces stays cached (LRU within its set)."""
    encoding = native.PieceEncoder({bytes([byte]): byte for byte in range(256)}, {}, 64)
    encoding.encode_pieces(["hot"], [])
    for number in range(1000, 3000):
        encoding.encode_pieces([str(number), "hot"], [])
    hits, misses, _, _ = encoding.cache_info()
    assert (hits, misses) == (2000, 2001)


def test_pieces_with_many_ids_are_cached_in_the_large_lines() -> None:
    """A piece too big for a 64-byte line (20 bytes, 20 ids) still hits once cached."""
    encoding = native.PieceEncoder({bytes([byte]): byte for byte in range(256)}, {}, 64)
    piece = "abcdefghijklmnopqrst"
    for _ in range(3):
        out: list[int] = []
        encoding.encode_pieces([piece], out)
        assert out == list(piece.encode())
    assert encoding.cache_info() == (2, 1, 64, 1)


def _pure_ids(text: str, encoder: dict[bytes, int], ranks: dict[bytes, int]) -> list[int]:
    return [
        id_
        for piece in regex.findall(patterns.GPT2, text)
        for id_ in pure_encode(piece.encode(), encoder, ranks)
    ]


def test_the_short_piece_table_tells_apart_pieces_that_share_bytes() -> None:
    """Scanned text, from 4,096 cache entries up, also goes through the short-piece table.

    It keys a piece of up to 15 bytes by its first eight bytes, the seven after
    them and its length: the words here share their first eight bytes or their
    ends, straddle the 8- and 15-byte edges, and have one to several ids, and
    every repeat must still give pure BPE's ids.
    """
    encoder, ranks = ab_vocabulary(random.Random(3), ties=False)
    words = [
        "".join(letters) + middle + tail
        for letters in itertools.product("ab", repeat=8)
        for middle in ("", "a", "bb", "abab", "babab")
        for tail in ("", "ba", "ab")
    ]
    random.Random(4).shuffle(words)
    text = " ".join(words)
    expected = _pure_ids(text, encoder, ranks)
    encoding = native.PieceEncoder(encoder, ranks, 8192)
    for _ in range(3):
        out: list[int] = []
        encoding.encode_text(text, patterns.GPT2, None, out)
        assert out == expected
    # Every word is one piece, counted once per pass; most repeats are hits.
    hits, misses, _, _ = encoding.cache_info()
    assert hits + misses == 3 * len(words)
    assert hits > len(words)


def _few_id_words(chooser: random.Random, vocabulary: Vocabulary, count: int) -> list[str]:
    """``count`` distinct "ab" words of 3 to 15 letters, each of at most three ids."""
    encoder, ranks = vocabulary
    words: dict[str, None] = {}
    while len(words) < count:
        word = "".join(chooser.choice("ab") for _ in range(chooser.randint(3, 15)))
        if len(pure_encode(word.encode(), encoder, ranks)) <= 3:
            words[word] = None
    return list(words)


def _encode_passes(vocabulary: Vocabulary, words: list[str], passes: int) -> tuple[int, int]:
    """Encode the words, a line each, ``passes`` times with 4,096 cache entries; ``(hits, misses)``.

    Each pass must give pure BPE's ids. A line break is a piece of its own
    in GPT-2's pattern, so every word is a piece as it is.
    """
    encoder, ranks = vocabulary
    text = "\n".join(words)
    expected = _pure_ids(text, encoder, ranks)
    encoding = native.PieceEncoder(encoder, ranks, 4096)
    for _ in range(passes):
        out: list[int] = []
        encoding.encode_text(text, patterns.GPT2, None, out)
        assert out == expected
    hits, misses, _, _ = encoding.cache_info()
    assert hits + misses == passes * (2 * len(words) - 1)
    return hits, misses


def test_the_short_piece_table_starts_over_when_full() -> None:
    """Three times as many short pieces as the table holds (three quarters of 4,096 entries).

    It empties itself and fills again, and every pass still gives pure BPE's
    ids, the pieces it dropped encoded again.
    """
    vocabulary = ab_vocabulary(random.Random(5), ties=False)
    words = _few_id_words(random.Random(6), vocabulary, 10_000)
    _encode_passes(vocabulary, words, 3)


def test_a_short_piece_with_more_ids_than_its_entry_holds_is_found_again() -> None:
    """Short pieces of two to eight ids, each encoded three times.

    An entry of the short-piece table holds up to four ids. For a piece with
    more it keeps a mark, and the ids go to the cache sets, which only a mark
    sends a short piece to. Every text must give pure BPE's ids, and each
    piece must run BPE once: every repeat is a hit, through its entry or its
    mark. The texts are ten pieces each, too short for the segment store.
    """
    encoder, ranks = ab_vocabulary(random.Random(8), ties=False)
    chooser = random.Random(9)
    by_count: dict[int, dict[str, None]] = {count: {} for count in range(2, 9)}
    while any(len(words) < 20 for words in by_count.values()):
        word = "".join(chooser.choice("abc") for _ in range(chooser.randint(3, 15)))
        words = by_count.get(len(pure_encode(word.encode(), encoder, ranks)))
        if words is not None and len(words) < 20:
            words[word] = None
    pieces = [word for words in by_count.values() for word in words]
    chooser.shuffle(pieces)
    encoding = native.PieceEncoder(encoder, ranks, 4096)
    lookups = 0
    for _ in range(3):
        for first in range(0, len(pieces), 10):
            text = "\n".join(pieces[first : first + 10])
            out: list[int] = []
            encoding.encode_text(text, patterns.GPT2, None, out)
            assert out == _pure_ids(text, encoder, ranks)
            lookups += len(regex.findall(patterns.GPT2, text))
    hits, misses, _, currsize = encoding.cache_info()
    assert (hits, misses) == (lookups - len(pieces), len(pieces))
    # Each piece once (the table's entries and the sets' lines; marks are not
    # counted), and the line break, a token the table keeps too.
    assert currsize == len(pieces) + 1


def _short_piece_slot(piece: bytes, mask: int) -> int:
    """The home slot ShortPieces gives ``piece`` (``_short_pieces.hpp``: key_of, hash_of)."""
    head = int.from_bytes(piece[:8], "little")
    tail = int.from_bytes(piece[8:], "little") | len(piece) << 56
    rotated = ((tail << 32) | (tail >> 32)) & (2**64 - 1)
    product = ((head ^ rotated) * 0x9E3779B97F4A7C15) & (2**64 - 1)
    return (product ^ (product >> 32)) & mask


def test_pieces_piled_on_one_slot_still_encode_exactly() -> None:
    """Sixty pieces with one home slot, more than a probe reaches (16 slots).

    Text can be made to do this, since the key is the piece itself. The
    pieces are tokens, each one id, so each would be kept: those past the
    reach are not, and are looked up in the vocabulary again on each pass, a
    bounded number of reads each. With 4,096 cache entries the table has
    4,096 slots. Every pass must give the tokens' ids.
    """
    chooser = random.Random(7)
    piled: dict[str, None] = {}
    while len(piled) < 60:
        letters = "abcdefghijklmnopqrstuvwxyz"
        word = "".join(chooser.choice(letters) for _ in range(chooser.randint(2, 15)))
        if _short_piece_slot(word.encode(), 4095) == 0:
            piled[word] = None
    words = list(piled)
    encoder = {bytes([byte]): byte for byte in range(256)}
    encoder.update({word.encode(): 256 + index for index, word in enumerate(words)})
    _, misses = _encode_passes((encoder, {}), words, 4)
    assert misses == 0  # every piece a token: no BPE ran


def test_pieces_whose_first_entries_share_a_cache_line_are_all_kept() -> None:
    """Four pieces each for the two entries of one cache line (slots 6 and 7).

    A lookup reads both entries of its first slot's line before the next
    line (``ShortPieces::probed``), and the encoder checks both before
    anything else, so the eight pieces sit in slots 6 to 13 and every
    later pass finds each of them in the table: the first pass misses once
    a word, the next two never. (A single byte, the line break here, is
    answered without BPE and counted as a hit.)
    """
    chooser = random.Random(11)
    by_slot: dict[int, list[str]] = {6: [], 7: []}
    while any(len(words) < 4 for words in by_slot.values()):
        word = "".join(
            chooser.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(chooser.randint(2, 15))
        )
        slot = _short_piece_slot(word.encode(), 4095)
        if slot in by_slot and len(by_slot[slot]) < 4 and word not in by_slot[slot]:
            by_slot[slot].append(word)
    words = by_slot[6] + by_slot[7]
    chooser.shuffle(words)
    encoder = {bytes([byte]): byte for byte in range(256)}
    ranks = {b"ab": 0, b"cd": 1, b"ef": 2}
    hits, misses = _encode_passes((encoder, ranks), words, 3)
    assert misses == len(words)
    assert hits == 3 * (2 * len(words) - 1) - len(words)


def test_long_pieces_and_many_ids_are_encoded_but_not_cached() -> None:
    encoding = native.PieceEncoder({bytes([byte]): byte for byte in range(256)}, {}, 64)
    long_piece = "x" * 40
    for _ in range(3):
        out: list[int] = []
        encoding.encode_pieces([long_piece], out)
        assert out == [ord("x")] * 40
    assert encoding.cache_info() == (0, 3, 64, 0)


def test_a_vocabulary_of_long_tokens_builds_and_encodes_like_pure() -> None:
    """Tokens far longer than the eight bytes the build's record buffer starts out sized for.

    The records the tables are built from go into a buffer sized for tokens
    of up to about eight bytes, which grows when they are longer; runs of
    "a" doubling up to 1,024 bytes, and "ab" runs beside them, make it grow
    several times. Every length from 1 to 1,100 must encode as pure does.
    """
    encoder = {bytes([byte]): byte for byte in range(256)}
    ranks: dict[bytes, int] = {}
    for unit in (b"a", b"ab"):
        token = unit
        while len(token) < 1024:
            token += token
            ranks[token] = len(ranks)
            encoder[token] = 256 + len(ranks)
    encoding = native.PieceEncoder(encoder, ranks, 64)
    for length in range(1, 1100, 7):
        for piece in (b"a" * length, b"ab" * length, b"a" * length + b"b"):
            assert encoding.encode_bytes(piece) == pure_encode(piece, encoder, ranks), len(piece)


def test_a_token_that_is_not_bytes_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="tokens must be bytes, got str"):
        native.PieceEncoder({"a": 0}, {}, 8)
    with pytest.raises(TypeError, match="tokens must be bytes, got int"):
        native.PieceEncoder({bytes([byte]): byte for byte in range(256)}, {1: 0}, 8)


def test_lone_surrogate_raises_unicode_encode_error() -> None:
    encoding = native.PieceEncoder({bytes([byte]): byte for byte in range(256)}, {}, 8)
    with pytest.raises(UnicodeEncodeError):
        encoding.encode_pieces(["a", "\ud800"], [])


def test_missing_part_raises_key_error() -> None:
    encoding = native.PieceEncoder({b"a": 0, b"b": 1}, {b"ab": 0}, 8)
    with pytest.raises(KeyError) as raised:
        encoding.encode_pieces(["ab"], [])
    assert raised.value.args == (b"ab",)


@pytest.mark.parametrize(
    ("encoder", "ranks", "cache_size"),
    [({b"a": 2**32}, {}, 0), ({b"a": -1}, {}, 0), ({}, {b"ab": 2**32}, 0), ({}, {}, -1)],
)
def test_out_of_range_arguments_are_rejected(
    encoder: dict[bytes, int], ranks: dict[bytes, int], cache_size: int
) -> None:
    with pytest.raises(ValueError):
        native.PieceEncoder(encoder, ranks, cache_size)


# --------------------------------------------------------------------------- real ranks


@pytest.fixture(scope="module")
def r50k_encoding(r50k_ranks: dict[bytes, int]) -> Any:
    return native.PieceEncoder(r50k_ranks, r50k_ranks, 4096)


def test_r50k_ids_match_tiktoken(r50k_ranks: dict[bytes, int], r50k_encoding: Any) -> None:
    reference = tiktoken.Encoding(
        name="r50k_offline", pat_str=patterns.GPT2, mergeable_ranks=r50k_ranks, special_tokens={}
    )
    text = SAMPLE.read_text(encoding="utf-8") + " Grüße, naïve café — 日本語のテキスト 😀 [[x]]"
    out: list[int] = []
    r50k_encoding.encode_pieces(regex.findall(patterns.GPT2, text), out)
    assert out == reference.encode_ordinary(text)


def check_ids_appended_with_references_of_their_own(encoding: Any, least_ids: int) -> None:
    """Encoding a text of more than ``least_ids`` ids twice: see the tests below."""
    text = SAMPLE.read_text(encoding="utf-8") * 40
    first: list[int] = []
    encoding.encode_text(text, patterns.GPT2, None, first)
    assert len(first) > least_ids
    token = next(id_ for id_ in first if id_ > 256)  # not one of CPython's shared small ints
    before = sys.getrefcount(token)
    again: list[int] = [7]
    encoding.encode_text(text, patterns.GPT2, None, again)
    assert again == [7, *first]
    assert sys.getrefcount(token) == before + first.count(token)
    del again
    assert sys.getrefcount(token) == before


def test_encoded_ids_are_appended_and_hold_their_own_references(r50k_encoding: Any) -> None:
    """Ids are appended to ``out`` 65,536 at a time; each id in a list is a reference of its own.

    The ids are written straight into ``out``'s item array, each with a
    reference taken by hand, so a missing or doubled reference would show in
    the ints' reference counts.
    """
    _, hand_over = native.id_block_sizes()
    check_ids_appended_with_references_of_their_own(r50k_encoding, hand_over)


def test_ids_of_many_blocks_are_appended_and_hold_their_own_references(
    r50k_encoding: Any, small_id_blocks: tuple[int, int]
) -> None:
    """The same across many blocks of ids, each handed over in many parts."""
    block, _ = small_id_blocks
    check_ids_appended_with_references_of_their_own(r50k_encoding, 20 * block)


def test_a_fork_makes_each_id_object_once_on_every_path(r50k_encoding: Any) -> None:
    """A fork makes an id's int the first time it puts that id in a list, on each way ids
    reach a list (one text, a text with special tokens, many texts at once), and reuses it
    after; the special tokens' ids are the caller's objects."""
    text = SAMPLE.read_text(encoding="utf-8")[:3000]
    with_special = text[:1000] + "<|endoftext|>" + text[1000:]
    special_id = 50256
    expected_text = r50k_encoding.encode_with_specials(
        text, patterns.GPT2, None, ("<|endoftext|>",), (special_id,)
    )
    expected_special = r50k_encoding.encode_with_specials(
        with_special, patterns.GPT2, None, ("<|endoftext|>",), (special_id,)
    )
    fork = r50k_encoding.fork()
    got_special = fork.encode_with_specials(
        with_special, patterns.GPT2, None, ("<|endoftext|>",), (special_id,)
    )
    assert got_special == expected_special
    assert special_id in got_special
    got_many = fork.encode_many(
        [text, with_special], patterns.GPT2, None, ("<|endoftext|>",), (special_id,)
    )
    assert got_many == [expected_text, expected_special]
    # One object per id within the fork, whichever call made it.
    made: dict[int, int] = {}
    for ids in (got_special, *got_many):
        for value in ids:
            assert made.setdefault(value, id(value)) == id(value) or value == special_id
    if sys.version_info < (3, 12):
        assert all(
            mine is not theirs
            for mine, theirs in zip(got_many[0], expected_text, strict=True)
            if mine != special_id
        )


def test_one_kernel_follows_the_pattern_of_each_call(
    r50k_ranks: dict[bytes, int], r50k_encoding: Any
) -> None:
    """The kernel keeps what it resolved for the last pattern; a call with another must not reuse it.

    The text is cut differently by each pattern (GPT-2 splits "  x" and
    keeps digits in one run, cl100k takes three digits at a time, the
    custom one splits every character), so a call that scanned with the
    previous call's pattern gives other ids.
    """
    text = "Hello  world 1234567 don't\n\n  x" * 3
    custom = r"\S|\s"
    custom_pretokenizer = native.Pretokenizer(custom)
    calls = [
        (patterns.GPT2, None),
        (patterns.CL100K, None),
        (custom, custom_pretokenizer),
        (patterns.GPT2, None),
        (custom, custom_pretokenizer),
        (patterns.CL100K, None),
    ]
    for pattern, pretokenizer in calls:
        out: list[int] = []
        r50k_encoding.encode_text(text, pattern, pretokenizer, out)
        expected: list[int] = []
        native.PieceEncoder(r50k_ranks, r50k_ranks, 4096).encode_pieces(
            regex.findall(pattern, text), expected
        )
        assert out == expected, pattern
        ids = r50k_encoding.encode_with_specials(text, pattern, pretokenizer, (), ())
        assert ids == expected, pattern


def long_pieces(size: int) -> dict[str, bytes]:
    """The long pieces that make quadratic merging hang, about ``size`` bytes each."""
    return {
        "one letter": b"a" * size,
        "a syllable": b"abc" * (size // 3),
        "base64": base64.b64encode(random.Random(1).randbytes(size // 4 * 3)),
    }


@pytest.mark.parametrize("piece", long_pieces(1 << 16).values(), ids=long_pieces(1 << 16).keys())
def test_long_pieces_match_pure(
    r50k_ranks: dict[bytes, int], r50k_encoding: Any, piece: bytes
) -> None:
    """Exact on 64 KiB pieces (checked with the pure heap merge; merge_piece is quadratic)."""
    expected = [r50k_ranks[part] for part in merge_long_piece(piece, r50k_ranks)]
    assert r50k_encoding.encode_bytes(piece) == expected


@pytest.mark.parametrize("piece", long_pieces(1 << 20).values(), ids=long_pieces(1 << 20).keys())
def test_megabyte_pieces_finish(
    r50k_ranks: dict[bytes, int], r50k_encoding: Any, piece: bytes
) -> None:
    """A megabyte piece completes (a quadratic merge would hang here) and decodes back."""
    ids = r50k_encoding.encode_bytes(piece)
    decoder = {rank: token for token, rank in r50k_ranks.items()}
    assert b"".join(decoder[token_id] for token_id in ids) == piece


# --------------------------------------------------------------------------- the pure heap merge


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(vocabularies(), pieces, st.none() | st.integers(0, 60))
def test_merge_long_piece_matches_merge_piece(
    vocabulary: Vocabulary, text: str, below: int | None
) -> None:
    _, ranks = vocabulary
    piece = text.encode()
    if below is None:
        assert merge_long_piece(piece, ranks) == merge_piece(piece, ranks)
    else:
        assert merge_long_piece(piece, ranks, below=below) == merge_piece(piece, ranks, below=below)


@pytest.mark.parametrize(
    "long_parts", [False, True], ids=["short", "long (copied without the GIL)"]
)
def test_move_id_part_moves_unshared_parts_and_copies_shared_ones(long_parts: bool) -> None:
    """The ids of the parts in order; each id keeps exactly the references its lists hold.

    A part only ``parts`` holds is emptied (its references move, into an empty
    list as a whole item array); one held elsewhere too is copied and left as
    it was, so its holder sees no change. Parts of 2**16 ids and more are
    copied with the GIL released.
    """
    from streambpe.core.piece_encoder import move_id_part as reference_move

    big = int("1000007")  # not one of CPython's shared small ints
    repeat = 1 << 16 if long_parts else 1
    shared_part = [big, 3, big] * repeat
    parts: list[list[int] | None] = [[1, big] * repeat, [], shared_part, [big] * repeat]
    expected: list[int] = []
    reference_parts: list[list[int] | None] = [list(part) for part in parts if part is not None]
    for index in range(len(reference_parts)):
        reference_move(expected, reference_parts, index)
    assert reference_parts == [None] * 4
    before = sys.getrefcount(big)
    joined: list[int] = []
    for index in range(len(parts)):
        native.move_id_part(joined, parts, index)
    assert joined == expected == [1, big] * repeat + [big, 3, big] * repeat + [big] * repeat
    assert parts == [None] * 4
    # 4 references per repeat in joined; the two of shared_part were copied,
    # the moved ones left their parts.
    assert sys.getrefcount(big) == before + 2 * repeat
    del joined
    assert sys.getrefcount(big) == before - 2 * repeat
    assert shared_part == [big, 3, big] * repeat


@pytest.mark.parametrize("move_id_part", ["native", "python"])
def test_move_id_part_refuses_what_is_not_a_part(move_id_part: str) -> None:
    """A slot that holds no list, or an index past the parts, is an error that changes nothing."""
    from streambpe.core.piece_encoder import move_id_part as reference_move

    move = native.move_id_part if move_id_part == "native" else reference_move
    joined = [7]
    parts: list[Any] = [[1], (2,)]
    with pytest.raises(TypeError, match="list of lists"):
        move(joined, parts, 1)
    with pytest.raises(IndexError):
        move(joined, parts, 2)
    assert joined == [7] and parts == [[1], (2,)]


def test_the_id_objects_are_out_of_the_collectors_walks(r50k_ranks: dict[bytes, int]) -> None:
    """The kernels' lists of id objects, the vocabulary's and a fork's, hold only ints and are
    kept out of the cyclic collector's walks: tracked, each full collection walked their
    50,257 items (r50k) for as long as the kernels lived."""
    import gc

    def tracked_long_lists() -> int:
        return sum(1 for item in gc.get_objects() if type(item) is list and len(item) >= 50_000)

    baseline = tracked_long_lists()
    kernel = native.PieceEncoder(dict(r50k_ranks), r50k_ranks, 64)
    fork = kernel.fork()
    text = SAMPLE.read_text(encoding="utf-8")[:2000]
    first: list[int] = []
    kernel.encode_text(text, patterns.GPT2, None, first)
    forked: list[int] = []
    fork.encode_text(text, patterns.GPT2, None, forked)  # the fork makes its id objects
    assert forked == first
    assert tracked_long_lists() == baseline


@pytest.mark.parametrize("length", [5_000, 70_000], ids=["checked-with-in", "matcher-only"])
def test_encode_with_specials_on_short_and_long_texts(
    r50k_ranks: dict[bytes, int], r50k_encoding: Any, length: int
) -> None:
    """Below 64K characters ``in`` picks the tokens the matcher looks for; above, the matcher
    looks for all of them: the same ids as tiktoken either way, absent tokens included."""
    specials = {"<|endoftext|>": 50256, "<|absent|>": 50257}
    reference = tiktoken.Encoding(
        name="r50k_specials",
        pat_str=patterns.GPT2,
        mergeable_ranks=r50k_ranks,
        special_tokens=specials,
    )
    sample = SAMPLE.read_text(encoding="utf-8").replace("<|endoftext|>", "")
    text = ""
    while len(text) < length:
        text += sample[: length // 4] + "<|endoftext|> <|absent of it"
    ids = r50k_encoding.encode_with_specials(
        text, patterns.GPT2, None, tuple(specials), tuple(specials.values())
    )
    assert ids == reference.encode(text, allowed_special="all")
    assert ids.count(50256) == text.count("<|endoftext|>") and 50257 not in ids
    with pytest.raises(ValueError, match="non-empty strings"):
        r50k_encoding.encode_with_specials(text, patterns.GPT2, None, ("",), (50256,))


@pytest.mark.parametrize(
    ("cache_size", "table_sizes"),
    [
        # Three quarters of cache_size go to the table, which stays at most
        # half full: its full size is the first power of two at or above
        # 1.5 times cache_size.
        (1 << 16, [4096, 131072]),
        (1 << 19, [4096, 131072, 1048576]),
    ],
)
def test_the_short_piece_table_starts_small_and_grows_in_steps(
    r50k_ranks: dict[bytes, int], cache_size: int, table_sizes: list[int]
) -> None:
    """A new kernel's first pieces go to a table of 4,096 entries, which moves to one 32
    times larger each time it is half full, up to its full size: ids stay tiktoken's
    across every move, and the pieces moved are still answered from the cache."""
    reference = tiktoken.Encoding(
        name="r50k_offline", pat_str=patterns.GPT2, mergeable_ranks=r50k_ranks, special_tokens={}
    )
    kernel = native.PieceEncoder(r50k_ranks, r50k_ranks, cache_size)

    def encoded(text: str) -> list[int]:
        out: list[int] = []
        kernel.encode_text(text, patterns.GPT2, None, out)
        assert out == reference.encode_ordinary(text)
        return out

    assert kernel.short_table_slots() == 0
    encoded("Hello! Could you summarize the report in three bullet points?")
    assert kernel.short_table_slots() == table_sizes[0]
    rng = random.Random(7)
    # Enough distinct words (each a short piece, space first) to pass the
    # last move: it comes when the table before it holds half its entries.
    word_count = table_sizes[-2] // 2 + 4000
    words = [
        " " + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
        for _ in range(word_count)
    ]
    sizes_seen = [kernel.short_table_slots()]
    for start in range(0, word_count, 2000):
        encoded("".join(words[start : start + 2000]))
        if kernel.short_table_slots() != sizes_seen[-1]:
            sizes_seen.append(kernel.short_table_slots())
    assert sizes_seen == table_sizes
    text = "".join(words)
    hits_before = kernel.cache_info()[0]
    encoded(text)  # every piece again: answered from the grown table
    # A piece with no free entry within a probe's reach is not kept, so a
    # few may miss; the ones moved from the smaller tables must not.
    pieces = len(regex.findall(patterns.GPT2, text))
    assert kernel.cache_info()[0] - hits_before >= 0.99 * pieces
    kernel.clear_cache()
    assert kernel.short_table_slots() == 0
    encoded("and small again")
    assert kernel.short_table_slots() == table_sizes[0]


def test_a_fork_hands_out_int_objects_of_its_own(r50k_encoding: Any) -> None:
    """Two threads must not write the reference counts of the same ints (see
    ``PieceEncoder._id_objects``): a fork's ids are equal, and before Python
    3.12 (where small ints became immortal) never the same objects, small ones
    included; each id in a list still holds exactly one reference."""
    text = SAMPLE.read_text(encoding="utf-8")[:2000] + " \x00\x01"
    first: list[int] = []
    r50k_encoding.encode_text(text, patterns.GPT2, None, first)
    fork = r50k_encoding.fork()
    forked: list[int] = []
    fork.encode_text(text, patterns.GPT2, None, forked)
    assert forked == first
    if sys.version_info < (3, 12):
        assert all(mine is not theirs for mine, theirs in zip(forked, first, strict=True))
    token = forked[0]
    before = sys.getrefcount(token)
    again: list[int] = []
    fork.encode_text(text, patterns.GPT2, None, again)
    assert again[0] is token
    assert sys.getrefcount(token) == before + again.count(token)
    del again
    assert sys.getrefcount(token) == before
