"""Async encoding (anyio: runs under asyncio and trio).

:func:`aencode_iterable` yields *batches* of ids (``list[int]``), one per block
of text that could be encoded, because one ``await`` per id would cost more
than the encoding itself; :func:`flatten` turns batches into single ids.

The CPU work runs in a worker thread, in slices of at most
:data:`SLICE_CHARS` characters, so the event loop gets the GIL back every few
milliseconds. Reading stops while the consumer is not asking for more
(backpressure), so memory stays bounded. The ids equal
``tokenizer.encode(whole_text)`` whatever the chunking.

>>> import anyio
>>> from streambpe.tokenizer import Tokenizer
>>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
>>> async def main():
...     return [i async for i in flatten(aencode_iterable(tok, ["a\\n", "\\n b"]))]
>>> anyio.run(main) == tok.encode("a\\n\\n b")
True
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread

from streambpe._support.progress import Advance, ProgressReporter, as_reporter
from streambpe.cutting.splitter import StreamSplitter

if TYPE_CHECKING:
    from streambpe.streaming.file_encoding import EncodeStats
    from streambpe.tokenizer import Tokenizer
    from streambpe.train.trainer import Merges, Vocab

#: Largest text slice encoded in one call: a few milliseconds of GIL-holding work.
SLICE_CHARS = 64 * 1024
#: Text handed to the worker thread per hop (a hop costs far more under trio than asyncio).
BATCH_CHARS = 256 * 1024
#: Most items pulled from a synchronous source per hop.
SYNC_GROUP = 4096

ItemT = TypeVar("ItemT")


def _take_group(iterator: Iterator[str]) -> tuple[str, bool]:
    """Up to SYNC_GROUP items or about BATCH_CHARS characters, joined; and whether the source ended."""
    group: list[str] = []
    size = 0
    for item in iterator:
        group.append(item)
        size += len(item)
        if size >= BATCH_CHARS or len(group) >= SYNC_GROUP:
            return "".join(group), False
    return "".join(group), True


def _slices(text: str) -> Iterator[str]:
    for start in range(0, len(text), SLICE_CHARS):
        yield text[start : start + SLICE_CHARS]


def _encode_ready(tokenizer: Tokenizer, splitter: StreamSplitter, text: str) -> list[int]:
    """Feed ``text`` to ``splitter`` and encode whatever it releases (runs in a worker thread).

    Feeding in slices keeps every ``encode`` call to a few milliseconds of
    GIL-holding C code, so the event loop's thread gets the GIL back often.
    """
    ids: list[int] = []
    for piece in _slices(text):
        ready = splitter.feed(piece)
        if ready:
            ids += tokenizer.encode(ready)
    return ids


def _encode_last(tokenizer: Tokenizer, splitter: StreamSplitter, text: str) -> list[int]:
    """Encode the last text and the stream's tail, re-cut the same way (runs in a worker thread)."""
    ids = _encode_ready(tokenizer, splitter, text)
    tail = tokenizer.stream_splitter()
    ids += _encode_ready(tokenizer, tail, splitter.finish())
    rest = tail.finish()
    if rest:
        ids += tokenizer.encode(rest)
    return ids


def _read_and_encode(
    tokenizer: Tokenizer, splitter: StreamSplitter, iterator: Iterator[str]
) -> tuple[list[int], bool]:
    # A sync source may block, so it is read in the worker thread, with the encoding.
    text, ended = _take_group(iterator)
    if ended:
        return _encode_last(tokenizer, splitter, text), True
    return _encode_ready(tokenizer, splitter, text), False


async def aencode_iterable(
    tokenizer: Tokenizer, source: AsyncIterable[str] | Iterable[str]
) -> AsyncIterator[list[int]]:
    """Encode an async (or sync) stream of text chunks; yields lists of ids in order.

    The source is read only as fast as batches are consumed: while the consumer
    holds a batch, nothing more is read.
    """
    splitter = tokenizer.stream_splitter()
    if not isinstance(source, AsyncIterable):
        iterator = iter(source)
        ended = False
        while not ended:
            ids, ended = await anyio.to_thread.run_sync(
                _read_and_encode, tokenizer, splitter, iterator
            )
            if ids:
                yield ids
        return
    pending: list[str] = []
    pending_size = 0
    async for chunk in source:
        pending.append(chunk)
        pending_size += len(chunk)
        if pending_size >= BATCH_CHARS:
            text = "".join(pending)
            pending.clear()
            pending_size = 0
            ids = await anyio.to_thread.run_sync(_encode_ready, tokenizer, splitter, text)
            if ids:
                yield ids
    ids = await anyio.to_thread.run_sync(_encode_last, tokenizer, splitter, "".join(pending))
    if ids:
        yield ids


async def flatten(batches: AsyncIterable[list[ItemT]]) -> AsyncIterator[ItemT]:
    """Yield the items of each batch in turn.

    >>> async def two():
    ...     yield [1, 2]
    ...     yield [3]
    >>> async def main():
    ...     return [item async for item in flatten(two())]
    >>> anyio.run(main)
    [1, 2, 3]
    """
    async for batch in batches:
        for item in batch:
            yield item


class _CancellableProgress:
    """Wraps a reporter so every progress step checks for cancellation of the awaiting task."""

    def __init__(self, inner: ProgressReporter) -> None:
        self.inner = inner

    @contextmanager
    def stage(self, name: str, *, total: int | None, unit: str) -> Iterator[Advance]:
        with self.inner.stage(name, total=total, unit=unit) as advance:

            def step(amount: int) -> None:
                # Raises the host task's cancellation inside the worker thread,
                # which unwinds the pool and removes the temporary output.
                anyio.from_thread.check_cancelled()
                advance(amount)

            yield step


async def aencode_file(
    tokenizer: Tokenizer,
    input_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
    *,
    progress: bool | ProgressReporter = False,
    **options: Any,
) -> EncodeStats:
    """Async :func:`~streambpe.streaming.file_encoding.encode_file`: same options, same result.

    Cancelling the awaiting task stops the workers and leaves no output file.
    """
    from streambpe.streaming.file_encoding import encode_file

    reporter = _CancellableProgress(as_reporter(progress))
    return await anyio.to_thread.run_sync(
        partial(encode_file, tokenizer, input_path, output_path, progress=reporter, **options)
    )


async def atrain_bpe(
    input_path: str | os.PathLike[str],
    vocab_size: int,
    special_tokens: list[str] | None = None,
    *,
    progress: bool | ProgressReporter = False,
    **options: Any,
) -> tuple[Vocab, Merges]:
    """Async :func:`~streambpe.train.trainer.train_bpe`: same options, cancellable between steps."""
    from streambpe.train.trainer import train_bpe

    reporter = _CancellableProgress(as_reporter(progress))
    return await anyio.to_thread.run_sync(
        partial(train_bpe, input_path, vocab_size, special_tokens, progress=reporter, **options)
    )
