"""In-memory encoding: streambpe (each backend) against tiktoken and the peers of :mod:`peers`.

Every encoder is built offline from the same ``.tiktoken`` files (r50k, the
GPT-2 encoding, cl100k and o200k), and each encodes two corpora of the same
size: multilingual prose (the generated corpus) and source code (this
Python's standard library, see ``corpus.source_code_text``).

Every timed call runs in a freshly spawned process
(:func:`peers.calls_in_fresh_process`): the encoder is built there, outside
the clock, encodes a few words untimed (first-use setup such as a thread
pool), then its calls are timed there. A fresh tokenizer in this process
would not do: fastokens keeps its piece caches per thread of its pool, not
per tokenizer, so a peer that had passed its ids check here answered the
"cold" rounds from memory (see :mod:`peers`). Each process's ids are checked
against tiktoken's: a fast wrong answer would make the ratio meaningless.

* ``<method>-<encoding>-<corpus>`` groups (goal 1 of issue 25, cold): one
  call per process, :data:`ROUNDS` processes, the best one counts. The
  process is pinned to one CPU before it imports anything, so an encoder
  that spreads a long text over threads (our ``encode`` does, and so does
  fastokens) gets one core, as tiktoken does. ``encode`` lets
  ``<|endoftext|>`` through as a special token on every side (tiktoken's
  ``allowed_special="all"``); ``encode_ordinary`` treats it as text.
* ``encode_ordinary-<encoding>-<corpus>-1cpu`` groups (the issue's warm
  method): one pinned process per encoder, one untimed call on the text, then
  the best of :data:`ROUNDS` calls on that same tokenizer (warm piece caches).
* ``encode_batch-<encoding>`` groups: the same text cut into about 1000
  documents, cold, on every CPU: tiktoken spreads them over 8 threads, ours
  and the peers over whatever they use.

``test_encode_prose_interleaved_with_tiktoken`` times tiktoken and ours in
turns, round by round, in this process, and reports the ratio of each round:
the figure that a slow spell of a shared machine cannot tilt towards one side.

Every streambpe test runs once per kernel backend (the ``backend`` fixture);
the tokenizer's kernel for that backend is built before the clock starts, as
tiktoken's tables are. A peer that cannot be built offline, refuses the
input or gives other ids than tiktoken skips with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from corpus import source_code_text
from peers import (
    ENCODE_PEERS,
    TimedCalls,
    ids_digest,
    quicktok_unavailable_reason,
    rounds_in_fresh_processes,
)
from turns import InTurns, time_in_turns

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

ENCODING_NAMES = ("r50k", "cl100k", "o200k")
METHODS = ("encode", "encode_ordinary")
#: Multilingual prose (the generated corpus) and source code (this Python's stdlib).
CORPORA = ("prose", "code")
ROUNDS = 3
#: Rounds of tiktoken and streambpe in turns (test_encode_prose_interleaved_with_tiktoken).
INTERLEAVED_ROUNDS = 5
#: tiktoken and the peers, timed like ours.
OTHERS = ("tiktoken", *ENCODE_PEERS)


def tiktoken_call(encoding: Any, method: str) -> Callable[[Any], Any]:
    """tiktoken's counterpart of our ``method``."""
    if method == "encode":
        return lambda text: encoding.encode(text, allowed_special="all")
    if method == "encode_batch":
        return lambda texts: encoding.encode_batch(texts, allowed_special="all")
    return encoding.encode_ordinary  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def reference_digests() -> dict[tuple[str, str, str], str]:
    """tiktoken results by ``(encoding, method, corpus)``, computed once per module."""
    return {}


@pytest.fixture(scope="module")
def corpus_texts(encode_text: str, encode_documents: list[str]) -> dict[str, Any]:
    """Each corpus of :data:`CORPORA`, the code one as long as the prose, and the documents."""
    return {
        "prose": encode_text,
        "code": source_code_text(len(encode_text)),
        "documents": encode_documents,
    }


def tiktoken_digest(
    digests: dict[tuple[str, str, str], str],
    files: EncodingFiles,
    method: str,
    corpus: str,
    argument: str | list[str],
) -> str:
    """:func:`peers.ids_digest` of tiktoken's ids (flattened for ``encode_batch``)."""
    key = (files.name, method, corpus)
    if key not in digests:
        ids = tiktoken_call(files.tiktoken(), method)(argument)
        digests[key] = ids_digest(
            [i for each in ids for i in each] if method == "encode_batch" else ids
        )
    return digests[key]


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


