"""GPT-2's tokenizer files: ``vocab.json`` and ``merges.txt``.

``vocab.json`` maps each token, spelled in GPT-2's byte-to-unicode characters
(see :mod:`streambpe.formats.byte_unicode`), to its id. ``merges.txt`` lists the merges
in the order they were learned, one ``left right`` pair a line, optionally
after a ``#version: 0.2`` header. Special tokens such as ``<|endoftext|>`` are
ordinary entries of ``vocab.json``, spelled like any other token.

Hugging Face's ``tokenizer.json`` embeds the same two structures, so the
spelling helpers here (:func:`encode_vocab`, :func:`decode_vocab`,
:func:`encode_merges`, :func:`decode_merge`, :func:`parse_merge_line`) are shared with
:mod:`streambpe.formats.hf_json`, as is :func:`read_json_file`.

>>> import tempfile
>>> vocab = {i: bytes([i]) for i in range(256)} | {256: b" t", 257: b" th"}
>>> merges = [(b" ", b"t"), (b" t", b"h")]
>>> with tempfile.TemporaryDirectory() as tmp:
...     vocab_path, merges_path = write_gpt2(tmp, vocab, merges)
...     print(merges_path.read_text(encoding="utf-8"), end="")
...     read_gpt2(vocab_path, merges_path) == (vocab, merges)
Ġ t
Ġt h
True
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from streambpe._support.atomic import atomic_write
from streambpe.errors import FormatError
from streambpe.formats.byte_unicode import decode_token, encode_token
from streambpe.formats.text_files import refuse_nul_bytes

#: The header line GPT-2's own ``vocab.bpe`` starts with.
MERGES_HEADER = "#version: 0.2"

#: Token ids are ``uint32`` values (as in Hugging Face ``tokenizers`` and tiktoken).
ID_LIMIT = 2**32


def write_gpt2(
    directory: str | os.PathLike[str],
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[bytes, bytes]],
    *,
    header: bool = False,
) -> tuple[Path, Path]:
    """Write ``vocab.json`` and ``merges.txt`` into ``directory``; return their paths.

    ``header=True`` starts ``merges.txt`` with ``#version: 0.2`` as GPT-2's
    original ``vocab.bpe`` does; the default matches the CS336 fixtures.
    Each file is written whole or not at all (see :mod:`streambpe._support.atomic`).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _, merges_path = write_gpt2(tmp, {0: b"a", 1: b"b", 2: b"ab"}, [(b"a", b"b")],
    ...                                 header=True)
    ...     merges_path.read_text(encoding="utf-8")
    '#version: 0.2\\na b\\n'
    """
    folder = Path(directory)
    vocab_text = json.dumps(encode_vocab(vocab), ensure_ascii=False)
    lines = [MERGES_HEADER] if header else []
    lines.extend(f"{left} {right}" for left, right in encode_merges(merges))
    vocab_path = folder / "vocab.json"
    merges_path = folder / "merges.txt"
    with atomic_write(vocab_path) as file:
        file.write(vocab_text.encode("utf-8"))
    with atomic_write(merges_path) as file:
        file.write("".join(line + "\n" for line in lines).encode("utf-8"))
    return vocab_path, merges_path


def read_gpt2(
    vocab_path: str | os.PathLike[str], merges_path: str | os.PathLike[str]
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Read a GPT-2 ``vocab.json`` and ``merges.txt`` into ``(vocab, merges)``.

    ``merges.txt`` may start with a ``#version`` header and end with blank
    lines. Anything malformed raises :class:`~streambpe.errors.FormatError`
    naming the file and, where there is one, the 1-based line; that includes
    a merge whose sides or result are not tokens of ``vocab.json``, which
    Hugging Face ``tokenizers`` refuses too (or panics on).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     paths = write_gpt2(tmp, {0: b"a", 1: b"b", 2: b"ab"}, [(b"a", b"b")])
    ...     read_gpt2(*paths)
    ({0: b'a', 1: b'b', 2: b'ab'}, [(b'a', b'b')])
    """
    vocab_file = Path(vocab_path)
    spelled = read_json_file(vocab_file)
    try:
        vocab = decode_vocab(spelled)
    except ValueError as exc:
        raise FormatError(str(vocab_file), None, str(exc)) from exc
    merges_file = Path(merges_path)
    numbered = _read_numbered_merges(merges_file)
    tokens = set(vocab.values())
    for number, (left, right) in numbered:
        unknown = next((t for t in (left, right, left + right) if t not in tokens), None)
        if unknown is not None:
            raise FormatError(
                str(merges_file),
                number,
                f"merge {encode_token(left)} {encode_token(right)} uses token "
                f"{encode_token(unknown)!r} ({unknown!r}), which is not in {vocab_file.name}",
            )
    return vocab, [merge for _, merge in numbered]


