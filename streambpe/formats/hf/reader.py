"""Reading a whole ``tokenizer.json`` into what the engine runs: vocabulary, merges, pattern, pipeline.

Each component is read by its own module, from its own JSON node, and any
setting that streambpe would not encode exactly as Hugging Face
``tokenizers`` does fails the load with a :class:`~streambpe.errors.FormatError`
naming the JSON path (``pre_tokenizer.pretokenizers[2].behavior``).

>>> import json, tempfile
>>> from pathlib import Path
>>> vocab = {chr(c): c - 97 for c in range(97, 100)}
>>> document = {"model": {"type": "BPE", "vocab": vocab, "merges": [], "dropout": 0.1}}
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = Path(tmp) / "tokenizer.json"
...     _ = path.write_text(json.dumps(document), encoding="utf-8")
...     read_hf_tokenizer(path)  # doctest: +ELLIPSIS
Traceback (most recent call last):
streambpe.errors.FormatError: .../tokenizer.json: model.dropout: BPE dropout (random merges) is not supported; streambpe would encode it differently
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from streambpe.core.split_steps import SplitSteps
from streambpe.formats.gpt2 import read_json_file
from streambpe.formats.hf.added_tokens import read_added_tokens
from streambpe.formats.hf.decoders import read_decoder
from streambpe.formats.hf.model import read_bpe_model
from streambpe.formats.hf.nodes import Node
from streambpe.formats.hf.normalizers import read_normalizer
from streambpe.formats.hf.post_processors import read_post_processor
from streambpe.formats.hf.pre_tokenizers import read_pre_tokenizer
from streambpe.pipeline.text import TextPipeline


@dataclass(frozen=True)
class HFTokenizerSpec:
    """What a ``tokenizer.json`` tells the engine.

    Attributes:
        vocab: id -> bytes of the tokens BPE may give (added tokens apart).
        merges: the merges, in rank order.
        pattern: a pattern string, or a chain of split steps.
        pipeline: added tokens, normalizer, prefix space, template, decoding.
        document: the parsed file, which ``save(format="hf")`` writes back.
    """

    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    pattern: str | SplitSteps
    pipeline: TextPipeline
    document: dict[str, object]

    @property
    def special_tokens(self) -> dict[str, int]:
        """Every added token's text and id."""
        return {token.content: token.id for token in self.pipeline.added_tokens}


def read_hf_tokenizer(
    path: str | os.PathLike[str], document: object | None = None
) -> HFTokenizerSpec:
    """Read ``path``, a ``tokenizer.json`` of a byte-level BPE model (``document``: parsed already)."""
    root = Node(read_json_file(Path(path)) if document is None else document, str(path))
    for setting in ("truncation", "padding"):
        if root.has(setting):
            raise root.child(setting).unsupported(f"{setting} (it changes what encode returns)")
    model = read_bpe_model(root.child("model"))
    pre_tokenizer = read_pre_tokenizer(root.child("pre_tokenizer"))
    normalizer = read_normalizer(root.child("normalizer"))
    added = read_added_tokens(root.child("added_tokens"), model.spellings)
    decode_added = read_decoder(root.child("decoder"))
    # tokenizers keeps a normalized token under its normalized text, and decodes that.
    decoded = model.decode_only | {
        token.id: decode_added(
            normalizer.normalize(token.content)
            if normalizer and token.normalized
            else token.content
        )
        for token in added
    }
    pipeline = TextPipeline(
        added,
        normalizer,
        prefix_space=pre_tokenizer.prefix_space,
        template=read_post_processor(root.child("post_processor")),
        decoded=decoded,
    )
    added_ids = {token.id for token in added}
    spelling_of = {token_id: spelling for spelling, token_id in model.spellings.items()}
    for index, token in enumerate(added):
        if token.id in spelling_of and spelling_of[token.id] != token.content:
            raise (
                root.child("added_tokens")
                .item(index)
                .fail(
                    f"{token.content!r} gets id {token.id}, which model.vocab gives to "
                    f"{spelling_of[token.id]!r}: one id would stand for two tokens"
                )
            )
    vocab = {
        token_id: token for token_id, token in model.vocab.items() if token_id not in added_ids
    }
    return HFTokenizerSpec(vocab, model.merges, pre_tokenizer.pattern, pipeline, root.fields())
