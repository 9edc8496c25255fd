"""Helpers for the streaming, async, file-encoding, batch and CLI tests.

What lives here: loaders for the real tiktoken vocabularies (skipping cleanly
when the data is absent), a fast seeded text generator with several scripts,
whitespace runs and special tokens, sources that count how often they are
pulled, and probes for what a failed call may leave behind (child processes,
busy threads, stray files).
"""

from __future__ import annotations

import random
import sys
import threading
import time
from array import array
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from functools import cache, lru_cache
from pathlib import Path
from types import FrameType

import anyio
import psutil
import tiktoken.load

import streambpe
from streambpe.tokenizer import Tokenizer

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = Path(streambpe.__file__).resolve().parent
EOT = "<|endoftext|>"
R50K_EOT_ID = 50256

# --------------------------------------------------------------------------- tokenizers


def tiktoken_file(name: str) -> Path:
    """``fixtures/tiktoken/NAME``: the rank files ship in the repository (see its README)."""
    path = REPO_ROOT / "fixtures" / "tiktoken" / name
    assert path.is_file(), f"{path} ships with the repository; is the checkout complete?"
    return path


@cache
def _ranks(name: str) -> dict[bytes, int]:
    return tiktoken.load.load_tiktoken_bpe(str(tiktoken_file(name)))


def fresh_r50k_tokenizer(eot_id: int = R50K_EOT_ID) -> Tokenizer:
    """GPT-2's r50k_base vocabulary as a streambpe tokenizer (a fresh instance each call)."""
    return Tokenizer.from_ranks(
        _ranks("r50k_base.tiktoken"),
        pattern=streambpe.patterns.GPT2,
        special_tokens={EOT: eot_id},
    )


def fresh_cl100k_tokenizer() -> Tokenizer:
    """cl100k_base (ids above 65535, its own pattern) as a streambpe tokenizer."""
    return Tokenizer.from_ranks(
        _ranks("cl100k_base.tiktoken"),
        pattern=streambpe.patterns.CL100K,
        special_tokens={EOT: 100257, "<|fim_prefix|>": 100258, "<|endofprompt|>": 100276},
    )


def train_small_tokenizer(
    folder: Path, *, vocab_size: int = 400, pattern: str = "gpt2", seed: int = 7
) -> Tokenizer:
    """Train a small tokenizer on generated text written into ``folder``."""
    corpus = folder / f"train-corpus-{seed}.txt"
    corpus.write_bytes(make_text(60_000, seed=seed).encode("utf-8"))
    vocab, merges = streambpe.train_bpe(corpus, vocab_size, [EOT], pattern=pattern, workers=1)
    return Tokenizer(vocab, merges, [EOT], pattern=pattern)


# --------------------------------------------------------------------------- text

#: Words from several scripts, with combining marks, emoji sequences, digits, contractions.
WORDS = [
    "the", "of", "and", "to", "in", "is", "was", "that", "for", "on", "with", "as", "by", "at",
    "from", "his", "her", "they", "we", "you", "it", "river", "mountain", "language", "token",
    "stream", "encode", "decode", "window", "garden", "winter", "summer",
    "don't", "it's", "we'll", "they're", "I'd", "42", "3.14", "1,000,000", "2024-05-17", "x86_64",
    "foo.bar()", "Straße", "über", "schön", "naïve", "café", "déjà", "façade", "Ελληνικά", "γλώσσα",
    "русский", "язык", "текст", "日本語の文章", "中文文本", "한국어", "नमस्ते", "مرحبا", "שלום",
    "e\u0301te\u0301", "n\u0303o", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "✨",
]  # fmt: skip

#: Sentence endings: punctuation, blank lines and whitespace runs (the classic traps).
ENDINGS = (
    ".",
    ".",
    ".",
    "!",
    "?",
    ".\n",
    ".\n\n",
    "?\n\n  ",
    ".\n   \t\n ",
    ":  ",
    ";\t",
    "...\r\n",
)


def make_sentences(rng: random.Random, count: int) -> list[str]:
    """``count`` random sentences built from :data:`WORDS` and :data:`ENDINGS`."""
    sentences = []
    for _ in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 16))]
        sentence = " ".join(words)
        sentences.append(sentence[0].upper() + sentence[1:] + rng.choice(ENDINGS))
    return sentences


def make_text(n_chars: int, *, seed: int = 0, eot_every: int | None = 17) -> str:
    """About ``n_chars`` characters of varied multilingual text, fast at any size.

    A block of a few thousand seeded random sentences is repeated (so the set
    of distinct pieces stops growing, like real text); every ``eot_every``-th
    sentence ends a document with ``<|endoftext|>``, or never if None.
    """
    block = _text_block(seed, eot_every)
    repeats = n_chars // len(block) + 1
    return (block * repeats)[:n_chars]


@lru_cache(maxsize=64)
def _text_block(seed: int, eot_every: int | None) -> str:
    rng = random.Random(seed)
    parts = []
    for index, sentence in enumerate(make_sentences(rng, 3000)):
        parts.append(sentence)
        parts.append(EOT if eot_every and index % eot_every == eot_every - 1 else " ")
    return "".join(parts)


