"""Readers and writers of tokenizer files, in GPT-2, tiktoken or Hugging Face format.

The names here save and load a whole tokenizer directory
(:mod:`~streambpe.formats.directory`); one module per file format reads and
writes its files: :mod:`~streambpe.formats.gpt2` (``vocab.json`` and
``merges.txt``), :mod:`~streambpe.formats.tiktoken_file` (tiktoken ranks, with
:mod:`~streambpe.formats.cached_ranks` keeping large ones compiled),
:mod:`~streambpe.formats.hf_json` (a ``tokenizer.json`` streambpe writes),
:mod:`~streambpe.formats.hf` (``tokenizer.json`` of real models) and
:mod:`~streambpe.formats.tekken` (Mistral's ``tekken.json``).

>>> import tempfile
>>> files = TokenizerFiles({0: b"a", 1: b"b", 2: b"ab"}, [(b"a", b"b")])
>>> with tempfile.TemporaryDirectory() as tmp:
...     load_tokenizer(save_tokenizer(tmp, files, format="hf")) == files
True
"""

from __future__ import annotations

from streambpe.formats.directory import (
    FORMATS,
    TokenizerFiles,
    check_byte_level,
    check_creatable,
    load_tokenizer,
    save_tokenizer,
)

__all__ = [
    "FORMATS",
    "TokenizerFiles",
    "check_byte_level",
    "check_creatable",
    "load_tokenizer",
    "save_tokenizer",
]
