"""The compiled kernel's segment store: text encoded again is answered whole, and always right.

From 4,096 cache entries up, the compiled kernel keeps the ids of whole
stretches of text (segments of about 2,048 characters, cut where no piece
crosses) the second time it sees them, and answers them with one lookup
from then on (``docs/design.md``, "Text encoded again"). Nothing may change the ids:
tiktoken is the oracle for texts encoded cold, again, and after edits that
move the cuts, change the str's width or add characters the cut rule reads
(no-break spaces, ideographic spaces, newlines before letters).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from streambpe.patterns import resolve_pattern
from streambpe.tokenizer import Tokenizer

native = pytest.importorskip(
    "streambpe.core._native", reason="the compiled core was not built (no C++ compiler at install)"
)

#: The kernel's shortest segment, in characters (``SEGMENT_MIN_UNITS``).
SEGMENT = 2048

FRAGMENTS = [
    "word", " word", "  ", " ", "\n", "\n\n", "line\nNext", ".\nAb", "é", "東京", "。\n吾",
    "😀", "12345", "!?", "'s", "\u00a0", "\u00a0 x", "\u3000", " \u3000y", "\t", "\r\n",
    "Привет ", "a" * 40,
]  # fmt: skip
#: Texts of one to six segments, with every character the cut rule reads.
long_texts = st.lists(st.sampled_from(FRAGMENTS), min_size=600, max_size=2500).map("".join)


def kernel(ranks: dict[bytes, int], cache_size: int = 1 << 16) -> Any:
    """A compiled kernel, which alone has ``segment_info``."""
    return native.PieceEncoder(ranks, ranks, cache_size)


def encode(encoding: Any, text: str, pattern: str) -> list[int]:
    out: list[int] = []
    encoding.encode_text(text, pattern, None, out)
    return out


def pieces_of(encoding: Any) -> int:
    hits, misses, _, _ = encoding.cache_info()
    return int(hits + misses)


@pytest.fixture(scope="module")
def prose() -> str:
    # Seeded, so a failure can be replayed: mixed scripts, widths and cuts.
    chooser = random.Random(25)
    return "".join(chooser.choice(FRAGMENTS) for _ in range(6000))


def test_a_text_is_kept_the_second_time_and_answered_whole_the_third(
    cl100k_ranks: dict[bytes, int], cl100k_reference: tiktoken.Encoding, prose: str
) -> None:
    encoding = kernel(cl100k_ranks)
    pattern = resolve_pattern("cl100k")
    expected = cl100k_reference.encode_ordinary(prose)
    assert encode(encoding, prose, pattern) == expected
    # Seen once: nothing kept, so text encoded once costs no memory.
    assert encoding.segment_info()[:3] == (0, 0, 0)
    pieces = pieces_of(encoding)
    assert encode(encoding, prose, pattern) == expected
    found, stored, held, _ = encoding.segment_info()
    assert found == 0 and stored >= len(prose) // (2 * SEGMENT) and held > 0
    # Pieces too long for the piece cache miss on every pass but this one.
    misses = encoding.cache_info()[1]
    assert encode(encoding, prose, pattern) == expected
    # Every segment found, and each of its pieces counted as a hit.
    assert encoding.segment_info()[:2] == (stored, stored)
    assert pieces_of(encoding) == 3 * pieces
    assert encoding.cache_info()[1] == misses


def test_a_wider_str_finds_the_segments_of_a_narrower_one(
    cl100k_ranks: dict[bytes, int], cl100k_reference: tiktoken.Encoding
) -> None:
    """One emoji makes Python store a whole str in four bytes a character; its keys stay narrow."""
    encoding = kernel(cl100k_ranks)
    pattern = resolve_pattern("cl100k")
    # One byte a character, and no two segments alike.
    latin = "".join(f"Un café numéro {number}, s'il vous plaît. " for number in range(600))
    for _ in range(2):
        assert encode(encoding, latin, pattern) == cl100k_reference.encode_ordinary(latin)
    found, stored, _, _ = encoding.segment_info()
    assert (found, stored) == (0, len(latin) // SEGMENT + 1)
    widened = latin + "😀"
    assert encode(encoding, widened, pattern) == cl100k_reference.encode_ordinary(widened)
    # All but the last segment, which now ends with the emoji, were found.
    assert encoding.segment_info()[0] == stored - 1


def test_texts_that_differ_only_in_high_bytes_keep_their_own_ids(
    cl100k_ranks: dict[bytes, int], cl100k_reference: tiktoken.Encoding
) -> None:
    """Keys are narrowed only when every character fits: "i", "ũ" and "\U00010069" share a low byte."""
    encoding = kernel(cl100k_ranks)
    pattern = resolve_pattern("cl100k")
    for letter in ("i", "ũ", "\U00010069", "ũ", "i"):
        text = "".join(f"l{letter}ne {number} " for number in range(1000))
        for _ in range(2):  # the second time, it is kept
            assert encode(encoding, text, pattern) == cl100k_reference.encode_ordinary(text)


def test_an_edit_is_encoded_anew_and_the_rest_is_found(
    cl100k_ranks: dict[bytes, int], cl100k_reference: tiktoken.Encoding, prose: str
) -> None:
    encoding = kernel(cl100k_ranks)
    pattern = resolve_pattern("cl100k")
    for _ in range(2):
        encode(encoding, prose, pattern)
    stored = encoding.segment_info()[1]
    middle = len(prose) // 2
    edited = prose[:middle] + "Zq" + prose[middle:]
    assert encode(encoding, edited, pattern) == cl100k_reference.encode_ordinary(edited)
    found = encoding.segment_info()[0]
    assert 0 < found < stored


def test_a_new_turn_of_a_conversation_finds_the_turns_before(
    cl100k_ranks: dict[bytes, int], cl100k_reference: tiktoken.Encoding, prose: str
) -> None:
    """Each turn re-encodes the conversation so far: from the third on, the first turns are found."""
    encoding = kernel(cl100k_ranks)
    pattern = resolve_pattern("cl100k")
    conversation = ""
    for turn in range(6):
        conversation += f"\nturn {turn}: " + prose[turn * 3000 : turn * 3000 + 5000]
        found_before = encoding.segment_info()[0]
        assert encode(encoding, conversation, pattern) == cl100k_reference.encode_ordinary(
            conversation
        )
        if turn > 1:
            assert encoding.segment_info()[0] > found_before


#: Around a segment's first possible end: whitespace a cut must not split,
#: and characters before a space or a letter that allow or forbid a cut.
RUNS = [
    "   x", "\t  x", "\n  x", "\u00a0 x", "\u3000 x", " \u3000x", "\r\n x", "x  \n\n y",
    ".\nAb", "\n\nAb", " \nAb", "東\n京", "é x", "😀 x", "\u0301 x", "1 2", "' s",
]  # fmt: skip


@pytest.mark.parametrize("run", RUNS)
def test_segments_end_only_where_no_piece_crosses(
    cl100k_ranks: dict[bytes, int], cl100k_reference: tiktoken.Encoding, run: str
) -> None:
    """The store's first cut is looked for from SEGMENT characters on: put every run there."""
    encoding = kernel(cl100k_ranks)
    pattern = resolve_pattern("cl100k")
    filler = "".join(f"w{number} " for number in range(SEGMENT))
    for shift in range(-6, 6):
        text = filler[: SEGMENT + shift] + run + " tail." * 400
        for _ in range(3):
            assert encode(encoding, text, pattern) == cl100k_reference.encode_ordinary(text), shift


