"""Shared fixtures: reference data paths, offline tiktoken references, and test-owned oracles.

Everything here is either a path to data nobody on the project wrote, or a
small, obviously-correct reference implementation written for the tests (never
the package's own code), so that tests compare the package against something
independent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import regex
import tiktoken
import tiktoken.load

from streambpe import patterns
from streambpe.tokenizer import Tokenizer

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = REPO_ROOT.parent / "shared" / "fixtures"

R50K_SPECIALS: dict[str, int] = {"<|endoftext|>": 50256}
CL100K_SPECIALS: dict[str, int] = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}

Match = tuple[int, int, str]


# --------------------------------------------------------------------------- oracles


def brute_force_special_matches(text: str, tokens: Sequence[str]) -> list[Match]:
    """Leftmost-longest, non-overlapping special-token matches, found the slow, obvious way."""
    found: list[Match] = []
    position = 0
    while position < len(text):
        longest = max(
            (token for token in tokens if text.startswith(token, position)),
            key=len,
            default=None,
        )
        if longest is None:
            position += 1
        else:
            found.append((position, position + len(longest), longest))
            position += len(longest)
    return found


def brute_force_documents(text: str, tokens: Sequence[str]) -> list[str]:
    """The ordinary-text stretches of ``text`` between special-token matches."""
    documents: list[str] = []
    cursor = 0
    for start, end, _token in brute_force_special_matches(text, tokens):
        documents.append(text[cursor:start])
        cursor = end
    documents.append(text[cursor:])
    return documents


def reference_pieces(text: str, pattern: str, tokens: Sequence[str]) -> list[str]:
    """Pretokens of ``text`` as plain ``regex.findall`` gives them, per document, in order."""
    compiled = regex.compile(pattern)
    return [piece for doc in brute_force_documents(text, tokens) for piece in compiled.findall(doc)]


def _gpt2_char_to_byte() -> dict[str, int]:
    # GPT-2's rule, restated: printable Latin-1 stands for itself, the other
    # 68 bytes take code points from U+0100 upward in byte order.
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {chr(byte): byte for byte in printable}
    borrowed = 0
    for byte in range(256):
        if byte not in printable:
            table[chr(0x100 + borrowed)] = byte
            borrowed += 1
    return table


_GPT2_CHAR_TO_BYTE = _gpt2_char_to_byte()


def decode_gpt2_spelling(spelling: str) -> bytes:
    """Bytes of a token written in GPT-2's byte-to-unicode characters."""
    return bytes(_GPT2_CHAR_TO_BYTE[char] for char in spelling)


def read_gpt2_merges(path: Path) -> list[tuple[bytes, bytes]]:
    """Merges from a GPT-2 style merges file (``left right`` per line, optional header)."""
    merges: list[tuple[bytes, bytes]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#version"):
            continue
        left, right = line.split(" ")
        merges.append((decode_gpt2_spelling(left), decode_gpt2_spelling(right)))
    return merges


@pytest.fixture(scope="session")
def special_matches_oracle() -> Callable[[str, Sequence[str]], list[Match]]:
    """The brute-force leftmost-longest special-token matcher."""
    return brute_force_special_matches


@pytest.fixture(scope="session")
def pieces_oracle() -> Callable[[str, str, Sequence[str]], list[str]]:
    """Reference pretokenization: brute-force special split, then ``regex.findall``."""
    return reference_pieces


@pytest.fixture(scope="session")
def gpt2_spelling_decoder() -> Callable[[str], bytes]:
    """A test-owned decoder for GPT-2's byte-to-unicode spelling."""
    return decode_gpt2_spelling


@pytest.fixture(scope="session")
def gpt2_merges_reader() -> Callable[[Path], list[tuple[bytes, bytes]]]:
    """A test-owned reader for GPT-2 merges files."""
    return read_gpt2_merges


# --------------------------------------------------------------------------- reference data


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    """``../shared/fixtures`` beside the repository; skips the test when it is absent."""
    path = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"
    if not path.is_dir():
        pytest.skip(
            "../shared/fixtures is absent: reference data lives beside the repo, see README"
        )
    return path


@pytest.fixture(scope="session")
def cs336_dir(shared_fixtures: Path) -> Path:
    """The CS336 assignment fixtures folder."""
    return shared_fixtures / "cs336"


def _tiktoken_file(name: str) -> Path:
    for folder in (REPO_ROOT / "fixtures" / "tiktoken", SHARED_FIXTURES / "tiktoken"):
        candidate = folder / name
        if candidate.is_file():
            return candidate
    pytest.skip(f"{name} is in neither fixtures/tiktoken/ nor ../shared/fixtures/tiktoken/")


@pytest.fixture(scope="session")
def r50k_ranks() -> dict[bytes, int]:
    """GPT-2 / r50k_base mergeable ranks, read offline."""
    return tiktoken.load.load_tiktoken_bpe(str(_tiktoken_file("r50k_base.tiktoken")))


@pytest.fixture(scope="session")
def cl100k_ranks() -> dict[bytes, int]:
    """cl100k_base mergeable ranks, read offline."""
    return tiktoken.load.load_tiktoken_bpe(str(_tiktoken_file("cl100k_base.tiktoken")))


@pytest.fixture(scope="session")
def r50k_reference(r50k_ranks: dict[bytes, int]) -> tiktoken.Encoding:
    """tiktoken's r50k_base, built without the network."""
    return tiktoken.Encoding(
        "r50k_base_offline",
        pat_str=patterns.GPT2,
        mergeable_ranks=r50k_ranks,
        special_tokens=R50K_SPECIALS,
    )


@pytest.fixture(scope="session")
def cl100k_reference(cl100k_ranks: dict[bytes, int]) -> tiktoken.Encoding:
    """tiktoken's cl100k_base, built without the network."""
    return tiktoken.Encoding(
        "cl100k_base_offline",
        pat_str=patterns.CL100K,
        mergeable_ranks=cl100k_ranks,
        special_tokens=CL100K_SPECIALS,
    )


@pytest.fixture(scope="session")
def r50k_tokenizer(r50k_ranks: dict[bytes, int]) -> Tokenizer:
    """streambpe's equivalent of r50k_base (shared: do not read its cache counts)."""
    return Tokenizer.from_ranks(r50k_ranks, pattern="gpt2", special_tokens=R50K_SPECIALS)


@pytest.fixture(scope="session")
def cl100k_tokenizer(cl100k_ranks: dict[bytes, int]) -> Tokenizer:
    """streambpe's equivalent of cl100k_base (shared: do not read its cache counts)."""
    return Tokenizer.from_ranks(cl100k_ranks, pattern="cl100k", special_tokens=CL100K_SPECIALS)