def read_merges(path: str | os.PathLike[str]) -> list[tuple[bytes, bytes]]:
    """Read a ``merges.txt`` file (header optional, trailing blank lines ignored).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "merges.txt"
    ...     _ = path.write_text("#version: 0.2\\nĠ t\\n\\n", encoding="utf-8")
    ...     read_merges(path)
    [(b' ', b't')]
    """
    return [merge for _, merge in _read_numbered_merges(Path(path))]


def _read_numbered_merges(merges_file: Path) -> list[tuple[int, tuple[bytes, bytes]]]:
    """The merges of ``merges_file``, each with its 1-based line number."""
    lines = _read_utf8(merges_file).split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    merges: list[tuple[int, tuple[bytes, bytes]]] = []
    for number, raw_line in enumerate(lines, start=1):
        # "\r" is never part of a spelling (byte 13 is spelled "č"), so dropping
        # it only makes files saved with Windows line endings readable.
        line = raw_line.removesuffix("\r")
        if number == 1 and line.startswith("#version"):
            continue
        try:
            merges.append((number, parse_merge_line(line)))
        except ValueError as exc:
            raise FormatError(str(merges_file), number, str(exc)) from exc
    return merges


def encode_vocab(vocab: Mapping[int, bytes]) -> dict[str, int]:
    """Spell a vocab as GPT-2's ``{token spelling: id}`` object, ordered by id.

    Raises ``ValueError`` for an empty token or two ids sharing the same bytes,
    neither of which the file format can hold.

    >>> encode_vocab({1: b" a", 0: b"\\n"})
    {'Ċ': 0, 'Ġa': 1}
    """
    spelled: dict[str, int] = {}
    for token_id in sorted(vocab):
        token = vocab[token_id]
        if not token:
            raise ValueError(
                f"token id {token_id} is empty, and a vocab.json or tokenizer.json cannot "
                "hold an empty token; save this tokenizer with format='tiktoken'"
            )
        spelling = encode_token(token)
        if spelling in spelled:
            raise ValueError(
                f"token ids {spelled[spelling]} and {token_id} both have bytes {token!r}; "
                "a vocab file maps each token to one id"
            )
        spelled[spelling] = token_id
    return spelled


