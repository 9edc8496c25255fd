"""Option objects, inputs resolved once, and the renamed public names.

Guards (docs/design.md, "Option objects"): the call paths from ``encode_file``,
``iter_file_id_batches``, ``encode_files`` and ``train_bpe`` down to the input
readers enter ``sources/inputs.py`` exactly once; ``EncodeOptions`` checks its
values when built; the old names (``input_path=``, ``iter_file_ids``) still
work and warn; ``aiter_id_batches`` and ``aencode_iterable`` are one function.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from streaming_helpers import EOT, fresh_r50k_tokenizer, read_ids

import streambpe
import streambpe.sources.inputs
from streambpe.errors import ParameterError
from streambpe.streaming import aio, batch, file_encoding, sharded
from streambpe.streaming.options import EncodeOptions
from streambpe.tokenizer import Tokenizer

TEXT = f"Hello world, hello there.{EOT}Another document, with more words in it.\n" * 40


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return fresh_r50k_tokenizer()


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


@contextmanager
def entries_into_inputs_module() -> Iterator[list[str]]:
    """Record each call that enters ``sources/inputs.py`` from code outside it.

    A profile hook sees every call however the function was imported (a
    module attribute, a name bound by ``from ... import``), so a second
    resolution anywhere on the path shows up, not only one made through a
    name a test thought to patch. Calls inside the module (``resolve_inputs``
    calling its helpers) are one entry.
    """
    inputs_file = streambpe.sources.inputs.__file__
    entries: list[str] = []

    def profile(frame: types.FrameType, event: str, _arg: object) -> None:
        if event != "call" or frame.f_code.co_filename != inputs_file:
            return
        caller = frame.f_back
        if caller is None or caller.f_code.co_filename != inputs_file:
            entries.append(frame.f_code.co_name)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield entries
    finally:
        sys.setprofile(previous)


def test_the_entry_counter_sees_every_resolution(corpus: Path) -> None:
    """Guards the guard: two resolutions are counted as two, whatever name they go through."""
    from streambpe.sources.inputs import resolve_inputs

    with entries_into_inputs_module() as entries:
        streambpe.sources.inputs.resolve_inputs(corpus)
        resolve_inputs([corpus])
    assert entries == ["resolve_inputs", "resolve_inputs"]


def test_encode_file_resolves_its_inputs_once(tok: Tokenizer, corpus: Path) -> None:
    output = corpus.with_suffix(".bin")
    with entries_into_inputs_module() as entries:
        stats = file_encoding.encode_file(tok, corpus, output, workers=1, chunk_size=256)
    assert entries == ["resolve_inputs"]
    assert read_ids(output, stats.dtype) == tok.encode(TEXT, allowed_special="all")


def test_iter_file_id_batches_resolves_its_inputs_once(tok: Tokenizer, corpus: Path) -> None:
    with entries_into_inputs_module() as entries:
        batches = list(tok.iter_file_id_batches(corpus, workers=1, chunk_size=256))
    assert entries == ["resolve_inputs"]
    assert len(batches) > 1
    assert [i for batch in batches for i in batch] == tok.encode(TEXT, allowed_special="all")


def test_encode_files_resolves_its_inputs_once(
    tok: Tokenizer, corpus: Path, tmp_path: Path
) -> None:
    with entries_into_inputs_module() as entries:
        stats = sharded.encode_files(tok, [corpus], tmp_path / "shards", workers=1)
    assert entries == ["resolve_inputs"]
    assert stats.tokens == len(tok.encode(TEXT, allowed_special="all"))


def test_train_bpe_resolves_its_inputs_once(corpus: Path) -> None:
    with entries_into_inputs_module() as entries:
        vocab, merges = streambpe.train_bpe(corpus, 270, [EOT], workers=1, chunk_size=64)
    assert entries == ["resolve_inputs"]
    assert len(vocab) == 270 and len(merges) == 270 - 257


# ----------------------------------------------------------------- EncodeOptions


def test_encode_options_check_their_values_when_built() -> None:
    """A bad value fails where the options are built."""
    assert EncodeOptions(shard_bytes=1).shard_bytes == 1
    with pytest.raises(ParameterError, match="shard_bytes must be at least 1, got 0"):
        EncodeOptions(shard_bytes=0)


def test_bad_shard_bytes_fails_before_the_inputs_are_resolved(
    tok: Tokenizer, tmp_path: Path
) -> None:
    """As before the options object: the parameter error wins over a missing input."""
    with pytest.raises(ParameterError, match="shard_bytes"):
        tok.encode_files(tmp_path / "absent.txt", tmp_path / "out", shard_bytes=0)


# ----------------------------------------------------------------- renamed names


def _deprecated_call(call: Callable[[], Any], old: str, new: str) -> Any:
    with pytest.warns(DeprecationWarning, match=rf"{old}\b.*\b{new}\b") as caught:
        result = call()
    # The warning points at the caller's line, not at streambpe's wrapper.
    assert caught[0].filename == __file__
    return result


def test_input_path_keyword_still_works_and_warns(tok: Tokenizer, corpus: Path) -> None:
    expected = tok.encode(TEXT, allowed_special="all")
    stats = _deprecated_call(
        lambda: tok.encode_file(input_path=corpus, output_path=corpus.with_suffix(".bin")),
        "input_path",
        "inputs",
    )
    assert read_ids(corpus.with_suffix(".bin"), stats.dtype) == expected
    batches = _deprecated_call(
        lambda: list(tok.iter_file_id_batches(input_path=corpus, workers=1)), "input_path", "inputs"
    )
    assert [i for batch in batches for i in batch] == expected
    trained = _deprecated_call(
        lambda: streambpe.train_bpe(input_path=corpus, vocab_size=260, workers=1),
        "input_path",
        "inputs",
    )
    assert trained == streambpe.train_bpe(corpus, 260, workers=1)


def test_input_path_and_inputs_together_is_an_error(tok: Tokenizer, corpus: Path) -> None:
    with pytest.raises(TypeError, match=r"input_path.*inputs"):
        streambpe.train_bpe(corpus, 260, input_path=corpus)  # type: ignore[call-arg]


def test_atrain_bpe_takes_the_old_keyword_too(corpus: Path) -> None:
    async def train() -> object:
        return await streambpe.atrain_bpe(input_path=corpus, vocab_size=260, workers=1)  # type: ignore[call-arg]

    with pytest.warns(DeprecationWarning, match="input_path"):
        trained = anyio.run(train)
    assert trained == streambpe.train_bpe(corpus, 260, workers=1)


def test_iter_file_ids_is_a_deprecated_alias(tok: Tokenizer, corpus: Path) -> None:
    expected = list(tok.iter_file_id_batches(corpus, workers=1, chunk_size=256))
    got = _deprecated_call(
        lambda: list(tok.iter_file_ids(corpus, workers=1, chunk_size=256)),
        "iter_file_ids",
        "iter_file_id_batches",
    )
    assert got == expected
    module_level = _deprecated_call(
        lambda: list(file_encoding.iter_file_ids(tok, corpus, workers=1, chunk_size=256)),
        "iter_file_ids",
        "iter_file_id_batches",
    )
    assert module_level == expected


def test_aiter_id_batches_is_aencode_iterable(tok: Tokenizer) -> None:
    """The async name that says "batches" and the README's name are one function."""
    assert aio.aencode_iterable is aio.aiter_id_batches
    assert Tokenizer.aencode_iterable is Tokenizer.aiter_id_batches
    lines = TEXT.splitlines(keepends=True)

    async def collect() -> list[list[int]]:
        return [batch async for batch in tok.aiter_id_batches(lines)]

    batches = anyio.run(collect)
    assert [i for batch in batches for i in batch] == tok.encode(TEXT, allowed_special="all")


def test_the_tokenizer_methods_are_the_streaming_functions() -> None:
    """One signature per entry point: the methods are the module functions, bound."""
    assert Tokenizer.encode_batch is batch.encode_batch
    assert Tokenizer.encode_file is file_encoding.encode_file
    assert Tokenizer.iter_file_id_batches is file_encoding.iter_file_id_batches
    assert Tokenizer.encode_files is sharded.encode_files
    assert Tokenizer.aencode_file is aio.aencode_file
