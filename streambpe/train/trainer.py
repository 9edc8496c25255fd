"""``train_bpe``: train a byte-level BPE vocabulary on files of any size, or on an iterator.

The steps, each in its own module: resolve the inputs (:mod:`streambpe.sources`),
plan counting tasks from their sizes (:mod:`~streambpe.train.count_tasks`),
count words on a pool or a cluster (:mod:`~streambpe.train.counting`, optionally
cached by :mod:`~streambpe.train.count_cache`), then learn merges on the caller
with the active backend's merge loop (:mod:`streambpe.core`).

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
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor
from pathlib import Path

from streambpe import core
from streambpe._support.pool import resolve_workers
from streambpe._support.progress import ProgressReporter, as_reporter, awaitable_in_thread
from streambpe._support.renames import renamed_keyword, user_stacklevel
from streambpe._support.utf8 import DecodeErrors, check_errors_policy
from streambpe.cutting.specials import validate_special_tokens
from streambpe.errors import ParameterError, VocabSizeWarning
from streambpe.patterns import resolve_pattern
from streambpe.sources.inputs import InputFile, Inputs, resolve_inputs
from streambpe.train.count_cache import WordCountCache, fingerprint_inputs
from streambpe.train.count_tasks import (
    DEFAULT_CHUNK_SIZE,
    CountSettings,
    InputFormat,
    batch_count_tasks,
)
from streambpe.train.counting import WordCounts, count_words, count_words_in_inputs
from streambpe.train.options import CacheKey, TrainOptions

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
    files: list[InputFile], options: TrainOptions, reporter: ProgressReporter
) -> WordCounts:
    store: WordCountCache | None = None
    key = ""
    if options.cache is not False:
        store = WordCountCache(None if options.cache is True else Path(options.cache))
        key = fingerprint_inputs(
            files,
            pattern=options.count.pattern,
            special_tokens=options.count.special_tokens,
            errors=options.count.errors,
            reading=(options.input_format, options.text_field),
            key=options.cache_key,
        )
        cached = store.load(key)
        if cached is not None:
            return cached
    with reporter.stage("counting", total=sum(f.size for f in files), unit="B") as advance:
        counts = count_words_in_inputs(files, options, progress_callback=advance)
    if store is not None:
        store.store(key, counts)
    return counts


def _learn_merges(
    word_counts: WordCounts,
    specials: list[str],
    max_merges: int,
    vocab_size: int,
    *,
    corpus: str,
    reporter: ProgressReporter,
) -> tuple[Vocab, Merges]:
    """The merge loop on the caller, then the vocabulary; warns if the corpus runs out of pairs."""
    learn_merges = core.active_backend().learn_merges
    with reporter.stage("merging", total=max_merges, unit="merge") as advance:
        # The merge loop empties word_counts as it reads them: one copy of the words.
        merges = learn_merges(word_counts, max_merges, lambda: advance(1))
    if len(merges) < max_merges:
        reached = N_BYTE_TOKENS + len(specials) + len(merges)
        warnings.warn(
            f"{corpus}: the corpus supports only {len(merges)} merges, so the vocabulary has "
            f"{reached} tokens instead of the requested {vocab_size}",
            VocabSizeWarning,
            stacklevel=user_stacklevel(),
        )
    return build_vocab(specials, merges), merges


def _describe(files: list[InputFile]) -> str:
    return (
        files[0].location if len(files) == 1 else f"{files[0].location} and {len(files) - 1} more"
    )


@renamed_keyword("input_path", "inputs")
def train_bpe(
    inputs: Inputs,
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    pattern: str = "gpt2",
    workers: int | None = None,
    executor: Executor | None = None,
    tasks: int | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    errors: DecodeErrors = "strict",
    input_format: InputFormat = "auto",
    text_field: str = "text",
    cache: bool | str | os.PathLike[str] = False,
    cache_key: CacheKey = "metadata",
    progress: bool | ProgressReporter = False,
    timings: dict[str, float] | None = None,
) -> tuple[Vocab, Merges]:
    """Train a byte-level BPE tokenizer on UTF-8 text: one file, a list, a glob, or URLs.

    Each file is its own stream: no piece spans two files, so training on a
    list gives the result of training on the files joined by a special token.

    Args:
        inputs: a path, a list of paths, a glob (``"data/*.txt"``), or fsspec URLs
            (``"s3://bucket/shard-*.jsonl"``, needs ``streambpe[remote]``). Special
            tokens in the text separate documents. (``input_path=``, the CS336
            name, is its old keyword: it still works, with a ``DeprecationWarning``.)
        vocab_size: the number of ids wanted, bytes and special tokens included.
        special_tokens: strings that are never split or merged (e.g. ``"<|endoftext|>"``).
        pattern: ``"gpt2"`` (default), ``"cl100k"``, ``"o200k"``, or a regex of your own.
            Long documents are cut between chunks only under the three named patterns.
        workers: processes that count words; ``None`` means one per core.
        executor: any ``concurrent.futures.Executor`` to run the counting on instead: a
            Dask ``client.get_executor()``, a :class:`~streambpe.RayExecutor`, a pool.
        tasks: how many counting tasks to make; by default twice the executor's
            workers (or ``workers``). Results never depend on it.
        chunk_size: bytes read and decoded at a time inside a task (results never
            depend on it): the quantity ``encode_file``'s ``chunk_size`` names, with a
            larger default because a counting task spans many chunks
            (:mod:`~streambpe.streaming.options` says why encoding's is smaller).
        errors: ``"strict"`` raises :class:`~streambpe.errors.InvalidUTF8Error` naming the
            byte offset; ``"replace"`` substitutes U+FFFD for invalid bytes.
        input_format: ``"auto"`` (by suffix: ``.jsonl``/``.ndjson``, ``.parquet``, else
            text), ``"text"``, ``"jsonl"`` or ``"parquet"`` (needs ``streambpe[parquet]``).
            In jsonl and parquet every record's ``text_field`` is one document.
        text_field: the jsonl field or parquet column holding the text.
        cache: reuse word counts across runs: ``True`` for the default cache directory,
            or a directory. Off by default.
        cache_key: ``"metadata"`` keys the cache on each file's location, size and
            modification time (or ETag), reading nothing; ``"content"`` hashes every byte.
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
    check_errors_policy(errors)
    options = TrainOptions(
        CountSettings(resolve_pattern(pattern), tuple(specials), errors, chunk_size),
        workers=resolve_workers(workers),
        executor=executor,
        tasks=tasks,
        input_format=input_format,
        text_field=text_field,
        cache=cache,
        cache_key=cache_key,
    )
    # Resolved here, once: everything below takes the resolved files.
    files = resolve_inputs(inputs)
    reporter = as_reporter(progress)

    started = time.perf_counter()
    word_counts = _count_with_cache(files, options, reporter)
    counted = time.perf_counter()
    result = _learn_merges(
        word_counts, specials, max_merges, vocab_size, corpus=_describe(files), reporter=reporter
    )
    if timings is not None:
        timings["count_words"] = counted - started
        timings["merge"] = time.perf_counter() - counted
    return result


def train_bpe_from_iterator(
    texts: Iterable[str],
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    pattern: str = "gpt2",
    workers: int | None = None,
    executor: Executor | None = None,
    batch_size: int = DEFAULT_CHUNK_SIZE,
    progress: bool | ProgressReporter = False,
    timings: dict[str, float] | None = None,
) -> tuple[Vocab, Merges]:
    """Train on an iterable of strings, each one a document (a ``datasets`` column, a generator).

    The result equals :func:`train_bpe` on a file of the same documents joined
    by a special token. The iterable is read once, in batches of about
    ``batch_size`` characters that are counted in the pool (or on ``executor``)
    while the next ones are read; only a few batches are out at a time, so
    memory stays bounded however long the iterable is.

    >>> texts = ["low low lower", "newest widest"]
    >>> vocab, merges = train_bpe_from_iterator(texts, 258, ["<|endoftext|>"], workers=1)
    >>> merges
    [(b'o', b'w')]
    """
    specials = validate_special_tokens(special_tokens)
    max_merges = check_vocab_size(vocab_size, specials)
    if isinstance(texts, str | bytes):
        raise TypeError("texts must be an iterable of strings, not a single string")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ParameterError(f"batch_size must be an int of at least 1, got {batch_size!r}")
    settings = CountSettings(resolve_pattern(pattern), tuple(specials))
    reporter = as_reporter(progress)

    started = time.perf_counter()
    with reporter.stage("counting", total=None, unit="char") as advance:
        word_counts = count_words(
            batch_count_tasks(texts, settings=settings, batch_chars=batch_size),
            workers=resolve_workers(workers),
            executor=executor,
            progress_callback=advance,
        )
    counted = time.perf_counter()
    result = _learn_merges(
        word_counts, specials, max_merges, vocab_size, corpus="texts", reporter=reporter
    )
    if timings is not None:
        timings["count_words"] = counted - started
        timings["merge"] = time.perf_counter() - counted
    return result


atrain_bpe = awaitable_in_thread(
    train_bpe,
    name="atrain_bpe",
    doc="""Async :func:`train_bpe`: same arguments, same result; cancellable between steps.

    The work runs in a worker thread, so the event loop stays free; cancelling
    the awaiting task stops the counting at the next finished task: every
    counting task not yet started is cancelled (on the local pool or the
    caller's executor) before this returns.
    """,
)
