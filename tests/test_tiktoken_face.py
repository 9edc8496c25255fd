"""``streambpe.tiktoken.Encoding`` against the installed tiktoken: ids, offsets, errors, messages.

Both sides load the seven OpenAI encodings offline, from the same temporary
tiktoken cache (``tiktoken_cache.seed_cache``), and every comparison is with
what tiktoken itself returns or raises.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken_cache import CS336, SHIPPED_ENCODINGS, seed_cache

import streambpe.tiktoken as face
from streambpe.errors import ParameterError, StreamBPEError
from streambpe.tiktoken.core import Encoding
from streambpe.tokenizer import Tokenizer
from streambpe.train.trainer import train_bpe


@pytest.fixture(scope="session", autouse=True)
def offline_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point both tiktoken and the face at a pre-seeded cache for the whole session."""
    folder = seed_cache(tmp_path_factory.mktemp("tiktoken-cache"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", str(folder))
        yield folder


def _pair(name: str) -> tuple[Encoding, tiktoken.Encoding]:
    if name == "gpt2" and not CS336.is_dir():
        pytest.skip("the gpt2 encoding's files are built from ../shared/fixtures/cs336/")
    return face.get_encoding(name), tiktoken.get_encoding(name)


SAMPLE = (
    "Hello, world! It's 2026-11-25 and we've got 1234567 tokens.\r\n\n  indented\tTabs\n"
    "Ünïcödé, 世界, привет мир, مرحبا, 😀👍🏽, ∑x², don't SHOUT'S   <|endoftext|> "
    "<|fim_prefix|>a<|fim_middle|>b<|fim_suffix|>c<|endofprompt|> <|start|>x<|end|>"
    "<|reserved_200018|>   \n"
)

TEXT_ALPHABET = st.sampled_from(
    [
        *"aAzZ eé\n\r\t 0123456789'!?.,-_/\\$€世界😀\u0300\u3000\x0b",
        *["<|endoftext|>", "<|fim_prefix|>", "<|endofprompt|>", "'s", "'LL", "  ", "\n\n"],
    ]
)
TEXTS = st.lists(TEXT_ALPHABET, max_size=40).map("".join)


# --------------------------------------------------------------------------- the seven encodings


@pytest.mark.parametrize("name", ["gpt2", *SHIPPED_ENCODINGS])
def test_encoding_attributes_match_tiktoken(name: str) -> None:
    """Guards the table of encodings: ranks, pattern, specials, sizes, as tiktoken builds them."""
    ours, theirs = _pair(name)
    assert ours.name == theirs.name == name
    assert ours._pat_str == theirs._pat_str
    assert ours._mergeable_ranks == theirs._mergeable_ranks
    assert ours._special_tokens == theirs._special_tokens
    assert ours.special_tokens_set == theirs.special_tokens_set
    assert (ours.n_vocab, ours.max_token_value) == (theirs.n_vocab, theirs.max_token_value)
    assert ours.eot_token == theirs.eot_token
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("name", ["gpt2", *SHIPPED_ENCODINGS])
def test_sample_encodes_as_tiktoken_under_every_policy(name: str) -> None:
    """Guards ids and the special-token keywords on every encoding, specials included."""
    ours, theirs = _pair(name)
    known = sorted(ours.special_tokens_set)[:3]
    policies: list[dict[str, Any]] = [
        {"disallowed_special": ()},
        {"allowed_special": "all"},
        {"allowed_special": set(known)},
        {"allowed_special": {known[0], "<|not-a-special|>"}, "disallowed_special": ()},
    ]
    for policy in policies:
        mine = _outcome(ours.encode, SAMPLE, **policy)
        assert mine == _outcome(theirs.encode, SAMPLE, **policy), policy
    assert ours.encode_ordinary(SAMPLE) == theirs.encode_ordinary(SAMPLE)
    assert ours.encode("plain text") == theirs.encode("plain text")
    ids = theirs.encode(SAMPLE, allowed_special="all")
    assert ours.decode(ids) == theirs.decode(ids)
    assert ours.decode_bytes(ids) == theirs.decode_bytes(ids)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "r50k_base"])
