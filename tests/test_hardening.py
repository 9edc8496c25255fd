"""Regression tests for failure paths that belong to no single feature.

- Process pools: a worker killed halfway through sending its result must
  neither hang the caller nor the interpreter at exit; every pool is finished
  when its ``with`` block ends; the session check in ``conftest.py`` catches
  leftovers (docs/design.md, "Errors lose nothing").
- Output files get the permissions ``open(path, "w")`` would give them under
  the process umask, from every writer (a private 0600 file is a surprise).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from streambpe._support.pool import process_pool
from streambpe.cli import main
from streambpe.formats import FORMATS
from streambpe.tokenizer import Tokenizer
from streambpe.train.trainer import train_bpe

TESTS_DIR = Path(__file__).resolve().parent

#: Waits that end in well under a second when nothing hangs.
HANG_LIMIT_SECONDS = 30

# A worker that starts sending a result and stops halfway, as one killed by the
# OOM killer (or by the pool being stopped) while it writes a large result
# would. It writes the message header itself, on the pool's result pipe.
_HALF_A_RESULT = """
import gc, os, struct, sys, threading, time
from multiprocessing.queues import SimpleQueue
from streambpe._support.executors import ordered_map
from streambpe._support.pool import process_pool

def half_a_result(then_die):
    results = next(o for o in gc.get_objects() if isinstance(o, SimpleQueue))
    os.write(results._writer.fileno(), struct.pack("!i", 1 << 20) + b"only the start")
    if then_die:
        os._exit(1)
    time.sleep(60)

def stop_while_sending():
    with process_pool(1) as pool:
        pool.submit(half_a_result, False)
        time.sleep(1)  # the manager thread is now waiting for the rest of the message
        raise RuntimeError("stopped")

def die_while_sending():
    with process_pool(1) as pool:
        list(ordered_map(pool, half_a_result, [True], max_in_flight=1))

try:
    {scenario}()
except Exception as exc:
    print(type(exc).__name__)
print(*sorted(thread.name for thread in threading.enumerate()))
"""


def _run_script(script: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=HANG_LIMIT_SECONDS,
        )
    except subprocess.TimeoutExpired as exc:
        # subprocess.run killed it; the message is the point of the test.
        raise AssertionError(f"the program hung; its stderr: {exc.stderr!r}") from None


def test_pool_stopped_while_a_worker_sends_a_result_lets_the_program_exit() -> None:
    """Stopping a pool whose worker is mid-result joins the manager thread instead of hanging."""
    result = _run_script(_HALF_A_RESULT.format(scenario="stop_while_sending"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["RuntimeError", "MainThread"]


def test_worker_dying_while_sending_a_result_raises_worker_error() -> None:
    """A worker that dies mid-result is noticed: WorkerError, and nothing keeps the program alive."""
    result = _run_script(_HALF_A_RESULT.format(scenario="die_while_sending"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["WorkerError", "MainThread"]


def test_pool_block_ending_normally_cancels_queued_tasks() -> None:
    """Tasks nobody will read are cancelled when the block ends; only the running one finishes."""
    started = time.monotonic()
    with process_pool(1) as pool:
        futures = [pool.submit(time.sleep, 0.5) for _ in range(20)]
        futures[0].result()
    assert time.monotonic() - started < 5
    assert any(future.cancelled() for future in futures)


def test_session_check_fails_a_run_that_leaks_a_pool(tmp_path: Path) -> None:
    """The conftest session check turns a pool left open into a failed run, and the run still ends."""
    shutil.copy(TESTS_DIR / "conftest.py", tmp_path / "conftest.py")
    shutil.copy(TESTS_DIR / "streaming_helpers.py", tmp_path / "streaming_helpers.py")
    (tmp_path / "test_leak.py").write_text(
        textwrap.dedent(
            """
            from concurrent.futures import ProcessPoolExecutor

            LEAKED = []

            def test_leaks_a_pool():
                pool = ProcessPoolExecutor(1)
                assert pool.submit(abs, -1).result() == 1
                LEAKED.append(pool)
            """
        ),
        encoding="utf-8",
    )
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=HANG_LIMIT_SECONDS * 2,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the failing run hung at exit: {exc.stdout!r}") from None
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout
    assert "1 passed" in result.stdout
    assert "ProcessPoolExecutor never shut down" in result.stdout
    assert "child process still alive" in result.stdout


# --------------------------------------------------------------------------- file modes

UMASKS = [0o022, 0o002, 0o077]


@contextmanager
def process_umask(mask: int) -> Iterator[None]:
    # The umask is process-wide; the tests run one at a time in this process.
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def modes_under(folder: Path) -> dict[str, int]:
    """Permission bits of every file below ``folder``, by relative path."""
    return {
        str(path.relative_to(folder)): stat.S_IMODE(path.stat().st_mode)
        for path in folder.rglob("*")
        if path.is_file()
    }


@pytest.mark.parametrize("mask", UMASKS, ids=oct)
def test_every_output_file_gets_the_umask_mode(
    tmp_path: Path, mask: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tokenizer files in each format, ``.bin`` ids, decoded text and the count cache: 0o666 & ~umask."""
    corpus = tmp_path / "in" / "corpus.txt"
    corpus.parent.mkdir()
    corpus.write_text("low lower lowest newer wider " * 200, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("STREAMBPE_CACHE_DIR", str(out / "cache"))
    with process_umask(mask):
        vocab, merges = train_bpe(corpus, 270, [], workers=1, cache=True)
        tokenizer = Tokenizer(vocab, merges)
        for format in FORMATS:
            tokenizer.save(out / format, format=format)
        tokenizer.encode_file(corpus, out / "ids.bin", workers=1)
        argv = ["decode", "--tokenizer", str(out / "gpt2"), str(out / "ids.bin")]
        assert main([*argv, "-o", str(out / "decoded.txt")]) == 0
    modes = modes_under(out)
    expected_files = {"gpt2/vocab.json", "gpt2/merges.txt", "tiktoken/tokenizer.tiktoken"}
    expected_files |= {"hf/tokenizer.json", "ids.bin", "decoded.txt"}
    assert expected_files <= set(modes)
    assert any(name.startswith("cache/") for name in modes), "the count cache wrote no file"
    assert modes == dict.fromkeys(modes, 0o666 & ~mask)
