"""A tokenizer we train and save as ``tokenizer.json`` gives the same ids in Hugging Face ``tokenizers``."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer as HFTokenizer

from streambpe import Tokenizer, train_bpe

# The exactness tests run once per backend (docs/design.md, "Backends").
pytestmark = pytest.mark.usefixtures("backend")

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "sample" / "tinytales.txt"
EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Tokenizer, HFTokenizer]:
    """Our tokenizer trained on the bundled sample, and HF's reading of its tokenizer.json."""
    vocab, merges = train_bpe(SAMPLE, 1500, [EOT], workers=1)
    ours = Tokenizer(vocab, merges, [EOT])
    folder = tmp_path_factory.mktemp("hf")
    ours.save(folder, format="hf")
    return ours, HFTokenizer.from_file(str(folder / "tokenizer.json"))


def test_hf_reads_our_tokenizer_json_with_the_same_ids(
    trained: tuple[Tokenizer, HFTokenizer],
) -> None:
    """Guards the HF writer end to end: every document of the sample, and odd inputs."""
    ours, hf = trained
    documents = SAMPLE.read_text(encoding="utf-8").split(EOT)[:120]
    extras = [
        "",
        "Héllò hôw <|endoftext|><|endoftext|> are ü? 🙃<|endoftext|>",
        "  leading spaces, trailing spaces   ",
        "tabs\tand\r\nwindows\r\nnewlines\n\n\n",
        "digits 1234567 and 3.14159, don't WON'T I'll",
        "日本語のテキスト, Ελληνικά, русский, عربي",
    ]
    for text in [*documents, *extras]:
        assert hf.encode(text, add_special_tokens=False).ids == ours.encode(text), text[:60]


def test_hf_decodes_our_ids(trained: tuple[Tokenizer, HFTokenizer]) -> None:
    """Guards the decoder settings: HF turns our ids back into the same text."""
    ours, hf = trained
    text = "Once upon a time, a small fox found a shiny stone."
    assert hf.decode(ours.encode(text)) == text
