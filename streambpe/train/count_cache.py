"""An on-disk cache of word counts, keyed by the inputs' versions and the counting settings.

Pretokenizing is most of the cost of training, and its result does not depend
on the vocabulary size. Training the same inputs again (another vocab size, say)
can reuse the counts. The key covers everything counting depends on: the
inputs, the pattern, the special tokens, the UTF-8 error policy and how
records are read. Entries are ``marshal`` data (plain strings and ints:
nothing is executed when loading).

Two ways to name the inputs' version (``docs/design.md``, "Scale-out"):

* ``"metadata"`` (default): each file's location, size and modification time
  (or ETag, for an object store). Nothing is read, so a terabyte of shards is
  keyed in milliseconds. The trade-off: a rewrite that keeps both the size and
  the modification time (a restored backup with its old mtime, or two writes
  within the filesystem's clock resolution) reuses stale counts.
* ``"content"``: an xxhash of every byte. Never stale, and it survives a copy
  or a move, but it reads every input once on the calling machine.

>>> import pathlib, tempfile
>>> from streambpe.sources.inputs import resolve_inputs
>>> corpus = pathlib.Path(tempfile.mkdtemp()) / "corpus.txt"
>>> _ = corpus.write_text("hello")
>>> files = resolve_inputs(corpus)
>>> key = fingerprint_inputs(files, pattern="x", special_tokens=["<s>"], errors="strict")
>>> len(key), key == fingerprint_inputs(files, pattern="y", special_tokens=["<s>"], errors="strict")
(32, False)
"""

from __future__ import annotations

import marshal
from collections.abc import Sequence
from pathlib import Path

import xxhash

from streambpe._support.atomic import atomic_write
from streambpe._support.table_cache import default_cache_dir
from streambpe.errors import ParameterError
from streambpe.sources.inputs import InputFile
from streambpe.sources.reading import read_range
from streambpe.train.counting import WordCounts
from streambpe.train.options import CACHE_KEYS, CacheKey

_FORMAT_VERSION = 1
_READ_BLOCK = 8 * 1024 * 1024


def _add_field(hasher: xxhash.xxh3_128, field: str) -> None:
    # Length-prefix every field so no two different lists hash the same bytes.
    encoded = field.encode("utf-8")
    hasher.update(len(encoded).to_bytes(8, "little"))
    hasher.update(encoded)


def fingerprint_inputs(
    files: Sequence[InputFile],
    *,
    pattern: str,
    special_tokens: Sequence[str],
    errors: str,
    reading: Sequence[str] = (),
    key: CacheKey = "metadata",
) -> str:
    """The cache key for counting ``files`` with these settings.

    ``reading`` holds any other setting that changes what is counted (the
    input format and text field). ``key="content"`` reads every byte.
    """
    if key not in CACHE_KEYS:
        raise ParameterError(f"unknown cache key {key!r}; choose one of {', '.join(CACHE_KEYS)}")
    hasher = xxhash.xxh3_128()
    _add_field(hasher, key)
    for file in files:
        if key == "metadata":
            _add_field(hasher, file.location)
            _add_field(hasher, file.fingerprint)
        else:
            _add_field(hasher, str(file.size))
            for start in range(0, file.size, _READ_BLOCK):
                hasher.update(read_range(file, start, min(file.size, start + _READ_BLOCK)))
    for field in (pattern, errors, *reading, *special_tokens):
        _add_field(hasher, field)
    hasher.update(f"v{_FORMAT_VERSION}".encode())
    return str(hasher.hexdigest())


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
