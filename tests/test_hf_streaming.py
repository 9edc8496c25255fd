"""Streams and files under a ``tokenizer.json`` pipeline give the ids of the whole text.

A normalizer runs on each stretch between added tokens, so a cut may fall
only where normalizing the two sides apart changes nothing
(``docs/design.md``, "Normalizers"): checked on NFD input cut at every
position, on the cut rule itself against :mod:`unicodedata`, and through
files encoded on threads and on processes that get the encoder as JSON.
"""

from __future__ import annotations

import pickle
import unicodedata
from array import array
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from hf_documents import BYTE_LEVEL_DECODER, added, document, write
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer

from streambpe import Tokenizer
from streambpe.pipeline.normalizers import UNICODE_FORMS, is_stable_starter

#: Characters that normalization joins, splits, reorders or widens.
TRICKY = (
    "ae \n\u0301\u0308\u0323\u0345\u1100\u1161\u11a8\uac00\u0cd5\u0cc6\uff76\uff9e\u212b"
    "\u00c5\u1e9b\ufb01\u2460\u0f73\u0f71\u0f72\u0f74\u3099\u309a\u304b\u05b0\u0591"
)

BYTE_VOCAB = {i: bytes([i]) for i in range(256)}
GPT2_BYTE_LEVEL = {
    "type": "ByteLevel",
    "add_prefix_space": False,
    "trim_offsets": True,
    "use_regex": True,
}
NFD_TEXT = unicodedata.normalize(
    "NFD", "Café résumé<s> naïve Ångström\n\nÉcole 가각 ｶﾞ ﬁ<s>x ğ ş  \u1e9b\u0323 end"
)


@settings(max_examples=300, deadline=None)
@given(
    before=st.text(alphabet=TRICKY, max_size=4),
    char=st.sampled_from(TRICKY),
    after=st.text(alphabet=TRICKY, max_size=4),
    form=st.sampled_from(UNICODE_FORMS),
)
def test_stable_starters_are_safe_cuts(before: str, char: str, after: str, form: str) -> None:
    """Guards the cut rule: normalizing across a stable starter equals normalizing each side."""
    if is_stable_starter(char, form):
        whole = unicodedata.normalize(form, before + char + after)  # type: ignore[arg-type]
        apart = unicodedata.normalize(form, before) + unicodedata.normalize(form, char + after)  # type: ignore[arg-type]
        assert whole == apart


def test_combining_and_composing_characters_are_not_stable_starters() -> None:
    assert not is_stable_starter("\u0301", "NFD")
    assert not is_stable_starter("\u1161", "NFC")  # a Hangul vowel joins the consonant before it
    assert not is_stable_starter("\u0cd5", "NFC")  # a starter that composes as a second part
    assert not is_stable_starter("\uff9e", "NFKC")  # becomes a combining mark
    assert is_stable_starter("\uff9e", "NFC")


def build(tmp_path: Path, **options: object) -> tuple[Tokenizer, HFTokenizer]:
    added_tokens = [added("<s>", 256)]
    doc = document(BYTE_VOCAB, [], added_tokens=added_tokens, **options)  # type: ignore[arg-type]
    path = write(tmp_path, doc)
    return Tokenizer.load(path), HFTokenizer.from_file(str(path))


