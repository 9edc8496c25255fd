"""In-memory encoding: streambpe (each backend) against tiktoken and the peers of :mod:`peers`.

Both tokenizers are built offline from the same ``.tiktoken`` files (r50k, the
GPT-2 encoding, cl100k and o200k), and each encodes two corpora of the same size:
multilingual prose (the generated corpus) and source code (this Python's
standard library, see ``corpus.source_code_text``). streambpe starts every round with a fresh
``Tokenizer``, so its piece cache is cold: the time includes filling it, and
the reported hit rate says how much the cache then saved. tiktoken has no such
cache. These groups measure single-thread speed (goal 1 of issue 25), so every
encoder's rounds run with the process pinned to one CPU (``one_cpu``): our
``encode`` spreads a long text over the cores it may use, and so does
fastokens, which unpinned had two cores against tiktoken's one.

``encode`` lets ``<|endoftext|>`` through as a special token on both sides
(tiktoken's ``allowed_special="all"``); ``encode_ordinary`` treats it as text.
Every streambpe result is checked against tiktoken's ids: a fast wrong answer
would make the ratio meaningless.

``encode_batch`` takes the same text cut into about 1000 documents; tiktoken's
version spreads them over threads, ours over whatever it uses.

The ``encode_ordinary-<encoding>-<corpus>-1cpu`` groups measure the way
issue 25 compares encoders: the process pinned to one CPU (so an encoder that
spreads its work over threads gets no more than one core), one tokenizer per
encoder, whose first call checks its ids against tiktoken's and is not timed,
then the best of three calls on that same tokenizer (warm piece caches).

``test_encode_prose_interleaved_with_tiktoken`` times the two in turns, round
by round, and reports the ratio of each round: the figure that a slow spell of
a shared machine cannot tilt towards one side.

Every streambpe test runs once per kernel backend (the ``backend`` fixture),
selected around the timed call; the tokenizer's kernel for that backend is
built in the untimed setup, as tiktoken's tables are built before its clock.

The peers fastokens and splintr (the ``bench`` extra) load the same
``.tiktoken`` files (see :mod:`peers`); each one's ids are compared with
tiktoken's on the benchmark text before it is timed, and a peer that differs or
cannot be built offline skips with the reason. Like ours, every timed round of
a peer starts with a fresh tokenizer, built outside the clock, so no piece
cache carries over from the check or from the round before.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from corpus import source_code_text
from peers import (
    ENCODE_PEERS,
    EncodePeer,
    PeerUnavailable,
    build_encode_peer,
    cold_peer_setup,
    first_difference,
    ids_digest,
    quicktok_unavailable_reason,
)

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

ENCODING_NAMES = ("r50k", "cl100k", "o200k")
METHODS = ("encode", "encode_ordinary")
#: Multilingual prose (the generated corpus) and source code (this Python's stdlib).
CORPORA = ("prose", "code")
ROUNDS = 3
#: Rounds of tiktoken and streambpe in turns (test_encode_prose_interleaved_with_tiktoken).
INTERLEAVED_ROUNDS = 5


def tiktoken_call(encoding: Any, method: str) -> Callable[[str], list[int]]:
    """tiktoken's counterpart of our ``method``."""
    if method == "encode":
        return lambda text: encoding.encode(text, allowed_special="all")
    return encoding.encode_ordinary  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def reference_digests() -> dict[tuple[str, str, str], str]:
    """tiktoken results by ``(encoding, method, corpus)``, computed once per module."""
    return {}


@pytest.fixture(scope="module")
def corpus_texts(encode_text: str) -> dict[str, str]:
    """Each corpus of :data:`CORPORA`, the code one as long as the prose."""
    return {"prose": encode_text, "code": source_code_text(len(encode_text))}


def tiktoken_digest(
    digests: dict[tuple[str, str, str], str],
    files: EncodingFiles,
    method: str,
    corpus: str,
    text: str,
) -> str:
    key = (files.name, method, corpus)
    if key not in digests:
        digests[key] = ids_digest(tiktoken_call(files.tiktoken(), method)(text))
    return digests[key]


