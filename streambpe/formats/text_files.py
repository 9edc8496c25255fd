"""Checks shared by the readers of text-based tokenizer files.

>>> refuse_nul_bytes("v.json", b'{"a": 0}', "this file should be text")
"""

from __future__ import annotations

from streambpe.errors import FormatError


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
