"""SpecialTokenScanner: leftmost-longest matching, checked against a brute-force matcher."""

from __future__ import annotations

import dataclasses
import pickle
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streambpe.core as core
import streambpe.cutting.specials as specials_module
import streambpe.encode.encoder as encoder_module
from streambpe.cutting.specials import SpecialTokenScanner, validate_special_tokens
from streambpe.errors import ParameterError
from streambpe.tokenizer import Tokenizer

Oracle = Callable[[str, Sequence[str]], list[tuple[int, int, str]]]

OVERLAPPING = ["ab", "abc", "bcd", "<|a|>", "<|a|><|a|>"]

special_sets = st.lists(
    st.text(alphabet="ab<|>", min_size=1, max_size=6), min_size=1, max_size=6, unique=True
)
# Texts built from fragments of the overlapping set, so partial and chained matches are common.
overlap_texts = st.lists(
    st.sampled_from(["a", "b", "c", "d", "<", "|", ">", *OVERLAPPING, "<|a|", "|><|"]),
    max_size=25,
).map("".join)


def _as_tuples(scanner: SpecialTokenScanner, text: str) -> list[tuple[int, int, str]]:
    return [(m.start, m.end, m.token) for m in scanner.matches(text)]


#: The two ways a scanner searches: str.find per token (few tokens, the usual
#: case) and one Aho-Corasick pass (many tokens). Every matching test runs both.
SEARCHES = ["find", "automaton"]


def force_search(patch: pytest.MonkeyPatch, search: str) -> None:
    """Make scanners built from now on search the given way, whatever their number of tokens."""
    patch.setattr(specials_module, "_FIND_MAX_TOKENS", 0 if search == "automaton" else 1 << 30)


def make_scanner(tokens: Iterable[str], search: str) -> SpecialTokenScanner:
    """A scanner over ``tokens`` that searches the given way, whatever their number."""
    with pytest.MonkeyPatch.context() as patch:
        force_search(patch, search)
        scanner = SpecialTokenScanner(tokens)
    assert (scanner._automaton is not None) == (search == "automaton" and bool(scanner.tokens))
    return scanner


def test_few_tokens_use_find_and_many_use_the_automaton() -> None:
    """Guards the default choice: the usual handful of specials skips pyahocorasick."""
    few = [f"<|t{i}|>" for i in range(specials_module._FIND_MAX_TOKENS)]
    many = [*few, "<|one more|>"]
    assert SpecialTokenScanner(few)._automaton is None
    assert SpecialTokenScanner(many)._automaton is not None
    text = "a<|t0|>b<|one more|>c" * 3
    assert _as_tuples(SpecialTokenScanner(few), text) == _as_tuples(
        make_scanner(few, "automaton"), text
    )
    assert _as_tuples(SpecialTokenScanner(many), text) == _as_tuples(
        make_scanner(many, "find"), text
    )


@pytest.mark.parametrize("search", SEARCHES)
@settings(max_examples=300, deadline=None)
@given(tokens=special_sets, text=st.text(alphabet="ab<|>", max_size=40))
def test_matches_equal_brute_force_on_random_sets(
    tokens: list[str], text: str, special_matches_oracle: Oracle, search: str
) -> None:
    """Guards "Special tokens": every leftmost-longest match is found, none invented or dropped."""
    assert _as_tuples(make_scanner(tokens, search), text) == special_matches_oracle(text, tokens)


@pytest.mark.parametrize("search", SEARCHES)
@settings(max_examples=300, deadline=None)
@given(
    tokens=st.lists(st.sampled_from(OVERLAPPING), min_size=1, max_size=5, unique=True),
    text=overlap_texts,
)
def test_matches_equal_brute_force_on_overlapping_tokens(
    tokens: list[str], text: str, special_matches_oracle: Oracle, search: str
) -> None:
    """Guards the iter_long pitfall: prefix/overlapping tokens and failed partial matches."""
    assert _as_tuples(make_scanner(tokens, search), text) == special_matches_oracle(text, tokens)


