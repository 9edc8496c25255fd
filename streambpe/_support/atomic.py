"""Write files so that a failure never leaves a half-written file under the final name.

The file gets the permissions a plain ``open(path, "w")`` would give it
(``0o666`` less the process umask, and a directory's default ACL if it has
one): it is created with mode ``0o666`` and the kernel applies the umask, as
for any new file. Reading the umask instead is racy (``os.umask`` can only be
read by setting it, for the whole process), and ``tempfile.mkstemp`` always
creates ``0o600``, which would make every output private whatever the umask.

>>> import tempfile, pathlib
>>> target = pathlib.Path(tempfile.mkdtemp()) / "out.txt"
>>> with atomic_write(target) as file:
...     _ = file.write(b"done")
>>> target.read_bytes()
b'done'
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

#: Random names to try before giving up; a clash needs 2**64 bad luck.
_NAME_ATTEMPTS = 100


def _create_beside(final: Path) -> tuple[int, Path]:
    """Create and open a new hidden file in ``final``'s directory, mode ``0o666`` less the umask."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_NAME_ATTEMPTS):
        temporary = final.with_name(f".{final.name}.{secrets.token_hex(8)}.tmp")
        try:
            return os.open(temporary, flags, 0o666), temporary
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file beside {final}")


@contextmanager
def atomic_write(path: str | Path) -> Iterator[BinaryIO]:
    """Open a temporary file beside ``path``; rename it to ``path`` only if the block succeeds.

    On any exception (Ctrl-C included) the temporary file is removed and ``path``
    keeps whatever it held before. A missing output directory raises
    ``FileNotFoundError`` naming it: it is never created, so a typo fails as
    it would with ``cp``.
    """
    final = Path(path)
    if not final.parent.is_dir():
        problem = "is not a directory" if final.parent.exists() else "does not exist"
        raise FileNotFoundError(f"output directory {problem}: {final.parent}")
    descriptor, temporary = _create_beside(final)
    try:
        with os.fdopen(descriptor, "wb") as file:
            yield file
        os.replace(temporary, final)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
