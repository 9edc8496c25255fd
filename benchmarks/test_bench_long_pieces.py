"""Long pieces (issue 9): ``encode`` of inputs whose pretokens are huge or unusual.

Three inputs of ``--bench-long-mb`` MiB (default 1) each:

* ``one-letter``: ``"a" * 2**20``, a single pretoken a megabyte long;
* ``syllable``: ``"abc"`` repeated, also a single pretoken, whose merges
  alternate rather than pair up identically;
* ``base64``: base64 of seeded random bytes, many mid-length pieces of letters,
  digits and ``+/`` with almost no repetition for a cache to exploit.

A naive BPE on a piece of n bytes costs O(n^2) (rescan all pairs per merge);
these catch that. Each input is encoded with r50k and cl100k by tiktoken, by
streambpe per kernel backend (a cleared piece cache every round) and by the
peers (each round in a freshly spawned process, see
``peers.calls_in_fresh_process``, so their piece caches start empty too:
fastokens' outlive its tokenizers); every result is checked against
tiktoken's ids, so one group (``long-<input>-<encoding>``) holds all of them.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from peers import ENCODE_PEERS, first_difference, ids_digest, rounds_in_fresh_processes

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

INPUTS = ("one-letter", "syllable", "base64")
ENCODING_NAMES = ("r50k", "cl100k")
ROUNDS = 3


def long_input(kind: str, size: int, seed: int) -> str:
    """The ``kind`` input, ``size`` characters (all ASCII, so also ``size`` bytes)."""
    if kind == "one-letter":
        return "a" * size
    if kind == "syllable":
        return ("abc" * (size // 3 + 1))[:size]
    if kind == "base64":
        raw = random.Random(seed).randbytes(size * 3 // 4 + 3)
        return base64.b64encode(raw).decode("ascii")[:size]
    raise ValueError(f"unknown long input {kind!r}")


@pytest.fixture(scope="module")
def long_inputs(long_piece_bytes: int, pytestconfig: pytest.Config) -> dict[str, str]:
    seed = pytestconfig.getoption("--bench-seed") + 4
    return {kind: long_input(kind, long_piece_bytes, seed) for kind in INPUTS}


@pytest.fixture(scope="module")
def reference_ids() -> Callable[[EncodingFiles, str], list[int]]:
    """tiktoken's ids for ``(files, text)``, computed once each."""
    known: dict[tuple[str, int], list[int]] = {}

    def ids(files: EncodingFiles, text: str) -> list[int]:
        key = (files.name, id(text))  # the texts live as long as the module's fixtures
        if key not in known:
            known[key] = files.tiktoken().encode(text, allowed_special="all")
        return known[key]

    return ids


def _group(kind: str, name: str) -> str:
    return f"long-{kind}-{name}"


@pytest.mark.parametrize("name", ENCODING_NAMES)
@pytest.mark.parametrize("kind", INPUTS)
def test_long_tiktoken(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    long_inputs: dict[str, str],
    reference_ids: Callable[[EncodingFiles, str], list[int]],
    kind: str,
    name: str,
) -> None:
    files = encoding_files(name)
    text = long_inputs[kind]
    benchmark.group = _group(kind, name)
    encoding = files.tiktoken()

    def encode(text: str) -> list[int]:
        return encoding.encode(text, allowed_special="all")

    ids = benchmark.pedantic(report.timed(encode), args=(text,), rounds=ROUNDS)
    assert ids == reference_ids(files, text)
    report.finish("tiktoken encode", ours=False, input_bytes=len(text), tokens=len(ids))


@pytest.mark.parametrize("name", ENCODING_NAMES)
@pytest.mark.parametrize("kind", INPUTS)
def test_long_streambpe(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    encoding_files: Callable[[str], EncodingFiles],
    long_inputs: dict[str, str],
    reference_ids: Callable[[EncodingFiles, str], list[int]],
    kind: str,
    name: str,
    backend: str,
) -> None:
    from streambpe.core import using_backend

    files = encoding_files(name)
    text = long_inputs[kind]
    benchmark.group = _group(kind, name)
    tokenizer = streambpe_api("Tokenizer").from_tiktoken(
        files.path, pattern=files.pattern, special_tokens=files.special_tokens
    )

    def cleared() -> tuple[tuple[str], dict[str, Any]]:
        with using_backend(backend):
            tokenizer.cache_info()  # builds the backend's kernel outside the clock
            tokenizer.clear_cache()
        return (text,), {}

    def encode(text: str) -> list[int]:
        with using_backend(backend):
            return tokenizer.encode(text)  # type: ignore[no-any-return]

    ids = benchmark.pedantic(report.timed(encode), setup=cleared, rounds=ROUNDS)
    difference = first_difference(reference_ids(files, text), ids)
    report.finish(
        "streambpe encode",
        ours=True,
        backend=backend,
        input_bytes=len(text),
        tokens=len(ids),
        matches_tiktoken=difference is None,
    )
    assert difference is None, f"streambpe [{backend}] ids differ from tiktoken's: {difference}"


@pytest.mark.parametrize("peer_name", ENCODE_PEERS)
@pytest.mark.parametrize("name", ENCODING_NAMES)
@pytest.mark.parametrize("kind", INPUTS)
def test_long_peer(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    long_inputs: dict[str, str],
    reference_ids: Callable[[EncodingFiles, str], list[int]],
    kind: str,
    name: str,
    peer_name: str,
) -> None:
    files = encoding_files(name)
    text = long_inputs[kind]
    benchmark.group = _group(kind, name)
    runs = benchmark.pedantic(
        rounds_in_fresh_processes,
        args=(peer_name, str(files.path), files.pattern, files.special_tokens, "encode", text),
        kwargs={"rounds": ROUNDS},
        rounds=1,
        iterations=1,
    )
    if runs[0].refused is not None:  # bpe-openai refuses a million characters or 200,000 ids
        pytest.skip(runs[0].refused)
    if any(run.digest != ids_digest(reference_ids(files, text)) for run in runs):
        pytest.skip(f"{peer_name} ids differ from tiktoken's on {kind}")
    report.finish(
        f"{peer_name} encode",
        ours=False,
        seconds=min(run.seconds[0] for run in runs),
        input_bytes=len(text),
        tokens=runs[0].tokens,
    )
