"""``encode_file`` / ``iter_file_id_batches``: files of any size to ``.bin`` ids.

Guards: the ids equal ``encode`` of the whole file for every worker count and
chunk size (docs/design.md, "Safe cuts" and "Determinism"); the dtype follows the vocabulary; the stats
are right; every failure (bad input, invalid UTF-8, a dying worker, Ctrl-C)
raises clearly and leaves no output, no temporary file and no child process,
and an existing output file untouched ("Errors lose nothing"); memory stays flat as the
input grows.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streaming_helpers import (
    EOT,
    REPO_ROOT,
    child_pids,
    encode_threads,
    fresh_cl100k_tokenizer,
    fresh_r50k_tokenizer,
    listing,
    make_text,
    make_whitespace_text,
    new_children,
    read_ids,
    tiktoken_file,
)

import streambpe
import streambpe.streaming.file_encoding
import streambpe.streaming.parallel
from streambpe._support.progress import Advance
from streambpe.errors import InvalidUTF8Error, WorkerError
from streambpe.tokenizer import Tokenizer

# The exactness tests run once per backend (docs/design.md, "Backends").
pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture(scope="module")
def gpt2_tok() -> Tokenizer:
    """r50k_base (GPT-2) with ``<|endoftext|>`` = 50256."""
    return fresh_r50k_tokenizer()


def _many_eot(n: int) -> str:
    return EOT * 3 + make_text(n, seed=12, eot_every=2) + EOT + EOT


#: Input texts by name: ~150k characters each.
CONTENTS: dict[str, Callable[[int], str]] = {
    "no-special-tokens": lambda n: make_text(n, seed=11, eot_every=None),
    "many-endoftext": _many_eot,
    "whitespace-runs": lambda n: make_whitespace_text(n, seed=13),
    "multilingual": lambda n: make_text(n, seed=14),
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One input file per entry of :data:`CONTENTS`."""
    folder = tmp_path_factory.mktemp("encode-inputs")
    paths = {}
    for name, build in CONTENTS.items():
        paths[name] = folder / f"{name}.txt"
        paths[name].write_bytes(build(150_000).encode("utf-8"))
    return paths


# --------------------------------------------------------------------------- equivalence


@pytest.mark.parametrize("content", list(CONTENTS))
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("chunk_size", [64, 1000, 1 << 16])
def test_encode_file_equals_encode(
    gpt2_tok: Tokenizer,
    inputs: dict[str, Path],
    tmp_path: Path,
    content: str,
    workers: int,
    chunk_size: int,
) -> None:
    """The ``.bin`` holds ``encode(whole file)`` as uint16, whatever the workers and chunk size."""
    source = inputs[content]
    output = tmp_path / "out.bin"
    stats = gpt2_tok.encode_file(source, output, workers=workers, chunk_size=chunk_size)
    expected = gpt2_tok.encode(source.read_bytes().decode("utf-8"))
    assert read_ids(output, "uint16") == expected
    assert output.stat().st_size == 2 * len(expected)
    assert stats.dtype == "uint16"
    assert stats.tokens == len(expected)
    assert stats.bytes == source.stat().st_size
    assert stats.seconds > 0
    assert stats.tokens_per_second == pytest.approx(stats.tokens / stats.seconds)
    assert listing(tmp_path) == {"out.bin"}


@pytest.mark.parametrize("workers", [1, 2])
def test_iter_file_id_batches_yields_the_ids_without_writing(
    gpt2_tok: Tokenizer, inputs: dict[str, Path], workers: int
) -> None:
    """``iter_file_id_batches`` gives the same ids, in chunks, and writes nothing anywhere."""
    source = inputs["multilingual"]
    before = listing(source.parent)
    chunks = list(gpt2_tok.iter_file_id_batches(source, workers=workers, chunk_size=20_000))
    assert len(chunks) > 2
    assert [i for chunk in chunks for i in chunk] == gpt2_tok.encode(
        source.read_bytes().decode("utf-8")
    )
    assert listing(source.parent) == before


