"""A :class:`~streambpe.pipeline.text.TextPipeline` as plain JSON data, and back.

Worker processes of another executor get an encoder as a JSON file, never a
pickle (:mod:`streambpe.streaming.worker_encoder`), and the encoder's
fingerprint is a hash of that JSON: so the pipeline has a canonical JSON
form, which holds everything that decides its ids.

>>> from streambpe.pipeline.normalizers import NormalizerSequence, Prepend, UnicodeForm
>>> pipeline = TextPipeline((AddedToken("<s>", 5),), NormalizerSequence((UnicodeForm("NFC"),
...                         Prepend("_"))), template=Template((5,)), decoded={5: b"<s>"})
>>> pipeline_from_document(pipeline_document(pipeline)) == pipeline
True
"""

from __future__ import annotations

import dataclasses
from typing import Any

from streambpe.pipeline.added_tokens import AddedToken
from streambpe.pipeline.normalizers import NORMALIZER_TYPES, Normalizer, NormalizerSequence
from streambpe.pipeline.templates import Template
from streambpe.pipeline.text import TextPipeline


def pipeline_document(pipeline: TextPipeline) -> dict[str, Any]:
    """``pipeline`` as JSON-ready data (lists, strings, numbers), in a canonical order."""
    template = pipeline.template
    return {
        "added_tokens": [dataclasses.asdict(token) for token in pipeline.added_tokens],
        "normalizer": _normalizer_document(pipeline.normalizer),
        "prefix_space": pipeline.prefix_space,
        "template": None if template is None else [list(template.before), list(template.after)],
        "decoded": sorted([token_id, data.hex()] for token_id, data in pipeline.decoded.items()),
    }


def pipeline_from_document(document: dict[str, Any]) -> TextPipeline:
    """The pipeline :func:`pipeline_document` describes."""
    template = document["template"]
    return TextPipeline(
        tuple(AddedToken(**fields) for fields in document["added_tokens"]),
        _normalizer_from(document["normalizer"]),
        prefix_space=document["prefix_space"],
        template=None if template is None else Template(tuple(template[0]), tuple(template[1])),
        decoded={token_id: bytes.fromhex(data) for token_id, data in document["decoded"]},
    )


def _normalizer_document(normalizer: Normalizer | None) -> dict[str, Any] | None:
    if normalizer is None:
        return None
    if isinstance(normalizer, NormalizerSequence):
        return {"type": "Sequence", "steps": [_normalizer_document(s) for s in normalizer.steps]}
    fields = dataclasses.asdict(normalizer)  # type: ignore[call-overload]
    return {"type": type(normalizer).__name__, **fields}


def _normalizer_from(document: dict[str, Any] | None) -> Normalizer | None:
    if document is None:
        return None
    fields = dict(document)
    kind = fields.pop("type")
    if kind == "Sequence":
        steps = [_normalizer_from(step) for step in fields["steps"]]
        return NormalizerSequence(tuple(step for step in steps if step is not None))
    normalizer: Normalizer = NORMALIZER_TYPES[kind](**fields)
    return normalizer