@settings(max_examples=60, deadline=None)
@given(text=TEXTS)
def test_random_text_encodes_as_tiktoken(name: str, text: str) -> None:
    """Guards ids on text mixing scripts, whitespace runs, contractions and special tokens."""
    ours, theirs = face.get_encoding(name), tiktoken.get_encoding(name)
    assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
    # The defaults: ids, or tiktoken's error for a special token in the text.
    assert _outcome(ours.encode, text) == _outcome(theirs.encode, text)
    assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")
    assert ours.encode(text, disallowed_special=()) == theirs.encode(text, disallowed_special=())


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@settings(max_examples=40, deadline=None)
@given(texts=st.lists(TEXTS, max_size=6))
def test_random_batches_encode_as_tiktoken(name: str, texts: list[str]) -> None:
    """Guards the batch path (one kernel call for the texts, the keywords resolved once):
    the ids, or the error, of tiktoken's batches on text mixing scripts, combining
    marks and special tokens inside words."""
    ours, theirs = face.get_encoding(name), tiktoken.get_encoding(name)
    assert ours.encode_ordinary_batch(texts) == theirs.encode_ordinary_batch(texts)
    for keywords in ({"allowed_special": "all"}, {"disallowed_special": ()}, {}):
        assert _outcome(ours.encode_batch, texts, **keywords) == _outcome(
            theirs.encode_batch, texts, **keywords
        )


# --------------------------------------------------------------------------- special-token policy


def _outcome(function: Callable[..., object], *args: Any, **kwargs: Any) -> tuple[str, object]:
    """The result, or the built-in type and message of the exception (ours subclass them)."""
    try:
        return "ok", function(*args, **kwargs)
    except Exception as exc:
        builtin = next(kind for kind in type(exc).__mro__ if kind.__module__ == "builtins")
        return builtin.__name__, str(exc)


@pytest.mark.parametrize(
    "text, policy",
    [
        ("a <|endoftext|> b", {}),
        ("a <|endoftext|> b", {"allowed_special": {"<|fim_prefix|>"}}),
        ("<|fim_prefix|> <|endoftext|>", {"allowed_special": {"<|endoftext|>"}}),
        ("<|fim_prefix|> x", {"disallowed_special": {"<|fim_prefix|>"}}),
        ("<|fim_prefix|> x", {"disallowed_special": {"<|fim_suffix|>"}}),
        ("a <|custom|> b", {"disallowed_special": {"<|custom|>"}}),
        ("a <|endoftext|> b", {"allowed_special": "all", "disallowed_special": "all"}),
        ("no specials here", {}),
    ],
)
def test_disallowed_special_tokens_raise_tiktokens_error(text: str, policy: dict[str, Any]) -> None:
    """Guards encode's default: a special token in the text is an error unless allowed."""
    ours, theirs = _pair("cl100k_base")
    for method in ("encode", "encode_to_numpy", "encode_with_unstable"):
        mine = _outcome(getattr(ours, method), text, **policy)
        reference = _outcome(getattr(theirs, method), text, **policy)
        if method == "encode_to_numpy" and mine[0] == "ok":
            mine, reference = ("ok", list(mine[1])), ("ok", list(reference[1]))  # type: ignore[call-overload]
        if method == "encode_with_unstable" and mine[0] == "ok":
            mine = ("ok", _unstable_as_sets(mine[1]))
            reference = ("ok", _unstable_as_sets(reference[1]))
        assert mine == reference, method


def test_disallowed_special_error_is_a_streambpe_value_error() -> None:
    """Guards the error type: tiktoken's ValueError, and also a StreamBPEError."""
    with pytest.raises(ValueError, match=r"disallowed special token '<\|endoftext\|>'") as info:
        face.get_encoding("r50k_base").encode("<|endoftext|>")
    assert isinstance(info.value, StreamBPEError)


# --------------------------------------------------------------------------- other encode methods


def test_encode_to_numpy_matches_tiktoken() -> None:
    """Guards the numpy output: uint32, same ids."""
    ours, theirs = _pair("o200k_base")
    mine = ours.encode_to_numpy(SAMPLE, allowed_special="all")
    reference = theirs.encode_to_numpy(SAMPLE, allowed_special="all")
    assert mine.dtype == np.uint32
    assert mine.tolist() == reference.tolist()


