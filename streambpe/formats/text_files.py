"""Checks shared by the readers and writers of tokenizer files.

>>> refuse_nul_bytes("v.json", b'{"a": 0}', "this file should be text")
>>> first_repeat({b"a": 0, b"b": 1, b"c": 0})
(b'a', b'c', 0)
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

from streambpe.errors import FormatError

KeyT = TypeVar("KeyT")
ValueT = TypeVar("ValueT", bound=Hashable)


def refuse_nul_bytes(path: str, data: bytes, expectation: str) -> None:
    """Raise :class:`FormatError` naming the line and offset of the first NUL byte in ``data``.

    No tokenizer text file holds a raw NUL (GPT-2 spells byte 0 as "Ā", JSON
    escapes it, base64 has none), so one means the file is corrupted or is
    not the file expected; ``expectation`` says what the file should be.

    >>> refuse_nul_bytes("t.tiktoken", b"YQ== 0\\n\\0", "a .tiktoken file is ASCII text")
    Traceback (most recent call last):
    ...
    streambpe.errors.FormatError: t.tiktoken:2: NUL byte at byte offset 7: a .tiktoken file is ASCII text; it is corrupted or not the file expected here
    """
    nul = data.find(b"\0")
    if nul >= 0:
        raise FormatError(
            path,
            data.count(b"\n", 0, nul) + 1,
            f"NUL byte at byte offset {nul}: {expectation}; it is corrupted "
            "or not the file expected here",
        )


def first_repeat(mapping: Mapping[KeyT, ValueT]) -> tuple[KeyT, KeyT, ValueT] | None:
    """The first value that two keys share, as ``(earlier key, later key, value)``; else None.

    A token file maps each token to one id and each id to one token; this
    finds the two entries to name when it does not. Distinct values, the
    usual case, cost one pass at C speed.

    >>> first_repeat({"a": 0, "b": 1}) is None
    True
    """
    if len(set(mapping.values())) == len(mapping):
        return None
    key_of: dict[ValueT, KeyT] = {}
    for key, value in mapping.items():
        if value in key_of:
            return key_of[value], key, value
        key_of[value] = key
    return None