# Characters whose low byte is that of "<", "|" or "a" (the compiled search
# filters places by it), from all three str widths, and filler for long runs.
WIDE_LOOKALIKES = ["\u013c", "\u017c", "\U0001003c", "\u0161", "x" * 70, "é"]


@settings(max_examples=300, deadline=None)
@given(
    tokens=st.one_of(
        special_sets, st.lists(st.sampled_from(OVERLAPPING), min_size=1, max_size=5, unique=True)
    ),
    text=st.lists(
        st.sampled_from(["a", "b", "<", "|", ">", *OVERLAPPING, "<|a|", *WIDE_LOOKALIKES]),
        max_size=30,
    ).map("".join),
)
def test_compiled_search_matches_the_scanner(
    tokens: list[str], text: str, special_matches_oracle: Oracle
) -> None:
    """The compiled search (used by the encoder) finds what the scanner finds.

    Texts reach past its 64-character blocks and hold characters that share a
    token's first low byte, in one-, two- and four-byte strings.
    """
    native = pytest.importorskip("streambpe.core._native", reason="the compiled core is not built")
    found = [
        (start, end, tokens[index])
        for start, end, index in native.special_matches(text, tuple(tokens))
    ]
    assert found == special_matches_oracle(text, tokens)


@pytest.mark.parametrize("filler", ["x", "\u013c", "\U0001003c"])
def test_compiled_search_finds_a_lone_token_at_every_offset_of_its_block(
    filler: str, special_matches_oracle: Oracle
) -> None:
    """The block skip must not step over a block with one token in it, wherever it sits."""
    native = pytest.importorskip("streambpe.core._native", reason="the compiled core is not built")
    tokens = ["<|e|>", "<|e|><"]
    for offset in range(140):
        text = filler * offset + "<|e|>" + filler * (200 - offset)
        found = [
            (start, end, tokens[i]) for start, end, i in native.special_matches(text, tuple(tokens))
        ]
        assert found == special_matches_oracle(text, tokens) == [(offset, offset + 5, "<|e|>")]


def test_compiled_search_rejects_empty_tokens() -> None:
    native = pytest.importorskip("streambpe.core._native", reason="the compiled core is not built")
    with pytest.raises(ValueError, match="non-empty strings"):
        native.special_matches("abc", ("a", ""))


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize(
    ("tokens", "text", "expected"),
    [
        (["ab"], "xxab", [(2, 4, "ab")]),
        (["ab", "abc"], "zzab", [(2, 4, "ab")]),
        (["abc", "bcd"], "xabcd", [(1, 4, "abc")]),
        (["ab", "abc", "bcd"], "abcabd", [(0, 3, "abc"), (3, 5, "ab")]),
        (["<|a|>", "<|a|><|a|>"], "<|a|><|a|", [(0, 5, "<|a|>")]),
        (["<|a|>", "<|a|><|a|>"], "x<|a|><|a|>", [(1, 11, "<|a|><|a|>")]),
        (["<|a|>", "<|a|><|a|>"], "<|a|><|a|><|a|>", [(0, 10, "<|a|><|a|>"), (10, 15, "<|a|>")]),
        (["aa"], "aaa", [(0, 2, "aa")]),
        (["<|endoftext|>"], "<|endoftext", []),
    ],
)
def test_matches_known_cases(
    tokens: list[str], text: str, expected: list[tuple[int, int, str]], search: str
) -> None:
    """Guards matches at the very end of the input and after a failed partial match."""
    assert _as_tuples(make_scanner(tokens, search), text) == expected


@pytest.mark.parametrize("search", SEARCHES)
@settings(max_examples=150, deadline=None)
@given(tokens=special_sets, text=st.text(alphabet="ab<|>", max_size=30), data=st.data())
def test_matches_in_a_window_use_text_offsets(
    tokens: list[str], text: str, data: st.DataObject, special_matches_oracle: Oracle, search: str
) -> None:
    """Guards ``matches(text, start, end)``: scans only the window, reports offsets into ``text``."""
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    expected = [
        (s + start, e + start, token)
        for s, e, token in special_matches_oracle(text[start:end], tokens)
    ]
    got = [
        (m.start, m.end, m.token) for m in make_scanner(tokens, search).matches(text, start, end)
    ]
    assert got == expected


