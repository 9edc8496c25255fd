"""The tiktoken drop-in (issue 23): ``streambpe.tiktoken`` against tiktoken, in the same run.

Three groups, all on o200k_base, both libraries reading the vocabulary from
the same tiktoken cache, seeded offline from ``fixtures/tiktoken``:

* ``tiktoken-face-short-calls``: 10,000 chat-sized strings of 20 to 2,000
  bytes (windows of the generated multilingual text, special tokens taken
  out), each encoded with ``encode`` and its default keywords; the time per
  call is noted. Goal: ours at most tiktoken's.
* ``tiktoken-face-cold-start``: ``import``, then ``get_encoding("o200k_base")``
  from the warm cache, then the first ``encode``, each in a fresh process, the
  two libraries in turns for five rounds; the note gives each phase's median.
  Goal: our total at most tiktoken's.
* ``tiktoken-face-bulk``: the ``--bench-encode-mb`` text (20 MiB by default)
  through ``Encoding.encode_ordinary``, through ``Tokenizer.encode_ordinary``
  on the same vocabulary (the two in turns, five rounds, the per-round ratio
  noted), and through tiktoken; piece caches are cleared before every round.
  Goal: the face as fast as the ``Tokenizer``.

Every result's ids are checked against tiktoken's before it is timed.
"""

from __future__ import annotations

import hashlib
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from corpus import DEFAULT_SPECIAL, seeded_windows
from peers import ids_digest

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
SHORT_CALLS = 10_000
COLD_ROUNDS = 5
BULK_ROUNDS = 5

#: Run in a fresh process: seconds for the import, get_encoding and the first encode.
COLD_START_PROGRAM = """
import time
started = time.perf_counter()
import {module} as tiktoken
imported = time.perf_counter()
encoding = tiktoken.get_encoding("o200k_base")
loaded = time.perf_counter()
encoding.encode("Hello, world! This is the first call.")
encoded = time.perf_counter()
print(imported - started, loaded - imported, encoded - loaded)
"""


@pytest.fixture(scope="module")
def warm_cache(
    tmp_path_factory: pytest.TempPathFactory, encoding_files: Callable[[str], EncodingFiles]
) -> Iterator[Path]:
    """A tiktoken cache holding o200k_base (under the SHA-1 of its URL), used by both sides."""
    folder = tmp_path_factory.mktemp("tiktoken-cache")
    name = hashlib.sha1(O200K_URL.encode()).hexdigest()
    (folder / name).write_bytes(encoding_files("o200k").path.read_bytes())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", str(folder))
        yield folder


@pytest.fixture(scope="module")
def chat_strings(encode_text: str, pytestconfig: pytest.Config) -> list[str]:
    """10,000 seeded windows of the text, 20 to 2,000 UTF-8 bytes each, no special tokens."""
    text = encode_text.replace(DEFAULT_SPECIAL, "\n")
    chooser = random.Random(pytestconfig.getoption("--bench-seed") + 23)
    return seeded_windows(text, SHORT_CALLS, chooser, lambda chooser: chooser.randint(23, 2000))


@pytest.fixture(scope="module")
def tiktoken_o200k(warm_cache: Path) -> Any:
    import tiktoken

    return tiktoken.get_encoding("o200k_base")


@pytest.fixture(scope="module")
def face_o200k(warm_cache: Path) -> Any:
    import streambpe.tiktoken

    return streambpe.tiktoken.get_encoding("o200k_base")


def _digest_all(results: list[list[int]]) -> str:
    return ids_digest([token for ids in results for token in ids])


# --------------------------------------------------------------------------- many short calls


def _encode_each(encode: Callable[[str], list[int]], strings: list[str]) -> list[list[int]]:
    return [encode(string) for string in strings]


def test_short_calls_tiktoken(
    benchmark: Any, report: Report, tiktoken_o200k: Any, chat_strings: list[str]
) -> None:
    benchmark.group = "tiktoken-face-short-calls"
    results = benchmark.pedantic(
        report.timed(_encode_each), args=(tiktoken_o200k.encode, chat_strings), rounds=5
    )
    entry = report.finish(
        "tiktoken encode, one call per string",
        ours=False,
        input_bytes=sum(len(s.encode("utf-8")) for s in chat_strings),
        tokens=sum(map(len, results)),
        microseconds_per_call=round(report.best_seconds / len(chat_strings) * 1e6, 2),
    )
    report.note(
        f"short calls, tiktoken: {entry.seconds / len(chat_strings) * 1e6:.1f} us per call "
        f"({len(chat_strings)} strings of 20-2,000 bytes)"
    )


def test_short_calls_face(
    benchmark: Any,
    report: Report,
    face_o200k: Any,
    tiktoken_o200k: Any,
    chat_strings: list[str],
    backend: str,
) -> None:
    from streambpe.core import using_backend

    benchmark.group = "tiktoken-face-short-calls"
    with using_backend(backend):
        expected = _digest_all(_encode_each(tiktoken_o200k.encode, chat_strings))
        assert _digest_all(_encode_each(face_o200k.encode, chat_strings)) == expected

        results = benchmark.pedantic(
            report.timed(_encode_each), args=(face_o200k.encode, chat_strings), rounds=5
        )
    entry = report.finish(
        "streambpe.tiktoken encode, one call per string",
        ours=True,
        backend=backend,
        input_bytes=sum(len(s.encode("utf-8")) for s in chat_strings),
        tokens=sum(map(len, results)),
        microseconds_per_call=round(report.best_seconds / len(chat_strings) * 1e6, 2),
    )
    report.note(
        f"short calls, streambpe.tiktoken [{backend}]: "
        f"{entry.seconds / len(chat_strings) * 1e6:.1f} us per call"
    )


