"""Two ways of doing the same work, timed in turns: per-round ratios a slow spell cannot tilt.

A shared machine drifts: the same work can take a tenth to two fifths longer
for minutes at a time. A group that runs every round of one side, then every
round of the other, can put a slow spell on one side only. Timed back to back,
round after round, both sides of a round see the same machine, so each
round's ratio is fair, and the median over the rounds is the figure to read.

Each side is a *preparer*: called outside the clock, it sets up what the
round needs (a fresh tokenizer, a cleared cache) and returns the call to time.

>>> turns = time_in_turns(lambda: lambda: sum(range(1000)), lambda: lambda: 499500, rounds=3)
>>> len(turns.ratios)
3
>>> InTurns([2.0, 2.0, 3.0], [1.0, 2.0, 1.0]).describe()
'2.00x, 1.00x, 3.00x; median 2.00x, lowest 1.00x'
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

R = TypeVar("R")


@dataclass(frozen=True)
class InTurns:
    """The seconds of each round, for the baseline and for the contender."""

    baseline_seconds: list[float]
    contender_seconds: list[float]

    @property
    def ratios(self) -> list[float]:
        """Per round, the baseline's time over the contender's: above 1, the contender was faster."""
        return [
            baseline / contender
            for baseline, contender in zip(
                self.baseline_seconds, self.contender_seconds, strict=True
            )
        ]

    @property
    def median_ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def lowest_ratio(self) -> float:
        return min(self.ratios)

    def describe(self) -> str:
        """Every round's ratio, then the median and the lowest."""
        rounds = ", ".join(f"{ratio:.2f}x" for ratio in self.ratios)
        return f"{rounds}; median {self.median_ratio:.2f}x, lowest {self.lowest_ratio:.2f}x"


def time_in_turns(
    baseline: Callable[[], Callable[[], R]],
    contender: Callable[[], Callable[[], R]],
    *,
    rounds: int,
    check: Callable[[R, R], None] | None = None,
) -> InTurns:
    """Time ``rounds`` rounds, each preparing and timing both sides, back to back.

    The side that goes first alternates, the baseline first in even rounds,
    so neither always inherits the other's garbage or warmed caches.
    ``check`` sees both results of every round, the baseline's first (it
    should raise if they differ), before they are dropped, so a round holds
    only its own results.
    """
    seconds: dict[str, list[float]] = {"baseline": [], "contender": []}
    sides = (("baseline", baseline), ("contender", contender))
    for round_number in range(rounds):
        results: dict[str, R] = {}
        for name, prepare in sides if round_number % 2 == 0 else sides[::-1]:
            call = prepare()
            started = time.perf_counter()
            results[name] = call()
            seconds[name].append(time.perf_counter() - started)
        if check is not None:
            check(results["baseline"], results["contender"])
        del results
    return InTurns(seconds["baseline"], seconds["contender"])