@pytest.mark.parametrize("search", SEARCHES)
def test_a_match_ends_within_the_range(search: str) -> None:
    """Guards the range's end: the longer token would cross it, so only the shorter one matches."""
    scanner = make_scanner(["<|a", "<|ab"], search)
    got = [(m.start, m.end, m.token) for m in scanner.matches("x<|ab", 0, 4)]
    assert got == [(1, 4, "<|a")]


@pytest.mark.parametrize("search", SEARCHES)
@settings(max_examples=150, deadline=None)
@given(tokens=special_sets, text=st.text(alphabet="ab<|>", max_size=30))
def test_split_covers_the_text(
    tokens: list[str], text: str, special_matches_oracle: Oracle, search: str
) -> None:
    """Guards ``split``: ordinary text and tokens, in order, rebuild the input exactly."""
    pairs = list(make_scanner(tokens, search).split(text))
    assert "".join(ordinary + (special or "") for ordinary, special in pairs) == text
    assert pairs[-1][1] is None
    assert [s for _, s in pairs[:-1]] == [t for _, _, t in special_matches_oracle(text, tokens)]


def test_empty_scanner_finds_nothing() -> None:
    """Guards the no-special case: a falsy scanner that yields the whole text."""
    scanner = SpecialTokenScanner([])
    assert not scanner
    assert scanner.matches("<|endoftext|>") == []
    assert list(scanner.split("abc")) == [("abc", None)]


@pytest.mark.parametrize("search", SEARCHES)
def test_scanner_survives_pickling(search: str) -> None:
    """Guards worker processes: a pickled scanner still matches leftmost-longest."""
    scanner = pickle.loads(pickle.dumps(make_scanner(OVERLAPPING, search)))
    assert _as_tuples(scanner, "xabcd<|a|><|a|>") == [(1, 4, "abc"), (5, 15, "<|a|><|a|>")]


@pytest.mark.parametrize(
    ("tokens", "error", "message"),
    [
        ([""], ValueError, "empty special token"),
        (["<s>", "</s>", "<s>"], ValueError, "duplicate special token '<s>'"),
        ("<|endoftext|>", TypeError, "write ['<|endoftext|>']"),
        ([b"<s>"], TypeError, "not a str"),
    ],
)
def test_validate_special_tokens_rejects_bad_lists(
    tokens: object, error: type[Exception], message: str
) -> None:
    """Guards "Errors lose nothing": empty, duplicate, or non-list special tokens raise a helpful error."""
    with pytest.raises(error, match=re.escape(message)):
        validate_special_tokens(tokens)  # type: ignore[arg-type]
    with pytest.raises(error):
        SpecialTokenScanner(tokens)  # type: ignore[arg-type]


def test_validate_special_tokens_accepts_good_lists() -> None:
    """Guards the happy path: None means none, order is kept, any iterable works."""
    assert validate_special_tokens(None) == []
    assert validate_special_tokens(("<b>", "<a>")) == ["<b>", "<a>"]
    assert validate_special_tokens(iter(["x"])) == ["x"]


non_ascii_alphabet = st.sampled_from(["a", "<", ">", "é", "日", "🙃", "\u00a0", "x"])
non_ascii_specials = st.lists(
    st.sampled_from(["<é>", "🙃🙃", "日", "é<", "<x>", "a🙃"]), min_size=1, max_size=4, unique=True
)


@pytest.mark.parametrize("search", SEARCHES)
@settings(max_examples=200, deadline=None)
@given(tokens=non_ascii_specials, text=st.lists(non_ascii_alphabet, max_size=30).map("".join))
def test_non_ascii_specials_match_like_the_oracle(
    tokens: list[str], text: str, special_matches_oracle: Oracle, search: str
) -> None:
    """Guards multi-byte and astral characters: offsets are character offsets, as the oracle's."""
    got = [(m.start, m.end, m.token) for m in make_scanner(tokens, search).matches(text)]
    assert got == [tuple(match) for match in special_matches_oracle(text, tokens)]


