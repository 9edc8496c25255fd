"""Checks on input files, so a mistake is reported before any work starts.

>>> check_input_file("/no/such/file")
Traceback (most recent call last):
...
FileNotFoundError: [Errno 2] input file not found: '/no/such/file'
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from streambpe.errors import EmptyInputError


def check_input_file(path: str | os.PathLike[str]) -> Path:
    """Return ``path`` as a Path if it is a readable, non-empty regular file; else raise clearly."""
    resolved = Path(path)
    if not resolved.exists():
        raise FileNotFoundError(errno.ENOENT, "input file not found", str(path))
    if resolved.is_dir():
        raise IsADirectoryError(errno.EISDIR, "input is a directory, not a file", str(path))
    if resolved.stat().st_size == 0:
        raise EmptyInputError(str(path))
    return resolved