@pytest.mark.parametrize("num_threads", [1, 4])
def test_batches_match_tiktoken(num_threads: int) -> None:
    """Guards encode_batch / encode_ordinary_batch / decode_batch with threads."""
    ours, theirs = _pair("cl100k_base")
    texts = [SAMPLE[i:] * (i % 5 + 1) for i in range(0, 120, 7)]
    assert ours.encode_batch(texts, num_threads=num_threads, allowed_special="all") == (
        theirs.encode_batch(texts, num_threads=num_threads, allowed_special="all")
    )
    assert ours.encode_ordinary_batch(texts, num_threads=num_threads) == (
        theirs.encode_ordinary_batch(texts, num_threads=num_threads)
    )
    batch = theirs.encode_ordinary_batch(texts)
    assert ours.decode_batch(batch, num_threads=num_threads) == theirs.decode_batch(batch)
    assert ours.decode_bytes_batch(batch) == theirs.decode_bytes_batch(batch)
    with pytest.raises(ValueError, match="disallowed special token"):
        ours.encode_batch(["fine", "<|endoftext|>"], num_threads=num_threads)
    # Any iterable of str, as tiktoken's thread pool maps over.
    assert ours.encode_batch(
        iter(texts), num_threads=num_threads, allowed_special="all"
    ) == theirs.encode_batch(texts, allowed_special="all")
    assert ours.encode_ordinary_batch(iter(texts)) == theirs.encode_ordinary_batch(texts)


def test_batches_refuse_what_tiktoken_refuses() -> None:
    """No threads, or a text that is not a str: an error, as in tiktoken, and no ids."""
    ours, theirs = _pair("cl100k_base")
    for encoding in (ours, theirs):
        with pytest.raises(ValueError):
            encoding.encode_batch(["a"], num_threads=0)
        with pytest.raises(TypeError):
            encoding.encode_batch(["a", 1])  # type: ignore[list-item]
        with pytest.raises(TypeError):
            encoding.encode_ordinary_batch(["a", b"b"])  # type: ignore[list-item]


def _unstable_as_sets(result: object) -> tuple[list[int], set[tuple[int, ...]]]:
    stable, completions = result  # type: ignore[misc]
    return stable, {tuple(sequence) for sequence in completions}


@pytest.mark.parametrize("name", ["cl100k_base", "r50k_base"])
@pytest.mark.parametrize(
    "text",
    [
        "hello fanta",
        "hello world ",
        "x\n",
        "line\n  ",
        "a  !",
        "caf\u00e9",
        "é",
        "",
        "12345",
        "你好",
    ],
)
def test_encode_with_unstable_matches_tiktoken(name: str, text: str) -> None:
    """Guards the stable ids and the set of completions (tiktoken's come unordered)."""
    ours, theirs = _pair(name)
    mine = ours.encode_with_unstable(text)
    assert _unstable_as_sets(mine) == _unstable_as_sets(theirs.encode_with_unstable(text))
    assert mine[1] == sorted(mine[1])


@settings(max_examples=15, deadline=None)
@given(text=st.lists(st.sampled_from(["ab", "x", "é", " ", "\n", "!", "12", "\xff"]), max_size=6))
def test_encode_with_unstable_matches_tiktoken_on_random_ends(text: list[str]) -> None:
    """Guards the unstable tail on endings of letters, spaces, newlines, digits, accents."""
    ours, theirs = face.get_encoding("r50k_base"), tiktoken.get_encoding("r50k_base")
    joined = "".join(text)
    mine = _unstable_as_sets(ours.encode_with_unstable(joined))
    assert mine == _unstable_as_sets(theirs.encode_with_unstable(joined))


def test_encode_with_unstable_after_a_special_token_has_no_completions() -> None:
    """Guards the special-token end: nothing after it can change."""
    ours, theirs = _pair("cl100k_base")
    text = "abc<|endoftext|>"
    assert ours.encode_with_unstable(text, allowed_special="all") == (
        theirs.encode_with_unstable(text, allowed_special="all")
    )