# --------------------------------------------------------------------------- windows and linear cost


@pytest.mark.parametrize("search", SEARCHES)
@settings(max_examples=300, deadline=None)
@given(text=overlap_texts, window=st.integers(1, 7))
def test_matches_across_window_edges_equal_brute_force(
    text: str, window: int, special_matches_oracle: Oracle, search: str
) -> None:
    """Guards the window overlap: a match crossing a scan-window edge is found exactly once."""
    scanner = make_scanner(OVERLAPPING, search)
    expected = special_matches_oracle(text, OVERLAPPING)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(specials_module, "_SCAN_WINDOW", window)
        assert _as_tuples(scanner, text) == expected
        first = scanner.first_match(text)
    assert (None if first is None else (first.start, first.end, first.token)) == (
        expected[0] if expected else None
    )


class _CountingAutomaton:
    """Stands in for the pyahocorasick automaton and counts the characters it is handed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.characters = 0

    def iter(self, text: str, *bounds: int) -> Any:
        self.characters += len(text)
        return self.inner.iter(text, *bounds)


class _SearchCounter:
    """Counts the characters every scanner searches: the windows, and what pyahocorasick is handed.

    pyahocorasick converts the whole string it is given, so handing it the
    whole text once per 64K window made a 20 MB encode take minutes; a window
    is searched with bounds, never a copy of the text, on the ``str.find`` path.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, search: str) -> None:
        self.windows = 0
        self.automata: list[_CountingAutomaton] = []
        force_search(monkeypatch, search)
        # The compiled backend's encoder searches without the scanner (its
        # search is one pass by construction, and compared with the scanner
        # above); these tests are about the scanner, so the encoder uses it.
        monkeypatch.setattr(
            core, "_active", dataclasses.replace(core.active_backend(), special_matches=None)
        )
        real_init = SpecialTokenScanner.__init__
        real_window = SpecialTokenScanner._window_occurrences
        counter = self

        def counted_init(scanner: SpecialTokenScanner, tokens: Iterable[str]) -> None:
            real_init(scanner, tokens)
            if scanner._automaton is not None:
                counter.automata.append(_CountingAutomaton(scanner._automaton))
                scanner._automaton = counter.automata[-1]

        def counted_window(
            scanner: SpecialTokenScanner, text: str, start: int, stop: int, end: int
        ) -> list[tuple[int, int, str]]:
            counter.windows += end - start
            return real_window(scanner, text, start, stop, end)

        monkeypatch.setattr(SpecialTokenScanner, "__init__", counted_init)
        monkeypatch.setattr(SpecialTokenScanner, "_window_occurrences", counted_window)
        encoder_module._scanner_for.cache_clear()

    def check_linear(self, text: str, search: str) -> None:
        assert self.windows > 0, "the text should have been scanned"
        assert self.windows <= 1.1 * len(text) + 100
        handed = sum(automaton.characters for automaton in self.automata)
        if search == "automaton":
            assert self.automata, "the automaton should have been used"
            assert handed <= 1.1 * len(text) + 100
        else:
            assert handed == 0


