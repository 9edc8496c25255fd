"""Shared fixtures: reference data paths, offline tiktoken references, and test-owned oracles.

Everything here is either a path to data nobody on the project wrote, or a
small, obviously-correct reference implementation written for the tests (never
the package's own code), so that tests compare the package against something
independent.

At the end of the session, :func:`pytest_sessionfinish` fails the run if any
process pool, pool manager thread or child process outlived the tests: such a
leftover is what makes a program hang at exit (docs/design.md, "Errors lose nothing").
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import _ExecutorManagerThread
from pathlib import Path

import psutil
import pytest
import regex
import tiktoken
import tiktoken.load
from streaming_helpers import tiktoken_file

from streambpe import core, patterns
from streambpe.tokenizer import Tokenizer

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = REPO_ROOT.parent / "shared" / "fixtures"

R50K_SPECIALS: dict[str, int] = {"<|endoftext|>": 50256}
CL100K_SPECIALS: dict[str, int] = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}

Match = tuple[int, int, str]


# --------------------------------------------------------------------------- isolation


@pytest.fixture(scope="session")
def _table_cache_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("table-cache")


@pytest.fixture(autouse=True)
def _private_table_cache(_table_cache_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keeps the compiled tables the tests build out of the user's cache folder.

    Every tokenizer the suite builds would otherwise leave its vocabulary
    tables under ``~/.cache/streambpe/tables``. Set for each test, so a test
    (or doctest) that changes the variable cannot leak its change; worker
    processes inherit it.
    """
    monkeypatch.setenv("STREAMBPE_TABLE_CACHE", str(_table_cache_folder))


# --------------------------------------------------------------------------- oracles


def brute_force_special_matches(text: str, tokens: Sequence[str]) -> list[Match]:
    """Leftmost-longest, non-overlapping special-token matches, found the slow, obvious way."""
    found: list[Match] = []
    position = 0
    while position < len(text):
        longest = max(
            (token for token in tokens if text.startswith(token, position)),
            key=len,
            default=None,
        )
        if longest is None:
            position += 1
        else:
            found.append((position, position + len(longest), longest))
            position += len(longest)
    return found


def brute_force_documents(text: str, tokens: Sequence[str]) -> list[str]:
    """The ordinary-text stretches of ``text`` between special-token matches."""
    documents: list[str] = []
    cursor = 0
    for start, end, _token in brute_force_special_matches(text, tokens):
        documents.append(text[cursor:start])
        cursor = end
    documents.append(text[cursor:])
    return documents


def reference_pieces(text: str, pattern: str, tokens: Sequence[str]) -> list[str]:
    """Pretokens of ``text`` as plain ``regex.findall`` gives them, per document, in order."""
    compiled = regex.compile(pattern)
    return [piece for doc in brute_force_documents(text, tokens) for piece in compiled.findall(doc)]


def _gpt2_char_to_byte() -> dict[str, int]:
    # GPT-2's rule, restated: printable Latin-1 stands for itself, the other
    # 68 bytes take code points from U+0100 upward in byte order.
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {chr(byte): byte for byte in printable}
    borrowed = 0
    for byte in range(256):
        if byte not in printable:
            table[chr(0x100 + borrowed)] = byte
            borrowed += 1
    return table


_GPT2_CHAR_TO_BYTE = _gpt2_char_to_byte()


def decode_gpt2_spelling(spelling: str) -> bytes:
    """Bytes of a token written in GPT-2's byte-to-unicode characters."""
    return bytes(_GPT2_CHAR_TO_BYTE[char] for char in spelling)


