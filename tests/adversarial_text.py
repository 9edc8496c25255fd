"""Hypothesis strategies for text that is hard on scanners, BPE and stream cuts.

Each strategy aims at one way text goes wrong in hand-written code over
UTF-8 or UTF-16/32 buffers; :func:`adversarial_text` mixes them. Reusable by
any test (``from adversarial_text import adversarial_text``) and by the long
fuzz run (``tests/fuzz_long.py``).

- lone surrogates (not encodable as UTF-8; tiktoken replaces them),
- combining marks piled on letters, digits and spaces,
- emoji joined by ZWJ, with variation selectors and skin tones,
- every Unicode whitespace character, alone and in runs,
- long runs of one character, or of two alternating ones,
- base64 blobs (long pieces with no pattern boundary),
- decimal digits of every script, and other numerals,
- English contractions in every letter case,
- fragments of special tokens, to be cut across chunk boundaries,
- long ASCII runs broken by rare characters beyond it (:func:`mostly_ascii_text`),
  which the compiled encoder reads as one-byte stretches.
"""

from __future__ import annotations

import base64
import unicodedata
from functools import cache

from hypothesis import strategies as st

#: The special token the differential tests register; its fragments appear in texts.
SPECIAL = "<|endoftext|>"

#: Every character ``str.isspace`` or the patterns' ``\s`` call whitespace, plus
#: look-alikes that are not (zero-width space and joiner, BOM, Mongolian vowel separator).
WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000"
)
WHITESPACE_LOOKALIKES = "\u200b\u200c\u200d\ufeff\u180e\u2060"

COMBINING_MARKS = (
    "".join(chr(c) for c in range(0x0300, 0x0370))
    + "\u0483\u0591\u05b0\u0610\u064b\u0670\u093c\u0e31\u1ab0\u1dc0\u20d0\u20e3\ufe20"
)

ZWJ = "\u200d"
EMOJI = "👨👩👧👦🏳🌈❤🔥🧑💻🫱🫲👍🐈⬛"
EMOJI_MODIFIERS = "\ufe0f\ufe0e\U0001f3fb\U0001f3fc\U0001f3fd\U0001f3fe\U0001f3ff"

CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")
APOSTROPHES = ("'", "\u2019")