def timed_in_fresh_processes(
    benchmark: Any,
    encoder: str,
    files: EncodingFiles,
    method: str,
    argument: str | list[str],
    expected_digest: str,
    *,
    rounds: int,
    calls: int,
    one_cpu: bool,
    backend: str | None = None,
) -> list[TimedCalls]:
    """Each round's :class:`peers.TimedCalls`, once every round's ids are tiktoken's.

    A peer that refuses the input or differs from tiktoken skips; streambpe
    or tiktoken differing fails.
    """
    if one_cpu and not hasattr(os, "sched_setaffinity"):
        pytest.skip("this OS cannot pin a process to one CPU (no os.sched_setaffinity)")
    runs: list[TimedCalls] = benchmark.pedantic(
        rounds_in_fresh_processes,
        args=(encoder, str(files.path), files.pattern, files.special_tokens, method, argument),
        kwargs={"rounds": rounds, "calls": calls, "one_cpu": one_cpu, "backend": backend},
        rounds=1,
        iterations=1,
    )
    if runs[0].refused is not None:
        pytest.skip(runs[0].refused)
    if any(run.digest != expected_digest for run in runs):
        why = f"{encoder} {method} ids differ from tiktoken's on the {files.name} text"
        if encoder in ENCODE_PEERS:
            pytest.skip(why)
        raise AssertionError(why + (f" ({backend})" if backend else ""))
    return runs


def input_bytes(argument: str | list[str]) -> int:
    texts = [argument] if isinstance(argument, str) else argument
    return sum(len(text.encode("utf-8")) for text in texts)


# ---------------------------------------------------------------------------
# One CPU, cold: a fresh process for every round


def cold_one_cpu(
    benchmark: Any,
    report: Report,
    reference_digests: dict[tuple[str, str, str], str],
    encoder: str,
    files: EncodingFiles,
    method: str,
    corpus: str,
    text: str,
    backend: str | None = None,
) -> None:
    benchmark.group = f"{method}-{files.name}-{corpus}"
    expected = tiktoken_digest(reference_digests, files, method, corpus, text)
    runs = timed_in_fresh_processes(
        benchmark,
        encoder,
        files,
        method,
        text,
        expected,
        rounds=ROUNDS,
        calls=1,
        one_cpu=True,
        backend=backend,
    )
    report.finish(
        f"{encoder} {method} (1 CPU)",
        ours=encoder == "streambpe",
        backend=backend,
        seconds=min(run.seconds[0] for run in runs),
        input_bytes=input_bytes(text),
        tokens=runs[0].tokens,
        rounds_seconds=[round(run.seconds[0], 4) for run in runs],
    )


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_streambpe(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    reference_digests: dict[tuple[str, str, str], str],
    corpus_texts: dict[str, Any],
    name: str,
    method: str,
    corpus: str,
    backend: str,
) -> None:
    cold_one_cpu(
        benchmark,
        report,
        reference_digests,
        "streambpe",
        encoding_files(name),
        method,
        corpus,
        corpus_texts[corpus],
        backend,
    )


@pytest.mark.parametrize("peer_name", OTHERS)
@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_peer(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    reference_digests: dict[tuple[str, str, str], str],
    corpus_texts: dict[str, Any],
    name: str,
    method: str,
    corpus: str,
    peer_name: str,
) -> None:
    cold_one_cpu(
        benchmark,
        report,
        reference_digests,
        peer_name,
        encoding_files(name),
        method,
        corpus,
        corpus_texts[corpus],
    )


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_prose_interleaved_with_tiktoken(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    encoding_files: Callable[[str], EncodingFiles],
    corpus_texts: dict[str, Any],
    name: str,
    method: str,
) -> None:
    """tiktoken and the compiled streambpe in turns on the prose, a ratio per round.

    The tests above run all of one implementation's rounds, then all of the
    other's, minutes apart: on a shared machine a slow spell can land on one
    side only. Here each round times tiktoken and streambpe with a fresh
    tokenizer (cold cache), back to back, each first in turn, and checks that the ids are equal.
    The median of the rounds' ratios is the figure to read; the lowest says
    how far one unlucky round can fall. No peer runs here: in one process,
    fastokens' piece caches outlive its tokenizers (see :mod:`peers`).
    """
    from streambpe.core import NATIVE, using_backend

    if NATIVE is None:
        pytest.skip("the compiled core is not built: these rounds time the compiled kernel")
    files = encoding_files(name)
    text = corpus_texts["prose"]
    reference = tiktoken_call(files.tiktoken(), method)
    benchmark.group = f"{method}-{name}-prose-interleaved"
    measured: list[InTurns] = []

    def tiktoken_round() -> Callable[[], list[int]]:
        return lambda: reference(text)  # type: ignore[no-any-return]

    def streambpe_round() -> Callable[[], list[int]]:
        tokenizer = fresh_tokenizer(streambpe_api, files, "native")

        def encode() -> list[int]:
            with using_backend("native"):
                return getattr(tokenizer, method)(text)  # type: ignore[no-any-return]

        return encode

    def same_ids(expected: list[int], ids: list[int]) -> None:
        assert ids == expected, f"streambpe {method} ids differ from tiktoken's for {name}"

    def rounds() -> None:
        measured.append(
            time_in_turns(
                tiktoken_round, streambpe_round, rounds=INTERLEAVED_ROUNDS, check=same_ids
            )
        )

    benchmark.pedantic(rounds, rounds=1)
    turns = measured[0]
    report.finish(
        f"streambpe {method}, rounds in turns with tiktoken",
        ours=True,
        backend="native",
        seconds=min(turns.contender_seconds),
        input_bytes=len(text.encode("utf-8")),
        ratios_to_tiktoken=[round(ratio, 2) for ratio in turns.ratios],
        median_ratio=round(turns.median_ratio, 2),
        lowest_ratio=round(turns.lowest_ratio, 2),
    )
    report.note(
        f"{method} {name} prose, in turns with tiktoken: its time / ours per round "
        + turns.describe()
    )


