"""``train_bpe``: train a byte-level BPE vocabulary on a file of any size.

The steps, each in its own module: cut the file into byte ranges
(:mod:`~streambpe.cutting.chunks`), count pieces in worker processes
(:mod:`~streambpe.train.counting`, optionally cached by :mod:`~streambpe.train.count_cache`),
then learn merges (:mod:`~streambpe.core.merge_loop`).

Vocabulary layout: ids 0-255 are the single bytes, then the special tokens in
the order given, then one id per merge in creation order; ids are exactly
``0 .. len(vocab) - 1``.

>>> import pathlib, tempfile
>>> corpus = pathlib.Path(tempfile.mkdtemp()) / "corpus.txt"
>>> _ = corpus.write_text("low low lower<|endoftext|>newest widest")
>>> vocab, merges = train_bpe(corpus, 259, ["<|endoftext|>"], workers=1)
>>> vocab[256], merges
(b'<|endoftext|>', [(b'o', b'w'), (b'l', b'ow')])
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import Executor
from pathlib import Path

from streambpe.train.count_cache import WordCountCache, fingerprint_file
from streambpe.train.counting import (
    DEFAULT_CHUNK_SIZE,
    DecodeErrors,
    WordCounts,
    count_words_in_file,
)
from streambpe._support.inputs import check_input_file
from streambpe.core.merge_loop import learn_merges_from_words
from streambpe.patterns import resolve_pattern
from streambpe._support.pool import resolve_workers
from streambpe._support.progress import ProgressReporter, as_reporter
from streambpe.cutting.specials import validate_special_tokens

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]

N_BYTE_TOKENS = 256


class VocabSizeWarning(UserWarning):
    """The corpus ran out of pairs before ``vocab_size`` was reached."""


def check_vocab_size(vocab_size: int, special_tokens: Sequence[str]) -> int:
    """Return how many merges ``vocab_size`` leaves room for; raise if it is too small.

    >>> check_vocab_size(300, ["<|endoftext|>"])
    43
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError(f"vocab_size must be an int, got {vocab_size!r}")
    minimum = N_BYTE_TOKENS + len(special_tokens)
    if vocab_size < minimum:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: the {N_BYTE_TOKENS} byte tokens and "
            f"{len(special_tokens)} special token(s) alone need {minimum}; "
            f"pass vocab_size >= {minimum}"
        )
    return vocab_size - minimum


def build_vocab(special_tokens: Sequence[str], merges: Merges) -> Vocab:
    """Bytes first, then special tokens, then merged tokens in creation order.

    >>> build_vocab(["<s>"], [(b"a", b"b")])[257]
    b'ab'
    """
    vocab: Vocab = {byte: bytes([byte]) for byte in range(N_BYTE_TOKENS)}
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    for left, right in merges:
        vocab[len(vocab)] = left + right
    return vocab


def _byte_words(text_counts: WordCounts) -> tuple[list[list[int]], list[int]]:
    """Spell each word as a list of byte values, emptying ``text_counts`` as it goes.

    Single-byte words are dropped: they hold no pair. Popping keeps peak memory
    near one copy of the words rather than two.
    """
    words: list[list[int]] = []
    counts: list[int] = []
    while text_counts:
        word, count = text_counts.popitem()
        spelled = list(word.encode("utf-8"))
        if len(spelled) > 1:
            words.append(spelled)
            counts.append(count)
    return words, counts


def _count_with_cache(
    path: Path,
    *,
    pattern: str,
    special_tokens: list[str],
    workers: int,
    executor: Executor | None,
    chunk_size: int,
    errors: DecodeErrors,
    cache: bool | str | os.PathLike[str],
    reporter: ProgressReporter,
) -> WordCounts:
    store: WordCountCache | None = None
    key = ""
    if cache is not False:
        store = WordCountCache(None if cache is True else Path(cache))
        key = fingerprint_file(path, pattern=pattern, special_tokens=special_tokens, errors=errors)
        cached = store.load(key)
        if cached is not None:
            return cached
    with reporter.stage("counting", total=path.stat().st_size, unit="B") as advance:
        counts = count_words_in_file(
            path,
            pattern=pattern,
            special_tokens=special_tokens,
            workers=workers,
            executor=executor,
            chunk_size=chunk_size,
            errors=errors,
            progress_callback=advance,
        )
    if store is not None:
        store.store(key, counts)
    return counts


def train_bpe(
    input_path: str | os.PathLike[str],
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    pattern: str = "gpt2",
    workers: int | None = None,
    executor: Executor | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    errors: DecodeErrors = "strict",
    cache: bool | str | os.PathLike[str] = False,
    progress: bool | ProgressReporter = False,
    timings: dict[str, float] | None = None,
) -> tuple[Vocab, Merges]:
    """Train a byte-level BPE tokenizer on the UTF-8 text file ``input_path``.

    Args:
        input_path: the training text; special tokens in it separate documents.
        vocab_size: the number of ids wanted, bytes and special tokens included.
        special_tokens: strings that are never split or merged (e.g. ``"<|endoftext|>"``).
        pattern: ``"gpt2"`` (default), ``"cl100k"``, ``"o200k"``, or a regex of your own.
            Long documents are cut between chunks only under the three named patterns.
        workers: processes that count words; ``None`` means one per core.
        executor: any ``concurrent.futures.Executor`` to run the counting on instead.
        chunk_size: bytes per counting task (results never depend on it).
        errors: ``"strict"`` raises :class:`~streambpe.errors.InvalidUTF8Error` naming the
            byte offset; ``"replace"`` substitutes U+FFFD for invalid bytes.
        cache: reuse word counts across runs: ``True`` for the default cache directory,
            or a directory. Off by default.
        progress: ``True`` shows a bar on stderr; or pass a reporter.
        timings: if given, filled with the seconds spent in ``count_words`` and ``merge``.

    Returns:
        ``(vocab, merges)``: ``vocab`` maps ids ``0..vocab_size-1`` to token bytes;
        ``merges`` lists the merged pairs in creation order.

    Warns:
        VocabSizeWarning: the corpus supports fewer merges than requested.
    """
    specials = validate_special_tokens(special_tokens)
    max_merges = check_vocab_size(vocab_size, specials)
    resolved_pattern = resolve_pattern(pattern)
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
    path = check_input_file(input_path)
    reporter = as_reporter(progress)

    started = time.perf_counter()
    text_counts = _count_with_cache(
        path,
        pattern=resolved_pattern,
        special_tokens=specials,
        workers=resolve_workers(workers),
        executor=executor,
        chunk_size=chunk_size,
        errors=errors,
        cache=cache,
        reporter=reporter,
    )
    counted = time.perf_counter()
    words, counts = _byte_words(text_counts)
    with reporter.stage("merging", total=max_merges, unit="merge") as advance:
        merges = learn_merges_from_words(words, counts, max_merges, on_merge=lambda: advance(1))
    if timings is not None:
        timings["count_words"] = counted - started
        timings["merge"] = time.perf_counter() - counted
    if len(merges) < max_merges:
        reached = N_BYTE_TOKENS + len(specials) + len(merges)
        warnings.warn(
            f"{path}: the corpus supports only {len(merges)} merges, so the vocabulary has "
            f"{reached} tokens instead of the requested {vocab_size}",
            VocabSizeWarning,
            stacklevel=2,
        )
    return build_vocab(specials, merges), merges
