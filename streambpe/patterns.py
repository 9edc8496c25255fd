"""Pretokenization patterns, exactly as tiktoken ships them.

A pattern cuts text into *pieces* before BPE runs; BPE never merges across a
piece boundary. The three named patterns are byte-for-byte tiktoken's:

>>> import regex
>>> regex.findall(GPT2, "Hello world's  end")
['Hello', ' world', "'s", ' ', ' end']
>>> resolve_pattern("cl100k") == CL100K
True
"""

from __future__ import annotations

from functools import cache

import regex

#: GPT-2 / r50k_base / p50k_base (tiktoken's faster, equivalent spelling).
GPT2 = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

#: cl100k_base (GPT-3.5 / GPT-4).
CL100K = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

#: o200k_base (GPT-4o).
O200K = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

#: Names accepted wherever a pattern is expected (CLI ``--pattern``, ``train_bpe(pattern=...)``).
NAMED_PATTERNS: dict[str, str] = {
    "gpt2": GPT2,
    "r50k": GPT2,
    "r50k_base": GPT2,
    "cl100k": CL100K,
    "cl100k_base": CL100K,
    "o200k": O200K,
    "o200k_base": O200K,
}

#: The patterns the compiled core scans with a scanner of its own (no regex engine).
BUILT_IN_PATTERNS: frozenset[str] = frozenset({GPT2, CL100K, O200K})

#: Patterns under which "a space right after a non-whitespace character" always starts a
#: new piece, so a long document may be cut there without changing any piece (docs/design.md, "Safe cuts").
SPACE_SPLITTABLE_PATTERNS: frozenset[str] = frozenset({GPT2, CL100K, O200K})


def resolve_pattern(name_or_regex: str) -> str:
    """Return the pattern string for a name (``"gpt2"``, ``"cl100k"``, ``"o200k"``) or a regex.

    A custom regex is compiled once to report mistakes early.

    >>> resolve_pattern("gpt2") == GPT2
    True
    >>> resolve_pattern(r"\\w+|\\W")
    '\\\\w+|\\\\W'
    """
    named = NAMED_PATTERNS.get(name_or_regex.lower())
    if named is not None:
        return named
    try:
        compile_pattern(name_or_regex)
    except regex.error as exc:
        known = ", ".join(sorted({"gpt2", "cl100k", "o200k"}))
        raise ValueError(
            f"pattern {name_or_regex!r} is neither a known name ({known}) nor a valid regex: {exc}"
        ) from exc
    return name_or_regex


@cache
def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """Compile (and memoize) a pretokenization pattern.

    >>> compile_pattern(GPT2).findall("a  b")
    ['a', ' ', ' b']
    """
    return regex.compile(pattern)
