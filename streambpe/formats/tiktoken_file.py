"""tiktoken's ``.tiktoken`` files, and recovering a merge list from their ranks.

A ``.tiktoken`` file holds one token a line, ``base64(token_bytes) rank``,
sorted by rank; special tokens are not in it (tiktoken is told about them
separately). A rank doubles as the token id, and there is no merge list:
tiktoken's BPE repeatedly merges the adjacent pair whose concatenation has the
lowest rank. :func:`merges_from_ranks` recovers the merge list that rank order
implies, so a ``.tiktoken`` file can drive a merge-list tokenizer exactly.

>>> import tempfile
>>> from pathlib import Path
>>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc", 258: b"<|end|>"}
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = write_tiktoken(Path(tmp) / "tiny.tiktoken", vocab, {"<|end|>": 258})
...     ranks = read_tiktoken(path)
>>> len(ranks), ranks[b"abc"]
(258, 257)
>>> merges_from_ranks(ranks)
[(b'a', b'b'), (b'ab', b'c')]
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from pathlib import Path

from streambpe._support.atomic import atomic_write
from streambpe.core.bpe import merge_piece
from streambpe.errors import FormatError
from streambpe.formats.text_files import first_repeat, refuse_nul_bytes

#: Ranks (and so ids) are ``uint32`` values below 2**32 - 1, which tiktoken
#: reserves for "no merge": a token of that rank is found only as a whole
#: piece, never merged, so tiktoken would give silently different ids.
RANK_LIMIT = 2**32 - 1


def write_tiktoken(
    path: str | os.PathLike[str],
    vocab: Mapping[int, bytes],
    special_tokens: Mapping[str, int],
) -> Path:
    """Write ``vocab`` as a ``.tiktoken`` file, ids as ranks, leaving out special tokens.

    Ranks are ids, so the file reproduces a merge-list tokenizer only when ids
    grow in merge order (true of GPT-2 and of vocabs from ``train_bpe``);
    :func:`streambpe.formats.save_tokenizer` checks that before writing. The
    file is written whole or not at all (see :mod:`streambpe._support.atomic`).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_tiktoken(Path(tmp) / "t.tiktoken", {0: b"a", 1: b"\\xff", 2: b"<s>"},
    ...                           {"<s>": 2})
    ...     path.read_text(encoding="ascii")
    'YQ== 0\\n/w== 1\\n'
    """
    special_ids = set(special_tokens.values())
    ordinary = {rank: vocab[rank] for rank in sorted(vocab) if rank not in special_ids}
    repeat = first_repeat(ordinary)
    if repeat is not None:
        first, second, token = repeat
        raise ValueError(
            f"token ids {first} and {second} both have bytes {token!r}; "
            "a .tiktoken file maps each token to one rank"
        )
    lines = [f"{_spell(token)} {rank}\n" for rank, token in ordinary.items()]
    target = Path(path)
    with atomic_write(target) as file:
        file.write("".join(lines).encode("ascii"))
    return target


def _spell(token: bytes) -> str:
    """A token's base64 field; ``=`` for the empty token, since an empty field would vanish.

    >>> _spell(b"a"), _spell(b"")
    ('YQ==', '=')
    """
    return base64.b64encode(token).decode("ascii") or "="


def read_tiktoken(path: str | os.PathLike[str]) -> dict[bytes, int]:
    """Read a ``.tiktoken`` file into ``{token bytes: rank}``.

    Base64 is read strictly: tiktoken's own loader skips characters outside
    the alphabet (``!!!! 257`` becomes an empty token, a NUL inside a token
    vanishes), which hides a corrupted file. The one leniency real files need
    is kept: an empty token spelled with padding alone (``=``; Whisper's
    multilingual vocabulary has one) keeps its id, decodes to nothing and is
    never produced by encoding. Ranks must be plain decimal integers below
    2**32 - 1: ids are ``uint32``, tiktoken refuses larger ones when it builds
    the encoder, and it treats 2**32 - 1 as "no merge" (its ``int()`` would
    also take ``+1``, ``1_0`` or ``-1``, which no real file holds). Blank lines are skipped. A line
    without exactly two fields, bad base64, a bad rank, a token or rank seen
    before, or a NUL byte raises :class:`~streambpe.errors.FormatError`
    naming the file and line. (An empty file reads as no ranks; a tokenizer
    built from it lacks the single bytes, see
    :func:`streambpe.formats.check_byte_level`.)

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "t.tiktoken"
    ...     _ = path.write_text("YQ== 0\\nYg== 1\\n", encoding="ascii")
    ...     read_tiktoken(path)
    {b'a': 0, b'b': 1}
    """
    source = Path(path)
    data = source.read_bytes()
    ranks: dict[bytes, int] = {}
    line_of_rank: dict[int, int] = {}
    refuse_nul_bytes(str(source), data, "a .tiktoken file is ASCII text")
    # Ranks may leave gaps, as tiktoken allows: an id in a gap is simply
    # unknown to decode, and no encoding ever produces it.
    for number, line in enumerate(data.split(b"\n"), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2:
            raise FormatError(
                str(source), number, f"expected 'base64-token rank', found {len(fields)} field(s)"
            )
        encoded, rank_text = fields
        try:
            token = _decode_token(encoded)
        except binascii.Error as exc:
            raise FormatError(
                str(source), number, f"token {encoded!r} is not base64: {exc}"
            ) from exc
        # isdigit() on bytes is ASCII-only, so int() below never sees "+1", "1_0" or "٣".
        if not rank_text.isdigit():
            raise FormatError(
                str(source), number, f"rank {rank_text!r} is not a non-negative integer"
            )
        rank = int(rank_text)
        if rank >= RANK_LIMIT:
            raise FormatError(
                str(source),
                number,
                f"rank {rank} is too large: ranks are 32-bit token ids below 2**32 - 1 "
                f"= {RANK_LIMIT} (tiktoken reserves {RANK_LIMIT} for 'no merge')",
            )
        if token in ranks:
            raise FormatError(
                str(source), number, f"token {token!r} already has rank {ranks[token]}"
            )
        if rank in line_of_rank:
            raise FormatError(
                str(source), number, f"rank {rank} already used on line {line_of_rank[rank]}"
            )
        ranks[token] = rank
        line_of_rank[rank] = number
    return ranks


def _decode_token(encoded: bytes) -> bytes:
    """A token's bytes from its base64 field, strictly, except ``=`` for the empty token.

    >>> _decode_token(b"YQ=="), _decode_token(b"=")
    (b'a', b'')
    >>> _decode_token(b"!!!!")
    Traceback (most recent call last):
    ...
    binascii.Error: Only base64 data is allowed
    """
    if not encoded.strip(b"="):
        return b""
    return base64.b64decode(encoded, validate=True)


def merges_from_ranks(
    ranks: Mapping[bytes, int], *, path: str | os.PathLike[str] | None = None
) -> list[tuple[bytes, bytes]]:
    """Derive the merge list implied by tiktoken ranks, in rank order.

    Each multi-byte token is split by rank-based BPE restricted to ranks below
    its own; a well-formed vocab always ends in exactly two parts, which are the
    merge that created the token. Anything else raises
    :class:`~streambpe.errors.FormatError` (naming ``path`` when given), since
    such a token could never be produced by tiktoken's own BPE.

    >>> merges_from_ranks({b"a": 0, b"b": 1, b"c": 2, b"bc": 3, b"abc": 4})
    [(b'b', b'c'), (b'a', b'bc')]
    >>> merges_from_ranks({b"a": 0, b"b": 1, b"c": 2, b"abc": 3})
    Traceback (most recent call last):
    ...
    streambpe.errors.FormatError: mergeable ranks: token b'abc' (rank 3) splits into 3 parts \
[b'a', b'b', b'c'] using lower ranks, not 2; it cannot be the result of a merge
    """
    where = "mergeable ranks" if path is None else str(path)
    merges: list[tuple[bytes, bytes]] = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) < 2:
            continue
        parts = merge_piece(token, ranks, below=rank)
        if len(parts) != 2:
            raise FormatError(
                where,
                None,
                f"token {token!r} (rank {rank}) splits into {len(parts)} parts {parts!r} "
                "using lower ranks, not 2; it cannot be the result of a merge",
            )
        merges.append((parts[0], parts[1]))
    return merges