def process_threads() -> list[int]:
    """The ids of this process's threads (Linux), or ``[0]``: the calling thread alone."""
    try:
        return [int(name) for name in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


@contextlib.contextmanager
def one_cpu() -> Iterator[None]:
    """Pin every thread of this process to one of its CPUs for the block.

    Every thread, not only the caller: on Linux ``os.sched_setaffinity(0, ...)``
    pins the calling thread alone, and the thread pool a peer started before the
    block (fastokens' threads, started by its ids check) went on running on both
    CPUs (measured in this module: its "one CPU" cold o200k prose ran at 36.7
    MiB/s, against 21.6 with every thread pinned). Threads started inside the block inherit the pin;
    on leaving, every thread gets back what it had, or the process's CPUs.
    """
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("this OS cannot pin a process to one CPU (no os.sched_setaffinity)")
    allowed = os.sched_getaffinity(0)
    single = {min(allowed)}
    before: dict[int, set[int]] = {}
    for thread in process_threads():
        with contextlib.suppress(OSError):  # the thread may end meanwhile
            before[thread] = os.sched_getaffinity(thread)
            os.sched_setaffinity(thread, single)
    try:
        yield
    finally:
        for thread in process_threads():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(thread, before.get(thread, allowed))


def cache_hit_rate(tokenizer: Any) -> float | None:
    """Share of pieces answered by the piece cache, if the tokenizer reports it."""
    if not hasattr(tokenizer, "cache_info"):
        return None
    info = tokenizer.cache_info()
    lookups = info.hits + info.misses
    return round(info.hits / lookups, 4) if lookups else None


def fresh_tokenizer(
    streambpe_api: Callable[..., Any], files: EncodingFiles, backend: str | None = None
) -> Any:
    """A new tokenizer (empty piece cache), its kernel for ``backend`` already built."""
    tokenizer_class = streambpe_api("Tokenizer")
    tokenizer = tokenizer_class.from_tiktoken(
        files.path, pattern=files.pattern, special_tokens=files.special_tokens
    )
    if backend is not None:
        from streambpe.core import using_backend

        with using_backend(backend):
            tokenizer.cache_info()  # builds the backend's kernel outside the clock
    return tokenizer


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_streambpe(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    encoding_files: Callable[[str], EncodingFiles],
    reference_digests: dict[tuple[str, str, str], str],
    corpus_texts: dict[str, str],
    name: str,
    method: str,
    corpus: str,
    backend: str,
) -> None:
    from streambpe.core import using_backend

    files = encoding_files(name)
    encode_text = corpus_texts[corpus]
    benchmark.group = f"{method}-{name}-{corpus}"
    tokenizers: list[Any] = []

    def cold_tokenizer() -> tuple[tuple[Any, str], dict[str, Any]]:
        # Only the newest tokenizer stays alive, as for the peers, whose fresh
        # objects go when their round ends: keeping every round's piece cache
        # alive had each round fault in memory that the others never touch.
        tokenizers.clear()
        tokenizers.append(fresh_tokenizer(streambpe_api, files, backend))
        return (tokenizers[-1], encode_text), {}

    def run(tokenizer: Any, text: str) -> list[int]:
        with using_backend(backend):
            return getattr(tokenizer, method)(text)  # type: ignore[no-any-return]

    with one_cpu():
        ids = benchmark.pedantic(report.timed(run), setup=cold_tokenizer, rounds=ROUNDS)
    matches = ids_digest(ids) == tiktoken_digest(
        reference_digests, files, method, corpus, encode_text
    )
    with using_backend(backend):
        hit_rate = cache_hit_rate(tokenizers[-1])
    report.finish(
        f"streambpe {method} (1 CPU)",
        ours=True,
        backend=backend,
        input_bytes=len(encode_text.encode("utf-8")),
        tokens=len(ids),
        cache_hit_rate=hit_rate,
        matches_tiktoken=matches,
    )
    assert matches, f"streambpe {method} ids differ from tiktoken's for {name} ({backend})"


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_tiktoken(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    reference_digests: dict[tuple[str, str, str], str],
    corpus_texts: dict[str, str],
    name: str,
    method: str,
    corpus: str,
) -> None:
    files = encoding_files(name)
    encode_text = corpus_texts[corpus]
    benchmark.group = f"{method}-{name}-{corpus}"
    call = tiktoken_call(files.tiktoken(), method)
    with one_cpu():
        ids = benchmark.pedantic(report.timed(call), args=(encode_text,), rounds=ROUNDS)
    reference_digests[(name, method, corpus)] = ids_digest(ids)
    report.finish(
        f"tiktoken {method} (1 CPU)",
        ours=False,
        input_bytes=len(encode_text.encode("utf-8")),
        tokens=len(ids),
    )


def timed_peer_round(
    setup: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]],
    method: str,
    text: str,
    expected: list[int],
) -> float:
    """Seconds a fresh peer takes for ``method`` on ``text``; NaN if its ids are not ``expected``."""
    (peer,), _ = setup()
    started = time.perf_counter()
    ids = getattr(peer, method)(text)
    seconds = time.perf_counter() - started
    return seconds if ids == expected else math.nan


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_prose_interleaved_with_tiktoken(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    encoding_files: Callable[[str], EncodingFiles],
    corpus_texts: dict[str, str],
    name: str,
    method: str,
) -> None:
    """tiktoken and the compiled streambpe in turns on the prose, a ratio per round.

    The tests above run all of one implementation's rounds, then all of the
    other's, minutes apart: on a shared machine a slow spell can land on one
    side only. Here each round times tiktoken, then streambpe with a fresh
    tokenizer (cold cache), back to back, and checks that the ids are equal.
    The median of the rounds' ratios is the figure to read; the lowest says
    how far one unlucky round can fall. When fastokens is installed, each
    round also times a fresh one of its tokenizers on the same text, and a
    note gives its time over ours per round.
    """
    from streambpe.core import NATIVE, using_backend

    if NATIVE is None:
        pytest.skip("the compiled core is not built: these rounds time the compiled kernel")
    files = encoding_files(name)
    text = corpus_texts["prose"]
    reference = tiktoken_call(files.tiktoken(), method)
    benchmark.group = f"{method}-{name}-prose-interleaved"
    ratios: list[float] = []
    our_seconds: list[float] = []
    peer_seconds: list[float] = []
    peer_setup = (
        cold_peer_setup("fastokens", str(files.path), files.pattern, files.special_tokens)
        if importlib.util.find_spec("fastokens")
        else None
    )

    def rounds() -> None:
        nonlocal peer_setup
        for _ in range(INTERLEAVED_ROUNDS):
            started = time.perf_counter()
            expected = reference(text)
            tiktoken_seconds = time.perf_counter() - started
            tokenizer = fresh_tokenizer(streambpe_api, files, "native")
            with using_backend("native"):
                started = time.perf_counter()
                ids = getattr(tokenizer, method)(text)
                our_seconds.append(time.perf_counter() - started)
            assert ids == expected, f"streambpe {method} ids differ from tiktoken's for {name}"
            ratios.append(tiktoken_seconds / our_seconds[-1])
            del ids
            if peer_setup is not None:
                peer_seconds.append(timed_peer_round(peer_setup, method, text, expected))
                if math.isnan(peer_seconds[-1]):
                    peer_setup, peer_seconds[:] = None, []
                    report.note(f"fastokens {method} ids differ from tiktoken's: left out")
            del expected

    benchmark.pedantic(rounds, rounds=1)
    median = statistics.median(ratios)
    report.finish(
        f"streambpe {method}, rounds in turns with tiktoken",
        ours=True,
        backend="native",
        seconds=min(our_seconds),
        input_bytes=len(text.encode("utf-8")),
        ratios_to_tiktoken=[round(ratio, 2) for ratio in ratios],
        median_ratio=round(median, 2),
        lowest_ratio=round(min(ratios), 2),
    )
    shown = ", ".join(f"{ratio:.2f}x" for ratio in ratios)
    report.note(
        f"{method} {name} prose, in turns with tiktoken: its time / ours per round {shown}; "
        f"median {median:.2f}x, lowest {min(ratios):.2f}x"
    )
    if peer_seconds:
        shown = ", ".join(
            f"{peer / ours:.2f}x" for peer, ours in zip(peer_seconds, our_seconds, strict=True)
        )
        report.note(
            f"{method} {name} prose, fastokens (fresh tokenizer) in the same rounds: "
            f"its time / ours per round {shown}"
        )


