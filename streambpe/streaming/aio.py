"""Async encoding (anyio: runs under asyncio and trio).

:func:`aiter_id_batches` (also named :func:`aencode_iterable`, the name the
README advertises) yields *batches* of ids (``list[int]``), one per block of
text that could be encoded, because one ``await`` per id would cost more
than the encoding itself; :func:`flatten` turns batches into single ids. It
is the async twin of ``Encoder.iter_id_batches``, not of ``encode_iterable``
(which yields single ids).

The CPU work runs in a worker thread, a batch of about :data:`BATCH_CHARS`
characters at a time, and the event loop gets the GIL back every few
milliseconds (see :func:`_encode_ready`). An async source is read on the
loop one batch ahead: the next batch waits in the worker's queue while the
current one is encoded, so the worker goes from batch to batch without
waiting for the loop. Reading stops while the consumer is not asking for
more (backpressure), so memory stays bounded. The ids equal
``encoder.encode(whole_text)`` whatever the chunking.

>>> import anyio
>>> from streambpe.encode.encoder import Encoder
>>> encoder = Encoder({i: bytes([i]) for i in range(256)}, {})
>>> async def main():
...     return [i async for i in flatten(aiter_id_batches(encoder, ["a\\n", "\\n b"]))]
>>> anyio.run(main) == encoder.encode("a\\n\\n b")
True
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from streambpe._support.progress import awaitable_in_thread
from streambpe.cutting.splitter import StreamSplitter, bounded_chunks
from streambpe.encode.encoder import Encoder
from streambpe.streaming.file_encoding import encode_file

#: Largest text slice a GIL-holding kernel encodes in one call: a few milliseconds of work.
SLICE_CHARS = 64 * 1024
#: Text handed to the worker thread per hop (a hop costs far more under trio than asyncio).
BATCH_CHARS = 256 * 1024
#: Most items pulled from a synchronous source per hop.
SYNC_GROUP = 4096

ItemT = TypeVar("ItemT")


def _take_group(iterator: Iterator[str]) -> tuple[list[str], bool]:
    """Up to SYNC_GROUP items or about BATCH_CHARS characters; and whether the source ended."""
    group: list[str] = []
    size = 0
    for item in iterator:
        group.append(item)
        size += len(item)
        if size >= BATCH_CHARS or len(group) >= SYNC_GROUP:
            return group, False
    return group, True


def _slices(text: str) -> Iterator[str]:
    for start in range(0, len(text), SLICE_CHARS):
        yield text[start : start + SLICE_CHARS]


def _encode_ready(encoder: Encoder, splitter: StreamSplitter, chunks: list[str]) -> list[int]:
    """Feed ``chunks`` to ``splitter`` and encode whatever it releases (runs in a worker thread).

    The event loop's thread needs the GIL back every few milliseconds. The
    compiled kernel (``encoder.releases_gil``) gives it back by itself: it
    holds the GIL only to hand over each block of ids, about a millisecond at
    a time, and encodes without it for milliseconds in between, so the whole
    batch goes in one call (measured: the loop's longest pause stays under
    10 ms, also with another process busy on the second core). Slicing the
    batch and handing the GIL over after each slice, as below, cost it a
    tenth of its time.

    Any other kernel holds the GIL throughout, so the batch is fed in slices
    that each take a few milliseconds, and each slice ends by handing the
    GIL over (``sleep(0)``).
    """
    ids: list[int] = []
    if encoder.releases_gil:
        # The splitter joins the chunks with its own buffered tail: one copy, not two.
        encoder.encode_into(splitter.feed_all(chunks), ids)
        return ids
    for piece in _slices("".join(chunks)):
        ready = splitter.feed(piece)
        if ready:
            encoder.encode_into(ready, ids)
        time.sleep(0)
    return ids


def _encode_last(encoder: Encoder, splitter: StreamSplitter, chunks: list[str]) -> list[int]:
    """Encode the last chunks and the stream's tail, re-cut the same way (runs in a worker thread)."""
    ids = _encode_ready(encoder, splitter, chunks)
    tail = encoder.stream_splitter()
    ids += _encode_ready(encoder, tail, [splitter.finish()])
    encoder.encode_into(tail.finish(), ids)
    return ids


