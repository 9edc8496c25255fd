"""Shared options, corpora and result reporting for the benchmark suites.

Sizes come from command-line options (or environment variables, handy in tox):

==========================  ====================================  =======
option                      environment variable                  default
==========================  ====================================  =======
``--bench-train-mb``        ``STREAMBPE_BENCH_TRAIN_MB``          100
``--bench-train-small-mb``  ``STREAMBPE_BENCH_TRAIN_SMALL_MB``    40
``--bench-encode-mb``       ``STREAMBPE_BENCH_ENCODE_MB``         20
``--bench-scaling-mb``      ``STREAMBPE_BENCH_SCALING_MB``        1,8,64
``--bench-long-mb``         ``STREAMBPE_BENCH_LONG_MB``           1
``--bench-file-mb``         ``STREAMBPE_BENCH_FILE_MB``           1024
``--bench-seed``            ``STREAMBPE_BENCH_SEED``              0
==========================  ====================================  =======

Every streambpe benchmark takes the ``backend`` fixture: it runs once per
kernel backend (``python``, ``native``), and a backend this installation lacks
(the compiled core not built, or mid-rebuild) skips with the reason.

Test modules take everything from here as fixtures and never import this
module: a measured job runs in a spawned child that imports its test module,
and ``conftest`` is not a name that resolves reliably there.

Each test records what it measured through the ``report`` fixture, which fills
``benchmark.extra_info`` and a session-wide board; at the end of the session a
summary prints every "ours / peer" ratio, since ratios, not absolute seconds,
are what these shared, noisy machines can compare.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import pytest
from corpus import DEFAULT_SPECIAL, MIB, cached_corpus, document_joiner
from peak_memory import Measurement, run_in_child

P = ParamSpec("P")
R = TypeVar("R")

ROOT = Path(__file__).resolve().parent.parent
SHARED_FIXTURES = ROOT.parent / "shared" / "fixtures"
SPECIAL = DEFAULT_SPECIAL


# ---------------------------------------------------------------------------
# Options


_SIZE_OPTIONS = {
    "--bench-train-mb": ("STREAMBPE_BENCH_TRAIN_MB", 100.0, "training corpus size in MiB"),
    "--bench-encode-mb": ("STREAMBPE_BENCH_ENCODE_MB", 20.0, "in-memory encode text in MiB"),
    "--bench-file-mb": ("STREAMBPE_BENCH_FILE_MB", 1024.0, "encode_file input size in MiB"),
    "--bench-train-small-mb": (
        "STREAMBPE_BENCH_TRAIN_SMALL_MB",
        40.0,
        "corpus of the vocab-16,000 training goal and the merge-loop group, in MiB",
    ),
    "--bench-long-mb": ("STREAMBPE_BENCH_LONG_MB", 1.0, "size of each long-piece input in MiB"),
    "--bench-scale-mb": (
        "STREAMBPE_BENCH_SCALE_MB",
        100.0,
        "corpus of the scale-out group (Dask LocalCluster vs the default pool), in MiB",
    ),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("streambpe benchmarks")
    for option, (variable, default, text) in _SIZE_OPTIONS.items():
        group.addoption(
            option,
            type=float,
            default=float(os.environ.get(variable, default)),
            help=f"{text} (default {default:g}, or ${variable})",
        )
    group.addoption(
        "--bench-scaling-mb",
        default=os.environ.get("STREAMBPE_BENCH_SCALING_MB", "1,8,64"),
        help="comma-separated text sizes in MiB of the encode scaling group "
        "(default 1,8,64, or $STREAMBPE_BENCH_SCALING_MB)",
    )
    group.addoption(
        "--bench-seed",
        type=int,
        default=int(os.environ.get("STREAMBPE_BENCH_SEED", 0)),
        help="seed of the generated corpora (default 0, or $STREAMBPE_BENCH_SEED)",
    )
    group.addoption(
        "--bench-report",
        default=None,
        metavar="PATH",
        help="also write the closing summary as a Markdown table to PATH",
    )


def _size_bytes(config: pytest.Config, option: str) -> int:
    return round(float(config.getoption(option)) * MIB)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Lift the test suite's per-test time limit: a full-size benchmark runs for minutes."""
    if not config.pluginmanager.hasplugin("timeout"):
        return
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.timeout(0))


# ---------------------------------------------------------------------------
# Backends