PIPELINES = {
    "nfc": {"normalizer": {"type": "NFC"}, "pre_tokenizer": GPT2_BYTE_LEVEL},
    "nfkc": {"normalizer": {"type": "NFKC"}, "pre_tokenizer": GPT2_BYTE_LEVEL},
    "nfkd-lowercase": {
        "normalizer": {
            "type": "Sequence",
            "normalizers": [{"type": "NFKD"}, {"type": "Lowercase"}],
        },
        "pre_tokenizer": GPT2_BYTE_LEVEL,
    },
    "prepend": {
        "normalizer": {"type": "Prepend", "prepend": "\u2581"},
        "pre_tokenizer": GPT2_BYTE_LEVEL,
    },
    "prefix-space": {
        "pre_tokenizer": dict(GPT2_BYTE_LEVEL, add_prefix_space=True),
        "decoder": BYTE_LEVEL_DECODER,
    },
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_nfd_input_cut_at_every_position(tmp_path: Path, name: str) -> None:
    ours, reference = build(tmp_path, **PIPELINES[name])
    expected = reference.encode(NFD_TEXT, add_special_tokens=False).ids
    assert ours.encode(NFD_TEXT) == expected
    for cut in range(len(NFD_TEXT) + 1):
        splitter = ours.stream_splitter(min_release=1)
        released = [splitter.feed(NFD_TEXT[:cut]), splitter.feed(NFD_TEXT[cut:]), splitter.finish()]
        assert [i for part in released if part for i in ours.encode(part)] == expected, cut
    assert list(ours.encode_iterable(NFD_TEXT.splitlines(keepends=True))) == expected


def test_normalizing_pipelines_still_cut_inside_text(tmp_path: Path) -> None:
    """Guards memory: NFC keeps space cuts; a per-stretch prefix keeps only special-token cuts."""
    nfc, _ = build(tmp_path, **PIPELINES["nfc"])
    splitter = nfc.stream_splitter(min_release=1)
    assert splitter.feed("one two three") == "one two"
    prepend, _ = build(tmp_path, **PIPELINES["prepend"])
    splitter = prepend.stream_splitter(min_release=1)
    assert splitter.feed("one two three") == ""
    assert splitter.feed("<s>four") == "one two three"


@pytest.mark.parametrize("name", ["nfc", "prepend"])
def test_files_encode_like_the_whole_text_on_threads_and_processes(
    tmp_path: Path, name: str
) -> None:
    ours, reference = build(tmp_path, **PIPELINES[name])
    text = (NFD_TEXT + "\n") * 50
    source = tmp_path / "input.txt"
    source.write_text(text, encoding="utf-8")
    expected = reference.encode(text, add_special_tokens=False).ids
    for executor in (None, ProcessPoolExecutor(2)):
        out = tmp_path / "ids.bin"
        try:
            ours.encode_file(source, out, dtype="uint32", chunk_size=512, executor=executor)
        finally:
            if executor is not None:
                executor.shutdown()
        ids = array("I")
        ids.frombytes(out.read_bytes())
        assert ids.tolist() == expected


def test_pickled_pipeline_tokenizer_encodes_alike(tmp_path: Path) -> None:
    ours, _ = build(tmp_path, **PIPELINES["nfkd-lowercase"])
    copy = pickle.loads(pickle.dumps(ours))
    assert copy.encode(NFD_TEXT) == ours.encode(NFD_TEXT)
    assert copy.pipeline == ours.pipeline


def test_async_and_counting_paths_apply_the_pipeline(tmp_path: Path) -> None:
    import asyncio

    from streambpe.streaming.aio import flatten

    ours, reference = build(tmp_path, **PIPELINES["nfkc"])
    expected = reference.encode(NFD_TEXT, add_special_tokens=False).ids

    async def collect() -> list[int]:
        return [i async for i in flatten(ours.aencode_iterable(NFD_TEXT.splitlines(True)))]

    assert asyncio.run(collect()) == expected
    assert ours.count_tokens(NFD_TEXT) == len(expected)
    assert ours.encode_to_array(NFD_TEXT).tolist() == expected
    plain = reference.encode(NFD_TEXT.replace("<s>", "\u2581"), add_special_tokens=False).ids
    assert ours.encode_ordinary(NFD_TEXT.replace("<s>", "\u2581")) == plain


def test_tiktoken_keywords_are_refused_for_added_tokens(tmp_path: Path) -> None:
    ours, _ = build(tmp_path, **PIPELINES["nfc"])
    with pytest.raises(ValueError, match="use encode_ordinary"):
        ours.encode("a<s>", allowed_special="all")
