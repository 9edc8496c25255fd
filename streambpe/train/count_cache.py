"""An on-disk cache of word counts, keyed by an xxhash fingerprint of the input.

Pretokenizing is most of the cost of training, and its result does not depend
on the vocabulary size. Training the same file again (another vocab size, say)
can reuse the counts. The key covers everything counting depends on: the file's
bytes, the pattern, the special tokens and the UTF-8 error policy. Entries are
``marshal`` data (plain strings and ints: nothing is executed when loading).

>>> import pathlib, tempfile
>>> corpus = pathlib.Path(tempfile.mkdtemp()) / "corpus.txt"
>>> _ = corpus.write_text("hello")
>>> key = fingerprint_file(corpus, pattern="x", special_tokens=["<s>"], errors="strict")
>>> len(key), key == fingerprint_file(corpus, pattern="y", special_tokens=["<s>"], errors="strict")
(32, False)
"""

from __future__ import annotations

import marshal
import os
from collections.abc import Sequence
from pathlib import Path

import xxhash

from streambpe._support.atomic import atomic_write
from streambpe.train.counting import WordCounts

_FORMAT_VERSION = 1
_READ_BLOCK = 8 * 1024 * 1024


def default_cache_dir() -> Path:
    """``$STREAMBPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/streambpe``, else ``~/.cache/streambpe``."""
    explicit = os.environ.get("STREAMBPE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "streambpe"


def _settings_digest(
    hasher: xxhash.xxh3_128, pattern: str, special_tokens: Sequence[str], errors: str
) -> str:
    # Length-prefix every field so no two different settings hash the same bytes.
    for field in (pattern, errors, *special_tokens):
        encoded = field.encode("utf-8")
        hasher.update(len(encoded).to_bytes(8, "little"))
        hasher.update(encoded)
    hasher.update(f"v{_FORMAT_VERSION}".encode())
    return str(hasher.hexdigest())


def fingerprint_file(
    path: str | Path, *, pattern: str, special_tokens: Sequence[str], errors: str
) -> str:
    """The cache key for counting ``path`` with these settings (reads the file once)."""
    hasher = xxhash.xxh3_128()
    with open(path, "rb") as file:
        while block := file.read(_READ_BLOCK):
            hasher.update(block)
    return _settings_digest(hasher, pattern, special_tokens, errors)


class WordCountCache:
    """A directory of cached :data:`WordCounts`, one file per fingerprint."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()

    def _path(self, key: str) -> Path:
        return self.directory / f"wordcounts-{key}.marshal"

    def load(self, key: str) -> WordCounts | None:
        """The counts stored under ``key``, or None (also for an unreadable entry)."""
        try:
            with open(self._path(key), "rb") as file:
                version, counts = marshal.load(file)
        except (OSError, EOFError, ValueError, TypeError):
            return None
        if version != _FORMAT_VERSION or not isinstance(counts, dict):
            return None
        return counts

    def store(self, key: str, counts: WordCounts) -> Path:
        """Write ``counts`` under ``key`` atomically (temporary file, then rename)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self._path(key)
        with atomic_write(final) as file:
            # marshal takes plain dicts only (not Counter).
            marshal.dump((_FORMAT_VERSION, dict(counts)), file)
        return final
