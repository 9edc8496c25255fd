"""One tokenizer shared by threads, and inherited by a forked process.

The compiled kernel encodes without the GIL, each thread on a piece cache of
its own (``streambpe/encode/thread_kernels.py``). These tests share one
``Tokenizer`` between eight threads, each encoding different text through a
cache small enough to evict all the time, and compare with the ids one thread
gets; empty every cache from another thread while they run; and fork a
process whose tokenizer has a warm cache. ``tests/sanitizer/run.sh`` runs
them under AddressSanitizer too.
"""

from __future__ import annotations

import gc
import os
import random
import signal
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import pytest
import tiktoken.load

from streambpe import Tokenizer
from streambpe.core import available_backends, using_backend

TIKTOKEN_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tiktoken"
THREADS = 8
#: Far fewer entries than the texts have distinct pieces: every text evicts.
SMALL_CACHE = 64
JOIN_SECONDS = 120

WORDS = [
    "the", "tokenizer", "Überraschung", "naïve", "東京", "данные", "مرحبا", "😀👍🏽",
    "1234567", "x=y+1;", "don't", "WE'LL", "   ", "\n\n", "\t", "ZmFrZSBiYXNlNjQ=",
    "e\u0301", "ﬁnance", "a" * 40, "abababababab",
]  # fmt: skip


def thread_text(seed: int, words: int = 1500) -> str:
    """A different mix of words for each seed; many distinct pieces."""
    rng = random.Random(seed)
    return " ".join(
        rng.choice(WORDS) + (str(rng.randrange(10_000)) if rng.random() < 0.3 else "")
        for _ in range(words)
    )


@pytest.fixture(scope="module")
def ranks() -> dict[bytes, int]:
    return tiktoken.load.load_tiktoken_bpe(str(TIKTOKEN_FIXTURES / "r50k_base.tiktoken"))


@pytest.fixture(params=available_backends())
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    with using_backend(name):
        yield name


def run_threads(target: Callable[[int], None], count: int) -> None:
    """Run ``target(index)`` on ``count`` threads started together; re-raise the first error."""
    errors: list[BaseException] = []
    start = threading.Barrier(count)

    def run(index: int) -> None:
        try:
            start.wait()
            target(index)
        except BaseException as error:  # reported to the test below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_SECONDS)
        assert not thread.is_alive(), "a thread hung"
    if errors:
        raise errors[0]


def test_eight_threads_share_one_tokenizer(ranks: dict[bytes, int], backend: str) -> None:
    texts = [thread_text(seed) for seed in range(THREADS)]
    single = Tokenizer.from_ranks(ranks, pattern="gpt2", cache_size=SMALL_CACHE)
    expected = [single.encode_ordinary(text) for text in texts]
    shared = Tokenizer.from_ranks(ranks, pattern="gpt2", cache_size=SMALL_CACHE)
    results: list[list[list[int]]] = [[] for _ in range(THREADS)]

    def encode(index: int) -> None:
        # Each thread also encodes its neighbour's text, so caches see shared pieces.
        for round_number in range(3):
            text_index = (index + round_number) % THREADS
            results[index].append(shared.encode_ordinary(texts[text_index]))
            assert shared.count_tokens(texts[index]) == len(expected[index])

    run_threads(encode, THREADS)
    for index in range(THREADS):
        for round_number, ids in enumerate(results[index]):
            assert ids == expected[(index + round_number) % THREADS], (index, round_number)
    assert shared.cache_info().maxsize >= SMALL_CACHE


def test_a_dropped_tokenizer_frees_its_kernels(ranks: dict[bytes, int], backend: str) -> None:
    """A tokenizer that has encoded, on this thread and on worker threads, frees its kernels
    (vocabulary tables and piece caches) once it is dropped.

    The finalizer that hands a finished thread's kernel back held its owner
    strongly, through a registry that lives as long as the process, and so
    kept alive the thread-local storage whose freeing would have run it:
    every such tokenizer stayed in memory for good (20 MB and more for cl100k).
    """
    tokenizer = Tokenizer.from_ranks(ranks, pattern="gpt2", cache_size=SMALL_CACHE)
    tokenizer.encode_ordinary(thread_text(0, words=50))
    tokenizer.encode_batch([thread_text(seed, words=50) for seed in range(4)], workers=2)
    kernels = [weakref.ref(owner) for owner in tokenizer._kernels.values()]
    assert kernels and all(reference() is not None for reference in kernels)
    del tokenizer
    gc.collect()
    assert all(reference() is None for reference in kernels)


def cache_heavy_text(seed: int, pieces: int = 20_000) -> str:
    """Few distinct pieces, none of them a token: nearly every lookup is a cache hit."""
    rng = random.Random(seed)
    words = [
        " " + "".join(rng.choice("qxzjkvw") for _ in range(rng.randint(3, 9))) for _ in range(40)
    ]
    return "".join(rng.choice(words) for _ in range(pieces))


