"""train_bpe: the CS336 reference merges, a naive-trainer oracle, determinism, caching, errors."""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streaming_helpers import child_pids, new_children

import streambpe
import streambpe.train.counting
import streambpe.train.trainer
from streambpe.errors import InvalidUTF8Error, WorkerError
from streambpe.patterns import CL100K, GPT2, O200K
from streambpe.train.count_tasks import CountTask
from streambpe.train.trainer import VocabSizeWarning, train_bpe

# The exactness tests run once per backend (docs/design.md, "Backends").
pytestmark = pytest.mark.usefixtures("backend")

PiecesOracle = Callable[[str, str, Sequence[str]], list[str]]
Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]

EOT = "<|endoftext|>"
PATTERNS = {"gpt2": GPT2, "cl100k": CL100K, "o200k": O200K}


# --------------------------------------------------------------------------- the oracle


def _merge_word(word: tuple[bytes, ...], pair: tuple[bytes, bytes]) -> tuple[bytes, ...]:
    merged: list[bytes] = []
    position = 0
    while position < len(word):
        if position + 1 < len(word) and (word[position], word[position + 1]) == pair:
            merged.append(pair[0] + pair[1])
            position += 2
        else:
            merged.append(word[position])
            position += 1
    return tuple(merged)


def naive_train(
    text: str,
    vocab_size: int,
    specials: Sequence[str],
    pattern: str,
    pieces_oracle: PiecesOracle,
) -> tuple[Vocab, Merges]:
    """Obviously-correct BPE: recount every pair each step, take max by (count, left, right)."""
    words: Counter[tuple[bytes, ...]] = Counter()
    for piece, count in Counter(pieces_oracle(text, pattern, specials)).items():
        words[tuple(bytes([b]) for b in piece.encode("utf-8"))] += count
    merges: Merges = []
    while len(merges) < vocab_size - 256 - len(specials):
        pairs: Counter[tuple[bytes, bytes]] = Counter()
        for word, count in words.items():
            for pair in itertools.pairwise(word):
                pairs[pair] += count
        if not pairs:
            break
        best = max(pairs, key=lambda pair: (pairs[pair], pair[0], pair[1]))
        merges.append(best)
        merged_words: Counter[tuple[bytes, ...]] = Counter()
        for word, count in words.items():
            merged_words[_merge_word(word, best)] += count
        words = merged_words
    tokens = [bytes([b]) for b in range(256)]
    tokens += [s.encode("utf-8") for s in specials]
    tokens += [left + right for left, right in merges]
    return dict(enumerate(tokens)), merges


# --------------------------------------------------------------------------- helpers


class CacheMissError(Exception):
    """Raised by a stand-in for counting when the cache should have answered."""


STALL_SECONDS = 12


def _crash_on_first_range(task: CountTask) -> dict[str, int]:
    """Stand-in for counting: the task holding the first range kills its worker, others stall."""
    if task.parts[0].start == 0:
        os._exit(1)
    time.sleep(STALL_SECONDS)
    return {}


def _stall_after_first_range(task: CountTask) -> dict[str, int]:
    """Stand-in for counting: the first task is counted at once, the others stall.

    Stalled workers are still busy when the test interrupts: only killing them
    makes them go away within the test's wait.
    """
    if task.parts[0].start > 0:
        time.sleep(STALL_SECONDS)
    return {}


def _write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def _train_quietly(
    path: Path, vocab_size: int, specials: list[str], **options: object
) -> tuple[Vocab, Merges, bool]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vocab, merges = train_bpe(path, vocab_size, specials, **options)  # type: ignore[arg-type]
    warned = any(issubclass(w.category, VocabSizeWarning) for w in caught)
    return vocab, merges, warned


def _check_layout(vocab: Vocab, merges: Merges, specials: Sequence[str]) -> None:
    assert sorted(vocab) == list(range(256 + len(specials) + len(merges)))
    assert [vocab[b] for b in range(256)] == [bytes([b]) for b in range(256)]
    assert [vocab[256 + i] for i in range(len(specials))] == [s.encode() for s in specials]
    first_merge = 256 + len(specials)
    assert [vocab[first_merge + i] for i in range(len(merges))] == [a + b for a, b in merges]


