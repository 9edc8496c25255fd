"""fsspec, imported only when a URL is given, so local use never needs it.

A location is a URL when it starts with a protocol (``s3://``, ``gs://``,
``memory://``); anything else is a local path.

>>> is_url("s3://bucket/part-0.txt"), is_url("data/part-0.txt"), is_url("C:\\\\data")
(True, False, False)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streambpe.errors import MissingDependencyError

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

# A protocol is at least two characters, so a Windows drive letter ("C:\") is never one.
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+://")


def is_url(location: str) -> bool:
    """True when ``location`` names a protocol (``scheme://...``) rather than a local path."""
    return _URL.match(location) is not None


def filesystem(url: str) -> tuple[AbstractFileSystem, str]:
    """The fsspec filesystem serving ``url`` and the path within it.

    fsspec keeps one instance per protocol and options, so calling this for
    every read costs a dictionary lookup, not a new connection.
    """
    try:
        from fsspec.core import url_to_fs
    except ImportError:
        raise MissingDependencyError(f"reading {url!r}", "fsspec", "remote") from None
    fs, path = url_to_fs(url)
    return fs, path
