"""The seven OpenAI encodings: where each vocabulary file lives, its SHA-256, pattern and specials.

Each constructor returns the keyword arguments of
:class:`~streambpe.tiktoken.core.Encoding`, the contract tiktoken's plugins
follow too (``ENCODING_CONSTRUCTORS``), so the registry treats these and
third-party encodings alike. The vocabulary files are fetched through
tiktoken's cache (:mod:`streambpe.tiktoken.vocabulary_files`) and checked
against the hashes OpenAI publishes.

>>> sorted(ENCODING_CONSTRUCTORS)[:3]
['cl100k_base', 'gpt2', 'o200k_base']
>>> len(harmony_special_tokens()), harmony_special_tokens()["<|call|>"]
(1091, 200012)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from streambpe.patterns import CL100K, GPT2, O200K
from streambpe.tiktoken.load import data_gym_to_mergeable_bpe_ranks, load_tiktoken_bpe

#: The keyword arguments of ``Encoding``, as an encoding constructor returns them.
EncodingSpec = dict[str, Any]

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"

_BLOB = "https://openaipublic.blob.core.windows.net"


class PublishedFile(NamedTuple):
    """A vocabulary file OpenAI publishes, and the SHA-256 it must have."""

    url: str
    sha256: str


R50K_FILE = PublishedFile(
    f"{_BLOB}/encodings/r50k_base.tiktoken",
    "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
)
P50K_FILE = PublishedFile(
    f"{_BLOB}/encodings/p50k_base.tiktoken",
    "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
)
CL100K_FILE = PublishedFile(
    f"{_BLOB}/encodings/cl100k_base.tiktoken",
    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
)
O200K_FILE = PublishedFile(
    f"{_BLOB}/encodings/o200k_base.tiktoken",
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
)
GPT2_MERGES_FILE = PublishedFile(
    f"{_BLOB}/gpt-2/encodings/main/vocab.bpe",
    "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
)
GPT2_ENCODER_FILE = PublishedFile(
    f"{_BLOB}/gpt-2/encodings/main/encoder.json",
    "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
)

#: Every file the seven encodings read, for tools that pre-fetch them.
PUBLISHED_FILES = (
    GPT2_MERGES_FILE,
    GPT2_ENCODER_FILE,
    R50K_FILE,
    P50K_FILE,
    CL100K_FILE,
    O200K_FILE,
)


def _spec(
    name: str,
    pat_str: str,
    file: PublishedFile,
    special_tokens: dict[str, int],
    explicit_n_vocab: int | None = None,
) -> EncodingSpec:
    """``Encoding``'s keyword arguments, the ranks read from ``file`` (and its hash checked)."""
    count = {} if explicit_n_vocab is None else {"explicit_n_vocab": explicit_n_vocab}
    return {
        "name": name,
        **count,
        "pat_str": pat_str,
        "mergeable_ranks": load_tiktoken_bpe(file.url, expected_hash=file.sha256),
        "special_tokens": special_tokens,
    }


def gpt2() -> EncodingSpec:
    """GPT-2, read from its original ``vocab.bpe`` and ``encoder.json``; ranks equal r50k's."""
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=GPT2_MERGES_FILE.url,
        encoder_json_file=GPT2_ENCODER_FILE.url,
        vocab_bpe_hash=GPT2_MERGES_FILE.sha256,
        encoder_json_hash=GPT2_ENCODER_FILE.sha256,
    )
    return {
        "name": "gpt2",
        "explicit_n_vocab": 50257,
        "pat_str": GPT2,
        "mergeable_ranks": ranks,
        "special_tokens": {ENDOFTEXT: 50256},
    }


def r50k_base() -> EncodingSpec:
    """GPT-3's encoding (davinci, curie, babbage, ada)."""
    return _spec("r50k_base", GPT2, R50K_FILE, {ENDOFTEXT: 50256}, explicit_n_vocab=50257)


def p50k_base() -> EncodingSpec:
    """The Codex encoding: r50k plus tokens for runs of 2 to 25 spaces."""
    return _spec("p50k_base", GPT2, P50K_FILE, {ENDOFTEXT: 50256}, explicit_n_vocab=50281)


def p50k_edit() -> EncodingSpec:
    """p50k_base with the fill-in-the-middle tokens of the edit models."""
    specials = {ENDOFTEXT: 50256, FIM_PREFIX: 50281, FIM_MIDDLE: 50282, FIM_SUFFIX: 50283}
    return _spec("p50k_edit", GPT2, P50K_FILE, specials)


def cl100k_base() -> EncodingSpec:
    """GPT-4 and GPT-3.5's encoding, also the ``text-embedding-3`` models'."""
    specials = {
        ENDOFTEXT: 100257,
        FIM_PREFIX: 100258,
        FIM_MIDDLE: 100259,
        FIM_SUFFIX: 100260,
        ENDOFPROMPT: 100276,
    }
    return _spec("cl100k_base", CL100K, CL100K_FILE, specials)


def o200k_base() -> EncodingSpec:
    """GPT-4o's encoding, and that of the o-series and GPT-4.1/GPT-5."""
    specials = {ENDOFTEXT: 199999, ENDOFPROMPT: 200018}
    return _spec("o200k_base", O200K, O200K_FILE, specials)


def harmony_special_tokens() -> dict[str, int]:
    """o200k_harmony's special tokens: o200k_base's, the harmony chat format's, and reserved ids.

    Every id from 200000 to 201087 that the harmony format does not name is
    reserved as ``<|reserved_ID|>``, 200018 too, which therefore has two
    names; it decodes as ``<|endofprompt|>``, as in tiktoken.
    """
    harmony = {
        "<|startoftext|>": 199998,
        "<|return|>": 200002,
        "<|constrain|>": 200003,
        "<|channel|>": 200005,
        "<|start|>": 200006,
        "<|end|>": 200007,
        "<|message|>": 200008,
        "<|call|>": 200012,
    }
    named_ids = set(harmony.values())
    reserved = {
        f"<|reserved_{token_id}|>": token_id
        for token_id in range(200000, 201088)
        if token_id not in named_ids
    }
    # Reserved names first: where an id has two names, the later one is what it decodes to.
    return reserved | harmony | {ENDOFTEXT: 199999, ENDOFPROMPT: 200018}


def o200k_harmony() -> EncodingSpec:
    """The gpt-oss models' encoding: o200k_base's ranks and pattern, the harmony specials."""
    return _spec("o200k_harmony", O200K, O200K_FILE, harmony_special_tokens())


#: Encoding name -> constructor, as a tiktoken plugin module declares them.
ENCODING_CONSTRUCTORS: dict[str, Callable[[], EncodingSpec]] = {
    "gpt2": gpt2,
    "r50k_base": r50k_base,
    "p50k_base": p50k_base,
    "p50k_edit": p50k_edit,
    "cl100k_base": cl100k_base,
    "o200k_base": o200k_base,
    "o200k_harmony": o200k_harmony,
}