@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_batch_streambpe(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    encoding_files: Callable[[str], EncodingFiles],
    encode_documents: list[str],
    name: str,
    backend: str,
) -> None:
    from streambpe.core import using_backend

    files = encoding_files(name)
    streambpe_api("Tokenizer", "encode_batch")
    benchmark.group = f"encode_batch-{name}"

    def cold_tokenizer() -> tuple[tuple[Any, list[str]], dict[str, Any]]:
        return (fresh_tokenizer(streambpe_api, files, backend), encode_documents), {}

    def run(tokenizer: Any, documents: list[str]) -> list[list[int]]:
        # Worker processes are forked inside the block, so they inherit the backend.
        with using_backend(backend):
            return tokenizer.encode_batch(documents)  # type: ignore[no-any-return]

    batches = benchmark.pedantic(report.timed(run), setup=cold_tokenizer, rounds=ROUNDS)
    report.finish(
        "streambpe encode_batch",
        ours=True,
        backend=backend,
        input_bytes=sum(len(document.encode("utf-8")) for document in encode_documents),
        tokens=sum(map(len, batches)),
        documents=len(encode_documents),
    )


@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_batch_tiktoken(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    encode_documents: list[str],
    name: str,
) -> None:
    files = encoding_files(name)
    benchmark.group = f"encode_batch-{name}"
    encoding = files.tiktoken()
    batches = benchmark.pedantic(
        report.timed(encoding.encode_batch), args=(encode_documents,), rounds=ROUNDS
    )
    report.finish(
        "tiktoken encode_batch (8 threads)",
        ours=False,
        input_bytes=sum(len(document.encode("utf-8")) for document in encode_documents),
        tokens=sum(map(len, batches)),
        documents=len(encode_documents),
    )