# One character of each width of CPython's str storage: 1, 2 and 4 bytes.
WIDE_CHARACTERS = ["e", "д", "🙂"]


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("wide", WIDE_CHARACTERS)
def test_encode_hands_the_scanner_each_character_a_bounded_number_of_times(
    wide: str, search: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards linear encoding (issue 13): scanning a long text costs O(length), not O(length²)."""
    counter = _SearchCounter(monkeypatch, search)
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>", "<|fim|>"])
    text = (f"line {wide} of text<|endoftext|>\n" * 20_000)[: 3 * 65_536 + 123]
    try:
        ids = tok.encode(text)
    finally:
        encoder_module._scanner_for.cache_clear()
    assert ids.count(256) == text.count("<|endoftext|>")
    counter.check_linear(text, search)


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("wide", WIDE_CHARACTERS)
def test_disallowed_check_hands_the_scanner_each_character_a_bounded_number_of_times(
    wide: str, search: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards linear encoding in the disallowed-special check (tiktoken's keywords).

    The disallowed token comes last, so the check scans every window before
    it finds it (a text without one is answered by ``in`` alone).
    """
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
    text = (f"line {wide} of text\n" * 20_000)[: 3 * 65_536 + 123] + "<|endoftext|>"
    counter = _SearchCounter(monkeypatch, search)
    try:
        with pytest.raises(ParameterError, match="disallowed"):
            tok.encode(text, allowed_special=set(), disallowed_special="all")
    finally:
        encoder_module._scanner_for.cache_clear()
    counter.check_linear(text, search)


def _byte_level_ids(text: str, specials: dict[str, int]) -> list[int]:
    """The ids a byte-level vocabulary gives ``text``, written out by hand.

    Lone surrogates become U+FFFD (tiktoken's repair); each occurrence of a
    special token, leftmost first and the longest where several start at one
    place, is its id; every other character is its UTF-8 bytes.
    """
    repaired = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    ids: list[int] = []
    position = 0
    while position < len(repaired):
        token = max(
            (t for t in specials if repaired.startswith(t, position)), key=len, default=None
        )
        if token is not None:
            ids.append(specials[token])
            position += len(token)
        else:
            ids.extend(repaired[position].encode("utf-8"))
            position += 1
    return ids


SHORT_TEXTS = [
    "plain words",
    "a<|fim|>b",
    "<|endoftext|>",
    "x\ud800y",
    "x\ud800<|endoftext|>y\udfff",
    "",
]


@pytest.mark.parametrize("backend_name", core.available_backends())
@pytest.mark.parametrize("text", SHORT_TEXTS)
def test_short_encode_finds_specials_and_repairs_surrogates(backend_name: str, text: str) -> None:
    """Guards encode()'s one-call path for short texts: specials found, surrogates repaired."""
    specials = {"<|endoftext|>": 256, "<|fim|>": 257}
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], list(specials))
    with core.using_backend(backend_name):
        assert tok.encode(text) == _byte_level_ids(text, specials)


def test_many_specials_are_found_without_the_quick_check() -> None:
    """Guards the path for more specials than ``in`` checks cheaply (Llama 3 has 256)."""
    specials = {f"<|t{i}|>": 256 + i for i in range(encoder_module._QUICK_CHECK_TOKENS + 1)}
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], list(specials))
    assert tok._quick_specials is None
    text = "a<|t8|>b<|t0|>"
    assert tok.encode(text) == _byte_level_ids(text, specials)


@pytest.mark.parametrize("backend_name", core.available_backends())
def test_encode_with_specials_gives_the_general_paths_ids_or_declines(backend_name: str) -> None:
    """Guards the kernel method's contract on both backends.

    The compiled kernel recognizes the special tokens itself (leftmost
    first, the longest where two start at one place, none overlapping); the
    pure one returns None exactly when a token occurs.
    """
    from streambpe.patterns import GPT2

    tokens = ("<s>", "</s>", "<s>x", "s>")
    ids = (300, 301, 302, 303)
    specials = dict(zip(tokens, ids, strict=True))
    with core.using_backend(backend_name):
        backend = core.active_backend()
        kernel = backend.piece_encoder({bytes([i]): i for i in range(256)}, {}, 16)
        pretokenizer = backend.pretokenizer(GPT2)
        assert kernel.encode_with_specials("a</s", GPT2, pretokenizer, tokens, ids) == list(b"a</s")
        assert kernel.encode_with_specials("a</s", GPT2, pretokenizer, (), ()) == list(b"a</s")
        # The last is past the length from which the matcher runs without the GIL.
        long_text = "ab <s>x</s>s> \u00e9" * 500
        for text in ("say <s>", "<s>x</s><s></s>s>", "<<s>xs>>", "</s>\U0001f600<s>x", long_text):
            found = kernel.encode_with_specials(text, GPT2, pretokenizer, tokens, ids)
            if backend_name == "python":
                assert found is None
            else:
                assert found == _byte_level_ids(text, specials), text