# ---------------------------------------------------------------------------
# encode_batch, cold, every CPU


def cold_batch(
    benchmark: Any,
    report: Report,
    reference_digests: dict[tuple[str, str, str], str],
    encoder: str,
    files: EncodingFiles,
    documents: list[str],
    label: str,
    backend: str | None = None,
) -> None:
    benchmark.group = f"encode_batch-{files.name}"
    expected = tiktoken_digest(reference_digests, files, "encode_batch", "documents", documents)
    runs = timed_in_fresh_processes(
        benchmark,
        encoder,
        files,
        "encode_batch",
        documents,
        expected,
        rounds=ROUNDS,
        calls=1,
        one_cpu=False,
        backend=backend,
    )
    report.finish(
        label,
        ours=encoder == "streambpe",
        backend=backend,
        seconds=min(run.seconds[0] for run in runs),
        input_bytes=input_bytes(documents),
        tokens=runs[0].tokens,
        documents=len(documents),
    )


@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_batch_streambpe(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    reference_digests: dict[tuple[str, str, str], str],
    corpus_texts: dict[str, Any],
    name: str,
    backend: str,
) -> None:
    cold_batch(
        benchmark,
        report,
        reference_digests,
        "streambpe",
        encoding_files(name),
        corpus_texts["documents"],
        "streambpe encode_batch",
        backend,
    )


@pytest.mark.parametrize("peer_name", OTHERS)
@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_batch_peer(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    reference_digests: dict[tuple[str, str, str], str],
    corpus_texts: dict[str, Any],
    name: str,
    peer_name: str,
) -> None:
    how = "8 threads" if peer_name == "tiktoken" else "its threads, cold cache"
    cold_batch(
        benchmark,
        report,
        reference_digests,
        peer_name,
        encoding_files(name),
        corpus_texts["documents"],
        f"{peer_name} encode_batch ({how})",
    )


# ---------------------------------------------------------------------------
# Every encoder on one CPU, warm (the method): the ``-1cpu`` groups


def warm_one_cpu(
    benchmark: Any,
    report: Report,
    reference_digests: dict[tuple[str, str, str], str],
    encoder: str,
    files: EncodingFiles,
    corpus: str,
    text: str,
    backend: str | None = None,
) -> None:
    benchmark.group = f"encode_ordinary-{files.name}-{corpus}-1cpu"
    expected = tiktoken_digest(reference_digests, files, "encode_ordinary", corpus, text)
    (run,) = timed_in_fresh_processes(
        benchmark,
        encoder,
        files,
        "encode_ordinary",
        text,
        expected,
        rounds=1,
        calls=1 + ROUNDS,
        one_cpu=True,
        backend=backend,
    )
    report.finish(
        f"{encoder} encode_ordinary (1 CPU, warm)",
        ours=encoder == "streambpe",
        backend=backend,
        seconds=min(run.seconds[1:]),
        input_bytes=input_bytes(text),
        tokens=run.tokens,
        first_call_seconds=round(run.seconds[0], 4),
    )


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_one_cpu_streambpe(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    reference_digests: dict[tuple[str, str, str], str],
    corpus_texts: dict[str, Any],
    name: str,
    corpus: str,
    backend: str,
) -> None:
    warm_one_cpu(
        benchmark,
        report,
        reference_digests,
        "streambpe",
        encoding_files(name),
        corpus,
        corpus_texts[corpus],
        backend,
    )


@pytest.mark.parametrize("peer_name", OTHERS)
@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_encode_one_cpu_peer(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    reference_digests: dict[tuple[str, str, str], str],
    corpus_texts: dict[str, Any],
    name: str,
    corpus: str,
    peer_name: str,
) -> None:
    warm_one_cpu(
        benchmark,
        report,
        reference_digests,
        peer_name,
        encoding_files(name),
        corpus,
        corpus_texts[corpus],
    )


def test_encode_quicktok() -> None:
    """quicktok is a candidate peer; it cannot load tiktoken ranks, and the skip says so."""
    pytest.importorskip("quicktok", reason="quicktok is not installed (optional peer)")
    pytest.skip(quicktok_unavailable_reason())
