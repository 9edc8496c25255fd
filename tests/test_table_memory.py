"""Freed native tables' memory is kept for the next table of the same size, and comes back zeroed.

See "Kept table memory" in ``docs/design.md``. On Linux the big tables (the
piece cache, the segment store, the vocabulary's) map their memory
themselves; a freed mapping is kept, up to a limit, for the next table that
asks for that size. A kept mapping that came back with its old entries would
answer another tokenizer's pieces with the first one's ids, so the second
tokenizer here has another vocabulary, and its ids are checked against
tiktoken's.
"""

from __future__ import annotations

import gc
import random
import string
import sys
from collections.abc import Iterator

import pytest
import tiktoken
from streaming_helpers import fresh_cl100k_tokenizer, fresh_r50k_tokenizer, make_text

from streambpe.core import NATIVE, kept_table_memory

native_only = pytest.mark.skipif(
    NATIVE is None, reason="the compiled core is not built: it owns the table memory"
)

linux_only = pytest.mark.skipif(
    NATIVE is None or sys.platform != "linux",
    reason="the compiled core's tables map their own memory, and keep it, only on Linux",
)


def many_distinct_pieces(seed: int) -> str:
    """Prose, then 6,000 random lowercase words: past the 2,048 distinct short pieces
    at which the short-piece table moves to a mapping of its own (4 MiB)."""
    rng = random.Random(seed)
    words = (
        "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(6_000)
    )
    return make_text(50_000, seed=seed, eot_every=None) + " " + " ".join(words)


@pytest.fixture
def kept_store() -> Iterator[int]:
    """An empty store with the default limit (yielded), emptied and restored afterwards."""
    limit = kept_table_memory()[1]
    kept_table_memory(0)
    kept_table_memory(limit)
    yield limit
    kept_table_memory(0)
    kept_table_memory(limit)


def drop_tokenizer_after(text: str) -> None:
    """Encode ``text`` with a fresh r50k tokenizer, then drop it (its tables are freed)."""
    tokenizer = fresh_r50k_tokenizer()
    tokenizer.encode_ordinary(text)
    del tokenizer
    gc.collect()


@linux_only
def test_a_dropped_tokenizers_tables_are_kept_within_the_limit(kept_store: int) -> None:
    drop_tokenizer_after(many_distinct_pieces(seed=1))
    kept, limit = kept_table_memory()
    assert limit == kept_store
    assert 0 < kept <= limit


@linux_only
def test_another_vocabulary_on_kept_memory_gets_its_own_ids(
    kept_store: int, cl100k_reference: tiktoken.Encoding
) -> None:
    text = many_distinct_pieces(seed=2)
    drop_tokenizer_after(text)
    kept_before = kept_table_memory()[0]
    second = fresh_cl100k_tokenizer()
    ids = second.encode_ordinary(text)
    # The second tokenizer's tables took kept mappings: the test reached them.
    assert kept_table_memory()[0] < kept_before
    assert ids == cl100k_reference.encode_ordinary(text)
    # Encoded again, from its caches (now holding its own entries).
    assert second.encode_ordinary(text) == ids


@native_only
def test_a_limit_of_zero_hands_everything_back_and_keeps_nothing(kept_store: int) -> None:
    drop_tokenizer_after(many_distinct_pieces(seed=3))
    assert kept_table_memory(0) == (0, 0)
    drop_tokenizer_after(many_distinct_pieces(seed=4))
    assert kept_table_memory() == (0, 0)


@linux_only
def test_a_lower_limit_unmaps_until_the_rest_fits(kept_store: int) -> None:
    drop_tokenizer_after(many_distinct_pieces(seed=5))
    kept = kept_table_memory()[0]
    lower = kept // 2
    now, limit = kept_table_memory(lower)
    assert limit == lower
    assert now <= lower


def test_a_negative_limit_is_refused_and_changes_nothing(kept_store: int) -> None:
    before = kept_table_memory()
    with pytest.raises(ValueError, match="limit must be at least 0"):
        kept_table_memory(-1)
    assert kept_table_memory() == before


@native_only
def test_the_compiled_core_refuses_a_negative_limit_itself(kept_store: int) -> None:
    from streambpe.core import _native  # type: ignore[attr-defined]

    with pytest.raises(ValueError, match="limit must be at least 0"):
        _native.kept_table_memory(-1)
