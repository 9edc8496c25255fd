"""Many short calls (issue 25, goal 4): ``SHORT_CALLS`` chat-sized strings encoded one by one.

The strings are seeded windows of the ``--bench-encode-mb`` prose, 20 to
2,000 UTF-8 bytes each, skewed short (log-normal, median about 180 bytes),
in two groups, o200k:

* ``short-calls-o200k-plain``: no special token in any string;
* ``short-calls-o200k-specials``: ``<|endoftext|>`` inside every fourth string.

streambpe's ``encode`` (every special allowed), tiktoken's
``encode(allowed_special="all")`` and each peer's ``encode`` (fastokens,
riptoken, bpe-openai) run in a freshly spawned process pinned to one CPU
(:func:`peers.short_calls_in_fresh_process`), as the issue measures them:
the tokenizer is built there and encodes every string once untimed (a
server encodes with a warm tokenizer), and the ids of that pass are checked
against tiktoken's. Then ``ROUNDS`` passes over all strings are timed,
each over new ``str`` objects equal to them (a server's messages are new
objects, with no UTF-8 cached in them; see the function), each result
dropped as it comes. The benchmark's own process holds the
expected ids of every string: timed there, the cyclic garbage collector's
passes over them fell in whichever encoder's rounds they happened to, and
moved a row by up to half. The note gives the time per call of the best
pass. Goal: ours at most the fastest peer's.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from corpus import DEFAULT_SPECIAL, seeded_windows
from peers import ENCODE_PEERS, TimedCalls, each_digest, short_calls_in_fresh_process, single_cpu

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

SHORT_CALLS = int(os.environ.get("STREAMBPE_BENCH_SHORT_CALLS", "100000"))
ROUNDS = 3
KINDS = ("plain", "specials")
#: The peers timed here. splintr is left out: its wrapper empties its cache
#: before every call (for the cold rows of test_bench_encode.py), which would
#: make 100,000 calls measure that instead of encoding.
SHORT_CALL_PEERS = ("fastokens", "riptoken", "bpe_openai")


@pytest.fixture(scope="module")
def o200k(encoding_files: Callable[[str], EncodingFiles]) -> EncodingFiles:
    return encoding_files("o200k")


@pytest.fixture(scope="module")
def chat_strings(encode_text: str, pytestconfig: pytest.Config) -> dict[str, list[str]]:
    text = encode_text.replace(DEFAULT_SPECIAL, "\n")
    chooser = random.Random(pytestconfig.getoption("--bench-seed") + 25)
    plain = seeded_windows(
        text,
        SHORT_CALLS,
        chooser,
        lambda chooser: min(2000, max(20, int(chooser.lognormvariate(5.2, 0.8)))),
    )
    specials = [
        f"{string[: len(string) // 2]}{DEFAULT_SPECIAL}{string[len(string) // 2 :]}"
        if index % 4 == 0
        else string
        for index, string in enumerate(plain)
    ]
    return {"plain": plain, "specials": specials}


@pytest.fixture(scope="module")
def expected_digests(o200k: EncodingFiles, chat_strings: dict[str, list[str]]) -> dict[str, str]:
    reference = o200k.tiktoken()
    return {
        kind: each_digest([reference.encode(string, allowed_special="all") for string in strings])
        for kind, strings in chat_strings.items()
    }


def _calls(
    encoder: str, files: EncodingFiles, strings: list[str], backend: str | None
) -> TimedCalls:
    from peak_memory import run_in_child

    measured = run_in_child(
        short_calls_in_fresh_process,
        encoder,
        str(files.path),
        files.pattern,
        files.special_tokens,
        strings,
        ROUNDS,
        single_cpu(),
        backend,
        interval=0.5,
    )
    return measured.result


def _measure(
    benchmark: Any,
    report: Report,
    encoder: str,
    kind: str,
    files: EncodingFiles,
    strings: list[str],
    expected_digest: str,
    backend: str | None,
) -> None:
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("this OS cannot pin a process to one CPU (no os.sched_setaffinity)")
    benchmark.group = f"short-calls-o200k-{kind}"
    run: TimedCalls = benchmark.pedantic(
        _calls, args=(encoder, files, strings, backend), rounds=1, iterations=1
    )
    if run.refused is not None:
        pytest.skip(run.refused)
    exact = run.digest == expected_digest
    if not exact and encoder not in ENCODE_PEERS:
        raise AssertionError(
            f"{encoder} encode ids differ from tiktoken's on the chat strings"
            + (f" ({backend})" if backend else "")
        )
    best = min(run.seconds)
    name = f"{encoder} encode (1 CPU)"
    report.finish(
        name,
        ours=encoder == "streambpe",
        backend=backend,
        exact=exact,
        seconds=best,
        tokens=run.tokens,
        rounds_seconds=[round(seconds, 4) for seconds in run.seconds],
    )
    report.note(
        f"short calls ({benchmark.group}), {name}{' [' + backend + ']' if backend else ''}: "
        f"{best / len(strings) * 1e6:.2f} us per call"
    )


@pytest.mark.parametrize("kind", KINDS)
def test_short_calls_streambpe(
    benchmark: Any,
    report: Report,
    backend: str,
    kind: str,
    o200k: EncodingFiles,
    chat_strings: dict[str, list[str]],
    expected_digests: dict[str, str],
) -> None:
    _measure(
        benchmark,
        report,
        "streambpe",
        kind,
        o200k,
        chat_strings[kind],
        expected_digests[kind],
        backend,
    )


@pytest.mark.parametrize("encoder", ("tiktoken", *SHORT_CALL_PEERS))
@pytest.mark.parametrize("kind", KINDS)
def test_short_calls_peer(
    benchmark: Any,
    report: Report,
    kind: str,
    encoder: str,
    o200k: EncodingFiles,
    chat_strings: dict[str, list[str]],
    expected_digests: dict[str, str],
) -> None:
    _measure(
        benchmark,
        report,
        encoder,
        kind,
        o200k,
        chat_strings[kind],
        expected_digests[kind],
        None,
    )
