"""Hugging Face ``tokenizer.json`` files of real models, read component by component.

One module per component family, each turning its JSON node into a plain
object: :mod:`~streambpe.formats.hf.normalizers`,
:mod:`~streambpe.formats.hf.pre_tokenizers`, :mod:`~streambpe.formats.hf.model`
(the BPE model), :mod:`~streambpe.formats.hf.added_tokens`,
:mod:`~streambpe.formats.hf.post_processors`, :mod:`~streambpe.formats.hf.decoders`;
:mod:`~streambpe.formats.hf.reader` puts them together, and
:mod:`~streambpe.formats.hf.nodes` names the JSON path of any error.
Writing is :mod:`streambpe.formats.hf_json`'s job.
"""

from streambpe.formats.hf.reader import HFTokenizerSpec, read_hf_tokenizer

__all__ = ["HFTokenizerSpec", "read_hf_tokenizer"]
