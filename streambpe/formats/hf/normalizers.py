"""The ``normalizer`` of a ``tokenizer.json``: JSON nodes to :mod:`streambpe.pipeline.normalizers`.

Supported: none (``null``), ``NFC``, ``NFD``, ``NFKC``, ``NFKD``,
``Lowercase``, ``Replace`` (``String`` or ``Regex`` pattern), ``Prepend`` and
``Sequence`` of these. Any other type fails the load, naming its path.

>>> read_normalizer(Node({"type": "Sequence", "normalizers": [{"type": "NFC"},
...     {"type": "Replace", "pattern": {"String": "."}, "content": "!"}]}, "t.json", "normalizer"))
NormalizerSequence(steps=(UnicodeForm(form='NFC'), Replace(pattern='\\\\.', content='!')))
"""

from __future__ import annotations

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
    kind = node.type_name()
    if kind in UNICODE_FORMS:
        return UnicodeForm(kind)
    if kind == "Lowercase":
        return Lowercase()
    if kind == "Prepend":
        return Prepend(node.child("prepend").string())
    if kind == "Replace":
        # "$" means any line end to tokenizers' regex engine (see split_steps.python_dialect).
        pattern = python_dialect(read_pattern(node.child("pattern")))
        return Replace(pattern, node.child("content").string())
    if kind == "Sequence":
        steps = [read_normalizer(step) for step in node.child("normalizers").items()]
        return NormalizerSequence(tuple(step for step in steps if step is not None))
    raise node.child("type").unsupported(f"normalizer {kind!r}")


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