def test_native_encode_with_specials_finds_tokens_at_either_end_in_every_str_width() -> None:
    """The kernel skips a token whose first character the text lacks; that must never skip one it holds.

    Tokens that start with a character of one, two and four bytes, found at
    the very start and the very end of texts stored one, two and four bytes
    a character, and texts that hold only a token's first character.
    """
    from streambpe.patterns import GPT2

    native = pytest.importorskip("streambpe.core._native")
    tokens = ("<s>", "\u00e9nd", "\u65e5\u672c", "\U0001f600!")
    ids = (300, 301, 302, 303)
    specials = dict(zip(tokens, ids, strict=True))
    kernel = native.PieceEncoder({bytes([i]): i for i in range(256)}, {}, 16)
    for widener in ("", "\u00e9", "\u0100", "\U0001f601"):
        for token in tokens:
            for text in (
                f"{token}a{widener}",
                f"a{widener}{token}",
                f"{token}",
                f"{token[0]}x{widener}",
            ):
                found = kernel.encode_with_specials(text, GPT2, None, tokens, ids)
                assert found == _byte_level_ids(text, specials), text
    with pytest.raises(ValueError, match="non-empty strings"):
        kernel.encode_with_specials("a", GPT2, None, ("",), (1,))
    with pytest.raises(TypeError):
        kernel.encode_with_specials("a", GPT2, None, (1,), (1,))


@pytest.mark.parametrize("backend_name", core.available_backends())
def test_encode_many_gives_each_texts_ids_or_declines(backend_name: str) -> None:
    """Guards ``encode_many`` on both backends: the compiled kernel finds the
    special tokens of every text; the pure one returns None if any text has one."""
    from streambpe.patterns import GPT2

    tokens = ("<s>", "</s>", "<s>x")
    ids = (300, 301, 302)
    specials = dict(zip(tokens, ids, strict=True))
    plain = ["", "ab", "日本語 \U0001f600", "a</s"]
    with_specials = [*plain, "<s>x</s>", "<<s>xs>", "</s>"]
    with core.using_backend(backend_name):
        backend = core.active_backend()
        kernel = backend.piece_encoder({bytes([i]): i for i in range(256)}, {}, 16)
        pretokenizer = backend.pretokenizer(GPT2)
        expected = [_byte_level_ids(text, specials) for text in with_specials]
        assert kernel.encode_many(plain, GPT2, pretokenizer, tokens, ids) == expected[: len(plain)]
        assert kernel.encode_many([], GPT2, pretokenizer, tokens, ids) == []
        found = kernel.encode_many(with_specials, GPT2, pretokenizer, tokens, ids)
        assert found == (None if backend_name == "python" else expected)
        with pytest.raises(UnicodeEncodeError):
            kernel.encode_many(["ok", "a\ud800"], GPT2, pretokenizer, (), ())
        missing = backend.piece_encoder({b"a": 0, b"b": 1}, {b"ab": 0}, 8)
        with pytest.raises(KeyError):
            missing.encode_many(["a", "ab"], GPT2, pretokenizer, (), ())


def test_native_encode_many_rejects_bad_arguments() -> None:
    """Checked before any text is read without the GIL."""
    from streambpe.patterns import GPT2

    native = pytest.importorskip("streambpe.core._native")
    kernel = native.PieceEncoder({bytes([i]): i for i in range(256)}, {}, 16)
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        kernel.encode_many(["a", b"b"], GPT2, None, (), ())
    with pytest.raises(ValueError, match="one id per special token"):
        kernel.encode_many(["a"], GPT2, None, ("<s>",), ())
    with pytest.raises(ValueError, match="non-empty strings"):
        kernel.encode_many(["a"], GPT2, None, ("",), (1,))
