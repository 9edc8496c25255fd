"""Vocabulary files: tiktoken's cache, downloads from a loopback server, hashes, failures.

No test reaches the network: downloads come from an ``http.server`` on
127.0.0.1, and the real OpenAI URLs are only ever read from a seeded cache
(or fail through a patched opener).
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import tiktoken.load
from streaming_helpers import tiktoken_file
from tiktoken_cache import CS336, R50K_URL, cache_name, seed_cache

from streambpe._support import atomic
from streambpe.errors import FormatError, HashMismatchError, StreamBPEError, VocabularyFileError
from streambpe.tiktoken import registry, vocabulary_files
from streambpe.tiktoken.load import (
    data_gym_to_mergeable_bpe_ranks,
    dump_tiktoken_bpe,
    load_tiktoken_bpe,
    read_file_cached,
)

R50K_BYTES = tiktoken_file("r50k_base.tiktoken").read_bytes()
R50K_SHA256 = hashlib.sha256(R50K_BYTES).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves the server's routes; a route marked truncated promises more bytes than it sends."""

    server: _VocabularyServer

    def do_GET(self) -> None:
        self.server.hits.append(self.path)
        body, truncated = self.server.routes.get(self.path, (b"", False))
        if not body:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body) + (1000 if truncated else 0)))
        self.end_headers()
        self.wfile.write(body)
        if truncated:
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        """Keep the test output quiet."""


class _VocabularyServer(http.server.ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes: dict[str, tuple[bytes, bool]] = {}
        self.hits: list[str] = []

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[_VocabularyServer]:
    """A loopback HTTP server; proxies are bypassed so requests go straight to it."""
    monkeypatch.setenv("no_proxy", "*")
    monkeypatch.setenv("NO_PROXY", "*")
    running = _VocabularyServer()
    thread = threading.Thread(target=running.serve_forever, daemon=True)
    thread.start()
    try:
        yield running
    finally:
        running.shutdown()
        running.server_close()
        thread.join()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    folder.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(folder))
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    return folder


def _closed_port_url(path: str) -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


# --------------------------------------------------------------------------- downloads


def test_missing_file_is_downloaded_once_verified_and_cached(
    server: _VocabularyServer, cache: Path
) -> None:
    """Guards the download path: fetched once, checked, stored under the SHA-1 of the URL."""
    server.routes["/r50k_base.tiktoken"] = (R50K_BYTES, False)
    url = server.url("/r50k_base.tiktoken")
    ranks = load_tiktoken_bpe(url, expected_hash=R50K_SHA256)
    lines = (line.split() for line in R50K_BYTES.splitlines())
    assert ranks == {base64.b64decode(token): int(rank) for token, rank in lines}
    assert (cache / cache_name(url)).read_bytes() == R50K_BYTES
    assert load_tiktoken_bpe(url, expected_hash=R50K_SHA256) == ranks
    assert server.hits == ["/r50k_base.tiktoken"]
    assert sorted(p.name for p in cache.iterdir()) == [cache_name(url)]


def test_wrong_hash_raises_and_caches_nothing(server: _VocabularyServer, cache: Path) -> None:
    """Guards the hash check: tiktoken's message start, both hashes named, no file left."""
    server.routes["/r50k_base.tiktoken"] = (R50K_BYTES + b"tampered 1\n", False)
    url = server.url("/r50k_base.tiktoken")
    with pytest.raises(HashMismatchError) as info:
        load_tiktoken_bpe(url, expected_hash=R50K_SHA256)
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith(f"Hash mismatch for data downloaded from {url}")
    assert R50K_SHA256 in str(info.value)
    assert list(cache.iterdir()) == []


def test_damaged_cached_copy_is_fetched_again(server: _VocabularyServer, cache: Path) -> None:
    """Guards a corrupt cache entry: replaced by a verified download, as tiktoken does."""
    server.routes["/r50k_base.tiktoken"] = (R50K_BYTES, False)
    url = server.url("/r50k_base.tiktoken")
    (cache / cache_name(url)).write_bytes(R50K_BYTES[:1000])
    assert len(load_tiktoken_bpe(url, expected_hash=R50K_SHA256)) == 50256
    assert (cache / cache_name(url)).read_bytes() == R50K_BYTES
    assert server.hits == ["/r50k_base.tiktoken"]


def test_interrupted_download_raises_and_leaves_no_file(
    server: _VocabularyServer, cache: Path
) -> None:
    """Guards a connection that ends early: a clear OSError and nothing half-written."""
    server.routes["/r50k_base.tiktoken"] = (R50K_BYTES[:5000], True)
    url = server.url("/r50k_base.tiktoken")
    with pytest.raises(VocabularyFileError, match="cannot download the vocabulary file") as info:
        load_tiktoken_bpe(url, expected_hash=R50K_SHA256)
    assert isinstance(info.value, OSError)
    assert url in str(info.value)
    assert list(cache.iterdir()) == []


