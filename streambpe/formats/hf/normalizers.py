"""The ``normalizer`` of a ``tokenizer.json``: JSON nodes to :mod:`streambpe.pipeline.normalizers`.

Supported: none (``null``), ``NFC``, ``NFD``, ``NFKC``, ``NFKD``,
``Lowercase``, ``Replace`` (``String`` or ``Regex`` pattern), ``Prepend`` and
``Sequence`` of these. Any other type fails the load, naming its path.

>>> read_normalizer(Node({"type": "Sequence", "normalizers": [{"type": "NFC"},
...     {"type": "Replace", "pattern": {"String": "."}, "content": "!"}]}, "t.json", "normalizer"))
NormalizerSequence(steps=(UnicodeForm(form='NFC'), Replace(pattern='\\\\.', content='!')))
"""

from __future__ import annotations

from collections.abc import Callable

import regex

from streambpe.core.split_steps import python_dialect
from streambpe.formats.hf.nodes import Node
from streambpe.pipeline.normalizers import (
    UNICODE_FORMS,
    Lowercase,
    Normalizer,
    NormalizerSequence,
    Prepend,
    Replace,
    UnicodeForm,
)


def read_normalizer(node: Node) -> Normalizer | None:
    """The normalizer that ``node`` describes, or None for ``null``."""
    if node.value is None:
        return None
    return node.read_by_type(_READERS, "normalizer")


def _read_replace(node: Node) -> Replace:
    # "$" means any line end to tokenizers' regex engine (see split_steps.python_dialect).
    pattern = python_dialect(read_pattern(node.child("pattern")))
    return Replace(pattern, node.child("content").string())


def _read_sequence(node: Node) -> NormalizerSequence:
    steps = [read_normalizer(step) for step in node.child("normalizers").items()]
    return NormalizerSequence(tuple(step for step in steps if step is not None))


def read_pattern(node: Node) -> str:
    """A ``{"String": ...}`` or ``{"Regex": ...}`` pattern as a regex (a string escaped)."""
    fields = node.fields()
    if set(fields) == {"String"}:
        return regex.escape(node.child("String").string(), special_only=True)
    if set(fields) == {"Regex"}:
        pattern = node.child("Regex").string()
        try:
            regex.compile(pattern)
        except regex.error as exc:
            raise node.child("Regex").fail(f"not a regex streambpe can run: {exc}") from exc
        return pattern
    raise node.fail('expected {"String": ...} or {"Regex": ...}')


#: The normalizer types streambpe reads, each to its normalizer.
_READERS: dict[str, Callable[[Node], Normalizer]] = {
    **dict.fromkeys(UNICODE_FORMS, lambda node: UnicodeForm(node.type_name())),
    "Lowercase": lambda node: Lowercase(),
    "Prepend": lambda node: Prepend(node.child("prepend").string()),
    "Replace": _read_replace,
    "Sequence": _read_sequence,
}