def test_single_tokens_and_pieces_match_tiktoken() -> None:
    """Guards encode_single_token, _encode_single_piece and _encode_only_native_bpe."""
    ours, theirs = _pair("cl100k_base")
    for token in ["hello", b" world", "<|endoftext|>", b"\xff", "<|endofprompt|>"]:
        assert ours.encode_single_token(token) == theirs.encode_single_token(token)
    for missing in ["hello world", b"\xff\xfe\xfd", "<|nope|>"]:
        mine = _outcome(ours.encode_single_token, missing)
        assert mine == _outcome(theirs.encode_single_token, missing)
    for piece in ["helloqqqq", b"  \xe4\xb8", "a" * 300, "don't stop"]:
        assert ours._encode_single_piece(piece) == theirs._encode_single_piece(piece)
    assert ours._encode_only_native_bpe(SAMPLE) == theirs._encode_only_native_bpe(SAMPLE)


@pytest.mark.parametrize("name", ["cl100k_base", "r50k_base"])
@settings(max_examples=80, deadline=None)
@given(text=TEXTS, tail=st.binary(max_size=6))
def test_encode_bytes_matches_tiktoken(name: str, text: str, tail: bytes) -> None:
    """Guards _encode_bytes on valid UTF-8 followed by arbitrary (often invalid) bytes."""
    ours, theirs = face.get_encoding(name), tiktoken.get_encoding(name)
    data = text.encode("utf-8", "replace") + tail
    assert ours._encode_bytes(data) == theirs._encode_bytes(data)


# --------------------------------------------------------------------------- decoding


def test_decoding_methods_match_tiktoken() -> None:
    """Guards decode, decode_bytes, the per-token forms, and decode_with_offsets."""
    ours, theirs = _pair("o200k_base")
    ids = theirs.encode(SAMPLE, allowed_special="all")
    assert ours.decode_tokens_bytes(ids) == theirs.decode_tokens_bytes(ids)
    assert [ours.decode_single_token_bytes(i) for i in ids[:50]] == [
        theirs.decode_single_token_bytes(i) for i in ids[:50]
    ]
    assert ours.decode_with_offsets(ids) == theirs.decode_with_offsets(ids)
    broken = [ids[0], theirs.encode_single_token(b"\xc3"), theirs.encode_single_token(b"\xff")]
    assert ours.decode(broken, errors="replace") == theirs.decode(broken, errors="replace")
    assert ours.decode(broken, errors="ignore") == theirs.decode(broken, errors="ignore")


@settings(max_examples=60, deadline=None)
@given(text=TEXTS)
def test_offsets_match_tiktoken_on_tokens_that_split_characters(text: str) -> None:
    """Guards decode_with_offsets where tokens cut multi-byte characters (r50k cuts CJK, emoji)."""
    ours, theirs = face.get_encoding("r50k_base"), tiktoken.get_encoding("r50k_base")
    ids = theirs.encode_ordinary(text)
    assert ours.decode_with_offsets(ids) == theirs.decode_with_offsets(ids)


def test_decoding_invalid_utf8_with_offsets_raises_like_tiktoken() -> None:
    """Guards decode_with_offsets' strictness: bytes that are not UTF-8 raise UnicodeDecodeError."""
    ours, theirs = _pair("r50k_base")
    lone = [theirs.encode_single_token(b"\xff")]
    with pytest.raises(UnicodeDecodeError):
        theirs.decode_with_offsets(lone)
    with pytest.raises(UnicodeDecodeError):
        ours.decode_with_offsets(lone)


def test_unknown_ids_raise_key_error() -> None:
    """Guards decoding an id outside the vocabulary: KeyError, as tiktoken's."""
    ours, theirs = _pair("cl100k_base")
    for call in ("decode", "decode_bytes", "decode_tokens_bytes"):
        with pytest.raises(KeyError):
            getattr(theirs, call)([10**6])
        with pytest.raises(KeyError, match="1000000"):
            getattr(ours, call)([10**6])
    with pytest.raises(KeyError):
        ours.decode_single_token_bytes(100261)


