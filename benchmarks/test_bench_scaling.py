"""Encode scaling (issue 13): one ``encode`` call on 1, 8 and 64 MiB of text, warm cache.

The rate of a single ``encode`` call must not fall as the text grows: a cost
that grows faster than the input (a quadratic join, a list copied per piece, a
cache that thrashes) shows here as MiB/s dropping from the smallest size to the
largest. Each size is a group of its own (``encode-scaling-<size>``) with
tiktoken in it, and the session notes print the rates of each implementation
side by side, with the largest size's rate over the smallest's.

The texts are prefixes of one generated multilingual corpus (r50k encoding),
so every size holds the same mix. streambpe runs per kernel backend; its cache
is warmed by one untimed ``encode`` of the same text, so the figure is the
steady-state rate, not the cost of filling the cache. Its ids are checked
against tiktoken's.

Sizes come from ``--bench-scaling-mb`` (default ``1,8,64``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from corpus import MIB, cached_corpus
from peers import ids_digest

if TYPE_CHECKING:
    from conftest import EncodingFiles, Report

#: Below this a rate drop is called a fall rather than noise (largest size vs smallest).
NOISE = 0.85


def _sizes(config: pytest.Config) -> list[int]:
    text = str(config.getoption("--bench-scaling-mb"))
    return sorted({round(float(part) * MIB) for part in text.split(",") if part.strip()})


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "scaling_size" in metafunc.fixturenames:
        sizes = _sizes(metafunc.config)
        metafunc.parametrize("scaling_size", sizes, ids=[f"{size / MIB:g}MiB" for size in sizes])


def _rounds(size: int) -> int:
    return 3 if size <= 8 * MIB else 2


@pytest.fixture(scope="module")
def scaling_texts(pytestconfig: pytest.Config) -> Callable[[int], str]:
    """``scaling_texts(size)``: the text of that size (only the last one asked for is kept)."""
    seed = pytestconfig.getoption("--bench-seed") + 3
    kept: dict[int, str] = {}

    def text(size: int) -> str:
        if size not in kept:
            kept.clear()
            kept[size] = cached_corpus(size, seed=seed).read_text(encoding="utf-8")
        return kept[size]

    return text


@pytest.fixture(scope="module")
def scaling_board() -> Iterator[dict[str, Any]]:
    """Rates by implementation and size; at module end, one note per implementation."""
    rates: dict[str, dict[int, float]] = {}
    reports: list[Report] = []
    yield {"rates": rates, "reports": reports}
    if not reports:
        return
    for label, by_size in rates.items():
        sizes = sorted(by_size)
        side_by_side = " | ".join(f"{size / MIB:g} MiB: {by_size[size]:.2f}" for size in sizes)
        line = f"encode scaling, {label}, MiB/s: {side_by_side}"
        if len(sizes) > 1:
            kept = by_size[sizes[-1]] / by_size[sizes[0]]
            verdict = "holds" if kept >= NOISE else "FALLS"
            line += f"; largest/smallest {kept:.2f}x ({verdict}, noise threshold {NOISE:.2f})"
        reports[-1].note(line)


@pytest.fixture(scope="module")
def tiktoken_digests() -> dict[int, str]:
    return {}


def _tiktoken_digest(digests: dict[int, str], files: EncodingFiles, size: int, text: str) -> str:
    if size not in digests:
        digests[size] = ids_digest(files.tiktoken().encode(text, allowed_special="all"))
    return digests[size]


def test_scaling_tiktoken(
    benchmark: Any,
    report: Report,
    encoding_files: Callable[[str], EncodingFiles],
    scaling_texts: Callable[[int], str],
    scaling_board: dict[str, Any],
    tiktoken_digests: dict[int, str],
    scaling_size: int,
) -> None:
    files = encoding_files("r50k")
    text = scaling_texts(scaling_size)
    benchmark.group = f"encode-scaling-{scaling_size / MIB:g}MiB"
    encoding = files.tiktoken()

    def encode(text: str) -> list[int]:
        return encoding.encode(text, allowed_special="all")

    ids = benchmark.pedantic(report.timed(encode), args=(text,), rounds=_rounds(scaling_size))
    tiktoken_digests[scaling_size] = ids_digest(ids)
    entry = report.finish(
        "tiktoken encode (1 thread)",
        ours=False,
        input_bytes=len(text.encode("utf-8")),
        tokens=len(ids),
    )
    scaling_board["rates"].setdefault("tiktoken", {})[scaling_size] = entry.mib_per_s
    scaling_board["reports"].append(report)


def test_scaling_streambpe(
    benchmark: Any,
    report: Report,
    streambpe_api: Callable[..., Any],
    encoding_files: Callable[[str], EncodingFiles],
    scaling_texts: Callable[[int], str],
    scaling_board: dict[str, Any],
    tiktoken_digests: dict[int, str],
    scaling_size: int,
    backend: str,
) -> None:
    from streambpe.core import using_backend

    files = encoding_files("r50k")
    text = scaling_texts(scaling_size)
    benchmark.group = f"encode-scaling-{scaling_size / MIB:g}MiB"
    tokenizer = streambpe_api("Tokenizer").from_tiktoken(
        files.path, pattern=files.pattern, special_tokens=files.special_tokens
    )

    def encode(text: str) -> list[int]:
        with using_backend(backend):
            return tokenizer.encode(text)  # type: ignore[no-any-return]

    warm_ids = encode(text)  # untimed: fills the piece cache
    reference = _tiktoken_digest(tiktoken_digests, files, scaling_size, text)
    assert ids_digest(warm_ids) == reference, f"streambpe [{backend}] ids differ from tiktoken's"
    del warm_ids
    ids = benchmark.pedantic(report.timed(encode), args=(text,), rounds=_rounds(scaling_size))
    matches = ids_digest(ids) == reference
    with using_backend(backend):
        info = tokenizer.cache_info()
    lookups = info.hits + info.misses
    entry = report.finish(
        "streambpe encode (warm cache)",
        ours=True,
        backend=backend,
        input_bytes=len(text.encode("utf-8")),
        tokens=len(ids),
        cache_hit_rate=round(info.hits / lookups, 4) if lookups else None,
        matches_tiktoken=matches,
    )
    scaling_board["rates"].setdefault(f"streambpe [{backend}]", {})[scaling_size] = entry.mib_per_s
    scaling_board["reports"].append(report)
    assert matches, f"streambpe [{backend}] ids differ from tiktoken's on a warm cache"