def decode_vocab(spelled: object) -> dict[int, bytes]:
    """Turn a parsed ``{token spelling: id}`` JSON object into ``{id: bytes}``.

    Raises ``ValueError`` naming the offending entry when ``spelled`` is not an
    object, an id is not a non-negative integer, a spelling is empty or not in
    the byte-to-unicode mapping, or two tokens share an id.

    >>> decode_vocab({"Ġa": 1, "Ċ": 0})
    {1: b' a', 0: b'\\n'}
    >>> decode_vocab({"a": 0, "b": 0})
    Traceback (most recent call last):
    ...
    ValueError: tokens 'a' and 'b' both have id 0
    """
    if not isinstance(spelled, dict):
        raise ValueError(
            f"expected a JSON object mapping tokens to ids, found {_json_kind(spelled)}"
        )
    vocab: dict[int, bytes] = {}
    spelling_of: dict[int, str] = {}
    for spelling, token_id in spelled.items():
        # bool is an int subclass, but true/false in a vocab is a mistake, not an id.
        if isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < 0:
            raise ValueError(
                f"token {spelling!r} has id {token_id!r}; ids must be non-negative integers"
            )
        if token_id >= ID_LIMIT:
            raise ValueError(
                f"token {spelling!r} has id {token_id}, which does not fit 32 bits; "
                f"ids must be below 2**32 = {ID_LIMIT}"
            )
        if token_id in vocab:
            raise ValueError(
                f"tokens {spelling_of[token_id]!r} and {spelling!r} both have id {token_id}"
            )
        if not spelling:
            raise ValueError(f"id {token_id} has an empty token")
        vocab[token_id] = decode_token(spelling)
        spelling_of[token_id] = spelling
    return vocab


def encode_merges(merges: Sequence[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """Spell each merge's two sides in GPT-2 characters, rejecting an empty side.

    >>> encode_merges([(b" ", b"t"), (b"\\n", b"\\n")])
    [('Ġ', 't'), ('Ċ', 'Ċ')]
    """
    spelled: list[tuple[str, str]] = []
    for number, (left, right) in enumerate(merges, start=1):
        if not left or not right:
            raise ValueError(f"merge {number} ({left!r}, {right!r}) has an empty side")
        spelled.append((encode_token(left), encode_token(right)))
    return spelled


def parse_merge_line(line: str) -> tuple[bytes, bytes]:
    """Parse one ``left right`` merge line (GPT-2 spelling) into a pair of byte strings.

    >>> parse_merge_line("Ġt he")
    (b' t', b'he')
    >>> parse_merge_line("Ġthe")
    Traceback (most recent call last):
    ...
    ValueError: expected two tokens separated by one space, found 1 field(s) in 'Ġthe'
    """
    fields = line.split(" ")
    if len(fields) != 2:
        raise ValueError(
            f"expected two tokens separated by one space, found {len(fields)} field(s) in {line!r}"
        )
    return decode_merge(fields[0], fields[1])


def decode_merge(left: str, right: str) -> tuple[bytes, bytes]:
    """Decode the two GPT-2 spellings of a merge, rejecting empty or unmappable ones.

    >>> decode_merge("Ġ", "t")
    (b' ', b't')
    """
    if not left or not right:
        raise ValueError(f"merge ({left!r}, {right!r}) has an empty side")
    return decode_token(left), decode_token(right)


def read_json_file(path: Path) -> object:
    """Parse a UTF-8 JSON file, raising :class:`FormatError` with the line of any syntax error.

    A key repeated within one object is an error too: ``json`` would silently
    keep the last value, hiding a corrupted vocab.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "bad.json"
    ...     _ = path.write_text('{"a": 1,\\n "a": 2}', encoding="utf-8")
    ...     read_json_file(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    streambpe.errors.FormatError: .../bad.json: key 'a' appears twice in one JSON object
    """
    text = _read_utf8(path)

    def reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
        result: dict[str, object] = {}
        for key, value in pairs:
            if key in result:
                raise FormatError(str(path), None, f"key {key!r} appears twice in one JSON object")
            result[key] = value
        return result

    try:
        parsed: object = json.loads(text, object_pairs_hook=reject_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise FormatError(
            str(path), exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})"
        ) from exc
    return parsed


def _read_utf8(path: Path) -> str:
    data = path.read_bytes()
    refuse_nul_bytes(str(path), data, "this file should be text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FormatError(
            str(path), line, f"invalid UTF-8 at byte offset {exc.start} ({exc.reason})"
        ) from exc


def _json_kind(value: object) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return kinds.get(type(value), "a number")