# ---------------------------------------------------------------------------
# Peers: fastokens and splintr, checked against tiktoken before they are timed


def checked_peer(
    peer_name: str,
    files: EncodingFiles,
    call: str,
    text: str,
    reference: list[int],
) -> Any:
    """The peer, built offline, once its ids for ``text`` equal ``reference``; else skip."""
    try:
        peer = build_encode_peer(peer_name, str(files.path), files.pattern, files.special_tokens)
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    try:
        ids = getattr(peer, call)(text)
    except ValueError as exc:  # bpe-openai refuses a million characters or 200,000 ids
        pytest.skip(f"{peer_name} {call} refuses the {len(text):,}-character text: {exc}")
    difference = first_difference(reference, ids)
    if difference is not None:
        pytest.skip(
            f"{peer_name} {call} ids differ from tiktoken's on the {files.name} text: {difference}"
        )
    return peer


@pytest.fixture(scope="module")
def tiktoken_ids() -> Callable[[EncodingFiles, str, str], list[int]]:
    """tiktoken's ids for ``(files, method, text)``, kept for the last text only (they are big)."""
    kept: dict[tuple[str, str, int], list[int]] = {}

    def ids(files: EncodingFiles, method: str, text: str) -> list[int]:
        key = (files.name, method, id(text))
        if key not in kept:
            kept.clear()
            kept[key] = tiktoken_call(files.tiktoken(), method)(text)
        return kept[key]

    return ids


@pytest.mark.parametrize("peer_name", ENCODE_PEERS)
@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_peer(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    tiktoken_ids: Callable[[EncodingFiles, str, str], list[int]],
    corpus_texts: dict[str, str],
    name: str,
    method: str,
    corpus: str,
    peer_name: str,
) -> None:
    files = encoding_files(name)
    encode_text = corpus_texts[corpus]
    benchmark.group = f"{method}-{name}-{corpus}"
    peer = checked_peer(
        peer_name, files, method, encode_text, tiktoken_ids(files, method, encode_text)
    )
    cold = cold_peer_setup(
        peer_name, str(files.path), files.pattern, files.special_tokens, encode_text
    )

    def run(fresh: EncodePeer, text: str) -> list[int]:
        return getattr(fresh, method)(text)  # type: ignore[no-any-return]

    with one_cpu():
        ids = benchmark.pedantic(report.timed(run), setup=cold, rounds=ROUNDS)
    report.finish(
        f"{peer_name} {method} ({peer.how}, 1 CPU)",
        ours=False,
        input_bytes=len(encode_text.encode("utf-8")),
        tokens=len(ids),
    )