@cache
def decimal_digits() -> str:
    """One string of every character whose category is Nd (decimal digit), all scripts."""
    return "".join(chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Nd")


#: Numerals that are not decimal digits: superscripts, fractions, Roman, circled, CJK.
OTHER_NUMERALS = "²³¹¼½¾⁰⁴⁵⁶⁷⁸⁹₀₁₂ⅠⅡⅢⅣⅤⅫⅰⅱ①②⑳㉑〇一二三十百千万"


def lone_surrogates() -> st.SearchStrategy[str]:
    """Text with unpaired surrogates among letters (and, sometimes, a valid pair)."""
    surrogate = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
    letter = st.sampled_from("ab é€ \n")
    return st.lists(st.one_of(surrogate, letter), min_size=1, max_size=12).map("".join)


def combining_marks() -> st.SearchStrategy[str]:
    """A base (letter, digit, space, punctuation) carrying one or more combining marks."""
    base = st.sampled_from("aZé1 .'\n\u0915")
    marks = st.text(alphabet=COMBINING_MARKS, min_size=1, max_size=6)
    return st.builds(str.__add__, base, marks)


def zwj_emoji() -> st.SearchStrategy[str]:
    """Emoji sequences joined by ZWJ, with variation selectors and skin tones."""
    one = st.builds(
        str.__add__, st.sampled_from(EMOJI), st.text(alphabet=EMOJI_MODIFIERS, max_size=2)
    )
    return st.lists(one, min_size=1, max_size=5).map(ZWJ.join)


def unicode_whitespace() -> st.SearchStrategy[str]:
    """Runs of any whitespace (and look-alikes), often followed by a letter or the end."""
    run = st.text(alphabet=WHITESPACE + WHITESPACE_LOOKALIKES, min_size=1, max_size=8)
    tail = st.sampled_from(["", "a", "1", "'s", ".", "\n", "é"])
    return st.builds(str.__add__, run, tail)


def runs() -> st.SearchStrategy[str]:
    """Long runs of one character, or of two alternating ones."""
    char = st.sampled_from("a \n1.'é€😀\u0301ab")
    one = st.builds(str.__mul__, char, st.integers(1, 400))
    two = st.builds(
        lambda first, second, times: (first + second) * times, char, char, st.integers(1, 200)
    )
    return st.one_of(one, two)


def base64_blobs() -> st.SearchStrategy[str]:
    """Base64 of random bytes: long pieces with few pattern boundaries."""
    return st.binary(min_size=1, max_size=600).map(lambda raw: base64.b64encode(raw).decode())


def digits() -> st.SearchStrategy[str]:
    """Numbers in any script, mixed with other numerals and separators."""
    digit = st.one_of(
        st.sampled_from(decimal_digits()), st.sampled_from(OTHER_NUMERALS), st.sampled_from("0189")
    )
    separator = st.sampled_from(["", "", "", ",", ".", " ", "_"])
    return st.lists(st.builds(str.__add__, digit, separator), min_size=1, max_size=14).map("".join)


def contractions() -> st.SearchStrategy[str]:
    """A word and a contraction in any letter case, with either apostrophe."""
    suffix = st.builds(
        lambda apostrophe, letters, upper: (
            apostrophe
            + "".join(c.upper() if u else c for c, u in zip(letters[1:], upper, strict=False))
        ),
        st.sampled_from(APOSTROPHES),
        st.sampled_from(CONTRACTIONS),
        st.lists(st.booleans(), min_size=3, max_size=3),
    )
    word = st.sampled_from(["", "it", "WE", "They", "don", "I", " ", "1", "é"])
    return st.builds(str.__add__, word, suffix)


def special_fragments() -> st.SearchStrategy[str]:
    """Whole special tokens, and pieces of one that a chunk boundary could cut."""
    cut = st.integers(0, len(SPECIAL))
    return st.one_of(
        st.just(SPECIAL),
        st.builds(lambda i: SPECIAL[:i], cut),
        st.builds(lambda i: SPECIAL[i:], cut),
        st.just("<|endoftext|<|endoftext|>>"),
        st.just("<<|endoftext|>|>"),
    )


def adversarial_fragment() -> st.SearchStrategy[str]:
    """One fragment of any of the kinds above, or plain text."""
    return st.one_of(
        lone_surrogates(),
        combining_marks(),
        zwj_emoji(),
        unicode_whitespace(),
        runs(),
        base64_blobs(),
        digits(),
        contractions(),
        special_fragments(),
        st.text(max_size=20),
        st.sampled_from(["Hello", " world", "\n\n", "  ", "über", "日本語", "!?", " a"]),
    )


def adversarial_text(max_fragments: int = 8) -> st.SearchStrategy[str]:
    """Fragments of the kinds above joined together: the boundaries between them matter too."""
    return st.lists(adversarial_fragment(), max_size=max_fragments).map("".join)


def valid_text(max_fragments: int = 8) -> st.SearchStrategy[str]:
    """:func:`adversarial_text` without lone surrogates: text that is valid UTF-8."""
    return adversarial_text(max_fragments).map(
        lambda text: text.encode("utf-8", "replace").decode("utf-8")
    )


# fmt: off
#: ASCII pieces of code and prose, with the whitespace shapes the patterns treat
#: apart (a space after a word, runs of spaces, newlines with indents, tabs).
ASCII_FRAGMENTS = [
    "word", " word", "Word", " WORD", "camelCase", "HTTPServer", " x", "_id", " 42", "1234567",
    "don't", " I'LL", "they've", "it's", "(", ")", " {", "};", " ->", "...", "/**/", "==",
    " ", "  ", " " * 9, "\t", "\n", "\n\n", "\r\n", "\n    ", " \n", "\n\t\t", "/\n", "'s",
]
#: What breaks an ASCII run: characters of every width CPython stores, and
#: ones the patterns class apart (a space, a capital, a mark, a digit).
BEYOND_ASCII = [
    "\u00e9", "\u00a0", "\x85", "\u00a9", "\u2019", "\u3000", "\u017f", "\u0301", "\u0663",
    "\u00c9", "\u4e2d\u6587", "\U0001f600", " \u00e9t\u00e9", "\u00a0\n", "\u2019s", "\U0001d7d8",
]
# fmt: on


def ascii_run(min_size: int = 0) -> st.SearchStrategy[str]:
    """ASCII text of code and prose fragments, at least ``min_size`` characters."""
    return st.lists(st.sampled_from(ASCII_FRAGMENTS), min_size=1, max_size=120).map(
        lambda parts: "".join(parts).ljust(min_size, "a")
    )


def mostly_ascii_text(max_runs: int = 6) -> st.SearchStrategy[str]:
    """Long ASCII runs (often 128 characters or more) joined by rare characters beyond ASCII.

    A single such character makes CPython store the whole str in 1, 2 or 4
    bytes a character; the compiled encoder then reads the long ASCII runs
    as one-byte stretches, cut where a space follows a non-space, and every
    cut must leave the pieces as they are.
    """
    run = st.one_of(ascii_run(), ascii_run(min_size=128), runs(), base64_blobs())
    return st.lists(
        st.tuples(run, st.sampled_from(BEYOND_ASCII)), min_size=1, max_size=max_runs
    ).map(lambda pairs: "".join(run + beyond for run, beyond in pairs))
