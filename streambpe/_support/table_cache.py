"""Tables that take long to build, kept on disk between processes and read back in milliseconds.

The compiled encoder's tables for a large vocabulary (o200k: 200,000
tokens, BPE run on every one of them) take most of a second to build, and
the pretokenizer's character table asks ``regex`` about every code point.
Every new process would pay that before its first ``encode``. Instead, the
first process to build a table writes its bytes here, and later ones read
them (``docs/design.md``, "Cold start").

A table is found by a key that covers everything it is derived from (the
vocabulary's bytes and ids, the ``regex`` version), so a table from other
inputs is never read: different inputs give a different name. Each file
also names the code that wrote it (a tag: the layout of compiled tables
changes from one build of the module to the next) and carries a checksum
of its bytes; both are checked before the bytes are used, so a table
written by another build, or damaged, is rebuilt and rewritten in place
rather than trusted. Files are written whole or not at all
(:mod:`streambpe._support.atomic`), and a failure to write (a read-only
home, a full disk) only costs the next process the build.

Where: ``$STREAMBPE_TABLE_CACHE`` names the directory, or turns the cache
off when set to ``0``, ``off`` or ``false``; otherwise ``tables`` under
:func:`default_cache_dir`.

>>> import os, tempfile
>>> os.environ["STREAMBPE_TABLE_CACHE"] = tempfile.mkdtemp()
>>> key = content_key("example", b"inputs of the table")
>>> read_table(key, "writer 1") is None
True
>>> write_table(key, "writer 1", b"the table")
>>> bytes(read_table(key, "writer 1")), read_table(key, "writer 2")
(b'the table', None)
>>> del os.environ["STREAMBPE_TABLE_CACHE"]
"""

from __future__ import annotations

import os
from pathlib import Path

import xxhash

from streambpe._support.atomic import atomic_write

#: The first bytes of every table file; the number changes with the file layout.
MAGIC = b"streambpe table 2\n"
_CHECKSUM_BYTES = 16
_OFF = ("0", "off", "false", "no")


def default_cache_dir() -> Path:
    """``$STREAMBPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/streambpe``, else ``~/.cache/streambpe``.

    >>> isinstance(default_cache_dir(), Path)
    True
    """
    explicit = os.environ.get("STREAMBPE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "streambpe"


def table_cache_dir() -> Path | None:
    """Where tables are kept, or None when ``$STREAMBPE_TABLE_CACHE`` turns the cache off.

    >>> os.environ["STREAMBPE_TABLE_CACHE"] = "off"
    >>> table_cache_dir() is None
    True
    >>> del os.environ["STREAMBPE_TABLE_CACHE"]
    """
    setting = os.environ.get("STREAMBPE_TABLE_CACHE", "")
    if setting.strip().lower() in _OFF:
        return None
    if setting:
        return Path(setting)
    return default_cache_dir() / "tables"


def content_key(kind: str, *parts: bytes | str) -> str:
    """A file name for the table ``kind`` derived from ``parts`` (each length-prefixed).

    >>> content_key("t", b"ab", b"c") == content_key("t", b"a", b"bc")
    False
    """
    hasher = xxhash.xxh3_128()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "little"))
        hasher.update(data)
    return f"{kind}-{hasher.hexdigest()}"


def _header(tag: str) -> bytes:
    encoded = tag.encode("utf-8")
    return MAGIC + len(encoded).to_bytes(4, "little") + encoded


def read_table(key: str, tag: str) -> memoryview | None:
    """The bytes stored under ``key`` by a writer with ``tag`` (a view, not a copy).

    None if there are none, or they are unreadable, damaged or another writer's.
    """
    directory = table_cache_dir()
    if directory is None:
        return None
    try:
        data = (directory / key).read_bytes()
    except OSError:
        return None
    header = _header(tag)
    start = len(header) + _CHECKSUM_BYTES
    if len(data) < start or not data.startswith(header):
        return None
    payload = memoryview(data)[start:]
    if xxhash.xxh3_128_digest(payload) != data[len(header) : start]:
        return None
    return payload


def write_table(key: str, tag: str, payload: bytes) -> None:
    """Store ``payload`` under ``key``, atomically; does nothing if the cache is off or unwritable."""
    directory = table_cache_dir()
    if directory is None:
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with atomic_write(directory / key) as file:
            file.write(_header(tag))
            file.write(xxhash.xxh3_128_digest(payload))
            file.write(payload)
    except OSError:
        return