@pytest.mark.parametrize("peer_name", ENCODE_PEERS)
@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_batch_peer(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    encode_documents: list[str],
    name: str,
    peer_name: str,
) -> None:
    files = encoding_files(name)
    benchmark.group = f"encode_batch-{name}"
    encoding = files.tiktoken()
    probe = encode_documents[: max(1, len(encode_documents) // 10)]
    reference = [i for ids in encoding.encode_batch(probe, allowed_special="all") for i in ids]
    try:
        peer = build_encode_peer(peer_name, str(files.path), files.pattern, files.special_tokens)
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    try:
        batch = peer.encode_batch(probe)
    except ValueError as exc:  # bpe-openai refuses a document of 200,000 ids or more
        pytest.skip(f"{peer_name} encode_batch refuses a document: {exc}")
    difference = first_difference(reference, [i for ids in batch for i in ids])
    if difference is not None:
        pytest.skip(f"{peer_name} encode_batch ids differ from tiktoken's: {difference}")
    cold = cold_peer_setup(
        peer_name, str(files.path), files.pattern, files.special_tokens, encode_documents
    )

    def run(fresh: EncodePeer, documents: list[str]) -> list[list[int]]:
        return fresh.encode_batch(documents)

    try:
        batches = benchmark.pedantic(report.timed(run), setup=cold, rounds=ROUNDS)
    except ValueError as exc:
        pytest.skip(f"{peer_name} encode_batch refuses a document: {exc}")
    report.finish(
        f"{peer_name} encode_batch (its threads, cold cache)",
        ours=False,
        input_bytes=sum(len(document.encode("utf-8")) for document in encode_documents),
        tokens=sum(map(len, batches)),
        documents=len(encode_documents),
    )


# ---------------------------------------------------------------------------
# Every encoder on one CPU, warm (the method): the ``-1cpu`` groups


def warm_one_cpu_rounds(
    report: Report, call: Callable[[str], list[int]], text: str, expected: list[int]
) -> list[int]:
    """``call(text)`` once, checked against ``expected``, then :data:`ROUNDS` timed calls, on one CPU."""
    with one_cpu():
        first = call(text)
        difference = first_difference(expected, first)
        assert difference is None, f"ids differ from tiktoken's: {difference}"
        del first
        ids: list[int] = []
        for _ in range(ROUNDS):
            del ids
            ids = report.timed(call)(text)
    return ids


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_one_cpu_streambpe(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    encoding_files: Callable[[str], EncodingFiles],
    tiktoken_ids: Callable[[EncodingFiles, str, str], list[int]],
    corpus_texts: dict[str, str],
    name: str,
    corpus: str,
    backend: str,
) -> None:
    from streambpe.core import using_backend

    files = encoding_files(name)
    text = corpus_texts[corpus]
    benchmark.group = f"encode_ordinary-{name}-{corpus}-1cpu"
    expected = tiktoken_ids(files, "encode_ordinary", text)
    tokenizer = fresh_tokenizer(streambpe_api, files, backend)

    def call(piece: str) -> list[int]:
        with using_backend(backend):
            return tokenizer.encode_ordinary(piece)  # type: ignore[no-any-return]

    ids = benchmark.pedantic(
        warm_one_cpu_rounds, args=(report, call, text, expected), rounds=1, iterations=1
    )
    with using_backend(backend):
        hit_rate = cache_hit_rate(tokenizer)
    report.finish(
        "streambpe encode_ordinary (1 CPU, warm)",
        ours=True,
        backend=backend,
        input_bytes=len(text.encode("utf-8")),
        tokens=len(ids),
        cache_hit_rate=hit_rate,
    )


@pytest.mark.parametrize("peer_name", ("tiktoken", *ENCODE_PEERS))
@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_one_cpu_peer(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    tiktoken_ids: Callable[[EncodingFiles, str, str], list[int]],
    corpus_texts: dict[str, str],
    name: str,
    corpus: str,
    peer_name: str,
) -> None:
    files = encoding_files(name)
    text = corpus_texts[corpus]
    benchmark.group = f"encode_ordinary-{name}-{corpus}-1cpu"
    expected = tiktoken_ids(files, "encode_ordinary", text)
    if peer_name == "tiktoken":
        call: Callable[[str], list[int]] = files.tiktoken().encode_ordinary
    else:
        call = checked_peer(peer_name, files, "encode_ordinary", text, expected).encode_ordinary
    ids = benchmark.pedantic(
        warm_one_cpu_rounds, args=(report, call, text, expected), rounds=1, iterations=1
    )
    report.finish(
        f"{peer_name} encode_ordinary (1 CPU, warm)",
        ours=False,
        input_bytes=len(text.encode("utf-8")),
        tokens=len(ids),
    )


def test_encode_quicktok() -> None:
    """quicktok is a candidate peer; it cannot load tiktoken ranks, and the skip says so."""
    pytest.importorskip("quicktok", reason="quicktok is not installed (optional peer)")
    pytest.skip(quicktok_unavailable_reason())