@pytest.mark.parametrize("cache_size", [SMALL_CACHE, 1 << 16])
def test_clear_cache_from_another_thread(
    ranks: dict[bytes, int], backend: str, cache_size: int
) -> None:
    """Emptying every thread's cache while they encode changes no id.

    Emptying a compiled cache while its thread was reading it handed that
    thread torn entries: about one encode in six came out wrong here. The
    larger cache also has the compiled kernel's segment store, which the
    same texts, encoded again and again, fill and read.
    """
    texts = [cache_heavy_text(seed) for seed in range(2)]
    single = Tokenizer.from_ranks(ranks, pattern="gpt2")
    expected = [single.encode_ordinary(text) for text in texts]
    shared = Tokenizer.from_ranks(ranks, pattern="gpt2", cache_size=cache_size)
    done = threading.Event()
    clears = 0
    wrong: list[tuple[int, int]] = []

    # With the segment store, pauses between clears let the texts be kept
    # and found again (a text is kept the second time it is encoded).
    pause = 0.0 if cache_size == SMALL_CACHE else 0.005

    def work(index: int) -> None:
        nonlocal clears
        if index == len(texts):
            while not done.is_set():
                shared.clear_cache()
                clears += 1
                time.sleep(pause)
            return
        try:
            for round_number in range(60 if backend == "native" else 2):
                if shared.encode_ordinary(texts[index]) != expected[index]:
                    wrong.append((index, round_number))
        finally:
            done.set()

    run_threads(work, len(texts) + 1)
    assert clears > 0
    assert wrong == []
    shared.clear_cache()
    assert shared.cache_info().currsize == 0


def wait_for_child(pid: int) -> int:
    """The child's exit status; kills it if it hangs."""
    deadline = time.monotonic() + JOIN_SECONDS
    while time.monotonic() < deadline:
        finished, status = os.waitpid(pid, os.WNOHANG)
        if finished:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError("the forked child hung")


def encode_in_child(tokenizer: Tokenizer, cases: list[tuple[str, list[int]]]) -> int:
    """Fork; the child encodes each text and exits 0 if every one gives its ids."""
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        status = 3
        try:
            ok = all(tokenizer.encode_ordinary(text) == ids for text, ids in cases)
            status = 0 if ok else 1
        finally:
            os._exit(status)
    return wait_for_child(pid)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_with_warm_cache_encodes_correctly(
    ranks: dict[bytes, int], backend: str
) -> None:
    tokenizer = Tokenizer.from_ranks(ranks, pattern="gpt2", cache_size=SMALL_CACHE)
    text = thread_text(7)
    expected = tokenizer.encode_ordinary(text)
    assert tokenizer.cache_info().currsize > 0
    # The warm text (cache hits) and one the cache has not seen (misses).
    fresh = thread_text(9)
    cases = [(text, expected), (fresh, Tokenizer.from_ranks(ranks, pattern="gpt2").encode(fresh))]
    assert encode_in_child(tokenizer, cases) == 0
    # The parent's tokenizer is untouched by the child.
    assert tokenizer.encode_ordinary(text) == expected


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_while_other_threads_encode(ranks: dict[bytes, int], backend: str) -> None:
    """A fork in the middle of other threads' encodes leaves the child a working tokenizer."""
    tokenizer = Tokenizer.from_ranks(ranks, pattern="gpt2", cache_size=SMALL_CACHE)
    text = thread_text(8, words=300)
    expected = tokenizer.encode_ordinary(text)
    stop = threading.Event()

    def keep_encoding() -> None:
        while not stop.is_set():
            tokenizer.encode_ordinary(text)

    workers = [threading.Thread(target=keep_encoding) for _ in range(2)]
    for worker in workers:
        worker.start()
    try:
        time.sleep(0.05)
        statuses = [encode_in_child(tokenizer, [(text, expected)]) for _ in range(3)]
    finally:
        stop.set()
        for worker in workers:
            worker.join(JOIN_SECONDS)
    assert statuses == [0, 0, 0]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_while_another_thread_holds_the_kernel_lock(
    ranks: dict[bytes, int], backend: str
) -> None:
    """A fork while another thread is inside a kernel lock: the child still gets a kernel.

    The thread holds the lock across the moment ``fork`` is called; the fork
    waits for it (the lock is taken before forking), so the child's copy of
    the lock is free. Without that, the child's first encode waits for ever.
    """
    tokenizer = Tokenizer.from_ranks(ranks, pattern="gpt2", cache_size=SMALL_CACHE)
    text = thread_text(11)
    expected = tokenizer.encode_ordinary(text)
    lock = tokenizer._thread_kernels()._lock
    held = threading.Event()

    def hold_the_lock() -> None:
        with lock:
            held.set()
            time.sleep(0.3)

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    try:
        held.wait(JOIN_SECONDS)
        # A fresh thread of the child has no kernel yet: it must take the lock.
        pid = os.fork()
        if pid == 0:
            status = 3
            try:
                results: list[list[int]] = []
                child_thread = threading.Thread(
                    target=lambda: results.append(tokenizer.encode_ordinary(text))
                )
                child_thread.start()
                child_thread.join(JOIN_SECONDS)
                status = 0 if results == [expected] else 1
            finally:
                os._exit(status)
        assert wait_for_child(pid) == 0
    finally:
        holder.join(JOIN_SECONDS)