#: Every kernel backend streambpe may have; those missing here skip, saying why.
BACKENDS = ("python", "native")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The name of a streambpe kernel backend to run under, or skip if it is not available.

    Tests select it with ``streambpe.core.using_backend(backend)`` around the
    timed work, and child-process jobs take the name and select it themselves.
    """
    name: str = request.param
    try:
        from streambpe import core
    except ImportError as exc:  # the package itself is broken (mid-edit): nothing to time
        pytest.skip(f"streambpe.core does not import: {exc}")
    available = core.available_backends()
    if name not in available:
        pytest.skip(
            f"streambpe backend {name!r} is not available here (available: {available}); "
            "the compiled core is not built, failed to import, or is being rebuilt"
        )
    return name


# ---------------------------------------------------------------------------
# Corpora and reference files


@pytest.fixture(scope="session")
def train_corpus(pytestconfig: pytest.Config) -> Path:
    """The multilingual training corpus (documents joined by ``<|endoftext|>``)."""
    seed = pytestconfig.getoption("--bench-seed")
    return cached_corpus(_size_bytes(pytestconfig, "--bench-train-mb"), seed=seed)


@pytest.fixture(scope="session")
def encode_text(pytestconfig: pytest.Config) -> str:
    """The multilingual text for in-memory encoding (a different seed from training)."""
    seed = pytestconfig.getoption("--bench-seed") + 1
    path = cached_corpus(_size_bytes(pytestconfig, "--bench-encode-mb"), seed=seed)
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def encode_documents(encode_text: str) -> list[str]:
    """``encode_text`` cut into about 1000 documents of ordinary text (no special tokens)."""
    documents = encode_text.split(document_joiner(SPECIAL))
    per_piece = max(1, len(documents) // 1000)
    return [
        "\n\n".join(documents[start : start + per_piece])
        for start in range(0, len(documents), per_piece)
    ]


@pytest.fixture(scope="session")
def train_small_corpus(pytestconfig: pytest.Config) -> Path:
    """The corpus of the vocab-16,000 goal, ``--bench-train-small-mb`` (a prefix of ``train_corpus``)."""
    seed = pytestconfig.getoption("--bench-seed")
    return cached_corpus(_size_bytes(pytestconfig, "--bench-train-small-mb"), seed=seed)


@pytest.fixture(scope="session")
def long_piece_bytes(pytestconfig: pytest.Config) -> int:
    """The size of each long-piece input."""
    return _size_bytes(pytestconfig, "--bench-long-mb")


@pytest.fixture(scope="session")
def big_file(pytestconfig: pytest.Config) -> Path:
    """The ``encode_file`` input, ``--bench-file-mb`` MiB."""
    seed = pytestconfig.getoption("--bench-seed") + 2
    return cached_corpus(_size_bytes(pytestconfig, "--bench-file-mb"), seed=seed)


@pytest.fixture(scope="session")
def tenth_file(pytestconfig: pytest.Config) -> Path:
    """A tenth of ``big_file`` (and byte for byte its prefix: same seed)."""
    seed = pytestconfig.getoption("--bench-seed") + 2
    return cached_corpus(_size_bytes(pytestconfig, "--bench-file-mb") // 10, seed=seed)


# name -> (file, pattern name in streambpe.patterns, special tokens)
_ENCODINGS: dict[str, tuple[str, str, dict[str, int]]] = {
    "r50k": ("r50k_base.tiktoken", "gpt2", {SPECIAL: 50256}),
    "cl100k": (
        "cl100k_base.tiktoken",
        "cl100k",
        {
            SPECIAL: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k": ("o200k_base.tiktoken", "o200k", {SPECIAL: 199999, "<|endofprompt|>": 200018}),
}


@dataclass(frozen=True)
class EncodingFiles:
    """A tiktoken encoding as a ``.tiktoken`` file plus its pattern and special tokens.

    Jobs that run in a child process get its fields (plain data), never the
    object, whose class lives in this conftest. The copies the project ships in
    ``fixtures/tiktoken`` are preferred over the shared reference folder.
    """

    name: str
    path: Path
    pattern_name: str
    special_tokens: dict[str, int]

    @property
    def pattern(self) -> str:
        from streambpe.patterns import resolve_pattern

        return resolve_pattern(self.pattern_name)

    def tiktoken(self) -> Any:
        """A ``tiktoken.Encoding`` built offline from these files."""
        import tiktoken
        import tiktoken.load

        return tiktoken.Encoding(
            self.name,
            pat_str=self.pattern,
            mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(self.path)),
            special_tokens=self.special_tokens,
        )


@pytest.fixture(scope="session")
def encoding_files() -> Callable[[str], EncodingFiles]:
    """``encoding_files("r50k")``: the files of that encoding, or skip saying which is missing."""

    def find(name: str) -> EncodingFiles:
        if name not in _ENCODINGS:
            raise KeyError(f"unknown encoding {name!r}; known: {sorted(_ENCODINGS)}")
        filename, pattern_name, specials = _ENCODINGS[name]
        for folder in (ROOT / "fixtures" / "tiktoken", SHARED_FIXTURES / "tiktoken"):
            if (folder / filename).is_file():
                return EncodingFiles(name, folder / filename, pattern_name, specials)
        pytest.skip(f"no {filename} in fixtures/tiktoken or {SHARED_FIXTURES / 'tiktoken'}")

    return find


@pytest.fixture(scope="session")
def streambpe_api() -> Callable[..., Any]:
    """``streambpe_api("Tokenizer")``: that part of streambpe, or skip if it is not there yet."""

    def lookup(*names: str) -> Any:
        import streambpe

        found: Any = streambpe
        for name in names:
            found = getattr(found, name, None)
            if found is None:
                pytest.skip(f"streambpe.{'.'.join(names)} is not available yet")
        return found

    return lookup


@pytest.fixture(scope="session")
def cs336_corpus() -> Path:
    """The CS336 reference training text, or skip if the shared fixtures are absent."""
    path = SHARED_FIXTURES / "cs336" / "corpus.en"
    if not path.is_file():
        pytest.skip(f"{path} is absent (the shared reference fixtures are not checked out)")
    return path


# ---------------------------------------------------------------------------
# Reporting


@dataclass(frozen=True)
class Entry:
    """One implementation's best result in one benchmark group."""

    group: str
    name: str
    ours: bool
    seconds: float
    peak_rss: int | None
    backend: str | None = None
    #: False for a peer whose output differed from ours (or tiktoken's): shown, never compared.
    exact: bool = True
    input_bytes: int | None = None

    @property
    def label(self) -> str:
        """The name as reports show it, with the backend of a streambpe entry."""
        return self.name if self.backend is None else f"{self.name} [{self.backend}]"

    @property
    def mib_per_s(self) -> float | None:
        return None if not self.input_bytes else self.input_bytes / MIB / self.seconds


