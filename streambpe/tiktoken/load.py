"""tiktoken's ``tiktoken.load``: vocabulary files to ``mergeable_ranks`` and back.

``load_tiktoken_bpe`` reads a ``.tiktoken`` file (``base64(token) rank`` per
line) from a path or URL through tiktoken's cache
(:mod:`streambpe.tiktoken.vocabulary_files`), checking its SHA-256 when one is
given; ``data_gym_to_mergeable_bpe_ranks`` does the same for GPT-2's original
``vocab.bpe`` + ``encoder.json``; ``dump_tiktoken_bpe`` writes ranks out.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "tiny.tiktoken"
>>> dump_tiktoken_bpe({b"a": 0, b"b": 1, b"ab": 2}, str(path))
>>> path.read_text()
'YQ== 0\\nYg== 1\\nYWI= 2\\n'
>>> load_tiktoken_bpe(str(path))
{b'a': 0, b'b': 1, b'ab': 2}
"""

from __future__ import annotations

import base64
import binascii
import json

from streambpe.errors import FormatError
from streambpe.formats.byte_unicode import bytes_to_unicode, decode_token
from streambpe.formats.tiktoken_file import write_tiktoken
from streambpe.tiktoken.vocabulary_files import check_hash, read_file, read_file_cached

__all__ = [
    "check_hash",
    "data_gym_to_mergeable_bpe_ranks",
    "dump_tiktoken_bpe",
    "load_tiktoken_bpe",
    "parse_tiktoken_bpe",
    "read_file",
    "read_file_cached",
]


def load_tiktoken_bpe(tiktoken_bpe_file: str, expected_hash: str | None = None) -> dict[bytes, int]:
    """``{token bytes: rank}`` from a ``.tiktoken`` file at a path or URL, cached as tiktoken does.

    A file whose SHA-256 is not ``expected_hash`` raises
    :class:`~streambpe.errors.HashMismatchError`; a malformed line raises
    :class:`~streambpe.errors.FormatError` (a ``ValueError``) naming the file and line.
    """
    return parse_tiktoken_bpe(read_file_cached(tiktoken_bpe_file, expected_hash), tiktoken_bpe_file)


def parse_tiktoken_bpe(contents: bytes, source: str = "<bytes>") -> dict[bytes, int]:
    """Parse ``.tiktoken`` contents; blank lines are skipped, as tiktoken skips them.

    >>> parse_tiktoken_bpe(b"YQ== 0\\n\\nYg== 1\\n")
    {b'a': 0, b'b': 1}
    >>> parse_tiktoken_bpe(b"YQ== 0\\nYg==\\n", "x.tiktoken")
    Traceback (most recent call last):
    ...
    streambpe.errors.FormatError: x.tiktoken:2: cannot parse b'Yg==': expected 'base64-token rank'
    """
    fields = contents.split()
    lines = contents.split(b"\n")
    if len(fields) == 2 * (len(lines) - lines.count(b"")):
        # Every line holds two fields: decode them all in C loops, without a
        # Python step per line (a third of the time of a per-line loop).
        try:
            return dict(
                zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True)
            )
        except (binascii.Error, ValueError):
            pass
    return _parse_by_line(contents, source)


def _parse_by_line(contents: bytes, source: str) -> dict[bytes, int]:
    """The per-line parse, which names the line that is wrong."""
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(contents.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            ranks[binascii.a2b_base64(token)] = int(rank)
        except (binascii.Error, ValueError) as exc:
            raise FormatError(
                source, number, f"cannot parse {line!r}: expected 'base64-token rank'"
            ) from exc
    return ranks


def data_gym_to_mergeable_bpe_ranks(
    vocab_bpe_file: str,
    encoder_json_file: str,
    vocab_bpe_hash: str | None = None,
    encoder_json_hash: str | None = None,
    clobber_one_byte_tokens: bool = False,
) -> dict[bytes, int]:
    """GPT-2's ``vocab.bpe`` (merges) and ``encoder.json`` (ids) as ``mergeable_ranks``.

    Single bytes rank in GPT-2's order (its printable characters first); each
    merge's result ranks next, in merge order. The ranks must equal
    ``encoder.json``'s ids (without ``<|endoftext|>``/``<|startoftext|>``);
    ``clobber_one_byte_tokens`` takes the single bytes' ids from ``encoder.json``.
    A disagreement raises :class:`~streambpe.errors.FormatError` naming a token.
    """
    ranks = _single_byte_ranks()
    merges_text = read_file_cached(vocab_bpe_file, vocab_bpe_hash).decode()
    # The first line is the "#version" header; the last is empty.
    for line in merges_text.split("\n")[1:-1]:
        left, right = line.split()
        ranks[decode_token(left) + decode_token(right)] = len(ranks)
    encoder = json.loads(read_file_cached(encoder_json_file, encoder_json_hash))
    ids = {decode_token(spelling): token_id for spelling, token_id in encoder.items()}
    for marker in (b"<|endoftext|>", b"<|startoftext|>"):
        ids.pop(marker, None)
    if clobber_one_byte_tokens:
        ranks.update({token: token_id for token, token_id in ids.items() if len(token) == 1})
    if ranks != ids:
        token = next(
            (t for t in sorted(ranks.keys() | ids.keys()) if ranks.get(t) != ids.get(t)), b""
        )
        raise FormatError(
            encoder_json_file,
            None,
            f"token {token!r} has id {ids.get(token)} here but rank {ranks.get(token)} from "
            f"the merges in {vocab_bpe_file}; the two files do not belong together",
        )
    return ranks


def _single_byte_ranks() -> dict[bytes, int]:
    """GPT-2's ranks of the 256 bytes: those it spells as themselves first, in byte order.

    >>> ranks = _single_byte_ranks()
    >>> ranks[b"!"], ranks[b"\\x00"], len(ranks)
    (0, 188, 256)
    """
    spelling = bytes_to_unicode()
    order = sorted(range(256), key=lambda byte: (spelling[byte] != chr(byte), byte))
    return {bytes([byte]): rank for rank, byte in enumerate(order)}


def dump_tiktoken_bpe(bpe_ranks: dict[bytes, int], tiktoken_bpe_file: str) -> None:
    """Write ``bpe_ranks`` as a ``.tiktoken`` file, sorted by rank, whole or not at all.

    A local path is written atomically; other URLs go through ``blobfile``.
    """
    if "://" not in tiktoken_bpe_file:
        write_tiktoken(tiktoken_bpe_file, {rank: token for token, rank in bpe_ranks.items()}, {})
        return
    try:
        import blobfile  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise ImportError(
            f"writing {tiktoken_bpe_file} needs blobfile, which is not installed: "
            "pip install blobfile"
        ) from None
    with blobfile.BlobFile(tiktoken_bpe_file, "wb") as file:
        for token, rank in sorted(bpe_ranks.items(), key=lambda item: item[1]):
            file.write(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")
