"""A ``.tiktoken`` file's ranks, parsed once and then read from the table cache.

Parsing o200k's 200,000 base64 lines in Python takes about 0.3 s, half of
a cold start (``docs/design.md``, "Cold start"). The ranks a file parses to
depend on its bytes alone, so they are kept in the table cache
(:mod:`streambpe._support.table_cache`) under a hash of the file's bytes, as
``marshal`` data (data only: loading it runs no code), which loads in a
sixth of the time. Files under :data:`MIN_CACHED_BYTES` parse faster than
that and are not cached. The first read of a file still goes through
:func:`~streambpe.formats.tiktoken_file.read_tiktoken`, so a file it rejects
is rejected every time, and nothing is cached for it.

>>> import base64, os, pathlib, tempfile
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> os.environ["STREAMBPE_TABLE_CACHE"] = str(folder / "tables")
>>> path = folder / "tiny.tiktoken"
>>> _ = path.write_text("".join(f"{base64.b64encode(bytes([i])).decode()} {i}\\n" for i in range(256)))
>>> read_tiktoken_cached(path)[b"a"]
97
>>> del os.environ["STREAMBPE_TABLE_CACHE"]
"""

from __future__ import annotations

import marshal
import os
from pathlib import Path

from streambpe._support.table_cache import content_key, read_table, write_table
from streambpe.formats.tiktoken_file import read_tiktoken

#: Names the stored form (marshal of the dict) and the reader that checked it.
_STORED_FORM = f"tiktoken ranks 1, marshal {marshal.version}"
#: Smaller files are parsed every time (r50k's file is 0.8 MB, o200k's 3.6 MB).
MIN_CACHED_BYTES = 1 << 18


def read_tiktoken_cached(path: str | os.PathLike[str]) -> dict[bytes, int]:
    """``read_tiktoken(path)``, from the table cache when this file's bytes were read before."""
    source = Path(path)
    data = source.read_bytes()
    if len(data) < MIN_CACHED_BYTES:
        return read_tiktoken(source)
    key = content_key("tiktoken-ranks", data)
    stored = read_table(key, _STORED_FORM)
    if stored is not None:
        ranks = marshal.loads(stored)
        if isinstance(ranks, dict):
            return ranks
    ranks = read_tiktoken(source)
    # The file may have changed since it was hashed: store the ranks only
    # under the key of the bytes they were parsed from.
    if content_key("tiktoken-ranks", source.read_bytes()) == key:
        write_table(key, _STORED_FORM, marshal.dumps(ranks))
    return ranks
