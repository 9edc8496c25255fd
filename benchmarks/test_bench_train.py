"""Training benchmarks: streambpe ``train_bpe`` against Hugging Face tokenizers and rustbpe.

All three learn the same number of merges (vocab 32,000 with one special
token) with the GPT-2 pattern on the same generated multilingual corpus. Each
runs in a fresh child process (see :mod:`peak_memory`), so wall time and the
peak RSS of its whole process tree (worker processes or threads included) are
measured the same way. Parallel peers get the machine's two cores: streambpe
through ``workers=2``, the Rust peers through ``RAYON_NUM_THREADS=2``.

What each peer sees differs in small ways that do not change the workload's
size: HF reads the file line by line and does not treat ``<|endoftext|>`` as
special while counting (the token is still added to its vocab), and rustbpe,
which has no special tokens, is fed the documents between them.

A second group trains on the CS336 reference corpus (``corpus.en``, vocab
500), in process, where the goal for streambpe is at most 0.38 s.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from corpus import DEFAULT_SPECIAL as SPECIAL
from corpus import read_documents

if TYPE_CHECKING:
    from conftest import Report

VOCAB_SIZE = 32_000
CS336_VOCAB_SIZE = 500
CS336_GOAL_SECONDS = 0.38
TWO_CORES = {"RAYON_NUM_THREADS": "2", "TOKENIZERS_PARALLELISM": "true"}


# ---------------------------------------------------------------------------
# Jobs: module-level so they can run in a spawned child process.


def train_streambpe(path: str, vocab_size: int, workers: int | None) -> dict[str, Any]:
    """Train with streambpe; report the merge count and, if offered, where time went."""
    import streambpe

    options: dict[str, Any] = {"workers": workers}
    timings: dict[str, float] = {}
    if "timings" in inspect.signature(streambpe.train_bpe).parameters:
        options["timings"] = timings
    _, merges = streambpe.train_bpe(path, vocab_size, [SPECIAL], **options)
    return {"merges": len(merges), "timings": timings}


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
# Large corpus, each run in a child process


def _finish_training(report: Report, name: str, corpus: Path, result: dict[str, Any]) -> None:
    figures = {
        f"{stage}_s": round(seconds, 3) for stage, seconds in result.get("timings", {}).items()
    }
    report.finish(
        name,
        ours=name.startswith("streambpe"),
        input_bytes=corpus.stat().st_size,
        merges=result["merges"],
        **figures,
    )


@pytest.mark.benchmark(group="train")
@pytest.mark.parametrize("workers", [2, 1])
def test_train_streambpe(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    train_corpus: Path,
    workers: int,
) -> None:
    streambpe_api("train_bpe")
    measured = benchmark.pedantic(
        report.in_child,
        args=(train_streambpe, str(train_corpus), VOCAB_SIZE, workers),
        kwargs={"preload": ["streambpe"]},
        rounds=1,
        iterations=1,
    )
    name = f"streambpe train_bpe ({workers} worker{'s' if workers > 1 else ''})"
    _finish_training(report, name, train_corpus, measured.result)
    two_workers = report.board.find("train", "streambpe train_bpe (2 workers)")
    if workers == 1 and two_workers is not None:
        speedup = report.best_seconds / two_workers.seconds
        benchmark.extra_info["speedup_2_workers_vs_1"] = round(speedup, 2)
        report.note(f"train_bpe speedup from 1 to 2 workers: {speedup:.2f}x")


@pytest.mark.benchmark(group="train")
def test_train_hf_tokenizers(benchmark: Any, report: Report, train_corpus: Path) -> None:
    measured = benchmark.pedantic(
        report.in_child,
        args=(train_hf_tokenizers, str(train_corpus), VOCAB_SIZE),
        kwargs={"preload": ["tokenizers"], "env": TWO_CORES},
        rounds=1,
        iterations=1,
    )
    _finish_training(report, "HF tokenizers BpeTrainer", train_corpus, measured.result)


@pytest.mark.benchmark(group="train")
def test_train_rustbpe(benchmark: Any, report: Report, train_corpus: Path) -> None:
    measured = benchmark.pedantic(
        report.in_child,
        args=(train_rustbpe, str(train_corpus), VOCAB_SIZE),
        kwargs={"preload": ["rustbpe"], "env": TWO_CORES},
        rounds=1,
        iterations=1,
    )
    _finish_training(report, "rustbpe", train_corpus, measured.result)


# ---------------------------------------------------------------------------
# CS336 reference corpus, in process (a child's start-up would dwarf the work)


@pytest.mark.benchmark(group="train-cs336")
def test_train_cs336_streambpe(
    benchmark: Any, report: Report, streambpe_api: Callable[..., Any], cs336_corpus: Path
) -> None:
    train_bpe = streambpe_api("train_bpe")
    benchmark.pedantic(
        report.timed(train_bpe),
        args=(cs336_corpus, CS336_VOCAB_SIZE, [SPECIAL]),
        rounds=5,
        iterations=1,
        warmup_rounds=1,
    )
    entry = report.finish(
        "streambpe train_bpe",
        ours=True,
        input_bytes=cs336_corpus.stat().st_size,
        goal_s=CS336_GOAL_SECONDS,
    )
    met = entry.seconds <= CS336_GOAL_SECONDS
    benchmark.extra_info["meets_goal"] = met
    report.note(
        f"corpus.en at vocab {CS336_VOCAB_SIZE}: best {entry.seconds:.3f} s, goal "
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
