"""The ``post_processor`` of a ``tokenizer.json``: the template ``add_special_tokens=True`` applies.

Supported: ``null``; ``TemplateProcessing`` (its ``single`` template: special
tokens around ``$A``); ``ByteLevel``, which only moves offsets, so adds no
ids; ``Sequence`` of these, with at most one template. Others fail the load.

>>> node = Node({"type": "TemplateProcessing",
...              "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
...                         {"Sequence": {"id": "A", "type_id": 0}}],
...              "special_tokens": {"<s>": {"id": "<s>", "ids": [7], "tokens": ["<s>"]}}},
...             "t.json", "post_processor")
>>> read_post_processor(node)
Template(before=(7,), after=())
"""

from __future__ import annotations

from collections.abc import Callable

from streambpe.formats.hf.nodes import Node
from streambpe.pipeline.templates import Template


def read_post_processor(node: Node) -> Template | None:
    """The template ``node`` describes, or None when it adds nothing."""
    if node.value is None:
        return None
    return node.read_by_type(_READERS, "post-processor")


def _read_sequence(node: Node) -> Template | None:
    templates = [
        template
        for step in node.child("processors").items()
        if (template := read_post_processor(step)) is not None
    ]
    if len(templates) > 1:
        raise node.child("processors").unsupported("more than one template")
    return templates[0] if templates else None


def _read_template(node: Node) -> Template:
    specials = node.child("special_tokens")
    before: list[int] = []
    after: list[int] = []
    seen_sequence = False
    for item in node.child("single").items():
        fields = item.fields()
        if set(fields) == {"Sequence"}:
            if item.child("Sequence").child("id").string() != "A" or seen_sequence:
                raise item.unsupported("a single-sequence template with other than one $A")
            seen_sequence = True
        elif set(fields) == {"SpecialToken"}:
            name = item.child("SpecialToken").child("id").string()
            ids = specials.child(name).child("ids")
            (after if seen_sequence else before).extend(entry.integer() for entry in ids.items())
        else:
            raise item.fail('expected {"SpecialToken": ...} or {"Sequence": ...}')
    if not seen_sequence:
        raise node.child("single").unsupported("a template without $A")
    return Template(tuple(before), tuple(after))


#: The post-processor types streambpe reads, each to its template (None: it adds no ids).
_READERS: dict[str, Callable[[Node], Template | None]] = {
    "ByteLevel": lambda node: None,
    "TemplateProcessing": _read_template,
    "Sequence": _read_sequence,
}