# --------------------------------------------------------------------------- the CS336 reference


@pytest.fixture(scope="module")
def reference_merges(
    cs336_file: Callable[[str], Path], gpt2_spelling_decoder: Callable[[str], bytes]
) -> Merges:
    """The 243 reference merges, decoded from GPT-2 spelling by the test's own decoder."""
    lines = cs336_file("train-bpe-reference-merges.txt").read_text(encoding="utf-8").splitlines()
    pairs = [line.split(" ") for line in lines if line]
    return [(gpt2_spelling_decoder(left), gpt2_spelling_decoder(right)) for left, right in pairs]


@pytest.fixture(scope="module")
def reference_vocab_bytes(
    cs336_file: Callable[[str], Path], gpt2_spelling_decoder: Callable[[str], bytes]
) -> set[bytes]:
    """The byte values of the reference vocab."""
    spelled = json.loads(cs336_file("train-bpe-reference-vocab.json").read_text(encoding="utf-8"))
    assert sorted(spelled.values()) == list(range(500))
    return {gpt2_spelling_decoder(token) for token in spelled}


def test_train_bpe_matches_cs336_reference(
    cs336_file: Callable[[str], Path], reference_merges: Merges, reference_vocab_bytes: set[bytes]
) -> None:
    """Guards "The tie-break" (on (left, right) bytes) against the CS336 reference output."""
    vocab, merges = train_bpe(cs336_file("corpus.en"), 500, [EOT], workers=1)
    assert len(reference_merges) == 243
    assert merges == reference_merges
    assert set(vocab) == set(range(500))
    assert set(vocab.values()) == reference_vocab_bytes
    _check_layout(vocab, merges, [EOT])


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("chunk_size", [1000, 20_000, 1 << 22])
def test_reference_is_independent_of_workers_and_chunk_size(
    cs336_file: Callable[[str], Path], reference_merges: Merges, workers: int, chunk_size: int
) -> None:
    """Guards rules 3 and 5: worker count and chunk size never change the merges."""
    vocab, merges = train_bpe(
        cs336_file("corpus.en"), 500, [EOT], workers=workers, chunk_size=chunk_size
    )
    assert merges == reference_merges
    _check_layout(vocab, merges, [EOT])


def test_train_bpe_is_exported_from_the_package() -> None:
    """Guards the public surface: ``streambpe.train_bpe`` is the CS336 adapter entry point."""
    assert streambpe.train_bpe is train_bpe


# --------------------------------------------------------------------------- the naive oracle

# fmt: off
TRAIN_FRAGMENTS = [
    "a", "aa", "aaaa", "aaaaaaa", "ab", "ba", "abab", "b", " a", " b", " ab", "cd", "dc",
    " the", "the", "The", " THE", "hé", "héé", "日本", "語", "🙃", "👍🏽", "👨‍👩‍👧",
    "1", "12", "345", "2024", "  ", "   ", "\n", "\n\n", "\r\n", "\t", "\u00a0", "\u3000",
    "don't", "'S", "'ll", "!", "...",
    EOT, EOT + EOT, "<|endo", "ftext|>", "<s>", "</s>",
]
# fmt: on
SPECIAL_SETS: list[list[str]] = [[], [EOT], [EOT, EOT + EOT], ["<s>", "</s>", EOT]]
train_corpora = (
    st.lists(
        st.one_of(st.sampled_from(TRAIN_FRAGMENTS), st.text(alphabet="abc é🙃1 \n", max_size=4)),
        min_size=1,
        max_size=60,
    )
    .map("".join)
    .filter(bool)
)


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    text=train_corpora,
    specials=st.sampled_from(SPECIAL_SETS),
    pattern_name=st.sampled_from(sorted(PATTERNS)),
    extra=st.integers(0, 60),
    chunk_size=st.sampled_from([1, 5, 64, 1 << 22]),
)
def test_train_bpe_equals_naive_trainer(
    text: str,
    specials: list[str],
    pattern_name: str,
    extra: int,
    chunk_size: int,
    pieces_oracle: PiecesOracle,
) -> None:
    """Guards the incremental merge loop (heap, pair index) against recount-everything BPE."""
    vocab_size = 256 + len(specials) + extra
    expected_vocab, expected_merges = naive_train(
        text, vocab_size, specials, PATTERNS[pattern_name], pieces_oracle
    )
    with tempfile.TemporaryDirectory() as directory:
        path = _write(Path(directory) / "corpus.txt", text)
        vocab, merges, warned = _train_quietly(
            path, vocab_size, specials, pattern=pattern_name, workers=1, chunk_size=chunk_size
        )
    assert merges == expected_merges
    assert vocab == expected_vocab
    assert warned == (len(expected_merges) < extra)


