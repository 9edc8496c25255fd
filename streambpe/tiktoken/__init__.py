"""A drop-in for tiktoken: ``import streambpe.tiktoken as tiktoken`` runs tiktoken code unchanged.

The names, defaults, vocabulary files, cache and error messages are
tiktoken's; the ids come from streambpe's engine, and each encoding hands out
its :class:`~streambpe.tokenizer.Tokenizer` (``enc.tokenizer``) for what
tiktoken lacks: files of any size, async streams, counting without ids.
:func:`register_encoding` adds encodings of your own, trained with
``streambpe.train_bpe`` for example. The modules mirror tiktoken's:
:mod:`~streambpe.tiktoken.core`, :mod:`~streambpe.tiktoken.registry`,
:mod:`~streambpe.tiktoken.load`, :mod:`~streambpe.tiktoken.model`.

>>> import streambpe.tiktoken as tiktoken
>>> tiktoken.encoding_name_for_model("gpt-4")
'cl100k_base'
>>> sorted(tiktoken.list_encoding_names())[:4]
['cl100k_base', 'gpt2', 'o200k_base', 'o200k_harmony']
"""

from __future__ import annotations

from streambpe.tiktoken.core import Encoding
from streambpe.tiktoken.model import encoding_for_model, encoding_name_for_model
from streambpe.tiktoken.registry import get_encoding, list_encoding_names, register_encoding

#: The tiktoken release whose names, tables and file hashes this module mirrors
#: (code that checks ``tiktoken.__version__`` reads it); streambpe's own
#: version is ``streambpe.__version__``.
__version__ = "0.14.0"

__all__ = [
    "Encoding",
    "__version__",
    "encoding_for_model",
    "encoding_name_for_model",
    "get_encoding",
    "list_encoding_names",
    "register_encoding",
]