# --------------------------------------------------------------------------- cold start


def _cold_start(module: str, cache: Path, backend: str) -> list[float]:
    environment = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache)}
    if backend == "python":
        environment["STREAMBPE_PURE_PYTHON"] = "1"
    finished = subprocess.run(
        [sys.executable, "-c", COLD_START_PROGRAM.format(module=module)],
        capture_output=True,
        text=True,
        env=environment,
        check=True,
        timeout=600,
    )
    return [float(seconds) for seconds in finished.stdout.split()]


def test_cold_start_in_turns(
    benchmark: Any, report: Report, warm_cache: Path, face_o200k: Any, backend: str
) -> None:
    benchmark.group = "tiktoken-face-cold-start"
    phases: dict[str, list[list[float]]] = {"tiktoken": [], "streambpe.tiktoken": []}

    def rounds() -> None:
        for turn in range(COLD_ROUNDS):
            order = ["tiktoken", "streambpe.tiktoken"]
            for module in order if turn % 2 == 0 else order[::-1]:
                phases[module].append(_cold_start(module, warm_cache, backend))

    benchmark.pedantic(rounds, rounds=1)
    medians: dict[str, list[float]] = {}
    for module, runs in phases.items():
        medians[module] = [statistics.median(phase) for phase in zip(*runs, strict=True)]
        totals = [sum(run) for run in runs]
        report.finish(
            f"{module}: import + get_encoding + first encode (median)",
            ours=module != "tiktoken",
            backend=backend if module != "tiktoken" else None,
            seconds=statistics.median(totals),
        )
        import_s, load_s, first_s = medians[module]
        report.note(
            f"cold start [{backend}], {module}: import {import_s:.3f} s, get_encoding "
            f"{load_s:.3f} s, first encode {first_s:.3f} s, total "
            f"{statistics.median(totals):.3f} s (median of {COLD_ROUNDS}, in turns)"
        )


# --------------------------------------------------------------------------- bulk


@pytest.fixture(scope="module")
def bulk_reference(tiktoken_o200k: Any, encode_text: str) -> str:
    return ids_digest(tiktoken_o200k.encode_ordinary(encode_text))


def test_bulk_tiktoken(
    benchmark: Any, report: Report, tiktoken_o200k: Any, encode_text: str, bulk_reference: str
) -> None:
    benchmark.group = "tiktoken-face-bulk"
    ids = benchmark.pedantic(
        report.timed(tiktoken_o200k.encode_ordinary), args=(encode_text,), rounds=3
    )
    assert ids_digest(ids) == bulk_reference
    report.finish(
        "tiktoken encode_ordinary",
        ours=False,
        input_bytes=len(encode_text.encode("utf-8")),
        tokens=len(ids),
    )


def test_bulk_face_and_tokenizer_in_turns(
    benchmark: Any,
    report: Report,
    face_o200k: Any,
    encode_text: str,
    bulk_reference: str,
    backend: str,
) -> None:
    """The face and a Tokenizer on the same ranks, round by round, so machine noise hits both.

    Both are built here, one after the other, so neither carries the history
    of earlier tests (where its tables landed in memory, a cache once filled).
    """
    from streambpe.core import using_backend
    from streambpe.tiktoken import Encoding
    from streambpe.tokenizer import Tokenizer

    benchmark.group = "tiktoken-face-bulk"
    arguments = {
        "pat_str": face_o200k._pat_str,
        "mergeable_ranks": face_o200k._mergeable_ranks,
        "special_tokens": face_o200k._special_tokens,
    }
    encoding = Encoding("o200k_base", **arguments)
    tokenizer = Tokenizer.from_ranks(
        arguments["mergeable_ranks"],
        pattern=arguments["pat_str"],
        special_tokens=arguments["special_tokens"],
    )
    sides: dict[str, tuple[Any, Callable[[str], list[int]]]] = {
        "Encoding": (encoding.tokenizer, encoding.encode_ordinary),
        "Tokenizer": (tokenizer, tokenizer.encode_ordinary),
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    with using_backend(backend):
        for name, (_owner, encode) in sides.items():
            assert ids_digest(encode(encode_text)) == bulk_reference, f"{name} ids differ"

    def rounds() -> None:
        for turn in range(BULK_ROUNDS):
            order = list(sides) if turn % 2 == 0 else list(sides)[::-1]
            for name in order:
                owner, encode = sides[name]
                with using_backend(backend):
                    owner.clear_cache()
                    started = time.perf_counter()
                    encode(encode_text)
                    times[name].append(time.perf_counter() - started)

    benchmark.pedantic(rounds, rounds=1)
    for name in sides:
        report.finish(
            f"streambpe {name}.encode_ordinary (cold cache, best of {BULK_ROUNDS} in turns)",
            ours=True,
            backend=backend,
            seconds=min(times[name]),
            input_bytes=len(encode_text.encode("utf-8")),
        )
    ratios = [
        face / plain for face, plain in zip(times["Encoding"], times["Tokenizer"], strict=True)
    ]
    report.note(
        f"bulk [{backend}], Encoding / Tokenizer time per round: "
        + ", ".join(f"{ratio:.2f}x" for ratio in ratios)
        + f"; median {statistics.median(ratios):.2f}x"
    )
