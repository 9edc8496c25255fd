"""Which encoding an OpenAI model uses: tiktoken's model tables, exact names then prefixes.

>>> encoding_name_for_model("gpt-4o"), encoding_name_for_model("gpt-4o-2024-08-06")
('o200k_base', 'o200k_base')
>>> encoding_name_for_model("gpt-oss-120b"), encoding_name_for_model("text-davinci-003")
('o200k_harmony', 'p50k_base')
"""

from __future__ import annotations

from streambpe.tiktoken.core import Encoding
from streambpe.tiktoken.registry import get_encoding

_O200K = "o200k_base"
_CL100K = "cl100k_base"
_P50K = "p50k_base"
_R50K = "r50k_base"

#: Model name prefixes, tried in this order when no exact name matches.
MODEL_PREFIX_TO_ENCODING: dict[str, str] = {
    # reasoning
    "o1-": _O200K,
    "o3-": _O200K,
    "o4-mini-": _O200K,
    # chat
    "gpt-5": _O200K,
    "gpt-4.5-": _O200K,
    "gpt-4.1-": _O200K,
    "chatgpt-4o-": _O200K,
    "gpt-4o-": _O200K,
    "gpt-4-": _CL100K,
    "gpt-3.5-turbo-": _CL100K,
    "gpt-35-turbo-": _CL100K,  # Azure deployment names
    "gpt-oss-": "o200k_harmony",
    # fine-tuned models
    "ft:gpt-4o": _O200K,
    "ft:gpt-4": _CL100K,
    "ft:gpt-3.5-turbo": _CL100K,
    "ft:davinci-002": _CL100K,
    "ft:babbage-002": _CL100K,
}

#: Exact model names.
MODEL_TO_ENCODING: dict[str, str] = {
    # reasoning
    "o1": _O200K,
    "o3": _O200K,
    "o4-mini": _O200K,
    # chat
    "gpt-5": _O200K,
    "gpt-4.1": _O200K,
    "gpt-4o": _O200K,
    "gpt-4": _CL100K,
    "gpt-3.5-turbo": _CL100K,
    "gpt-3.5": _CL100K,
    "gpt-35-turbo": _CL100K,
    # base
    "davinci-002": _CL100K,
    "babbage-002": _CL100K,
    # embeddings
    "text-embedding-ada-002": _CL100K,
    "text-embedding-3-small": _CL100K,
    "text-embedding-3-large": _CL100K,
    # text (deprecated)
    "text-davinci-003": _P50K,
    "text-davinci-002": _P50K,
    "text-davinci-001": _R50K,
    "text-curie-001": _R50K,
    "text-babbage-001": _R50K,
    "text-ada-001": _R50K,
    "davinci": _R50K,
    "curie": _R50K,
    "babbage": _R50K,
    "ada": _R50K,
    # code (deprecated)
    "code-davinci-002": _P50K,
    "code-davinci-001": _P50K,
    "code-cushman-002": _P50K,
    "code-cushman-001": _P50K,
    "davinci-codex": _P50K,
    "cushman-codex": _P50K,
    # edit (deprecated)
    "text-davinci-edit-001": "p50k_edit",
    "code-davinci-edit-001": "p50k_edit",
    # old embeddings (deprecated)
    "text-similarity-davinci-001": _R50K,
    "text-similarity-curie-001": _R50K,
    "text-similarity-babbage-001": _R50K,
    "text-similarity-ada-001": _R50K,
    "text-search-davinci-doc-001": _R50K,
    "text-search-curie-doc-001": _R50K,
    "text-search-babbage-doc-001": _R50K,
    "text-search-ada-doc-001": _R50K,
    "code-search-babbage-code-001": _R50K,
    "code-search-ada-code-001": _R50K,
    # open models
    "gpt2": "gpt2",
    "gpt-2": "gpt2",
}


def encoding_name_for_model(model_name: str) -> str:
    """The name of the encoding ``model_name`` uses; ``KeyError`` for a model not in the tables.

    >>> encoding_name_for_model("gpt-3.5-turbo-0125")
    'cl100k_base'
    """
    exact = MODEL_TO_ENCODING.get(model_name)
    if exact is not None:
        return exact
    # Prefixes cover new versions of a model without a new table; they also
    # accept names no model has, such as "gpt-4-anything".
    for prefix, encoding_name in MODEL_PREFIX_TO_ENCODING.items():
        if model_name.startswith(prefix):
            return encoding_name
    raise KeyError(
        f"Could not automatically map {model_name} to a tokeniser. "
        "Please use `tiktoken.get_encoding` to explicitly get the tokeniser you expect."
    )


def encoding_for_model(model_name: str) -> Encoding:
    """The encoding ``model_name`` uses (see :func:`encoding_name_for_model`)."""
    return get_encoding(encoding_name_for_model(model_name))