def _read_and_encode(
    encoder: Encoder, splitter: StreamSplitter, iterator: Iterator[str]
) -> tuple[list[int], bool]:
    # A sync source may block, so it is read in the worker thread, with the encoding.
    chunks, ended = _take_group(iterator)
    if ended:
        return _encode_last(encoder, splitter, chunks), True
    return _encode_ready(encoder, splitter, chunks), False


async def aiter_id_batches(
    encoder: Encoder, source: AsyncIterable[str] | Iterable[str]
) -> AsyncIterator[list[int]]:
    """Encode an async (or sync) stream of text chunks; yields *batches* of ids in order.

    The source is read only as fast as batches are consumed: the first ids
    come once one batch is read, later ones with at most one more batch read,
    and while the consumer holds a batch, nothing more is read.
    """
    splitter = encoder.stream_splitter()
    # A huge chunk goes to the worker a batch at a time: the first ids then
    # wait for one batch's encoding, not the whole chunk's.
    if not isinstance(source, AsyncIterable):
        iterator = bounded_chunks(source, BATCH_CHARS)
        ended = False
        while not ended:
            ids, ended = await anyio.to_thread.run_sync(
                _read_and_encode, encoder, splitter, iterator
            )
            if ids:
                yield ids
        return
    # A thread of its own encodes the batches in the order they are queued,
    # each continuing the splitter's state from the one before.
    worker = ThreadPoolExecutor(1, thread_name_prefix="streambpe-aencode")
    chunks = _bounded_async_chunks(source, BATCH_CHARS)
    queued: deque[Future[list[int]]] = deque()
    ended = False
    # Batches queued before waiting for the oldest: one until the first ids
    # are out (so they come after one batch is read), then two. With one, the
    # worker sat idle while the loop woke, yielded and read the next batch:
    # 0.77x of iter_id_batches' speed under asyncio, against 0.98x with two.
    depth = 1
    try:
        while queued or not ended:
            while not ended and len(queued) < depth:
                batch, ended = await _gather_batch(chunks)
                job = _encode_last if ended else _encode_ready
                queued.append(worker.submit(job, encoder, splitter, batch))
            ids = await _ids_of(queued.popleft())
            depth = 2
            if ids:
                yield ids
    finally:
        # Waits for a batch the worker is still encoding, without blocking the
        # loop, so that no thread outlives the stream.
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(partial(worker.shutdown, wait=True, cancel_futures=True))
            await chunks.aclose()


#: The name the README advertises: the same function, yielding batches of ids.
aencode_iterable = aiter_id_batches


async def _ids_of(job: Future[list[int]]) -> list[int]:
    """The ids of a queued batch, taken at once when it is done.

    Waiting in a thread costs a round trip between threads (about 0.2 ms);
    a batch queued ahead is often done by the time the loop has read the
    next. Either way the loop passes a checkpoint, so cancellation and other
    tasks still get their turn.
    """
    if job.done():
        await anyio.lowlevel.checkpoint()
        return job.result()
    return await anyio.to_thread.run_sync(job.result)


async def _bounded_async_chunks(chunks: AsyncIterable[str], most: int) -> AsyncGenerator[str, None]:
    """:func:`~streambpe.cutting.splitter.bounded_chunks` of an async source."""
    async for chunk in chunks:
        for part in bounded_chunks((chunk,), most):
            yield part


async def _gather_batch(chunks: AsyncIterator[str]) -> tuple[list[str], bool]:
    """About BATCH_CHARS characters of chunks from ``chunks``; and whether it ended."""
    batch: list[str] = []
    size = 0
    async for chunk in chunks:
        batch.append(chunk)
        size += len(chunk)
        if size >= BATCH_CHARS:
            return batch, False
    return batch, True


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


aencode_file = awaitable_in_thread(
    encode_file,
    name="aencode_file",
    doc="""Async :func:`~streambpe.streaming.file_encoding.encode_file`: same arguments, same result.

    Cancelling the awaiting task stops the workers and leaves no output file.
    """,
)