def test_vocabulary_views_match_tiktoken() -> None:
    """Guards token_byte_values, is_special_token and eot_token."""
    ours, theirs = _pair("cl100k_base")
    assert ours.token_byte_values() == theirs.token_byte_values()
    for token_id in [0, 100256, 100257, 100276, 100261]:
        assert ours.is_special_token(token_id) == theirs.is_special_token(token_id)


# --------------------------------------------------------------------------- hard inputs


@pytest.mark.parametrize(
    "text",
    ["a\ud800b", "\udfff", "x \ud83d\ude00 y", "\ud83d", "<|endoftext|>\ud800"],
)
def test_lone_surrogates_are_handled_as_tiktoken(text: str) -> None:
    """Guards surrogates: lone ones become U+FFFD, a valid pair its character, as in tiktoken."""
    ours, theirs = _pair("cl100k_base")
    assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
    assert _outcome(ours.encode, text) == _outcome(theirs.encode, text)
    assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")
    assert ours.encode(text, disallowed_special=()) == theirs.encode(text, disallowed_special=())
    batch = [text, "fine", text]
    assert ours.encode_ordinary_batch(batch) == theirs.encode_ordinary_batch(batch)
    assert ours.encode_batch(batch, allowed_special="all") == theirs.encode_batch(
        batch, allowed_special="all"
    )


def test_surrogates_do_not_break_the_methods_tiktoken_fails_on() -> None:
    """Guards our improvement: encode_to_numpy and encode_with_unstable repair surrogates too."""
    ours, theirs = _pair("cl100k_base")
    with pytest.raises(UnicodeEncodeError):
        theirs.encode_to_numpy("a\ud800")
    assert ours.encode_to_numpy("a\ud800").tolist() == theirs.encode("a\ud800")
    assert ours.encode_with_unstable("a\ud800 b")[0] == theirs.encode("a\ud800 b")[:-1]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize(
    "text", ["a" * 200_000, " " * 200_000, "\U0001f600" * 50_000, "1" * 99_999]
)
def test_long_runs_of_one_character_match_tiktoken(name: str, text: str) -> None:
    """Guards long pieces: a run of one character is one huge piece, merged without blowing up."""
    ours, theirs = _pair(name)
    assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)


def test_millions_of_repeated_characters_round_trip() -> None:
    """Guards the no-quadratic-path rule through the face (tiktoken itself is slow here)."""
    ours = face.get_encoding("o200k_base")
    text = "x" * 3_000_000
    ids = ours.encode(text)
    assert ours.decode(ids) == text
    assert len(ids) < len(text) // 4


# --------------------------------------------------------------------------- constructing


def _custom_arguments() -> dict[str, Any]:
    ranks = {bytes([i]): i for i in range(256)} | {b"ab": 256, b"abc": 257, b" ab": 258}
    return {
        "name": "custom",
        "pat_str": r"""'s|\s?\w+|\s+|[^\w\s]+""",
        "mergeable_ranks": ranks,
        "special_tokens": {"<|stop|>": 300},
    }


def test_a_custom_encoding_behaves_as_tiktokens() -> None:
    """Guards the constructor with a custom pattern: the same ids and attributes."""
    ours, theirs = Encoding(**_custom_arguments()), tiktoken.Encoding(**_custom_arguments())
    text = "abc ab's abab<|stop|> x"
    assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")
    assert ours.n_vocab == theirs.n_vocab == 301
    assert ours.max_token_value == theirs.max_token_value == 300
    assert _outcome(getattr, ours, "eot_token") == _outcome(getattr, theirs, "eot_token")


class _Text(str):
    """A str subclass: encode's default call leaves it to the general check."""


@pytest.mark.parametrize("count", [1, 8, 9, 20])
def test_default_encode_checks_every_special_token_however_many(count: int) -> None:
    """Guards encode's default call on both of its ways: up to eight special tokens are looked
    for with ``in`` (in a text of 64K characters or more, by the compiled matcher in one pass),
    more by the general check. Either way a special token anywhere in the text is tiktoken's
    error, and a text without one gets tiktoken's ids."""
    arguments = _custom_arguments() | {
        "special_tokens": {f"<|s{index}|>": 300 + index for index in range(count)}
    }
    ours, theirs = Encoding(**arguments), tiktoken.Encoding(**arguments)
    last = f"<|s{count - 1}|>"
    long = "abc ab's <|s " * 6000  # past the one-pass threshold, with near misses
    texts = ["abc ab's", f"abc {last} ab", f"<|s0|>x{last}", "<|s", _Text(f"ab {last}")]
    texts += [long, long + last, last + long, long[:40_000] + last + long]
    for text in texts:
        assert _outcome(ours.encode, text) == _outcome(theirs.encode, text), text


