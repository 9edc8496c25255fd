"""The training merge loop alone: ``learn_merges`` per kernel backend, on the same word counts.

The words of the vocab-16,000 goal corpus (``--bench-train-small-mb``, 40 MiB)
are counted once, untimed, with ``count_words_in_inputs`` (GPT-2 pattern,
``<|endoftext|>`` special, two workers). Each round then hands a fresh copy of
the counts (``learn_merges`` empties the dict it is given; copying is outside
the clock) to ``streambpe.core.active_backend().learn_merges`` for
16,000 - 257 merges. Counting and I/O are out of the picture, so the summary's
"speedup of native over python" is the speedup of the merge loop itself.

Both backends must learn the same merges; the test asserts it. ffbpe's trainer
(``tie_break="largest_content"``) runs on the same counts as a peer of the
merge loop alone, and is compared only if its merges equal ours.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from corpus import DEFAULT_SPECIAL as SPECIAL
from peers import merges_digest, read_ffbpe_merges

if TYPE_CHECKING:
    from conftest import Report

VOCAB_SIZE = 16_000
MAX_MERGES = VOCAB_SIZE - 256 - 1  # the bytes and one special token
ROUNDS = 2


@pytest.fixture(scope="module")
def word_counts(streambpe_api: Callable[..., Any], train_small_corpus: Path) -> dict[str, int]:
    """The corpus's word counts, counted once (untimed)."""
    streambpe_api("core", "available_backends")
    from streambpe.patterns import GPT2
    from streambpe.sources.inputs import resolve_inputs
    from streambpe.train.count_tasks import CountSettings
    from streambpe.train.counting import count_words_in_inputs
    from streambpe.train.options import TrainOptions

    settings = CountSettings(GPT2, (SPECIAL,))
    return count_words_in_inputs(
        resolve_inputs(train_small_corpus), TrainOptions(settings, workers=2)
    )


@pytest.fixture(scope="module")
def merge_digests() -> dict[str, str]:
    """Fingerprint of the merges each backend learned."""
    return {}


def test_merge_loop_streambpe(
    benchmark: Any,
    report: Report,
    word_counts: dict[str, int],
    merge_digests: dict[str, str],
    backend: str,
) -> None:
    from streambpe import core

    benchmark.group = "merge-loop"

    def fresh_counts() -> tuple[tuple[dict[str, int]], dict[str, Any]]:
        return (dict(word_counts),), {}

    def learn(counts: dict[str, int]) -> list[tuple[bytes, bytes]]:
        with core.using_backend(backend):
            return core.active_backend().learn_merges(counts, MAX_MERGES)

    merges = benchmark.pedantic(report.timed(learn), setup=fresh_counts, rounds=ROUNDS)
    digest = merges_digest(merges)
    merge_digests[backend] = digest
    others = {name: known for name, known in merge_digests.items() if known != digest}
    report.finish(
        "streambpe learn_merges",
        ours=True,
        backend=backend,
        merges=len(merges),
        distinct_words=len(word_counts),
        same_merges_as_other_backends=not others,
    )
    assert not others, f"backend {backend} learned different merges from {sorted(others)}"


def _ffbpe_learn(trainer_class: Any, counts: dict[str, int], folder: Path) -> list[Any]:
    trainer = trainer_class(
        [SPECIAL], unit="byte", initial_alphabet="byte_level", tie_break="largest_content"
    )
    trainer.add_words(counts)
    trainer.train(VOCAB_SIZE)
    merges_path = folder / "merges.txt"
    trainer.validate_model().save_files(folder / "vocab.json", merges_path, format="gpt2")
    return read_ffbpe_merges(str(merges_path))


def test_merge_loop_ffbpe(
    benchmark: Any,
    report: Report,
    word_counts: dict[str, int],
    merge_digests: dict[str, str],
    tmp_path: Path,
) -> None:
    ffbpe = pytest.importorskip("ffbpe", reason="ffbpe is not installed: pip install -e '.[bench]'")
    benchmark.group = "merge-loop"
    merges = benchmark.pedantic(
        report.timed(_ffbpe_learn),
        args=(ffbpe.BpeTrainer, word_counts, tmp_path),
        rounds=ROUNDS,
    )
    digest = merges_digest(merges)
    exact = not merge_digests or digest in merge_digests.values()
    report.finish(
        "ffbpe BpeTrainer (add_words + train, largest_content)",
        ours=False,
        exact=exact,
        merges=len(merges),
        compared_with_streambpe=bool(merge_digests),
    )
    if not exact:
        report.note("ffbpe merge loop: merges differ from streambpe's on the same counts")
