"""GPT-2's byte-to-unicode mapping: how byte-level tokens are spelled in text files.

A byte-level BPE token is an arbitrary byte string, often not valid UTF-8 on its
own. GPT-2's ``vocab.json`` and ``merges.txt`` (and Hugging Face's
``tokenizer.json``) therefore spell each byte as one printable character: the
188 bytes that are already printable Latin-1 characters stand for themselves,
and the other 68 (controls, space, soft hyphen, ...) borrow characters from
U+0100 upward, in byte order. A space becomes ``Ġ`` and a newline ``Ċ``; the
spelling never contains a literal space, which is why ``merges.txt`` can use
one as its separator.

>>> encode_token(b" hello\\n")
'ĠhelloĊ'
>>> decode_token("ĠhelloĊ")
b' hello\\n'
>>> decode_token(encode_token(bytes(range(256)))) == bytes(range(256))
True
"""

from __future__ import annotations


def _build_byte_to_char() -> tuple[str, ...]:
    # Printable Latin-1 ranges keep their own code point; everything else is
    # numbered from 256 in byte order. This is the exact rule GPT-2 used, so
    # files written here are byte-identical to GPT-2's.
    printable = {
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    }
    chars: list[str] = []
    borrowed = 0
    for byte in range(256):
        if byte in printable:
            chars.append(chr(byte))
        else:
            chars.append(chr(256 + borrowed))
            borrowed += 1
    return tuple(chars)


_BYTE_TO_CHAR: tuple[str, ...] = _build_byte_to_char()
_CHAR_TO_BYTE: dict[str, int] = {char: byte for byte, char in enumerate(_BYTE_TO_CHAR)}


def bytes_to_unicode() -> dict[int, str]:
    """Return GPT-2's table from each byte value (0-255) to the character that spells it.

    The result is a fresh dict, so callers may modify it.

    >>> table = bytes_to_unicode()
    >>> table[ord("a")], table[ord(" ")], table[ord("\\n")], table[0]
    ('a', 'Ġ', 'Ċ', 'Ā')
    >>> len(set(table.values()))
    256
    """
    return dict(enumerate(_BYTE_TO_CHAR))


def encode_token(token: bytes) -> str:
    """Spell a token's bytes in GPT-2's byte-to-unicode characters.

    >>> encode_token("é".encode())
    'Ã©'
    >>> encode_token(b"\\xff\\x00")
    'ÿĀ'
    """
    return "".join([_BYTE_TO_CHAR[byte] for byte in token])


def decode_token(spelling: str) -> bytes:
    """Turn a GPT-2 byte-to-unicode spelling back into the token's bytes.

    Raises ``ValueError`` naming the first character that is not in the mapping.

    >>> decode_token("Ã©").decode()
    'é'
    >>> decode_token("a b")
    Traceback (most recent call last):
    ...
    ValueError: character ' ' (U+0020) at index 1 of 'a b' is not in GPT-2's byte-to-unicode mapping
    """
    try:
        return bytes([_CHAR_TO_BYTE[char] for char in spelling])
    except KeyError:
        pass
    # Only the failing path pays for finding which character was at fault.
    index, char = next((i, c) for i, c in enumerate(spelling) if c not in _CHAR_TO_BYTE)
    raise ValueError(
        f"character {char!r} (U+{ord(char):04X}) at index {index} of {spelling!r} "
        "is not in GPT-2's byte-to-unicode mapping"
    )