def test_offline_error_names_the_file_the_url_and_the_variable(cache: Path) -> None:
    """Guards the offline message: what to put where, instead of a urllib traceback."""
    url = _closed_port_url("/encodings/r50k_base.tiktoken")
    with pytest.raises(VocabularyFileError) as info:
        load_tiktoken_bpe(url, expected_hash=R50K_SHA256)
    message = str(info.value)
    assert "r50k_base.tiktoken" in message
    assert url in message
    assert "TIKTOKEN_CACHE_DIR" in message
    assert str(cache / cache_name(url)) in message
    assert info.value.__suppress_context__, "urllib's traceback should not be shown"
    assert list(cache.iterdir()) == []


def test_get_encoding_offline_without_a_cache_says_what_to_do(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the real path: the OpenAI URL is named, and nothing reaches the network."""

    def offline(url: str, timeout: float) -> object:
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    monkeypatch.setattr(registry, "ENCODINGS", {})
    with pytest.raises(VocabularyFileError) as info:
        registry.get_encoding("r50k_base")
    assert R50K_URL in str(info.value)
    assert cache_name(R50K_URL) in str(info.value)
    assert "no route to host" in str(info.value)


def test_cache_written_by_tiktoken_is_used_without_downloading(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the shared cache: a file tiktoken cached is read, and no download happens."""
    url = _closed_port_url("/encodings/r50k_base.tiktoken")
    monkeypatch.setattr(tiktoken.load, "read_file", lambda blobpath: R50K_BYTES)
    tiktoken.load.read_file_cached(url, R50K_SHA256)
    monkeypatch.setattr(vocabulary_files, "_download", pytest.fail)
    assert len(load_tiktoken_bpe(url, expected_hash=R50K_SHA256)) == 50256


# --------------------------------------------------------------------------- the cache folder


def test_cache_folder_follows_tiktokens_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the folder order: TIKTOKEN_CACHE_DIR, then DATA_GYM_CACHE_DIR, then the temp dir."""
    monkeypatch.setattr(vocabulary_files.tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    assert vocabulary_files.cache_folder() == (tmp_path / "data-gym-cache", None)
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", "/data/gym")
    assert vocabulary_files.cache_folder() == (Path("/data/gym"), "DATA_GYM_CACHE_DIR")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "/tik/tok")
    assert vocabulary_files.cache_folder() == (Path("/tik/tok"), "TIKTOKEN_CACHE_DIR")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    assert vocabulary_files.cache_folder() == (None, "TIKTOKEN_CACHE_DIR")


def test_empty_cache_variable_turns_caching_off(
    server: _VocabularyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards TIKTOKEN_CACHE_DIR='': every call downloads, nothing is written."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    server.routes["/r50k_base.tiktoken"] = (R50K_BYTES, False)
    url = server.url("/r50k_base.tiktoken")
    read_file_cached(url, R50K_SHA256)
    read_file_cached(url, R50K_SHA256)
    assert len(server.hits) == 2


def test_unwritable_chosen_cache_is_an_error(
    server: _VocabularyServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards a cache folder that cannot be written: the folder and the variable are named."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(blocker / "cache"))
    server.routes["/r50k_base.tiktoken"] = (R50K_BYTES, False)
    with pytest.raises(VocabularyFileError, match="TIKTOKEN_CACHE_DIR") as info:
        read_file_cached(server.url("/r50k_base.tiktoken"), R50K_SHA256)
    assert str(blocker / "cache") in str(info.value)


def test_read_only_chosen_cache_is_an_error_and_keeps_no_temporary(
    server: _VocabularyServer, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards permissions: a cache folder that refuses the file raises and holds no temporary file.

    The refusal is simulated at the rename, the last step of the atomic write,
    because root (CI runs as root) may write into a folder whatever its mode:
    the temporary file then exists and must be removed.
    """
    server.routes["/r50k_base.tiktoken"] = (R50K_BYTES, False)

    def refuse(source: object, target: object) -> None:
        raise PermissionError(13, "Permission denied", str(target))

    monkeypatch.setattr(atomic.os, "replace", refuse)
    with pytest.raises(VocabularyFileError, match=r"make .* writable"):
        read_file_cached(server.url("/r50k_base.tiktoken"), R50K_SHA256)
    assert list(cache.iterdir()) == []


def test_unwritable_default_cache_is_skipped(
    server: _VocabularyServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards tiktoken's leniency: the default cache failing to write does not fail the load."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(vocabulary_files.tempfile, "tempdir", str(blocker))
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    server.routes["/r50k_base.tiktoken"] = (R50K_BYTES, False)
    assert read_file_cached(server.url("/r50k_base.tiktoken"), R50K_SHA256) == R50K_BYTES


# --------------------------------------------------------------------------- formats


@pytest.mark.parametrize("name", ["r50k_base", "cl100k_base", "o200k_base"])
def test_load_tiktoken_bpe_equals_tiktokens(name: str, cache: Path) -> None:
    """Guards the parser on real files (read from a path, as tiktoken allows)."""
    path = str(tiktoken_file(f"{name}.tiktoken"))
    assert load_tiktoken_bpe(path) == tiktoken.load.load_tiktoken_bpe(path)


def test_malformed_line_names_the_file_and_line(tmp_path: Path, cache: Path) -> None:
    """Guards bad files: a ValueError (as tiktoken raises) naming where the problem is."""
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(b"YQ== 0\nYg== 1\nYw==\n")
    with pytest.raises(ValueError):
        tiktoken.load.load_tiktoken_bpe(str(path))
    with pytest.raises(FormatError, match=r"bad.tiktoken:3: cannot parse b'Yw=='"):
        load_tiktoken_bpe(str(path))
    # A local path is cached too (as tiktoken caches it), so the next bad file gets a new name.
    other = tmp_path / "other.tiktoken"
    other.write_bytes(b"YQ== 0\nnot-base64! 1\n")
    with pytest.raises(FormatError, match=r"other.tiktoken:2:"):
        load_tiktoken_bpe(str(other))


def test_blank_lines_are_skipped_as_tiktoken_skips_them(tmp_path: Path, cache: Path) -> None:
    """Guards the fast parse's guard: blank lines fall back to the per-line parse."""
    path = tmp_path / "blank.tiktoken"
    path.write_bytes(b"\nYQ== 0\n\n\nYg== 1")
    assert load_tiktoken_bpe(str(path)) == tiktoken.load.load_tiktoken_bpe(str(path))


def test_dump_writes_tiktokens_format_byte_for_byte(tmp_path: Path) -> None:
    """Guards dump_tiktoken_bpe: r50k's ranks dumped are the published file."""
    ranks = tiktoken.load.load_tiktoken_bpe(str(tiktoken_file("r50k_base.tiktoken")))
    target = tmp_path / "out.tiktoken"
    dump_tiktoken_bpe(ranks, str(target))
    assert target.read_bytes() == R50K_BYTES


def test_data_gym_files_give_tiktokens_gpt2_ranks(tmp_path: Path, cache: Path) -> None:
    """Guards data_gym_to_mergeable_bpe_ranks against tiktoken on GPT-2's own files."""
    if not CS336.is_dir():
        pytest.skip("GPT-2's encoder.json and vocab.bpe come from ../shared/fixtures/cs336/")
    merges = tmp_path / "vocab.bpe"
    merges.write_bytes(b"#version: 0.2\n" + (CS336 / "gpt2_merges.txt").read_bytes())
    encoder = str(CS336 / "gpt2_vocab.json")
    ours = data_gym_to_mergeable_bpe_ranks(str(merges), encoder)
    assert ours == tiktoken.load.data_gym_to_mergeable_bpe_ranks(str(merges), encoder)


def test_data_gym_files_that_disagree_are_refused(tmp_path: Path, cache: Path) -> None:
    """Guards the consistency check: an encoder.json that is not the merges' vocabulary."""
    merges = tmp_path / "vocab.bpe"
    merges.write_text("#version: 0.2\na b\n", encoding="utf-8")
    encoder = tmp_path / "encoder.json"
    encoder.write_text(json.dumps({"ab": 256}), encoding="utf-8")
    with pytest.raises(FormatError, match="do not belong together"):
        data_gym_to_mergeable_bpe_ranks(str(merges), str(encoder))


def test_errors_are_streambpe_errors() -> None:
    """Guards the error types: each is a StreamBPEError and the built-in type callers expect."""
    assert issubclass(VocabularyFileError, StreamBPEError) and issubclass(
        VocabularyFileError, OSError
    )
    assert issubclass(HashMismatchError, ValueError)


def test_seeded_cache_serves_every_shipped_encoding(tmp_path: Path, cache: Path) -> None:
    """Guards the test setup itself: seeded files have the hashes tiktoken publishes."""
    from streambpe.tiktoken import openai_public

    seed_cache(cache)
    for published in openai_public.PUBLISHED_FILES:
        path = cache / cache_name(published.url)
        if path.exists():
            assert hashlib.sha256(path.read_bytes()).hexdigest() == published.sha256
