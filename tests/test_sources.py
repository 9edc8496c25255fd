"""Inputs: paths, lists, globs and fsspec URLs resolve to files; byte ranges read the same anywhere.

docs/design.md, "Scale-out". Remote reads use fsspec's ``memory://`` filesystem, so
no test touches the network.
"""

from __future__ import annotations

import builtins
import os
import random
from pathlib import Path
from typing import Any

import fsspec
import pytest

from streambpe.errors import EmptyInputError, MissingDependencyError, ParameterError
from streambpe.sources.inputs import InputFile, resolve_inputs
from streambpe.sources.reading import RemoteBuffer, open_buffer, read_range


@pytest.fixture
def memory_file() -> Any:
    """``memory_file(name, data)`` writes to fsspec's in-memory filesystem and returns the URL."""
    fs = fsspec.filesystem("memory")
    written: list[str] = []

    def write(name: str, data: bytes) -> str:
        fs.pipe_file(f"/{name}", data)
        written.append(f"/{name}")
        return f"memory:///{name}"

    yield write
    for path in written:
        fs.rm_file(path)


def test_inputs_keep_the_given_order_and_sort_glob_matches(tmp_path: Path) -> None:
    """Guards the order of a list and of a glob: results depend on the file order."""
    for name in ("b.txt", "a.txt", "c.md"):
        (tmp_path / name).write_text(name)
    files = resolve_inputs([tmp_path / "c.md", str(tmp_path / "*.txt")])
    assert [os.path.basename(f.location) for f in files] == ["c.md", "a.txt", "b.txt"]
    assert [f.size for f in files] == [4, 5, 5]
    assert all(os.path.isabs(f.location) for f in files)


def test_relative_paths_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards workers in another directory: a relative path is resolved before dispatch."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.txt").write_text("hello")
    monkeypatch.chdir(tmp_path)
    [file] = resolve_inputs("data/x.txt")
    assert file.location == str(tmp_path / "data" / "x.txt")


def test_fingerprint_changes_with_the_file_without_reading_it(tmp_path: Path) -> None:
    """Guards the cache key: a rewrite changes the fingerprint (size or mtime)."""
    path = tmp_path / "x.txt"
    path.write_text("hello")
    [before] = resolve_inputs(path)
    path.write_text("hello!")
    [after] = resolve_inputs(path)
    assert before.fingerprint != after.fingerprint
    os.utime(path, ns=(1, 1))
    [touched] = resolve_inputs(path)
    assert touched.fingerprint not in (before.fingerprint, after.fingerprint)


def test_file_with_glob_characters_in_its_name_is_that_file(tmp_path: Path) -> None:
    """Guards literal names: an existing file named like a glob is not expanded."""
    path = tmp_path / "notes[1].txt"
    path.write_text("x")
    assert [f.location for f in resolve_inputs(path)] == [str(path)]


def test_input_errors_are_clear(tmp_path: Path) -> None:
    """Guards the error paths: missing file in a list, glob with no match, empty list, all empty."""
    present = tmp_path / "present.txt"
    present.write_text("x")
    with pytest.raises(FileNotFoundError, match=r"input file not found: .*missing\.txt"):
        resolve_inputs([present, tmp_path / "missing.txt"])
    with pytest.raises(FileNotFoundError, match=r"no input file matches the glob: .*\*\.md"):
        resolve_inputs(str(tmp_path / "*.md"))
    with pytest.raises(ParameterError, match="no inputs given"):
        resolve_inputs([])
    with pytest.raises(IsADirectoryError):
        resolve_inputs(tmp_path)
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(EmptyInputError, match=r"empty\.txt"):
        resolve_inputs(empty)
    with pytest.raises(EmptyInputError, match="2 inputs, all empty"):
        resolve_inputs([empty, empty])
    assert [f.size for f in resolve_inputs([empty, present])] == [0, 1]
    with pytest.raises(TypeError, match="path, a glob or a URL"):
        resolve_inputs([b"bytes.txt"])  # type: ignore[list-item]


def test_url_without_fsspec_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards the optional extra: a URL without fsspec names ``streambpe[remote]``."""
    real_import = builtins.__import__

    def no_fsspec(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("fsspec"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_fsspec)
    with pytest.raises(MissingDependencyError, match=r"pip install 'streambpe\[remote\]'") as info:
        resolve_inputs("s3://bucket/corpus.txt")
    assert isinstance(info.value, ImportError)


def test_remote_inputs_resolve_and_read_ranges(memory_file: Any) -> None:
    """Guards URLs and remote globs: sizes, fingerprints and ranged reads through fsspec."""
    data = bytes(range(256)) * 40
    first = memory_file("shard-1.txt", data)
    memory_file("shard-0.txt", b"abc")
    files = resolve_inputs("memory:///shard-*.txt")
    assert [(f.location, f.size) for f in files] == [
        ("memory:///shard-0.txt", 3),
        (first, len(data)),
    ]
    assert files[1].fingerprint.startswith(f"size={len(data)};")
    assert read_range(files[1], 1000, 5000) == data[1000:5000]
    assert read_range(first, 10, 10) == b""
    with pytest.raises(FileNotFoundError, match="input file not found"):
        resolve_inputs("memory:///absent.txt")


def test_remote_buffer_behaves_like_bytes(memory_file: Any) -> None:
    """Guards the lazy buffer that cut searches run on: ``find`` and slices equal ``bytes``'."""
    rng = random.Random(7)
    data = bytes(rng.choice(b"ab c\n") for _ in range(20_000))
    url = memory_file("buffer.txt", data)
    [source] = resolve_inputs(url)
    with open_buffer(source) as buffer:
        assert isinstance(buffer, RemoteBuffer) and len(buffer) == len(data)
        for _ in range(300):
            start = rng.randrange(len(data))
            end = rng.randrange(start, len(data) + 10)
            needle = data[start : start + rng.randrange(1, 6)]
            assert buffer[start:end] == data[start:end]
            for sub in (needle, b"zz", b"a\n"):
                assert buffer.find(sub, start, end) == data.find(sub, start, end)


def test_local_buffer_of_an_empty_file_is_empty(tmp_path: Path) -> None:
    """Guards mmap's refusal of empty files."""
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    with open_buffer(InputFile(str(path), 0, "size=0")) as buffer:
        assert len(buffer) == 0
