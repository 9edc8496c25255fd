"""Run the differential fuzz checks for a given time, not a given number of examples.

The checks of ``tests/test_fuzz_differential.py`` (pretokenizing, encoding,
stream splits, training, compiled against pure Python and tiktoken), on the
adversarial text of ``tests/adversarial_text.py``, each in turn with a fresh
random seed, until the time is up. Any disagreement or crash stops the run
with hypothesis' shrunk example and exit status 1. Meant to run under the
sanitizer build, where a memory error aborts with a report:

    tests/sanitizer/run.sh --fuzz 30          # 30 minutes, sanitized core
    python tests/fuzz_long.py --minutes 5     # the normal build
    python tests/fuzz_long.py --minutes 5 --checks encode,stream
"""

from __future__ import annotations

import argparse
import random
import sys
import time

# Run as a script, this file's folder is first on sys.path: the tests' modules import.
from hypothesis import HealthCheck, given, seed, settings
from test_fuzz_differential import CHECKS

#: Examples per check per round: long enough for hypothesis to explore, short
#: enough that every check gets a turn every minute or so.
ROUND_EXAMPLES = 200


def run_round(name: str, examples: int, round_seed: int) -> None:
    check, arguments = CHECKS[name]

    @seed(round_seed)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )
    @given(arguments)
    def fuzz(drawn: tuple[object, ...]) -> None:
        check(*drawn)  # type: ignore[operator]

    fuzz()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, required=True, help="how long to run")
    parser.add_argument(
        "--checks", default=",".join(CHECKS), help=f"comma-separated, from {', '.join(CHECKS)}"
    )
    parser.add_argument("--examples", type=int, default=ROUND_EXAMPLES, help="per check per round")
    args = parser.parse_args(argv)
    names = args.checks.split(",")
    unknown = [name for name in names if name not in CHECKS]
    if unknown:
        parser.error(f"unknown checks {unknown}; choose from {', '.join(CHECKS)}")
    deadline = time.monotonic() + 60 * args.minutes
    started = time.monotonic()
    examples = dict.fromkeys(names, 0)
    rounds = 0
    while time.monotonic() < deadline:
        for name in names:
            round_seed = random.randrange(2**32)
            try:
                run_round(name, args.examples, round_seed)
            except Exception:
                print(f"fuzz: check {name!r} failed (seed {round_seed})", file=sys.stderr)
                raise
            examples[name] += args.examples
            if time.monotonic() >= deadline:
                break
        rounds += 1
    minutes = (time.monotonic() - started) / 60
    counts = ", ".join(f"{name} {count}" for name, count in examples.items())
    print(f"fuzz: {minutes:.1f} min, {rounds} round(s), no disagreement; examples: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