@pytest.mark.parametrize("mode", ["processes", "threads"])
def test_abandoned_iter_file_id_batches_stops_its_workers(
    gpt2_tok: Tokenizer, inputs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Closing the generator after one chunk shuts the pool down: no worker process or thread survives."""
    monkeypatch.setattr(streambpe.streaming.parallel, "parallel_mode", lambda encoder: mode)
    children = child_pids()
    chunks = gpt2_tok.iter_file_id_batches(inputs["multilingual"], workers=2, chunk_size=5000)
    assert next(chunks)
    workers = new_children(children) if mode == "processes" else encode_threads()
    assert workers, "the pool should be running while chunks are pending"
    chunks.close()  # type: ignore[attr-defined]
    assert new_children(children) == set()
    assert encode_threads() == []


def test_tokenizer_method_passes_options(
    gpt2_tok: Tokenizer, inputs: dict[str, Path], tmp_path: Path
) -> None:
    """``Tokenizer.encode_file`` is the same function, keywords passed through."""
    source = inputs["many-endoftext"]
    stats = gpt2_tok.encode_file(
        source, tmp_path / "out.bin", workers=2, chunk_size=3000, dtype="uint32"
    )
    assert stats.dtype == "uint32"
    assert read_ids(tmp_path / "out.bin", "uint32") == gpt2_tok.encode(
        source.read_bytes().decode("utf-8")
    )


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_threads_and_processes_give_the_same_ids(
    gpt2_tok: Tokenizer,
    inputs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    """Either way of spreading the work, on either backend, writes what one thread writes."""
    source = inputs["many-endoftext"]
    gpt2_tok.encode_file(source, tmp_path / "one.bin", workers=1, chunk_size=7000)
    monkeypatch.setattr(streambpe.streaming.parallel, "parallel_mode", lambda encoder: mode)
    for workers in (2, 3):
        gpt2_tok.encode_file(source, tmp_path / "many.bin", workers=workers, chunk_size=7000)
        assert (tmp_path / "many.bin").read_bytes() == (tmp_path / "one.bin").read_bytes()
    assert encode_threads() == []


def test_several_inputs_are_encoded_one_after_another(
    gpt2_tok: Tokenizer, inputs: dict[str, Path], tmp_path: Path
) -> None:
    """A list (or a glob) gives each file's ids in turn: each file is its own stream."""
    names = ["many-endoftext", "whitespace-runs", "multilingual"]
    parts = []
    for name in names:
        gpt2_tok.encode_file(inputs[name], tmp_path / f"{name}.bin", workers=1)
        parts.append((tmp_path / f"{name}.bin").read_bytes())
    stats = gpt2_tok.encode_file([inputs[n] for n in names], tmp_path / "all.bin", workers=2)
    assert (tmp_path / "all.bin").read_bytes() == b"".join(parts)
    assert stats.bytes == sum(inputs[n].stat().st_size for n in names)
    folder = inputs["multilingual"].parent
    every = sorted(folder.glob("*.txt"))
    ids = [i for chunk in gpt2_tok.iter_file_id_batches(str(folder / "*.txt")) for i in chunk]
    assert ids == [i for path in every for i in gpt2_tok.encode(path.read_bytes().decode())]


def _move_to(folder: str) -> None:
    """Pool initializer: the worker runs in another directory than the caller."""
    os.chdir(folder)


@pytest.mark.parametrize("kind", ["thread-pool", "process-pool-elsewhere"])
def test_encode_file_on_a_callers_executor(
    gpt2_tok: Tokenizer,
    inputs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:
    """``executor=`` gives the default's bytes; relative paths work from workers in another directory.

    The process pool is a stand-in for a cluster: its workers start in another
    directory and get the encoder from a staged file, which is gone afterwards.
    """
    source = inputs["multilingual"]
    gpt2_tok.encode_file(source, tmp_path / "default.bin", chunk_size=20_000)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(source.parent)
    executor: Executor = (
        ThreadPoolExecutor(2)
        if kind == "thread-pool"
        else ProcessPoolExecutor(2, initializer=_move_to, initargs=(str(elsewhere),))
    )
    with executor:
        stats = gpt2_tok.encode_file(
            source.name, os.path.relpath(out / "ids.bin"), chunk_size=20_000, executor=executor
        )
        chunks = list(
            gpt2_tok.iter_file_id_batches(source.name, chunk_size=20_000, executor=executor)
        )
    assert (out / "ids.bin").read_bytes() == (tmp_path / "default.bin").read_bytes()
    assert stats.tokens == sum(map(len, chunks)) == (out / "ids.bin").stat().st_size // 2
    assert [i for chunk in chunks for i in chunk] == read_ids(out / "ids.bin", "uint16")
    assert listing(out) == {"ids.bin"}, "the staged encoder should be gone"
    assert listing(elsewhere) == set()


ATOMS = [
    "a", "Hello", " ", "  ", "\n", "\n\n", "\t", "\r\n", "\u00a0", "\u3000", "'s", "42", "12345",
    ".", "!?", EOT, "<|endoftext", "|>", "<|fim_prefix|>", "é", "e\u0301", "👍🏽", "日本", "語",
    " x", "x ", "\u0085",
]  # fmt: skip


@pytest.mark.parametrize("vocabulary", ["r50k", "cl100k"])
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.lists(st.sampled_from(ATOMS), min_size=1, max_size=80).map("".join),
    chunk_size=st.integers(1, 40),
)
def test_any_chunk_size_gives_encode(vocabulary: str, text: str, chunk_size: int) -> None:
    """Property ("Safe cuts"): cutting a file into chunks of any size never changes an id."""
    tok = _tokenizers(vocabulary)
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "in.txt"
        source.write_bytes(text.encode("utf-8"))
        stats = tok.encode_file(source, Path(folder) / "out.bin", workers=1, chunk_size=chunk_size)
        assert read_ids(Path(folder) / "out.bin", stats.dtype) == tok.encode(text)


_TOKENIZERS: dict[str, Tokenizer] = {}


def _tokenizers(name: str) -> Tokenizer:
    if name not in _TOKENIZERS:
        _TOKENIZERS[name] = fresh_r50k_tokenizer() if name == "r50k" else fresh_cl100k_tokenizer()
    return _TOKENIZERS[name]


# --------------------------------------------------------------------------- dtype


@settings(max_examples=60, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(["uint16", "uint32"]))
def test_packing_an_id_array_equals_packing_the_list(data: st.DataObject, dtype: str) -> None:
    """The strided uint32 -> uint16 packing writes what packing the list of ints writes."""
    largest = 2**16 - 1 if dtype == "uint16" else 2**32 - 1
    ids = data.draw(st.lists(st.integers(0, largest), max_size=300))
    packed = streambpe.streaming.file_encoding.pack_uint32_ids(array("I", ids), dtype)
    assert packed == streambpe.streaming.file_encoding.ids_to_bytes(ids, dtype)


def test_cl100k_ids_are_written_as_uint32(inputs: dict[str, Path], tmp_path: Path) -> None:
    """A vocabulary past 65536 ids gets uint32 by default, with the right ids."""
    tok = _tokenizers("cl100k")
    source = inputs["many-endoftext"]
    stats = tok.encode_file(source, tmp_path / "out.bin", workers=2, chunk_size=10_000)
    expected = tok.encode(source.read_bytes().decode("utf-8"))
    assert stats.dtype == "uint32"
    assert max(expected) == 100257
    assert read_ids(tmp_path / "out.bin", "uint32") == expected


def test_special_id_above_65535_switches_to_uint32(inputs: dict[str, Path], tmp_path: Path) -> None:
    """r50k with ``<|endoftext|>`` = 70000: n_vocab > 65536, so the file is uint32 and id 70000 survives."""
    tok = fresh_r50k_tokenizer(eot_id=70000)
    assert tok.n_vocab == 70001
    source = inputs["many-endoftext"]
    stats = tok.encode_file(source, tmp_path / "out.bin", workers=2, chunk_size=10_000)
    ids = read_ids(tmp_path / "out.bin", "uint32")
    assert stats.dtype == "uint32"
    assert ids == tok.encode(source.read_bytes().decode("utf-8"))
    assert ids.count(70000) == source.read_bytes().decode("utf-8").count(EOT)
    assert (tmp_path / "out.bin").stat().st_size == 4 * stats.tokens


def test_uint16_requested_for_a_large_vocab_fails_before_writing(
    inputs: dict[str, Path], tmp_path: Path
) -> None:
    """``dtype='uint16'`` with ids up to 70000 raises ValueError and creates no file at all."""
    tok = fresh_r50k_tokenizer(eot_id=70000)
    with pytest.raises(ValueError, match=r"do not fit dtype uint16.*uint32"):
        tok.encode_file(inputs["many-endoftext"], tmp_path / "out.bin", dtype="uint16")
    assert listing(tmp_path) == set()


def test_unknown_dtype_is_rejected(
    gpt2_tok: Tokenizer, inputs: dict[str, Path], tmp_path: Path
) -> None:
    """A dtype name that is not offered is named in the error, nothing written."""
    with pytest.raises(ValueError, match="int8"):
        gpt2_tok.encode_file(inputs["multilingual"], tmp_path / "out.bin", dtype="int8")
    assert listing(tmp_path) == set()


# --------------------------------------------------------------------------- failures


@contextmanager
def leaves_nothing_behind(folder: Path, output: Path) -> Iterator[None]:
    """The block must fail without a new file in ``folder``, a changed ``output`` or a new child."""
    children = child_pids()
    before = listing(folder)
    old = output.read_bytes() if output.exists() else None
    yield
    assert listing(folder) == before, "a temporary or partial file was left behind"
    assert (output.read_bytes() if output.exists() else None) == old
    assert new_children(children) == set()


@pytest.fixture(params=["no-previous-output", "previous-output"])
def output(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """The output path, either absent or holding an earlier result that must survive."""
    folder = tmp_path / "out"
    folder.mkdir()
    path = folder / "ids.bin"
    if request.param == "previous-output":
        path.write_bytes(b"an earlier, good result")
    return path


def test_missing_input(gpt2_tok: Tokenizer, tmp_path: Path, output: Path) -> None:
    """A missing input is a FileNotFoundError naming the path."""
    with (
        leaves_nothing_behind(output.parent, output),
        pytest.raises(FileNotFoundError, match=r"input file not found.*nope\.txt"),
    ):
        gpt2_tok.encode_file(tmp_path / "nope.txt", output)


def test_empty_input(gpt2_tok: Tokenizer, tmp_path: Path, output: Path) -> None:
    """An empty input is a ValueError saying so, not an empty ``.bin``."""
    (tmp_path / "empty.txt").write_bytes(b"")
    with leaves_nothing_behind(output.parent, output), pytest.raises(ValueError, match="empty"):
        gpt2_tok.encode_file(tmp_path / "empty.txt", output)


def test_input_is_a_directory(gpt2_tok: Tokenizer, tmp_path: Path, output: Path) -> None:
    """A directory given as input is an IsADirectoryError."""
    with (
        leaves_nothing_behind(output.parent, output),
        pytest.raises(IsADirectoryError, match="directory"),
    ):
        gpt2_tok.encode_file(tmp_path, output)


def test_output_directory_missing(
    gpt2_tok: Tokenizer, inputs: dict[str, Path], tmp_path: Path
) -> None:
    """An output path in a missing directory fails up front, naming the directory."""
    with pytest.raises(FileNotFoundError, match="output directory does not exist"):
        gpt2_tok.encode_file(inputs["multilingual"], tmp_path / "no" / "out.bin")
    assert not (tmp_path / "no").exists()


def _with_bad_bytes(tmp_path: Path, offset: int, bad: bytes) -> tuple[Path, bytes, int]:
    """Generated text with ``bad`` inserted near ``offset``; returns (path, bytes, exact offset)."""
    good = make_text(120_000, seed=15).encode("utf-8")
    # Step back to a character start so the only invalid bytes are ``bad``.
    while good[offset] >> 6 == 2:
        offset -= 1
    data = good[:offset] + bad + good[offset:]
    path = tmp_path / "bad.txt"
    path.write_bytes(data)
    return path, data, offset


@pytest.mark.parametrize(
    ("workers", "offset", "bad"),
    [
        (1, 10, b"\xff"),  # first chunk
        (2, 100_000, b"\xff"),  # a later chunk, decoded in a worker
        (2, 90_001, b"\xe6\x97"),  # a truncated three-byte character
        (2, 70_000, b"\x80"),  # a stray continuation byte
    ],
)
def test_invalid_utf8_names_the_absolute_byte_offset(
    gpt2_tok: Tokenizer, tmp_path: Path, output: Path, workers: int, offset: int, bad: bytes
) -> None:
    """InvalidUTF8Error carries the path and the offset in the *file*, not in the chunk."""
    source, _data, expected_offset = _with_bad_bytes(tmp_path, offset, bad)
    with leaves_nothing_behind(output.parent, output), pytest.raises(InvalidUTF8Error) as caught:
        gpt2_tok.encode_file(source, output, workers=workers, chunk_size=8192)
    assert caught.value.byte_offset == expected_offset
    assert caught.value.path == str(source)
    assert f"byte offset {expected_offset}" in str(caught.value)
    assert "errors='replace'" in str(caught.value)


@pytest.mark.parametrize("workers", [1, 2])
def test_errors_replace_substitutes_u_fffd(
    gpt2_tok: Tokenizer, tmp_path: Path, workers: int
) -> None:
    """``errors='replace'`` encodes the text Python's ``'replace'`` decoding gives (U+FFFD ids)."""
    source, data, _offset = _with_bad_bytes(tmp_path, 100_000, b"\xe6\x97\xff \x80")
    stats = gpt2_tok.encode_file(
        source, tmp_path / "out.bin", workers=workers, chunk_size=8192, errors="replace"
    )
    replaced = data.decode("utf-8", errors="replace")
    assert "\ufffd" in replaced
    assert read_ids(tmp_path / "out.bin", stats.dtype) == gpt2_tok.encode(replaced)
    ids = list(
        gpt2_tok.iter_file_id_batches(source, workers=workers, chunk_size=8192, errors="replace")
    )
    assert [i for chunk in ids for i in chunk] == gpt2_tok.encode(replaced)


_TEST_PROCESS = os.getpid()


def _die_in_worker(encoder: object, task: object) -> tuple[int, bytes]:
    """Stands in for ``encode_range``: a worker process that dies abruptly."""
    if os.getpid() != _TEST_PROCESS:
        os._exit(1)
    raise RuntimeError("the task ran in the test process, not in a worker")


def test_dying_worker_raises_worker_error(
    gpt2_tok: Tokenizer, inputs: dict[str, Path], output: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker killed mid-task surfaces as WorkerError; the pool is torn down, nothing written."""
    monkeypatch.setattr(streambpe.streaming.parallel, "parallel_mode", lambda encoder: "processes")
    monkeypatch.setattr(streambpe.streaming.file_encoding, "encode_range", _die_in_worker)
    with leaves_nothing_behind(output.parent, output), pytest.raises(WorkerError, match="died"):
        gpt2_tok.encode_file(inputs["multilingual"], output, workers=2, chunk_size=10_000)


class InterruptOnSecondStep:
    """A progress reporter whose second ``advance`` raises KeyboardInterrupt (Ctrl-C mid-way)."""

    def __init__(self) -> None:
        self.steps = 0

    @contextmanager
    def stage(self, name: str, *, total: int | None, unit: str) -> Iterator[Advance]:
        def advance(amount: int) -> None:
            self.steps += 1
            if self.steps == 2:
                raise KeyboardInterrupt

        yield advance


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_mid_way(
    gpt2_tok: Tokenizer, inputs: dict[str, Path], output: Path, workers: int
) -> None:
    """KeyboardInterrupt in the parent propagates as itself; no output, no temp file, no worker left."""
    reporter = InterruptOnSecondStep()
    with leaves_nothing_behind(output.parent, output), pytest.raises(KeyboardInterrupt):
        gpt2_tok.encode_file(
            inputs["multilingual"],
            output,
            workers=workers,
            chunk_size=10_000,
            progress=reporter,
        )
    assert reporter.steps == 2


# --------------------------------------------------------------------------- memory

_ENCODE_IN_CHILD = """
import sys
import tiktoken.load
import streambpe
ranks = tiktoken.load.load_tiktoken_bpe(sys.argv[1])
tok = streambpe.Tokenizer.from_ranks(
    ranks, pattern=streambpe.patterns.GPT2, special_tokens={"<|endoftext|>": 50256}
)
stats = tok.encode_file(sys.argv[2], sys.argv[3], workers=2)
print(stats.tokens)
"""


def _peak_tree_rss(ranks_path: Path, source: Path, output: Path) -> tuple[int, int]:
    """Run ``encode_file(workers=2)`` in a fresh interpreter; return (peak RSS of its tree, tokens)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    process = subprocess.Popen(
        [sys.executable, "-c", _ENCODE_IN_CHILD, str(ranks_path), str(source), str(output)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    root = psutil.Process(process.pid)
    peak = 0
    while process.poll() is None:
        total = 0
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        for member in tree:
            with suppress(psutil.Error):
                total += member.memory_info().rss
        peak = max(peak, total)
        time.sleep(0.01)
    stdout, stderr = process.communicate()
    assert process.returncode == 0, stderr.decode()
    return peak, int(stdout)


@pytest.mark.slow
def test_peak_memory_is_flat_when_the_input_grows_tenfold(tmp_path: Path) -> None:
    """Peak RSS of the process tree for a 40 MB input stays near that for a 4 MB input.

    With two workers and the default 1 MiB chunks, both runs keep the same
    things in memory: the interpreter and tokenizer in three processes, one
    chunk's text, pieces and ids per worker, and at most ``2 * workers``
    packed results in flight. None of that depends on the file size, so the
    peaks should match; the allowance (x1.5 + 30 MiB) only absorbs sampling
    noise and the piece cache filling further. Holding the whole input as
    text (the mixed-script text is 4 bytes per character as ``str``) or all
    ids as Python ints would add well over 100 MiB at 40 MB and fail. A smaller
    pair of inputs would not: the allowance grows with the small run's peak,
    so 40 MB is what it takes for holding the text to exceed it.
    """
    ranks_path = tiktoken_file("r50k_base.tiktoken")
    small, large = tmp_path / "4mb.txt", tmp_path / "40mb.txt"
    small.write_bytes(make_text(3_100_000, seed=16).encode("utf-8"))
    large.write_bytes(make_text(31_000_000, seed=16).encode("utf-8"))
    assert 9 < large.stat().st_size / small.stat().st_size < 11
    small_peak, small_tokens = _peak_tree_rss(ranks_path, small, tmp_path / "4mb.bin")
    large_peak, large_tokens = _peak_tree_rss(ranks_path, large, tmp_path / "40mb.bin")
    assert large_tokens > 9 * small_tokens
    mib = 1 << 20
    assert large_peak < small_peak * 1.5 + 30 * mib, (
        f"peak RSS {large_peak / mib:.0f} MiB for 40 MB vs {small_peak / mib:.0f} MiB for 4 MB"
    )