@dataclass
class Board:
    """Every entry of the session, plus free-form notes, for the closing summary."""

    entries: list[Entry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def find(self, group: str, name: str, backend: str | None = None) -> Entry | None:
        return next(
            (
                e
                for e in self.entries
                if e.group == group and e.name == name and (backend is None or e.backend == backend)
            ),
            None,
        )


_BOARD = pytest.StashKey[Board]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_BOARD] = Board()


class Report:
    """Collects one test's timings and turns them into ``extra_info`` and a board entry.

    In-process work is timed by wrapping it with :meth:`timed`; child-process
    work goes through :meth:`in_child`, which keeps the child's own wall time
    (not the process start-up) and its tree's peak RSS. The best (smallest) time
    over the rounds is what gets compared: noise on a shared machine only ever
    adds time.
    """

    def __init__(self, benchmark: Any, board: Board) -> None:
        self.benchmark = benchmark
        self.board = board
        self.durations: list[float] = []
        self.peak_rss: int | None = None

    def timed(self, function: Callable[P, R]) -> Callable[P, R]:
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            started = time.perf_counter()
            result = function(*args, **kwargs)
            self.durations.append(time.perf_counter() - started)
            return result

        return run

    def in_child(self, function: Callable[..., R], *args: Any, **options: Any) -> Measurement[R]:
        """:func:`peak_memory.run_in_child`, remembering the time and the peak."""
        measured = run_in_child(function, *args, **options)
        self.durations.append(measured.seconds)
        self.peak_rss = max(self.peak_rss or 0, measured.peak_rss)
        return measured

    @property
    def best_seconds(self) -> float:
        return min(self.durations)

    def finish(
        self,
        name: str,
        *,
        ours: bool,
        input_bytes: int | None = None,
        tokens: int | None = None,
        seconds: float | None = None,
        backend: str | None = None,
        exact: bool = True,
        **figures: Any,
    ) -> Entry:
        """Record the result under ``name``; ``seconds`` overrides the measured best time.

        ``backend`` names the streambpe kernel backend the result was measured
        with; ``exact=False`` marks a peer whose output differed, so the summary
        shows it without a ratio.
        """
        best = self.best_seconds if seconds is None else seconds
        info = self.benchmark.extra_info
        info["implementation"] = name
        if backend is not None:
            info["backend"] = backend
        if not exact:
            info["exact_peer"] = False
        info["best_seconds"] = round(best, 4)
        if self.peak_rss is not None:
            info["peak_rss_mib"] = round(self.peak_rss / MIB, 1)
        if input_bytes is not None:
            info["input_mib"] = round(input_bytes / MIB, 2)
            info["mib_per_s"] = round(input_bytes / MIB / best, 3)
        if tokens is not None:
            info["tokens"] = tokens
            info["tokens_per_s"] = round(tokens / best)
        info.update(figures)
        entry = Entry(
            self.benchmark.group or "ungrouped",
            name,
            ours,
            best,
            self.peak_rss,
            backend=backend,
            exact=exact,
            input_bytes=input_bytes,
        )
        self.board.entries.append(entry)
        return entry

    def note(self, text: str) -> None:
        self.board.notes.append(text)


