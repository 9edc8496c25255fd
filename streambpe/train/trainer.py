"""``train_bpe``: train a byte-level BPE vocabulary on a file of any size.

The steps, each in its own module: cut the file into byte ranges
(:mod:`~streambpe.cutting.byte_ranges`), count words in worker processes
(:mod:`~streambpe.train.counting`, optionally cached by :mod:`~streambpe.train.count_cache`),
then learn merges with the active backend's merge loop (:mod:`streambpe.core`).

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
from functools import partial
from pathlib import Path

import anyio.to_thread

from streambpe import core
from streambpe._support.inputs import check_input_file
from streambpe._support.pool import resolve_workers
from streambpe._support.progress import CancellableProgress, ProgressReporter, as_reporter
from streambpe._support.utf8 import DecodeErrors, check_errors_policy
from streambpe.cutting.specials import validate_special_tokens
from streambpe.errors import ParameterError, VocabSizeWarning
from streambpe.patterns import resolve_pattern
from streambpe.train.count_cache import WordCountCache, fingerprint_file
from streambpe.train.counting import DEFAULT_CHUNK_SIZE, WordCounts, count_words_in_file

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]

N_BYTE_TOKENS = 256


def check_vocab_size(vocab_size: int, special_tokens: Sequence[str]) -> int:
    """Return how many merges ``vocab_size`` leaves room for; raise if it is too small.

    >>> check_vocab_size(300, ["<|endoftext|>"])
    43
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError(f"vocab_size must be an int, got {vocab_size!r}")
    minimum = N_BYTE_TOKENS + len(special_tokens)
    if vocab_size < minimum:
        raise ParameterError(
            f"vocab size {vocab_size} is too small: the {N_BYTE_TOKENS} byte tokens and "
            f"{len(special_tokens)} special token(s) alone need {minimum} (or more)",
            fix=("vocab_size", str(minimum)),
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
    check_errors_policy(errors)
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
    learn_merges = core.active_backend().learn_merges
    with reporter.stage("merging", total=max_merges, unit="merge") as advance:
        # The merge loop empties text_counts as it reads them: one copy of the words.
        merges = learn_merges(text_counts, max_merges, lambda: advance(1))
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


async def atrain_bpe(
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
) -> tuple[Vocab, Merges]:
    """Async :func:`train_bpe`: same arguments, same result; cancellable between steps.

    The work runs in a worker thread, so the event loop stays free; cancelling
    the awaiting task stops the worker processes at the next progress step.
    """
    return await anyio.to_thread.run_sync(
        partial(
            train_bpe,
            input_path,
            vocab_size,
            special_tokens,
            pattern=pattern,
            workers=workers,
            executor=executor,
            chunk_size=chunk_size,
            errors=errors,
            cache=cache,
            progress=CancellableProgress(as_reporter(progress)),
        )
    )
