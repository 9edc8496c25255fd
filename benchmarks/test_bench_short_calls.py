"""Many short calls (issue 25, goal 4): ``SHORT_CALLS`` chat-sized strings encoded one by one.

The strings are seeded windows of the ``--bench-encode-mb`` prose, 20 to
2,000 UTF-8 bytes each, skewed short (log-normal, median about 180 bytes),
in two groups, o200k:

* ``short-calls-o200k-plain``: no special token in any string;
* ``short-calls-o200k-specials``: ``<|endoftext|>`` inside every fourth string.

streambpe's ``encode`` (every special allowed), tiktoken's
``encode(allowed_special="all")`` and each peer's ``encode`` (fastokens,
riptoken, bpe-openai) run over all strings, warm (one untimed pass first: a
server encodes with a warm tokenizer);
the ids of every string are checked against tiktoken's first. The note gives
the time per call. Goal: ours at most the fastest peer's.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from corpus import DEFAULT_SPECIAL, seeded_windows
from peers import PeerUnavailable, build_encode_peer

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

SHORT_CALLS = int(os.environ.get("STREAMBPE_BENCH_SHORT_CALLS", "100000"))
ROUNDS = 3
KINDS = ("plain", "specials")


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
def expected(
    o200k: EncodingFiles, chat_strings: dict[str, list[str]]
) -> dict[str, list[list[int]]]:
    reference = o200k.tiktoken()
    return {
        kind: [reference.encode(string, allowed_special="all") for string in strings]
        for kind, strings in chat_strings.items()
    }


def _each(encode: Callable[[str], list[int]], strings: list[str]) -> list[list[int]]:
    return [encode(string) for string in strings]


def _finish(report: Report, name: str, strings: list[str], **options: Any) -> None:
    report.finish(name, tokens=None, **options)
    report.note(
        f"short calls ({report.benchmark.group}), {name}"
        f"{' [' + options['backend'] + ']' if 'backend' in options else ''}: "
        f"{report.best_seconds / len(strings) * 1e6:.2f} us per call"
    )


@pytest.mark.parametrize("kind", KINDS)
def test_short_calls_streambpe(
    benchmark: Any,
    report: Report,
    backend: str,
    kind: str,
    o200k: EncodingFiles,
    chat_strings: dict[str, list[str]],
    expected: dict[str, list[list[int]]],
    streambpe_api: Callable[..., Any],
) -> None:
    from streambpe.core import using_backend

    benchmark.group = f"short-calls-o200k-{kind}"
    strings = chat_strings[kind]
    tokenizer = streambpe_api("Tokenizer").from_tiktoken(
        o200k.path, pattern=o200k.pattern, special_tokens=o200k.special_tokens
    )
    with using_backend(backend):
        assert _each(tokenizer.encode, strings) == expected[kind]
        benchmark.pedantic(report.timed(_each), args=(tokenizer.encode, strings), rounds=ROUNDS)
    _finish(report, "streambpe encode", strings, ours=True, backend=backend)


@pytest.mark.parametrize("kind", KINDS)
def test_short_calls_tiktoken(
    benchmark: Any,
    report: Report,
    kind: str,
    o200k: EncodingFiles,
    chat_strings: dict[str, list[str]],
    expected: dict[str, list[list[int]]],
) -> None:
    benchmark.group = f"short-calls-o200k-{kind}"
    strings = chat_strings[kind]
    reference = o200k.tiktoken()

    def encode(string: str) -> list[int]:
        return reference.encode(string, allowed_special="all")  # type: ignore[no-any-return]

    assert _each(encode, strings) == expected[kind]
    benchmark.pedantic(report.timed(_each), args=(encode, strings), rounds=ROUNDS)
    _finish(report, "tiktoken encode", strings, ours=False)


#: The peers timed here. splintr is left out: its wrapper empties its cache
#: before every call (for the cold rows of test_bench_encode.py), which would
#: make 100,000 calls measure that instead of encoding.
SHORT_CALL_PEERS = ("fastokens", "riptoken", "bpe_openai")


@pytest.mark.parametrize("peer_name", SHORT_CALL_PEERS)
@pytest.mark.parametrize("kind", KINDS)
def test_short_calls_peer(
    benchmark: Any,
    report: Report,
    kind: str,
    peer_name: str,
    o200k: EncodingFiles,
    chat_strings: dict[str, list[str]],
    expected: dict[str, list[list[int]]],
) -> None:
    benchmark.group = f"short-calls-o200k-{kind}"
    strings = chat_strings[kind]
    try:
        peer = build_encode_peer(peer_name, str(o200k.path), o200k.pattern, o200k.special_tokens)
    except PeerUnavailable as why:
        pytest.skip(str(why))
    exact = _each(peer.encode, strings) == expected[kind]
    benchmark.pedantic(report.timed(_each), args=(peer.encode, strings), rounds=ROUNDS)
    _finish(report, f"{peer_name} encode", strings, ours=False, exact=exact)