@settings(max_examples=40, deadline=None)
@given(long_texts, st.lists(st.tuples(st.floats(0, 1), st.sampled_from(FRAGMENTS)), max_size=4))
def test_ids_equal_tiktokens_before_and_after_edits(
    cl100k_ranks: dict[bytes, int],
    cl100k_reference: tiktoken.Encoding,
    text: str,
    edits: list[tuple[float, str]],
) -> None:
    encoding = kernel(cl100k_ranks)
    pattern = resolve_pattern("cl100k")
    for _ in range(3):  # seen, kept, found
        assert encode(encoding, text, pattern) == cl100k_reference.encode_ordinary(text)
    for where, fragment in edits:
        at = int(where * len(text))
        text = text[:at] + fragment + text[at:]
        assert encode(encoding, text, pattern) == cl100k_reference.encode_ordinary(text)
        # And a suffix: its segments start elsewhere, and may match stored ones.
        tail = text[at // 2 :]
        assert encode(encoding, tail, pattern) == cl100k_reference.encode_ordinary(tail)


@pytest.mark.parametrize("name", ["gpt2", "cl100k", "o200k"])
def test_every_builtin_pattern_gives_the_same_ids_from_the_store(
    name: str, r50k_ranks: dict[bytes, int], cl100k_ranks: dict[bytes, int], prose: str
) -> None:
    ranks = r50k_ranks if name == "gpt2" else cl100k_ranks
    pattern = resolve_pattern(name)
    reference = tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    encoding = kernel(ranks)
    for _ in range(3):
        assert encode(encoding, prose, pattern) == reference.encode_ordinary(prose)
    assert encoding.segment_info()[0] > 0


def test_memory_stays_within_two_generations(
    r50k_ranks: dict[bytes, int], r50k_reference: tiktoken.Encoding
) -> None:
    encoding = kernel(r50k_ranks, cache_size=4096)  # the smallest store: 128 KiB a generation
    pattern = resolve_pattern("gpt2")
    generation = encoding.segment_info()[3]
    assert generation == 32 * 4096
    chooser = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    for round_ in range(12):
        text = " ".join(chooser.choice(words) + str(round_) for _ in range(6000))
        for _ in range(2):
            assert encode(encoding, text, pattern) == r50k_reference.encode_ordinary(text)
            assert encoding.segment_info()[2] <= 2 * generation
    # The text just encoded is still there, after the older ones were dropped.
    found = encoding.segment_info()[0]
    assert encode(encoding, text, pattern) == r50k_reference.encode_ordinary(text)
    assert encoding.segment_info()[0] > found


@pytest.mark.parametrize("cache_size", [0, 4095])
def test_small_caches_have_no_store(r50k_ranks: dict[bytes, int], cache_size: int) -> None:
    encoding = kernel(r50k_ranks, cache_size=cache_size)
    text = "one two three " * 1000
    for _ in range(2):
        encode(encoding, text, resolve_pattern("gpt2"))
    assert encoding.segment_info() == (0, 0, 0, 0)


def test_clear_cache_empties_the_store(r50k_ranks: dict[bytes, int]) -> None:
    encoding = kernel(r50k_ranks)
    text = "".join(f"one {number} three " for number in range(1000))
    for _ in range(2):
        encode(encoding, text, resolve_pattern("gpt2"))
    assert encoding.segment_info()[1] > 0
    encoding.clear_cache()
    assert encoding.segment_info()[:3] == (0, 0, 0)
    # What it had seen is forgotten too: the next encode keeps nothing.
    encode(encoding, text, resolve_pattern("gpt2"))
    assert encoding.segment_info()[:3] == (0, 0, 0)


def test_blocks_and_streams_over_a_warm_store(
    cl100k_ranks: dict[bytes, int], cl100k_reference: tiktoken.Encoding, prose: str
) -> None:
    """Encoding in bounded blocks resumes where a segment ended: the same ids, warm or cold."""
    tokenizer = Tokenizer.from_ranks(cl100k_ranks, pattern="cl100k")
    text = prose * 6
    expected = cl100k_reference.encode_ordinary(text)
    assert tokenizer.encode_ordinary(text) == expected
    for _ in range(2):
        streamed = [i for batch in tokenizer.iter_id_batches([text]) for i in batch]
        assert streamed == expected
        assert tokenizer.encode_ordinary(text) == expected