def read_gpt2_merges(path: Path) -> list[tuple[bytes, bytes]]:
    """Merges from a GPT-2 style merges file (``left right`` per line, optional header)."""
    merges: list[tuple[bytes, bytes]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#version"):
            continue
        left, right = line.split(" ")
        merges.append((decode_gpt2_spelling(left), decode_gpt2_spelling(right)))
    return merges


@pytest.fixture(scope="session")
def special_matches_oracle() -> Callable[[str, Sequence[str]], list[Match]]:
    """The brute-force leftmost-longest special-token matcher."""
    return brute_force_special_matches


@pytest.fixture(scope="session")
def pieces_oracle() -> Callable[[str, str, Sequence[str]], list[str]]:
    """Reference pretokenization: brute-force special split, then ``regex.findall``."""
    return reference_pieces


@pytest.fixture(scope="session")
def gpt2_spelling_decoder() -> Callable[[str], bytes]:
    """A test-owned decoder for GPT-2's byte-to-unicode spelling."""
    return decode_gpt2_spelling


@pytest.fixture(scope="session")
def gpt2_merges_reader() -> Callable[[Path], list[tuple[bytes, bytes]]]:
    """A test-owned reader for GPT-2 merges files."""
    return read_gpt2_merges


# --------------------------------------------------------------------------- reference data


#: The CS336 assignment's reference files the tests read (not ours to ship).
CS336_FILES = (
    "address.txt",
    "corpus.en",
    "german.txt",
    "gpt2_merges.txt",
    "gpt2_vocab.json",
    "tinystories_sample.txt",
    "train-bpe-reference-merges.txt",
    "train-bpe-reference-vocab.json",
)
CS336_FIXTURES = SHARED_FIXTURES / "cs336"
_CS336_WHAT = "the CS336 assignment's reference data, placed in ../shared/fixtures/cs336/"


@pytest.fixture(scope="session")
def cs336_file() -> Callable[[str], Path]:
    """``cs336_file(name)``: one CS336 reference file; skips the test, naming the file, if absent."""

    def find(name: str) -> Path:
        path = CS336_FIXTURES / name
        if not path.is_file():
            pytest.skip(f"{name} is missing: it is part of {_CS336_WHAT}")
        return path

    return find


@pytest.fixture(scope="session")
def cs336_dir() -> Path:
    """The CS336 reference folder; skips the test, naming the missing files, unless all are there."""
    missing = [name for name in CS336_FILES if not (CS336_FIXTURES / name).is_file()]
    if missing:
        pytest.skip(f"{', '.join(missing)} missing: {_CS336_WHAT}")
    return CS336_FIXTURES


@pytest.fixture(scope="session")
def r50k_ranks() -> dict[bytes, int]:
    """GPT-2 / r50k_base mergeable ranks, read offline."""
    return tiktoken.load.load_tiktoken_bpe(str(tiktoken_file("r50k_base.tiktoken")))


@pytest.fixture(scope="session")
def cl100k_ranks() -> dict[bytes, int]:
    """cl100k_base mergeable ranks, read offline."""
    return tiktoken.load.load_tiktoken_bpe(str(tiktoken_file("cl100k_base.tiktoken")))


@pytest.fixture(scope="session")
def r50k_reference(r50k_ranks: dict[bytes, int]) -> tiktoken.Encoding:
    """tiktoken's r50k_base, built without the network."""
    return tiktoken.Encoding(
        "r50k_base_offline",
        pat_str=patterns.GPT2,
        mergeable_ranks=r50k_ranks,
        special_tokens=R50K_SPECIALS,
    )


@pytest.fixture(scope="session")
def cl100k_reference(cl100k_ranks: dict[bytes, int]) -> tiktoken.Encoding:
    """tiktoken's cl100k_base, built without the network."""
    return tiktoken.Encoding(
        "cl100k_base_offline",
        pat_str=patterns.CL100K,
        mergeable_ranks=cl100k_ranks,
        special_tokens=CL100K_SPECIALS,
    )


@pytest.fixture(scope="session")
def r50k_tokenizer(r50k_ranks: dict[bytes, int]) -> Tokenizer:
    """streambpe's equivalent of r50k_base (shared: do not read its cache counts)."""
    return Tokenizer.from_ranks(r50k_ranks, pattern="gpt2", special_tokens=R50K_SPECIALS)


@pytest.fixture(scope="session")
def cl100k_tokenizer(cl100k_ranks: dict[bytes, int]) -> Tokenizer:
    """streambpe's equivalent of cl100k_base (shared: do not read its cache counts)."""
    return Tokenizer.from_ranks(cl100k_ranks, pattern="cl100k", special_tokens=CL100K_SPECIALS)


# --------------------------------------------------------------------------- nothing left behind

#: How long pools and child processes get to finish after the last test.
LEFTOVER_GRACE_SECONDS = 3.0


def _is_resource_tracker(process: psutil.Process) -> bool:
    # multiprocessing's one tracker per interpreter, started by spawned pools
    # (Dask's LocalCluster): it ends when this process does, so it is no leak.
    return "multiprocessing.resource_tracker" in " ".join(process.cmdline())


def _live_children() -> list[psutil.Process]:
    alive = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and not _is_resource_tracker(child):
                alive.append(child)
        except psutil.NoSuchProcess:
            pass
    return alive


def _describe(process: psutil.Process) -> str:
    try:
        return f"{process.pid} {' '.join(process.cmdline())}"
    except psutil.Error:
        return f"{process.pid} (exited meanwhile)"


def _open_pools() -> list[ProcessPoolExecutor]:
    # Garbage included: a pool only the collector would finish is a leak too.
    return [
        obj
        for obj in gc.get_objects()
        if isinstance(obj, ProcessPoolExecutor) and not obj._shutdown_thread
    ]


def _pool_threads() -> list[_ExecutorManagerThread]:
    return [t for t in threading.enumerate() if isinstance(t, _ExecutorManagerThread)]


def _clean_up(pools: list[ProcessPoolExecutor], children: list[psutil.Process]) -> None:
    """Stop what was left, so a failed check ends the run instead of hanging it at exit."""
    for pool in pools:
        pool.shutdown(wait=False, cancel_futures=True)
    for child in children:
        # Shutting the pools down above may already have ended it.
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    psutil.wait_procs(children, timeout=5)
    for thread in _pool_threads():
        # A manager thread may be stuck reading a result its killed worker never
        # finished; closing this process's write end of that pipe unblocks it.
        thread.result_queue._writer.close()
        thread.join(timeout=10)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a process pool, its manager thread or a child process outlived the tests."""
    deadline = time.monotonic() + LEFTOVER_GRACE_SECONDS
    while True:
        pools, threads, children = _open_pools(), _pool_threads(), _live_children()
        if not (pools or threads or children) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if not (pools or threads or children):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [
        *(f"ProcessPoolExecutor never shut down: {pool!r}" for pool in pools),
        *(f"pool manager thread still running: {thread.name}" for thread in threads),
        *(f"child process still alive: {_describe(child)}" for child in children),
    ]
    if reporter is not None:
        reporter.write_sep("=", "left behind by the tests", red=True)
        for line in lines:
            reporter.write_line(line)
    else:
        print("left behind by the tests:", *lines, sep="\n", file=sys.stderr)
    _clean_up(pools, children)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


# --------------------------------------------------------------------------- backends


@pytest.fixture
def small_id_blocks() -> Iterator[tuple[int, int]]:
    """The compiled kernel's id blocks shrunk to 1,000 ids, handed over 100 at a time.

    A run makes about four million ids before it hands them to the list (see
    ``_LIST_BLOCK`` in ``_native.pyx``); shrunk, texts of thousands of ids reach
    the pauses between runs and between hand-overs. Yields the pair in force.
    """
    native = pytest.importorskip(
        "streambpe.core._native",
        reason="the compiled core was not built (no C++ compiler at install)",
    )
    before = native.id_block_sizes(block=1000, hand_over=100)
    try:
        yield native.id_block_sizes()
    finally:
        native.id_block_sizes(*before)


@pytest.fixture(scope="module", params=core.available_backends())
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs a module's tests once per available backend (pure Python, and compiled if built).

    Exactness modules request it with ``pytestmark = pytest.mark.usefixtures("backend")``.
    Module scope keeps hypothesis happy (no function-scoped fixture) and runs
    each module's tests grouped by backend. Worker processes are forked, so
    they inherit the selection.
    """
    with core.using_backend(request.param):
        yield request.param
