"""Where tiktoken's vocabulary files live on disk, and fetching one that is missing.

The cache is tiktoken's own, so a machine that already ran tiktoken never
downloads again: the folder is ``$TIKTOKEN_CACHE_DIR``, else
``$DATA_GYM_CACHE_DIR``, else ``data-gym-cache`` in the system's temporary
folder; an empty ``TIKTOKEN_CACHE_DIR`` turns caching off. A file is stored
under the SHA-1 of the URL it came from. A missing file is downloaded with the
standard library only, checked against its published SHA-256, and written
whole or not at all (:mod:`streambpe._support.atomic`).

>>> cache_key("https://openaipublic.blob.core.windows.net/encodings/r50k_base.tiktoken")
'0ea1e91bbb3a60f729a8dc8f777fd2fc07cd8df4'
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

from streambpe._support.atomic import atomic_write
from streambpe.errors import HashMismatchError, VocabularyFileError

#: Seconds a download may wait for the server before it is given up.
DOWNLOAD_TIMEOUT = 60.0


def cache_key(url: str) -> str:
    """The name a file fetched from ``url`` has in the cache: the SHA-1 of the URL."""
    return hashlib.sha1(url.encode()).hexdigest()


def cache_folder() -> tuple[Path | None, str | None]:
    """The cache folder (None when caching is off) and the variable that chose it, if any.

    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"TIKTOKEN_CACHE_DIR": "/tmp/vocabularies"}):
    ...     cache_folder()
    (PosixPath('/tmp/vocabularies'), 'TIKTOKEN_CACHE_DIR')
    """
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            value = os.environ[variable]
            return (Path(value) if value else None), variable
    return Path(tempfile.gettempdir()) / "data-gym-cache", None


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of ``data`` in hex, as tiktoken publishes its files' hashes."""
    return hashlib.sha256(data).hexdigest()


def check_hash(data: bytes, expected_hash: str) -> bool:
    """Whether ``data`` has the SHA-256 ``expected_hash`` (tiktoken's name).

    >>> check_hash(b"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    True
    """
    return sha256_hex(data) == expected_hash


def read_file(blobpath: str) -> bytes:
    """The bytes at a local path or URL; http(s) is fetched with the standard library.

    Other URL schemes (``gs://``, ``az://``) go through ``blobfile``, when it
    is installed. A download that fails raises
    :class:`~streambpe.errors.VocabularyFileError` naming the URL.
    """
    if "://" not in blobpath:
        return Path(blobpath).read_bytes()
    if blobpath.startswith(("http://", "https://")):
        return _download(blobpath)
    try:
        import blobfile  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise ImportError(
            f"reading {blobpath} needs blobfile, which is not installed: pip install blobfile"
        ) from None
    data: bytes = blobfile.read_bytes(blobpath)
    return data


def _download(url: str) -> bytes:
    # Imported here: urllib's HTTPS stack (ssl, http.client, email) takes longer
    # to import than the rest of this package, and a warm cache never needs it.
    import http.client
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT) as response:
            data: bytes = response.read()
    except (OSError, http.client.HTTPException) as exc:
        # The message carries the cause; urllib's own traceback would only bury it.
        raise VocabularyFileError(_download_failure(url, exc)) from None
    return data


def _download_failure(url: str, exc: BaseException) -> str:
    # URLError carries the cause (refused, unknown host) in ``reason``.
    reason = getattr(exc, "reason", None) or exc
    name = url.rsplit("/", 1)[-1]
    folder, variable = cache_folder()
    if folder is None:
        where = (
            "Caching is turned off (TIKTOKEN_CACHE_DIR is empty); set TIKTOKEN_CACHE_DIR "
            f"to a folder holding a copy of {name} saved under the name {cache_key(url)}"
        )
    else:
        chosen = f" (from {variable})" if variable else ""
        where = (
            f"No cached copy was found at {folder / cache_key(url)}{chosen}. If this machine "
            f"is offline, copy {name} there from a machine that has it (tiktoken's cache holds "
            "it under the same name), or set TIKTOKEN_CACHE_DIR to a folder that holds it"
        )
    return f"cannot download the vocabulary file {name} from {url}: {reason}.\n{where}."


def read_file_cached(blobpath: str, expected_hash: str | None = None) -> bytes:
    """The bytes at ``blobpath``, from the cache when it holds them, else fetched and cached.

    A cached copy with the wrong SHA-256 is fetched again; a fetched file with
    the wrong SHA-256 raises :class:`~streambpe.errors.HashMismatchError` and
    is not cached. A cache folder the user chose (through an environment
    variable) that cannot be written raises
    :class:`~streambpe.errors.VocabularyFileError`; the default one is only
    skipped, as tiktoken does.

    >>> import pathlib, tempfile
    >>> from unittest import mock
    >>> source = pathlib.Path(tempfile.mkdtemp()) / "ranks.tiktoken"
    >>> _ = source.write_bytes(b"YQ== 0\\n")
    >>> cache = pathlib.Path(tempfile.mkdtemp())
    >>> with mock.patch.dict(os.environ, {"TIKTOKEN_CACHE_DIR": str(cache)}):
    ...     read_file_cached(str(source))
    b'YQ== 0\\n'
    >>> (cache / cache_key(str(source))).exists()
    True
    """
    folder, variable = cache_folder()
    if folder is None:
        return _verified(blobpath, read_file(blobpath), expected_hash)
    path = folder / cache_key(blobpath)
    try:
        cached = path.read_bytes()
    except OSError:
        cached = None
    if cached is not None:
        if expected_hash is None or check_hash(cached, expected_hash):
            return cached
        # A damaged copy: fetch it again rather than fail (the write below
        # replaces it, so a copy that cannot be removed here is no obstacle).
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
    data = _verified(blobpath, read_file(blobpath), expected_hash)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_write(path) as file:
            file.write(data)
    except OSError as exc:
        if variable is not None:
            raise VocabularyFileError(
                f"cannot write the vocabulary cache file {path} ({exc.strerror or exc}); "
                f"make {folder} writable, or set {variable} to a folder you can write "
                "(an empty TIKTOKEN_CACHE_DIR turns caching off)"
            ) from exc
    return data


def _verified(source: str, data: bytes, expected_hash: str | None) -> bytes:
    if expected_hash:
        actual = sha256_hex(data)
        if actual != expected_hash:
            raise HashMismatchError(source, expected_hash, actual)
    return data