def make_whitespace_text(n_chars: int, *, seed: int = 0) -> str:
    """Short words between whitespace runs of every kind (spaces, newlines, tabs, NBSP, ideographic)."""
    rng = random.Random(seed)
    words = ["word", "x", "Hello", "é", "日本", "42", "it's", "!", EOT]
    runs = [" ", "  ", "\n", "\n\n", " \n ", "\t\t", "\r\n", "\u3000", "\u00a0 ", " \u00a0"]
    parts: list[str] = []
    size = 0
    while size < n_chars:
        word = rng.choice(words)
        run = rng.choice(
            [
                *runs,
                " " * rng.randint(2, 40),
                "\n" * rng.randint(2, 12),
                " \t\n" * rng.randint(1, 8),
            ]
        )
        parts += [word, run]
        size += len(word) + len(run)
    return "".join(parts)[:n_chars]


def make_no_space_text(n_chars: int) -> str:
    """Japanese prose: no spaces, no special tokens, so no safe cut anywhere (lines end in newlines)."""
    line = "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。\n"
    return (line * (n_chars // len(line) + 1))[:n_chars]


def ragged_chunks(text: str, rng: random.Random, max_len: int) -> list[str]:
    """``text`` cut at random places into chunks of 0..max_len characters (empty ones included)."""
    chunks = []
    position = 0
    while position < len(text):
        size = rng.choice((0, 1, 2, 3, rng.randint(1, max_len), rng.randint(1, max_len)))
        chunks.append(text[position : position + size])
        position += size
    return chunks


def cut_inside_specials(text: str) -> list[str]:
    """``text`` cut in the middle of every ``<|endoftext|>`` and nowhere else."""
    chunks = []
    position = 0
    while (found := text.find(EOT, position)) >= 0:
        middle = found + 5  # "<|end" | "oftext|>"
        chunks.append(text[position:middle])
        position = middle
    chunks.append(text[position:])
    return chunks


# --------------------------------------------------------------------------- sources


class PullCounter:
    """Counts the chunks taken from a source."""

    def __init__(self) -> None:
        self.pulled = 0
        self.exhausted = False


def counting_sync_source(chunks: Sequence[str], counter: PullCounter) -> Iterator[str]:
    """A generator over ``chunks`` that records each pull in ``counter``."""
    for chunk in chunks:
        counter.pulled += 1
        yield chunk
    counter.exhausted = True


async def counting_async_source(
    chunks: Iterable[str], counter: PullCounter, *, checkpoint: bool = True
) -> AsyncIterator[str]:
    """An async generator over ``chunks``; with ``checkpoint`` it yields to the loop before each."""
    for chunk in chunks:
        if checkpoint:
            await anyio.sleep(0)
        counter.pulled += 1
        yield chunk
    counter.exhausted = True


# --------------------------------------------------------------------------- leftovers


def child_pids() -> set[int]:
    """Pids of every live descendant of this process."""
    return {child.pid for child in psutil.Process().children(recursive=True) if _alive(child)}


def _alive(process: psutil.Process) -> bool:
    try:
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def new_children(before: set[int], timeout: float = 0.0) -> set[int]:
    """Descendants that did not exist in ``before`` and are still alive after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        extra = child_pids() - before
        if not extra or time.monotonic() >= deadline:
            return extra
        time.sleep(0.05)


def busy_package_threads() -> list[str]:
    """Names of threads (other than this one) currently executing streambpe code.

    An idle anyio/trio worker thread waits in the standard library, so it does
    not count; a thread still encoding after its caller gave up does.
    """
    frames = sys._current_frames()
    busy = []
    for thread in threading.enumerate():
        if thread is threading.current_thread() or thread.ident not in frames:
            continue
        frame: FrameType | None = frames[thread.ident]
        while frame is not None:
            if Path(frame.f_code.co_filename).resolve().is_relative_to(PACKAGE_DIR):
                busy.append(thread.name)
                break
            frame = frame.f_back
    return busy


def unexpected_threads(before: set[threading.Thread]) -> list[str]:
    """New threads that are neither anyio's nor trio's cached worker threads."""
    return [
        thread.name
        for thread in threading.enumerate()
        if thread not in before
        and not thread.name.startswith(("AnyIO worker thread", "Trio thread"))
    ]


def encode_threads() -> list[str]:
    """Names of the live threads of streambpe's encoding thread pools."""
    return [t.name for t in threading.enumerate() if t.name.startswith("streambpe-encode")]


def listing(folder: Path) -> set[str]:
    """Names in ``folder`` (hidden temporary files included)."""
    return {path.name for path in folder.iterdir()}


def read_ids(path: Path, dtype: str) -> list[int]:
    """Little-endian ids from a ``.bin`` written by ``encode_file``."""
    values = array({"uint16": "H", "uint32": "I"}[dtype])
    values.frombytes(path.read_bytes())
    if sys.byteorder == "big":
        values.byteswap()
    return values.tolist()
