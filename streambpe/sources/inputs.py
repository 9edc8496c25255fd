"""Resolve what a caller passes as input into an ordered list of files with sizes.

Accepted: one path (``str`` or ``os.PathLike``), a glob (``data/*.txt``,
``s3://bucket/shard-*.jsonl``), an fsspec URL, or a list of any of these.
Each becomes one or more :class:`InputFile`, in the order given (a glob's
matches sorted by name). Local paths are made absolute here, before any task
is shipped, so a worker running in another directory opens the same file.

Nothing is read: sizes and fingerprints come from ``stat`` (or fsspec's
``info``), which is all the planning needs (``docs/design.md``, "Scale-out").

>>> import os, pathlib, tempfile
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> for name in ("b.txt", "a.txt"):
...     _ = (folder / name).write_text("some text")
>>> [os.path.basename(f.location) for f in resolve_inputs(str(folder / "*.txt"))]
['a.txt', 'b.txt']
>>> resolve_inputs("/no/such/folder/*.md")
Traceback (most recent call last):
...
FileNotFoundError: [Errno 2] no input file matches the glob: '/no/such/folder/*.md'
"""

from __future__ import annotations

import errno
import glob
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from streambpe.errors import EmptyInputError, ParameterError
from streambpe.sources.remote import filesystem, is_url

#: One input as a caller may name it.
InputName: TypeAlias = "str | os.PathLike[str] | InputFile"
#: What the public functions accept: one input, or several in order.
Inputs: TypeAlias = "InputName | Iterable[InputName]"

_GLOB_CHARACTERS = frozenset("*?[")
#: Keys of fsspec's ``info()`` that change when a remote object's content does, most telling first.
_REMOTE_VERSION_KEYS = (
    "ETag",
    "etag",
    "md5Hash",
    "version_id",
    "VersionId",
    "generation",
    "LastModified",
    "last_modified",
    "updated",
    "mtime",
    "created",
)


@dataclass(frozen=True)
class InputFile:
    """One input file: where it is, how big it is, and a cheap fingerprint of its version.

    ``location`` is an absolute local path or a full URL. ``fingerprint`` changes
    when the file is rewritten (size and modification time, or the object's ETag)
    without reading its bytes.
    """

    location: str
    size: int
    fingerprint: str


def _is_glob(name: str) -> bool:
    return not _GLOB_CHARACTERS.isdisjoint(name)


def _local_file(path: str, given: str) -> InputFile:
    """The InputFile of the local file ``path`` (``given`` is how the caller spelled it)."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "input file not found", given) from None
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "input is a directory, not a file", given)
    return InputFile(path, status.st_size, f"size={status.st_size};mtime_ns={status.st_mtime_ns}")


def _local_files(name: str) -> list[InputFile]:
    path = os.path.abspath(os.path.expanduser(name))
    # A file whose name holds glob characters is still that file.
    if not _is_glob(name) or os.path.exists(path):
        return [_local_file(path, name)]
    matches = sorted(match for match in glob.glob(path, recursive=True) if os.path.isfile(match))
    if not matches:
        raise FileNotFoundError(errno.ENOENT, "no input file matches the glob", name)
    return [_local_file(match, match) for match in matches]


def remote_fingerprint(info: Mapping[str, Any]) -> str:
    """A version fingerprint from fsspec's ``info()``: the size and every version key present.

    >>> remote_fingerprint({"size": 5, "ETag": '"abc"', "LastModified": "2026-01-01"})
    'size=5;ETag="abc";LastModified=2026-01-01'
    """
    fields = [f"size={info.get('size')}"]
    fields += [f"{key}={info[key]}" for key in _REMOTE_VERSION_KEYS if info.get(key) is not None]
    return ";".join(fields)


def _remote_file(fs: Any, path: str, given: str) -> InputFile:
    try:
        info = fs.info(path)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "input file not found", given) from None
    if info.get("type") == "directory":
        raise IsADirectoryError(errno.EISDIR, "input is a directory, not a file", given)
    return InputFile(fs.unstrip_protocol(path), int(info["size"]), remote_fingerprint(info))


def _remote_files(url: str) -> list[InputFile]:
    fs, path = filesystem(url)
    if not _is_glob(path) or fs.exists(path):
        return [_remote_file(fs, path, url)]
    matches = sorted(fs.glob(path))
    files = [_remote_file(fs, match, match) for match in matches if fs.isfile(match)]
    if not files:
        raise FileNotFoundError(errno.ENOENT, "no input file matches the glob", url)
    return files


def _expand(name: InputName) -> list[InputFile]:
    if isinstance(name, InputFile):
        return [name]
    if isinstance(name, bytes) or not isinstance(name, str | os.PathLike):
        raise TypeError(
            f"an input must be a path, a glob or a URL (str or os.PathLike), got {name!r}"
        )
    text = os.fspath(name)
    return _remote_files(text) if is_url(text) else _local_files(text)


def resolve_inputs(inputs: Inputs) -> list[InputFile]:
    """Every file named by ``inputs``, in order, with absolute locations, sizes and fingerprints.

    Raises ``FileNotFoundError`` for a missing file or a glob matching nothing,
    :class:`~streambpe.errors.ParameterError` for an empty list, and
    :class:`~streambpe.errors.EmptyInputError` when the files hold no bytes at all.
    Empty files among others are kept: they contribute nothing.

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "corpus.txt"
    >>> _ = path.write_text("hello")
    >>> [(f.location == str(path), f.size) for f in resolve_inputs([path, str(path)])]
    [(True, 5), (True, 5)]
    """
    names: list[InputName] = (
        [inputs] if isinstance(inputs, str | bytes | os.PathLike | InputFile) else list(inputs)
    )
    if not names:
        raise ParameterError(
            "no inputs given: pass a path, a list of paths, a glob or a URL (s3://..., memory://...)"
        )
    files = [found for name in names for found in _expand(name)]
    if sum(file.size for file in files) == 0:
        raise EmptyInputError(
            files[0].location if len(files) == 1 else f"{len(files)} inputs, all empty"
        )
    return files
