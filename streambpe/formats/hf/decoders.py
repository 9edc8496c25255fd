"""The ``decoder`` of a ``tokenizer.json``: which bytes each added token decodes to.

Supported: ``null``, ``ByteLevel`` and ``Sequence`` of ``ByteLevel``. A
``ByteLevel`` decoder turns a token spelled entirely in GPT-2's byte
characters into those bytes, and any other token into its own UTF-8; so an
added token spelled ``"À"`` decodes to the byte 0xC0, as in ``tokenizers``.
Without a decoder, a token decodes to its own UTF-8.

>>> byte_level = read_decoder(Node({"type": "ByteLevel"}, "t.json", "decoder"))
>>> byte_level("Ġhi"), byte_level("<\\uff5cend\\uff5c>") == "<\\uff5cend\\uff5c>".encode()
(b' hi', True)
"""

from __future__ import annotations

from collections.abc import Callable

from streambpe.formats.byte_unicode import decode_token
from streambpe.formats.hf.nodes import Node

#: An added token's text to the bytes decoding gives for it.
TokenDecoder = Callable[[str], bytes]


def read_decoder(node: Node) -> TokenDecoder:
    """How ``node`` decodes the text of an added token."""
    if node.value is None:
        return _utf8
    return node.read_by_type(_READERS, "decoder")


def _read_sequence(node: Node) -> TokenDecoder:
    steps = [read_decoder(step) for step in node.child("decoders").items()]
    if all(step is _byte_level for step in steps) and steps:
        return _byte_level
    raise node.child("decoders").unsupported("a decoder sequence of other than ByteLevel")


def _utf8(text: str) -> bytes:
    return text.encode("utf-8")


def _byte_level(text: str) -> bytes:
    try:
        return decode_token(text)
    except ValueError:
        return text.encode("utf-8")


#: The decoder types streambpe reads, each to how it decodes an added token.
_READERS: dict[str, Callable[[Node], TokenDecoder]] = {
    "ByteLevel": lambda node: _byte_level,
    "Sequence": _read_sequence,
}