def _seeded_corpus(seed: int, fragments: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(TRAIN_FRAGMENTS) for _ in range(fragments))


@pytest.mark.parametrize("specials", SPECIAL_SETS[1:], ids=["eot", "overlapping", "several"])
def test_workers_and_chunks_agree_with_naive_on_adversarial_corpus(
    specials: list[str], tmp_path: Path, pieces_oracle: PiecesOracle
) -> None:
    """Guards "Determinism" on ties, repeats, scripts and specials: all settings equal the oracle."""
    text = _seeded_corpus(seed=len(specials), fragments=4000)
    path = _write(tmp_path / "corpus.txt", text)
    vocab_size = 256 + len(specials) + 120
    expected = naive_train(text, vocab_size, specials, GPT2, pieces_oracle)
    for workers in (1, 2):
        for chunk_size in (7, 512, 1 << 22):
            got = train_bpe(path, vocab_size, specials, workers=workers, chunk_size=chunk_size)
            assert got == expected, (workers, chunk_size)


def test_special_tokens_are_never_merged(tmp_path: Path) -> None:
    """Guards "Special tokens": no learned token contains or straddles a special token."""
    path = _write(tmp_path / "corpus.txt", ("hi" + EOT) * 500 + " <|endo ftext|>")
    _, merges = train_bpe(path, 265, [EOT], workers=1)
    for left, right in merges:
        assert b"<|endoftext" not in left + right
        assert b"endoftext|>" not in left + right


def test_too_large_vocab_size_warns_and_stops(tmp_path: Path) -> None:
    """Guards VocabSizeWarning: a small corpus yields fewer merges, still a contiguous vocab."""
    path = _write(tmp_path / "corpus.txt", "low lower lowest")
    with pytest.warns(VocabSizeWarning, match="supports only"):
        vocab, merges = train_bpe(path, 1000, [EOT], workers=1)
    assert 0 < len(merges) < 1000 - 257
    _check_layout(vocab, merges, [EOT])


@pytest.mark.parametrize("entry", [train_bpe, streambpe.train_bpe], ids=["module", "package"])
def test_vocab_size_warning_points_at_the_caller(
    tmp_path: Path, entry: Callable[..., object]
) -> None:
    """Guards ``stacklevel``: the warning names the caller's line, not streambpe's own code."""
    path = _write(tmp_path / "corpus.txt", "low lower lowest")
    with pytest.warns(VocabSizeWarning) as caught:
        entry(path, 1000, [EOT], workers=1)
    assert [Path(warning.filename) for warning in caught] == [Path(__file__)]


def test_smallest_vocab_size_has_no_merges(tmp_path: Path) -> None:
    """Guards the boundary: vocab_size == 256 + specials is valid and learns nothing."""
    path = _write(tmp_path / "corpus.txt", "aaaa bbbb")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vocab, merges = train_bpe(path, 257, [EOT], workers=1)
    assert merges == []
    _check_layout(vocab, merges, [EOT])


def test_timings_are_filled(tmp_path: Path) -> None:
    """Guards the timings option: both stages report a non-negative duration."""
    path = _write(tmp_path / "corpus.txt", "the cat sat on the mat " * 50)
    timings: dict[str, float] = {}
    train_bpe(path, 265, [], workers=1, timings=timings)
    assert set(timings) >= {"count_words", "merge"}
    assert all(isinstance(v, float) and v >= 0 for v in timings.values())