@pytest.fixture
def report(benchmark: Any, request: pytest.FixtureRequest) -> Report:
    return Report(benchmark, request.config.stash[_BOARD])


def _peers_of(mine: Entry, entries: list[Entry]) -> list[Entry]:
    """The exact peers of one of our entries in its group (of its backend, if they have one)."""
    return [
        entry
        for entry in entries
        if entry.group == mine.group
        and not entry.ours
        and entry.exact
        and (entry.backend is None or entry.backend == mine.backend)
    ]


def _summary_lines(board: Board) -> Iterator[str]:
    groups = list(dict.fromkeys(entry.group for entry in board.entries))
    for group in groups:
        entries = [entry for entry in board.entries if entry.group == group]
        yield f"[{group}]"
        for entry in entries:
            rate = "" if entry.mib_per_s is None else f"  {entry.mib_per_s:9.2f} MiB/s"
            peak = "" if entry.peak_rss is None else f"  peak RSS {entry.peak_rss / MIB:8.1f} MiB"
            flag = "" if entry.exact else "  (output differs: not an exact peer)"
            yield f"  {entry.label:<52} {entry.seconds:9.3f} s{rate}{peak}{flag}"
        ours = [entry for entry in entries if entry.ours]
        for mine in ours:
            for peer in _peers_of(mine, entries):
                line = (
                    f"  ratio {mine.label} / {peer.label}: time {mine.seconds / peer.seconds:.2f}x"
                )
                if mine.peak_rss and peer.peak_rss:
                    line += f", peak RSS {mine.peak_rss / peer.peak_rss:.2f}x"
                yield line
        for native in (entry for entry in ours if entry.backend == "native"):
            pure = next((e for e in ours if e.backend == "python" and e.name == native.name), None)
            if pure is not None:
                yield (
                    f"  speedup of native over python, {native.name}: "
                    f"{pure.seconds / native.seconds:.2f}x"
                )
    for note in board.notes:
        yield f"note: {note}"


def _markdown_lines(board: Board) -> Iterator[str]:
    """The board as a Markdown table: one row per entry, with its ratio to the group's peers."""
    yield "| group | implementation | seconds | MiB/s | peak RSS MiB | vs peers (time) |"
    yield "| --- | --- | ---: | ---: | ---: | --- |"
    for entry in board.entries:
        peers = _peers_of(entry, board.entries) if entry.ours else []
        ratios = ", ".join(f"{entry.seconds / peer.seconds:.2f}x {peer.label}" for peer in peers)
        rate = "" if entry.mib_per_s is None else f"{entry.mib_per_s:.2f}"
        peak = "" if entry.peak_rss is None else f"{entry.peak_rss / MIB:.0f}"
        name = entry.label if entry.exact else f"{entry.label} (differs)"
        yield f"| {entry.group} | {name} | {entry.seconds:.3f} | {rate} | {peak} | {ratios} |"
    if board.notes:
        yield ""
    for note in board.notes:
        yield f"- {note}"


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    board = config.stash.get(_BOARD, None)
    if not board or not board.entries:
        return
    terminalreporter.section("streambpe: ours / peer (below 1.00x: we are faster or smaller)")
    for line in _summary_lines(board):
        terminalreporter.write_line(line)
    target = config.getoption("--bench-report")
    if target:
        Path(target).write_text("\n".join(_markdown_lines(board)) + "\n", encoding="utf-8")
        terminalreporter.write_line(f"report written to {target}")
