"""A conversation encoded again at every turn: what a chat server does with each request.

``TURNS`` turns, seeded windows of the ``--bench-encode-mb`` prose of 1,000
to 4,000 bytes each, make a conversation. At turn ``k`` the first ``k``
turns are encoded whole with ``encode_ordinary``, as a server that
re-tokenizes the history with every request does, so most of each call is
text the tokenizer has seen before (``docs/design.md``, "Text encoded
again"). Group ``conversation-o200k``.

Every encoder runs in a freshly spawned process pinned to one CPU
(:func:`peers.conversation_in_fresh_process`): the tokenizer is built
there, encodes a few words untimed, then all the turns are timed, best of
``ROUNDS`` processes. The ids of the whole conversation are checked against
tiktoken's. The note gives the total time and the time of the last turn.
splintr is left out: its wrapper empties its cache before every call (for
the cold rows of ``test_bench_encode.py``), which this group would measure
instead of its encoding.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from corpus import DEFAULT_SPECIAL, seeded_windows
from peers import TimedCalls, conversation_in_fresh_process, ids_digest, single_cpu

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

TURNS = int(os.environ.get("STREAMBPE_BENCH_TURNS", "40"))
ROUNDS = 3
PEERS = ("fastokens", "riptoken", "bpe_openai")


@pytest.fixture(scope="module")
def o200k(encoding_files: Callable[[str], EncodingFiles]) -> EncodingFiles:
    return encoding_files("o200k")


@pytest.fixture(scope="module")
def turns(encode_text: str, pytestconfig: pytest.Config) -> list[str]:
    text = encode_text.replace(DEFAULT_SPECIAL, "\n")
    chooser = random.Random(pytestconfig.getoption("--bench-seed") + 40)
    windows = seeded_windows(text, TURNS, chooser, lambda chooser: chooser.randrange(1000, 4000))
    return [f"\n\nturn {number}: {window}" for number, window in enumerate(windows)]


@pytest.fixture(scope="module")
def expected_digest(o200k: EncodingFiles, turns: list[str]) -> str:
    return ids_digest(o200k.tiktoken().encode_ordinary("".join(turns)))


def _rounds(
    encoder: str, files: EncodingFiles, turns: list[str], backend: str | None
) -> list[TimedCalls]:
    from peak_memory import run_in_child

    runs: list[TimedCalls] = []
    for _ in range(ROUNDS):
        measured = run_in_child(
            conversation_in_fresh_process,
            encoder,
            str(files.path),
            files.pattern,
            files.special_tokens,
            turns,
            single_cpu(),
            backend,
            interval=0.5,
        )
        runs.append(measured.result)
        if measured.result.refused is not None:
            break
    return runs


def _measure(
    benchmark: Any,
    report: Report,
    encoder: str,
    files: EncodingFiles,
    turns: list[str],
    expected_digest: str,
    backend: str | None,
) -> None:
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("this OS cannot pin a process to one CPU (no os.sched_setaffinity)")
    benchmark.group = "conversation-o200k"
    runs: list[TimedCalls] = benchmark.pedantic(
        _rounds, args=(encoder, files, turns, backend), rounds=1, iterations=1
    )
    if runs[-1].refused is not None:
        pytest.skip(runs[-1].refused)
    ours = encoder == "streambpe"
    if any(run.digest != expected_digest for run in runs):
        why = f"{encoder} ids differ from tiktoken's on the conversation"
        if encoder in PEERS:
            pytest.skip(why)
        raise AssertionError(why + (f" ({backend})" if backend else ""))
    best = min(runs, key=lambda run: sum(run.seconds))
    encoded_bytes = sum(len("".join(turns[:turn]).encode()) for turn in range(1, len(turns) + 1))
    name = f"{encoder} conversation (1 CPU)"
    report.finish(
        name,
        ours=ours,
        backend=backend,
        seconds=sum(best.seconds),
        input_bytes=encoded_bytes,
        tokens=best.tokens,
    )
    report.note(
        f"conversation of {len(turns)} turns, {name}{' [' + backend + ']' if backend else ''}: "
        f"{sum(best.seconds) * 1e3:.1f} ms in all, last turn {best.seconds[-1] * 1e3:.2f} ms"
    )


def test_conversation_streambpe(
    benchmark: Any,
    report: Report,
    backend: str,
    o200k: EncodingFiles,
    turns: list[str],
    expected_digest: str,
) -> None:
    _measure(benchmark, report, "streambpe", o200k, turns, expected_digest, backend)


@pytest.mark.parametrize("encoder", ("tiktoken", *PEERS))
def test_conversation_peer(
    benchmark: Any,
    report: Report,
    encoder: str,
    o200k: EncodingFiles,
    turns: list[str],
    expected_digest: str,
) -> None:
    _measure(benchmark, report, encoder, o200k, turns, expected_digest, None)