# --------------------------------------------------------------------------- the word-count cache


def test_word_count_cache_is_reused(
    cs336_file: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the cache: a second run reads the counts (no counting) and gives the same result."""
    corpus = shutil.copy(cs336_file("corpus.en"), tmp_path / "corpus.en")
    cache_dir = tmp_path / "cache"
    first = train_bpe(corpus, 300, [EOT], workers=1, cache=cache_dir)
    assert any(cache_dir.iterdir())

    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise CacheMissError("counted again although the cache holds these counts")

    monkeypatch.setattr(streambpe.train.trainer, "count_words_in_inputs", refuse)
    assert train_bpe(corpus, 300, [EOT], workers=2, cache=cache_dir) == first
    # Another vocab size reuses the same counts; its merges extend the shorter run's.
    _, longer = train_bpe(corpus, 320, [EOT], workers=1, cache=cache_dir)
    assert longer[: len(first[1])] == first[1]
    # Anything counting depends on is part of the key: each of these must miss.
    with pytest.raises(CacheMissError):
        train_bpe(corpus, 300, [EOT, "<s>"], workers=1, cache=cache_dir)
    with pytest.raises(CacheMissError):
        train_bpe(corpus, 300, [EOT], pattern="cl100k", workers=1, cache=cache_dir)
    with open(corpus, "ab") as file:
        file.write(b" one more line")
    with pytest.raises(CacheMissError):
        train_bpe(corpus, 300, [EOT], workers=1, cache=cache_dir)


def test_cache_true_uses_the_default_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards ``cache=True``: entries go to $STREAMBPE_CACHE_DIR and give identical results."""
    monkeypatch.setenv("STREAMBPE_CACHE_DIR", str(tmp_path / "default-cache"))
    path = _write(tmp_path / "corpus.txt", "abc abd abe " * 100)
    uncached = train_bpe(path, 262, [], workers=1)
    assert train_bpe(path, 262, [], workers=1, cache=True) == uncached
    assert any((tmp_path / "default-cache").iterdir())
    assert train_bpe(path, 262, [], workers=1, cache=True) == uncached


# --------------------------------------------------------------------------- errors


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    """Guards "Errors lose nothing": a missing input raises FileNotFoundError naming it."""
    missing = tmp_path / "nope" / "corpus.txt"
    with pytest.raises(FileNotFoundError, match=r"corpus\.txt") as info:
        train_bpe(missing, 300, [EOT])
    assert str(missing) in str(info.value)


def test_empty_file_is_rejected(tmp_path: Path) -> None:
    """Guards "Errors lose nothing": an empty corpus is an error, not an empty vocabulary."""
    path = _write(tmp_path / "empty.txt", b"")
    with pytest.raises(ValueError, match="empty"):
        train_bpe(path, 300, [EOT])


def test_directory_is_rejected(tmp_path: Path) -> None:
    """Guards "Errors lose nothing": a directory is not a corpus."""
    with pytest.raises(IsADirectoryError, match="directory"):
        train_bpe(tmp_path, 300, [EOT])


@pytest.mark.parametrize(
    ("vocab_size", "specials"), [(255, []), (256, [EOT]), (0, []), (257, ["a", "b"])]
)
def test_vocab_size_below_bytes_and_specials(
    tmp_path: Path, vocab_size: int, specials: list[str]
) -> None:
    """Guards "Errors lose nothing": too small a vocab_size says the minimum."""
    path = _write(tmp_path / "corpus.txt", "hello")
    with pytest.raises(ValueError, match=f"use vocab_size={256 + len(specials)}"):
        train_bpe(path, vocab_size, specials)


@pytest.mark.parametrize(
    ("specials", "error"),
    [([""], ValueError), ([EOT, EOT], ValueError), (EOT, TypeError)],
)
def test_bad_special_tokens(tmp_path: Path, specials: object, error: type[Exception]) -> None:
    """Guards "Errors lose nothing": empty, duplicate or a bare string of special tokens is refused."""
    path = _write(tmp_path / "corpus.txt", "hello")
    with pytest.raises(error):
        train_bpe(path, 300, specials)  # type: ignore[arg-type]


def _bad_utf8_corpus() -> tuple[bytes, int, int]:
    """A corpus with two invalid bytes far apart; returns it and both offsets."""
    head = "hello wörld, lots of text here. ".encode() * 400
    middle = b" and more text after the first bad byte " * 100
    data = head + b"\xff" + middle + b"\xc3" + b" tail"
    return data, len(head), len(head) + 1 + len(middle)


@pytest.mark.parametrize("workers", [1, 2])
def test_invalid_utf8_reports_the_file_offset(tmp_path: Path, workers: int) -> None:
    """Guards "Errors lose nothing": the offset is the first bad byte's offset in the file, not in a chunk."""
    data, first_bad, _ = _bad_utf8_corpus()
    path = _write(tmp_path / "bad.txt", data)
    with pytest.raises(InvalidUTF8Error) as info:
        train_bpe(path, 300, [EOT], workers=workers, chunk_size=256)
    assert info.value.byte_offset == first_bad
    assert info.value.path == str(path)
    assert str(first_bad) in str(info.value)
    assert "errors='replace'" in str(info.value)


def test_invalid_utf8_truncated_at_end_of_file(tmp_path: Path) -> None:
    """Guards a character cut off by the end of the file (in the last of many chunks)."""
    data = "été ".encode() * 300 + "日".encode()[:2]
    path = _write(tmp_path / "bad.txt", data)
    with pytest.raises(InvalidUTF8Error) as info:
        train_bpe(path, 300, [], workers=2, chunk_size=64)
    assert info.value.byte_offset == len(data) - 2


def test_errors_replace_trains_on_replacement_characters(
    tmp_path: Path, pieces_oracle: PiecesOracle
) -> None:
    """Guards errors='replace': bad bytes become U+FFFD, whatever the chunking."""
    data, _, _ = _bad_utf8_corpus()
    path = _write(tmp_path / "bad.txt", data)
    expected = naive_train(data.decode("utf-8", "replace"), 300, [EOT], GPT2, pieces_oracle)
    for workers in (1, 2):
        assert (
            train_bpe(path, 300, [EOT], workers=workers, chunk_size=256, errors="replace")
            == expected
        )


def test_unknown_errors_policy_is_refused(tmp_path: Path) -> None:
    """Guards the errors option: only 'strict' and 'replace' exist."""
    path = _write(tmp_path / "corpus.txt", "hello")
    with pytest.raises(ValueError, match="errors"):
        train_bpe(path, 300, [], errors="ignore")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- crashes and Ctrl-C


def test_dead_worker_raises_worker_error_and_leaves_no_children(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards "Errors lose nothing": a worker killed mid-task becomes WorkerError; no process is orphaned."""
    path = _write(tmp_path / "corpus.txt", "some words to count " * 2000)
    before = child_pids()
    monkeypatch.setattr(streambpe.train.counting, "run_count_task", _crash_on_first_range)
    started = time.monotonic()
    with pytest.raises(WorkerError, match="worker"):
        train_bpe(path, 300, [EOT], workers=2, chunk_size=1024)
    assert new_children(before, timeout=5.0) == set()
    assert time.monotonic() - started < STALL_SECONDS / 2


def test_keyboard_interrupt_propagates_and_leaves_no_children(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards Ctrl-C: KeyboardInterrupt reaches the caller and the pool's workers are gone."""
    path = _write(tmp_path / "corpus.txt", "some words to count " * 2000)
    before = child_pids()

    def interrupt(total: object, part: object) -> NoReturn:
        raise KeyboardInterrupt

    monkeypatch.setattr(streambpe.train.counting, "run_count_task", _stall_after_first_range)
    monkeypatch.setattr(streambpe.train.counting, "add_word_counts", interrupt)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        train_bpe(path, 300, [EOT], workers=2, chunk_size=1024)
    assert new_children(before, timeout=5.0) == set()
    assert time.monotonic() - started < STALL_SECONDS / 2
