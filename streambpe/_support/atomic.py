"""Write files so that a failure never leaves a half-written file under the final name.

>>> import tempfile, pathlib
>>> target = pathlib.Path(tempfile.mkdtemp()) / "out.txt"
>>> with atomic_write(target) as file:
...     _ = file.write(b"done")
>>> target.read_bytes()
b'done'
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


@contextmanager
def atomic_write(path: str | Path) -> Iterator[BinaryIO]:
    """Open a temporary file beside ``path``; rename it to ``path`` only if the block succeeds.

    On any exception (Ctrl-C included) the temporary file is removed and ``path``
    keeps whatever it held before.
    """
    final = Path(path)
    descriptor, temporary = tempfile.mkstemp(
        dir=final.parent or Path("."), prefix=f".{final.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, "wb") as file:
            yield file
        os.replace(temporary, final)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
