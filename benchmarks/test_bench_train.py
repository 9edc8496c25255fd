"""Training benchmarks: streambpe ``train_bpe`` against ffbpe, Hugging Face tokenizers and rustbpe.

Two goal rows, each a benchmark group trained on the same generated
multilingual corpus with the GPT-2 pattern and ``<|endoftext|>`` special:

* ``train-v16000``: ``--bench-train-small-mb`` (40 MiB) at vocab 16,000;
* ``train-v32000``: ``--bench-train-mb`` (100 MiB) at vocab 32,000, where
  streambpe also runs with one worker, for the 1 -> 2 worker speedup.

streambpe runs once per kernel backend (the job selects it in its child).
Each run is in a fresh child process (see :mod:`peak_memory`), so wall time and
the peak RSS of its whole process tree (worker processes or threads included)
are measured the same way. Parallel peers get the machine's two cores:
streambpe through ``workers=2``, the Rust peers through ``RAYON_NUM_THREADS=2``.

ffbpe is the exact peer: with ``tie_break="largest_content"`` (CS336's rule,
which is ours) it must learn our merges. That is checked before it is timed,
on a small prefix of the corpus, and again on the timed run's merges against
ours from the same session; a peer that differs is reported as such, never as
a ratio. What HF and rustbpe see differs in small ways that do not change the
workload's size: HF reads the file line by line and does not treat
``<|endoftext|>`` as special while counting (the token is still added to its
vocab), and rustbpe, which has no special tokens, is fed the documents between
them.

A third group trains on the CS336 reference corpus (``corpus.en``, vocab
500), in process, where the goal for streambpe is at most 0.38 s.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from corpus import DEFAULT_SPECIAL as SPECIAL
from corpus import MIB, cached_corpus, read_documents
from peers import merges_digest, train_ffbpe_merges

if TYPE_CHECKING:
    from conftest import Report

#: goal -> (corpus fixture, vocab size); the group is ``train-v{vocab}``.
GOALS = {"v16000": ("train_small_corpus", 16_000), "v32000": ("train_corpus", 32_000)}
CS336_VOCAB_SIZE = 500
CS336_GOAL_SECONDS = 0.38
TWO_CORES = {"RAYON_NUM_THREADS": "2", "TOKENIZERS_PARALLELISM": "true"}
#: The untimed ffbpe exactness check trains both on this much of the corpus.
FFBPE_CHECK_BYTES = 2 * MIB
FFBPE_CHECK_VOCAB = 1_000


# ---------------------------------------------------------------------------
# Jobs: module-level so they can run in a spawned child process.


def train_streambpe(
    path: str, vocab_size: int, workers: int | None, backend: str | None = None
) -> dict[str, Any]:
    """Train with streambpe; report the merges' fingerprint and, if offered, where time went."""
    import streambpe
    from streambpe.core import using_backend

    options: dict[str, Any] = {"workers": workers}
    timings: dict[str, float] = {}
    if "timings" in inspect.signature(streambpe.train_bpe).parameters:
        options["timings"] = timings
    with using_backend(backend or streambpe.backend()):
        _, merges = streambpe.train_bpe(path, vocab_size, [SPECIAL], **options)
        used = streambpe.backend()
    return {
        "merges": len(merges),
        "digest": merges_digest(merges),
        "timings": timings,
        "backend": used,
    }


def train_ffbpe(path: str, vocab_size: int) -> dict[str, Any]:
    """Train with ffbpe (CS336 tie-break); report the merges' fingerprint."""
    from streambpe.patterns import GPT2

    merges = train_ffbpe_merges(path, vocab_size, [SPECIAL], GPT2)
    return {"merges": len(merges), "digest": merges_digest(merges)}


def train_hf_tokenizers(path: str, vocab_size: int) -> dict[str, Any]:
    """Train a byte-level BPE with HF tokenizers, pretokenizing with the GPT-2 pattern."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    from streambpe.patterns import GPT2

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(GPT2), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[SPECIAL],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train([path], trainer)
    return {"merges": tokenizer.get_vocab_size() - 256 - 1}


def train_rustbpe(path: str, vocab_size: int) -> dict[str, Any]:
    """Train with rustbpe on the documents between special tokens, streamed from the file."""
    import rustbpe

    from streambpe.patterns import GPT2

    tokenizer = rustbpe.Tokenizer()
    # rustbpe has no special tokens: one id fewer gives it the same number of merges.
    tokenizer.train_from_iterator(read_documents(path, SPECIAL), vocab_size - 1, pattern=GPT2)
    return {"merges": tokenizer.vocab_size - 256}


# ---------------------------------------------------------------------------
# The goal rows, each run in a child process


@pytest.fixture(scope="module")
def our_digests() -> dict[tuple[str, int], str]:
    """Our merges' fingerprint by (corpus, vocab), from the streambpe runs of this session."""
    return {}


