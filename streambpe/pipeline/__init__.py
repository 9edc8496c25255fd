"""The steps around the BPE model that a ``tokenizer.json`` describes, as plain objects.

Hugging Face ``tokenizers`` runs: added tokens cut out of the raw text, a
normalizer on the rest, added tokens cut out of the normalized text, the
pre-tokenizer, the model, then a post-processor. This package holds those
steps other than pre-tokenizing and the model (which the kernels of
:mod:`streambpe.core` run): :mod:`~streambpe.pipeline.normalizers`,
:mod:`~streambpe.pipeline.added_tokens`, :mod:`~streambpe.pipeline.templates`,
and :class:`~streambpe.pipeline.text.TextPipeline`, which ties them
together for the encoder.
"""

from __future__ import annotations

from streambpe.pipeline.added_tokens import AddedToken
from streambpe.pipeline.normalizers import Normalizer
from streambpe.pipeline.templates import Template
from streambpe.pipeline.text import TextPipeline

__all__ = ["AddedToken", "Normalizer", "Template", "TextPipeline"]
