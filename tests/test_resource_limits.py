"""Long inputs: memory follows the output, and one huge piece stays linear in its length.

Each measurement runs in a fresh process that resets its peak resident size
(``/proc/self/clear_refs``) just before the call, so the peak it reads is
the call's own. The sizes keep the suite fast; the 1 GB string and 100 MB
piece of the issue are a manual run (README, "Limits"), and the times are in
``benchmarks/test_bench_long_pieces.py``. Under the sanitizer build (shadow
memory inflates every figure) the same calls run without the bounds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from streambpe.core import NATIVE

if NATIVE is None:
    pytest.skip("the compiled core was not built", allow_module_level=True)

REPO_ROOT = Path(__file__).resolve().parents[1]
SANITIZED = "libasan" in os.environ.get("LD_PRELOAD", "")
MIB = 1 << 20

# Prints {"peak_growth": bytes, "result": ...} for one call on a generated text.
_MEASURE = """
import json, random, sys
import tiktoken.load
from streambpe import Tokenizer

def status(field):
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise LookupError(field)

kind, size, call = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ranks = tiktoken.load.load_tiktoken_bpe(sys.argv[4])
tokenizer = Tokenizer.from_ranks(ranks, pattern="gpt2", cache_size=1024)
tokenizer.encode("warm up the kernels")
if kind == "prose":
    rng = random.Random(0)
    words = ["the", " cat", " sat", " on", " mat", ",", "\\n", " Über", " 東京", " 123", " zq"]
    parts = rng.choices(words, k=size // 3)
    text = "".join(parts)[:size]
    del parts
elif kind == "piece":
    text = "ab" * (size // 2)  # one pretoken: no pattern boundary anywhere
else:
    raise SystemExit(f"unknown kind {kind}")
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")  # resets the peak resident size to the current one
before = status("VmRSS")
if call == "count":
    result = tokenizer.count_tokens(text)
    output_bytes = 0
else:
    ids = tokenizer.encode_to_array(text)
    result = len(ids)
    output_bytes = ids.itemsize * len(ids)
print(json.dumps({"peak_growth": status("VmHWM") - before, "result": result,
                  "output_bytes": output_bytes, "length": len(text)}))
"""


def measure(kind: str, size: int, call: str) -> dict[str, int]:
    ranks = REPO_ROOT / "fixtures" / "tiktoken" / "r50k_base.tiktoken"
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_MEASURE), kind, str(size), call, str(ranks)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    result: dict[str, int] = json.loads(completed.stdout)
    return result


needs_proc = pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc to read peak memory"
)


@needs_proc
def test_counting_a_long_text_needs_no_memory_per_token() -> None:
    """count_tokens works in blocks: 8 MiB of text, nothing kept per id."""
    measured = measure("prose", 8 * MIB, "count")
    assert measured["result"] > 2_000_000
    if not SANITIZED:
        assert measured["peak_growth"] < 4 * MIB, measured


@needs_proc
def test_encoding_a_long_text_needs_memory_for_its_output_only() -> None:
    """encode_to_array of 8 MiB: the peak grows by the id array (and its regrowth), no more."""
    measured = measure("prose", 8 * MIB, "array")
    assert measured["result"] > 2_000_000
    if not SANITIZED:
        assert measured["peak_growth"] < 2 * measured["output_bytes"] + 4 * MIB, measured


@needs_proc
def test_one_long_piece_needs_memory_linear_in_its_length() -> None:
    """BPE on one 4 MiB piece holds a few arrays over its bytes: under 40 bytes per byte."""
    measured = measure("piece", 4 * MIB, "count")
    assert measured["result"] > 0
    if not SANITIZED:
        assert measured["peak_growth"] < 40 * measured["length"], measured