def _goal(request: pytest.FixtureRequest, goal: str) -> tuple[Path, int]:
    fixture, vocab_size = GOALS[goal]
    corpus: Path = request.getfixturevalue(fixture)
    return corpus, vocab_size


def _finish_training(
    report: Report,
    name: str,
    corpus: Path,
    vocab_size: int,
    result: dict[str, Any],
    **extra: Any,
) -> None:
    figures = {
        f"{stage}_s": round(seconds, 3) for stage, seconds in result.get("timings", {}).items()
    }
    report.finish(
        name,
        ours=name.startswith("streambpe"),
        input_bytes=corpus.stat().st_size,
        merges=result["merges"],
        vocab_size=vocab_size,
        **figures,
        **extra,
    )


@pytest.mark.parametrize(("goal", "workers"), [("v16000", 2), ("v32000", 2), ("v32000", 1)])
def test_train_streambpe(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    request: pytest.FixtureRequest,
    our_digests: dict[tuple[str, int], str],
    goal: str,
    workers: int,
    backend: str,
) -> None:
    streambpe_api("train_bpe")
    corpus, vocab_size = _goal(request, goal)
    benchmark.group = f"train-{goal}"
    measured = benchmark.pedantic(
        report.in_child,
        args=(train_streambpe, str(corpus), vocab_size, workers, backend),
        kwargs={"preload": ["streambpe"]},
        rounds=1,
        iterations=1,
    )
    assert measured.result["backend"] == backend, "the child did not run the selected backend"
    key = (str(corpus), vocab_size)
    digest = measured.result["digest"]
    known = our_digests.setdefault(key, digest)
    assert digest == known, f"{backend} learned different merges from another streambpe run"
    name = f"streambpe train_bpe ({workers} worker{'s' if workers > 1 else ''})"
    _finish_training(report, name, corpus, vocab_size, measured.result, backend=backend)
    two_workers = report.board.find(benchmark.group, "streambpe train_bpe (2 workers)", backend)
    if workers == 1 and two_workers is not None:
        speedup = report.best_seconds / two_workers.seconds
        benchmark.extra_info["speedup_2_workers_vs_1"] = round(speedup, 2)
        report.note(f"train_bpe [{backend}] speedup from 1 to 2 workers: {speedup:.2f}x")