def test_explicit_n_vocab_is_checked() -> None:
    """Guards explicit_n_vocab: tiktoken asserts, we raise ValueError saying what is off."""
    arguments = _custom_arguments()
    with pytest.raises(AssertionError):
        tiktoken.Encoding(**arguments, explicit_n_vocab=301)
    with pytest.raises(ParameterError, match="should have 301 tokens"):
        Encoding(**arguments, explicit_n_vocab=301)


def test_bad_ranks_raise_clear_errors() -> None:
    """Guards the constructor's checks: duplicate ranks, missing bytes, empty ranks."""
    arguments = _custom_arguments()
    arguments["mergeable_ranks"] = {**arguments["mergeable_ranks"], b"zz": 256}
    with pytest.raises(ValueError, match="both have rank 256"):
        Encoding(**arguments)
    arguments["mergeable_ranks"] = {b"a": 0}
    with pytest.raises(ValueError, match="single-byte"):
        Encoding(**arguments)
    arguments["mergeable_ranks"] = {}
    with pytest.raises(ValueError, match="no mergeable_ranks"):
        Encoding(**arguments)


def test_unregistered_encoding_pickles_its_data() -> None:
    """Guards pickling by value: the copy encodes identically."""
    ours = Encoding(**_custom_arguments())
    copy = pickle.loads(pickle.dumps(ours))
    assert copy is not ours
    assert copy.encode("abc ab", allowed_special="all") == ours.encode("abc ab")
    assert copy._mergeable_ranks == ours._mergeable_ranks


# --------------------------------------------------------------------------- the bridge


def test_trained_tokenizer_becomes_an_encoding_with_tiktokens_ids(tmp_path: Path) -> None:
    """Guards from_tokenizer: a trained vocabulary gives tiktoken's ids through both objects."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(("the cat sat on the mat. the dog ate the hat.<|endoftext|>" * 30), "utf-8")
    vocab, merges = train_bpe(corpus, 270, ["<|endoftext|>"])
    tokenizer = Tokenizer(vocab, merges, ["<|endoftext|>"])
    ours = Encoding.from_tokenizer(tokenizer, "trained")
    theirs = tiktoken.Encoding(
        "trained",
        pat_str=tokenizer.pattern,
        mergeable_ranks=tokenizer.tiktoken_ranks(),
        special_tokens=tokenizer.special_tokens,
    )
    text = "the cat ate the mat<|endoftext|>a dog"
    assert ours.tokenizer is tokenizer
    assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")
    assert ours.encode(text, allowed_special="all") == tokenizer.encode(text)
    assert ours.tokenizer.count_tokens(text) == len(theirs.encode(text, allowed_special="all"))
    output = tmp_path / "ids.bin"
    ours.tokenizer.encode_file(corpus, output, workers=1, dtype="uint32")
    expected = theirs.encode(corpus.read_text("utf-8"), allowed_special="all")
    assert np.fromfile(output, dtype=np.uint32).tolist() == expected


def test_tokenizer_whose_ids_do_not_follow_merges_is_refused() -> None:
    """Guards tiktoken_ranks: ids out of merge order cannot be tiktoken ranks."""
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"abc", 257: b"ab"}
    tokenizer = Tokenizer(vocab, [(b"a", b"b"), (b"ab", b"c")])
    with pytest.raises(ParameterError, match="below the id of a token merged before it"):
        Encoding.from_tokenizer(tokenizer, "unordered")
    extra = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"xyz"}
    with pytest.raises(ParameterError, match="no merge makes it"):
        Encoding.from_tokenizer(Tokenizer(extra, [(b"a", b"b")]), "extra")
