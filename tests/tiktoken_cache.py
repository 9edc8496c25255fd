"""Offline copies of OpenAI's vocabulary files, laid out as tiktoken's cache, for the face tests.

The files come from ``fixtures/tiktoken/`` (r50k, cl100k, o200k), from r50k
(p50k: r50k plus the runs of 2 to 25 spaces) and from the CS336 reference
data beside the repository (GPT-2's ``encoder.json`` and ``vocab.bpe``, when
present). Each is written under the SHA-1 of its URL, the name tiktoken
gives it, so tiktoken and ``streambpe.tiktoken`` both find them without the
network.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from streaming_helpers import tiktoken_file

REPO_ROOT = Path(__file__).resolve().parents[1]
CS336 = REPO_ROOT.parent / "shared" / "fixtures" / "cs336"
BLOB = "https://openaipublic.blob.core.windows.net"

R50K_URL = f"{BLOB}/encodings/r50k_base.tiktoken"
P50K_URL = f"{BLOB}/encodings/p50k_base.tiktoken"
CL100K_URL = f"{BLOB}/encodings/cl100k_base.tiktoken"
O200K_URL = f"{BLOB}/encodings/o200k_base.tiktoken"
GPT2_MERGES_URL = f"{BLOB}/gpt-2/encodings/main/vocab.bpe"
GPT2_ENCODER_URL = f"{BLOB}/gpt-2/encodings/main/encoder.json"

ALL_ENCODINGS = [
    "gpt2",
    "r50k_base",
    "p50k_base",
    "p50k_edit",
    "cl100k_base",
    "o200k_base",
    "o200k_harmony",
]
#: Encodings whose files ship in the repository (gpt2 needs the CS336 data).
SHIPPED_ENCODINGS = [name for name in ALL_ENCODINGS if name != "gpt2"]


def cache_name(url: str) -> str:
    """tiktoken's file name for ``url``: the SHA-1 of the URL, computed here independently."""
    return hashlib.sha1(url.encode("utf-8")).hexdigest()


def p50k_contents() -> bytes:
    """p50k_base's file: r50k's lines, then runs of 2 to 25 spaces as ranks 50257 to 50280."""
    lines = tiktoken_file("r50k_base.tiktoken").read_bytes()
    for width in range(2, 26):
        lines += base64.b64encode(b" " * width) + b" %d\n" % (50257 + width - 2)
    return lines


def published_files() -> dict[str, bytes]:
    """URL -> contents of every file available offline."""
    files = {
        R50K_URL: tiktoken_file("r50k_base.tiktoken").read_bytes(),
        P50K_URL: p50k_contents(),
        CL100K_URL: tiktoken_file("cl100k_base.tiktoken").read_bytes(),
        O200K_URL: tiktoken_file("o200k_base.tiktoken").read_bytes(),
    }
    if CS336.is_dir():
        files[GPT2_ENCODER_URL] = (CS336 / "gpt2_vocab.json").read_bytes()
        files[GPT2_MERGES_URL] = b"#version: 0.2\n" + (CS336 / "gpt2_merges.txt").read_bytes()
    return files


def seed_cache(folder: Path) -> Path:
    """Write every available file into ``folder`` under tiktoken's cache names."""
    folder.mkdir(parents=True, exist_ok=True)
    for url, contents in published_files().items():
        (folder / cache_name(url)).write_bytes(contents)
    return folder


def tiny_encoding_spec() -> dict[str, object]:
    """A small encoding's constructor, importable by name (so pickles can refer to it)."""
    ranks = {bytes([i]): i for i in range(256)} | {b"ab": 256}
    return {
        "name": "tiny_registered",
        "pat_str": r"\S+|\s+",
        "mergeable_ranks": ranks,
        "special_tokens": {"<|end|>": 257},
    }