def _ffbpe_matches_on_prefix(corpus: Path, seed: int) -> tuple[bool, str]:
    """Untimed: do ffbpe and streambpe learn the same merges on the corpus's first 2 MiB?"""
    import streambpe
    from streambpe.patterns import GPT2

    size = min(FFBPE_CHECK_BYTES, corpus.stat().st_size)
    prefix = cached_corpus(size, seed=seed)  # same seed: byte for byte a prefix of the corpus
    _, ours = streambpe.train_bpe(prefix, FFBPE_CHECK_VOCAB, [SPECIAL], workers=1)
    theirs = train_ffbpe_merges(str(prefix), FFBPE_CHECK_VOCAB, [SPECIAL], GPT2)
    if ours == theirs:
        return True, f"same {len(ours)} merges on the first {size / MIB:.0f} MiB"
    index = next(
        (i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
        min(len(ours), len(theirs)),
    )
    return False, (
        f"merges differ from ours on the first {size / MIB:.0f} MiB at merge {index} "
        f"({len(theirs)} merges instead of {len(ours)})"
    )


@pytest.mark.parametrize("goal", list(GOALS))
def test_train_ffbpe(
    benchmark: Any,
    report: Report,
    request: pytest.FixtureRequest,
    pytestconfig: pytest.Config,
    our_digests: dict[tuple[str, int], str],
    goal: str,
) -> None:
    pytest.importorskip("ffbpe", reason="ffbpe is not installed: pip install -e '.[bench]'")
    corpus, vocab_size = _goal(request, goal)
    benchmark.group = f"train-{goal}"
    exact, why = _ffbpe_matches_on_prefix(corpus, pytestconfig.getoption("--bench-seed"))
    if not exact:
        report.note(f"ffbpe (tie_break=largest_content) is not an exact peer: {why}")
    measured = benchmark.pedantic(
        report.in_child,
        args=(train_ffbpe, str(corpus), vocab_size),
        kwargs={"preload": ["ffbpe", "streambpe"], "env": TWO_CORES},
        rounds=1,
        iterations=1,
    )
    ours = our_digests.get((str(corpus), vocab_size))
    if ours is None:
        checked = "not compared at full size (no streambpe run of this goal in the session)"
    elif measured.result["digest"] == ours:
        checked = "same merges as streambpe at full size"
    else:
        exact = False
        checked = "merges differ from streambpe's at full size"
        report.note(f"ffbpe [{goal}]: {checked}: reported without a ratio")
    _finish_training(
        report,
        "ffbpe (tie_break=largest_content)",
        corpus,
        vocab_size,
        measured.result,
        exact=exact,
        prefix_check=why,
        full_size_check=checked,
    )


@pytest.mark.parametrize("goal", list(GOALS))
def test_train_hf_tokenizers(
    benchmark: Any, report: Report, request: pytest.FixtureRequest, goal: str
) -> None:
    corpus, vocab_size = _goal(request, goal)
    benchmark.group = f"train-{goal}"
    measured = benchmark.pedantic(
        report.in_child,
        args=(train_hf_tokenizers, str(corpus), vocab_size),
        kwargs={"preload": ["tokenizers"], "env": TWO_CORES},
        rounds=1,
        iterations=1,
    )
    _finish_training(report, "HF tokenizers BpeTrainer", corpus, vocab_size, measured.result)


@pytest.mark.parametrize("goal", list(GOALS))
def test_train_rustbpe(
    benchmark: Any, report: Report, request: pytest.FixtureRequest, goal: str
) -> None:
    corpus, vocab_size = _goal(request, goal)
    benchmark.group = f"train-{goal}"
    measured = benchmark.pedantic(
        report.in_child,
        args=(train_rustbpe, str(corpus), vocab_size),
        kwargs={"preload": ["rustbpe"], "env": TWO_CORES},
        rounds=1,
        iterations=1,
    )
    _finish_training(report, "rustbpe", corpus, vocab_size, measured.result)


# ---------------------------------------------------------------------------
# CS336 reference corpus, in process (a child's start-up would dwarf the work)


@pytest.mark.benchmark(group="train-cs336")
def test_train_cs336_streambpe(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    cs336_corpus: Path,
    backend: str,
) -> None:
    from streambpe.core import using_backend

    train_bpe = streambpe_api("train_bpe")

    def train(path: Path) -> Any:
        with using_backend(backend):
            return train_bpe(path, CS336_VOCAB_SIZE, [SPECIAL])

    benchmark.pedantic(
        report.timed(train),
        args=(cs336_corpus,),
        rounds=5,
        iterations=1,
        warmup_rounds=1,
    )
    entry = report.finish(
        "streambpe train_bpe",
        ours=True,
        backend=backend,
        input_bytes=cs336_corpus.stat().st_size,
        goal_s=CS336_GOAL_SECONDS,
    )
    met = entry.seconds <= CS336_GOAL_SECONDS
    benchmark.extra_info["meets_goal"] = met
    report.note(
        f"corpus.en at vocab {CS336_VOCAB_SIZE} [{backend}]: best {entry.seconds:.3f} s, goal "
        f"<= {CS336_GOAL_SECONDS} s: {'met' if met else 'NOT met'}"
    )


@pytest.mark.benchmark(group="train-cs336")
def test_train_cs336_hf_tokenizers(benchmark: Any, report: Report, cs336_corpus: Path) -> None:
    benchmark.pedantic(
        report.timed(train_hf_tokenizers),
        args=(str(cs336_corpus), CS336_VOCAB_SIZE),
        rounds=5,
        iterations=1,
        warmup_rounds=1,
    )
    report.finish("HF tokenizers BpeTrainer", ours=False, input_bytes=cs336_corpus.stat().st_size)


@pytest.mark.benchmark(group="train-cs336")
def test_train_cs336_rustbpe(benchmark: Any, report: Report, cs336_corpus: Path) -> None:
    benchmark.pedantic(
        report.timed(train_rustbpe),
        args=(str(cs336_corpus), CS336_VOCAB_SIZE),
        rounds=5,
        iterations=1,
        warmup_rounds=1,
    )
    report.finish("rustbpe", ours=False, input_bytes=cs336_corpus.stat().st_size)
