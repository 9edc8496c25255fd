"""Pieces that start from their characters' tokens: the same ids as BPE from bytes.

The compiled core starts BPE on a piece with a multibyte character from
that character's token, where no "fragment" token (one that holds part of
the character and bytes beside it) could apply (``_char_atoms.hpp`` says
why that is exact). These tests build vocabularies full of fragments, check
that the core did take characters as atoms, and compare every piece with the
pure-Python BPE from bytes; then real cl100k and o200k ranks, on text made of
their own fragments, against tiktoken.
"""

from __future__ import annotations

import random

import pytest
import tiktoken
from piece_oracle import pure_encode
from streaming_helpers import tiktoken_file

from streambpe import patterns

native = pytest.importorskip(
    "streambpe.core._native", reason="the compiled core was not built (no C++ compiler at install)"
)

# One-, two- and three-byte characters: several share their first bytes
# (ж and н, 中 and 文 do not, € and ₽ do), so a fragment of one applies
# beside another.
ALPHABET = "aé€₽жн中文 "


def fragment_vocabulary(
    rng: random.Random, merges: int
) -> tuple[dict[bytes, int], dict[bytes, int]]:
    """Ranks in which every character of ALPHABET is a token, among random merges.

    Each character's bytes merge into it in one of its possible orders, so
    it is a token its own BPE forms. Between those steps come merges of any
    two known tokens, single bytes included, so many are fragments: a byte
    of a character with its neighbours, like b"a\\xe4", some ranked before
    the character they cut into. Each new token ranks after the tokens it
    is made of, as in trained vocabularies.
    """
    steps: list[list[bytes]] = []
    for character in ALPHABET:
        encoded = character.encode()
        if len(encoded) == 3:
            steps.append([encoded[:2] if rng.random() < 0.5 else encoded[1:], encoded])
        elif len(encoded) == 2:
            steps.append([encoded])
    known = sorted({bytes([byte]) for byte in ALPHABET.encode()})
    tokens: list[bytes] = []
    while steps or merges > 0:
        if steps and (merges == 0 or rng.random() < 0.2):
            step = rng.choice(steps)
            token = step.pop(0)
            if not step:
                steps.remove(step)
        else:
            merges -= 1
            token = rng.choice(known) + rng.choice(known)
            if len(token) > 12:
                continue
        if token not in known:
            known.append(token)
            tokens.append(token)
    ranks = {token: rank for rank, token in enumerate(tokens)}
    everything = [bytes([byte]) for byte in range(256)] + tokens
    ids = list(range(len(everything)))
    rng.shuffle(ids)
    return dict(zip(everything, ids, strict=True)), ranks


def last_merge(token: bytes, ranks: dict[bytes, int]) -> tuple[bytes, bytes] | None:
    """The two parts BPE on ``token`` alone joins last, if it ends in ``token``."""
    parts = [bytes([byte]) for byte in token]
    while len(parts) > 2:
        candidates = [
            (ranks[parts[i] + parts[i + 1]], i)
            for i in range(len(parts) - 1)
            if parts[i] + parts[i + 1] in ranks
        ]
        if not candidates:
            return None
        _, at = min(candidates)
        parts[at : at + 2] = [parts[at] + parts[at + 1]]
    return (parts[0], parts[1]) if len(parts) == 2 else None


def is_proper(ranks: dict[bytes, int]) -> bool:
    """Whether every token BPE can form ranks after both parts of its last merge."""
    for token, rank in ranks.items():
        pair = last_merge(token, ranks)
        if pair is not None and any(len(part) > 1 and ranks[part] >= rank for part in pair):
            return False
    return True


@pytest.mark.parametrize("seed", range(16))
def test_pieces_with_fragment_tokens_match_bpe_from_bytes(seed: int) -> None:
    rng = random.Random(seed)
    encoder, ranks = fragment_vocabulary(rng, merges=80)
    encoding = native.PieceEncoder(encoder, ranks, 0)
    # Atoms are used exactly when the vocabulary allows them.
    assert (encoding.atom_characters() > 0) == is_proper(ranks)
    for _ in range(1500):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 40)))
        piece = text.encode()
        assert encoding.encode_bytes(piece) == pure_encode(piece, encoder, ranks), text


def test_a_vocabulary_with_a_rank_tie_keeps_to_bytes() -> None:
    """Atoms need strict rank order; with a tie the core merges from bytes, still exactly."""
    rng = random.Random(7)
    encoder, ranks = fragment_vocabulary(rng, merges=40)
    tied = dict(ranks)
    last = max(tied, key=tied.__getitem__)
    tied[last] = tied[b"\xc3\xa9"]  # "é" and the newest token share a rank
    encoding = native.PieceEncoder(encoder, tied, 0)
    assert encoding.atom_characters() == 0
    for _ in range(300):
        piece = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 30))).encode()
        assert encoding.encode_bytes(piece) == pure_encode(piece, encoder, tied)


def test_a_merge_that_ranks_before_its_operand_keeps_to_bytes() -> None:
    """ "a€" ranks before "€", one of its parts: not proper, so no atoms, and still BPE's ids.

    From bytes, "xa" (rank 2) merges while "€" (rank 3) is still two parts,
    so "a€" never forms in "xa€"; starting from the token "€" would let
    "a€" (rank 1) merge first.
    """
    ranks = {b"\xe2\x82": 0, b"a\xe2\x82\xac": 1, b"xa": 2, b"\xe2\x82\xac": 3}
    encoder = {bytes([byte]): byte for byte in range(256)}
    encoder |= {token: 256 + rank for token, rank in ranks.items()}
    encoding = native.PieceEncoder(encoder, ranks, 0)
    assert encoding.atom_characters() == 0
    assert encoding.encode_bytes("xa€".encode()) == [encoder[b"xa"], encoder["€".encode()]]
    for text in ["xa€", "a€", "xa€a€", "€xa€"]:
        piece = text.encode()
        assert encoding.encode_bytes(piece) == pure_encode(piece, encoder, ranks)


def fragment_contexts(ranks: dict[bytes, int], rng: random.Random, count: int) -> list[str]:
    """Strings that put the vocabulary's own fragment tokens beside characters they cover.

    A head fragment is bytes followed by a character's first bytes; it is
    completed with a character starting that way. A tail fragment starts
    with a character's last bytes; a character ending that way goes before
    it. Only whole, valid UTF-8 results are kept.
    """
    by_first: dict[int, list[bytes]] = {}
    by_last: dict[int, list[bytes]] = {}
    for token in ranks:
        if len(token) > 1 and is_one_character(token):
            by_first.setdefault(token[0], []).append(token)
            by_last.setdefault(token[-1], []).append(token)
    candidates: list[bytes] = []
    for token in ranks:
        last = len(token)
        while last > 0 and token[last - 1] & 0xC0 == 0x80:
            last -= 1
        if last > 1 and token[last - 1] >= 0xC0:  # ends inside a character
            begun = token[last - 1 :]
            starting = by_first.get(begun[0], [])
            completing = [c for c in starting if c.startswith(begun) and c != begun]
            if completing:
                candidates.append(token[: last - 1] + rng.choice(completing) + b"x")
        first = 0
        while first < len(token) and token[first] & 0xC0 == 0x80:
            first += 1
        if 0 < first < len(token):  # starts inside a character
            suffix = token[:first]
            ending = [
                c for c in by_last.get(suffix[-1], []) if c.endswith(suffix) and len(c) > first
            ]
            if ending:
                candidates.append(b"x" + rng.choice(ending)[:-first] + token)
    strings = [candidate.decode() for candidate in candidates if is_text(candidate)]
    return strings[:count]


def is_text(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def is_one_character(data: bytes) -> bool:
    return is_text(data) and len(data.decode()) == 1


@pytest.mark.parametrize(
    ("file_name", "pattern"),
    [("cl100k_base.tiktoken", patterns.CL100K), ("o200k_base.tiktoken", patterns.O200K)],
)
def test_real_vocabularies_use_atoms_and_match_tiktoken_beside_their_fragments(
    file_name: str, pattern: str
) -> None:
    ranks = tiktoken.load.load_tiktoken_bpe(str(tiktoken_file(file_name)))
    reference = tiktoken.Encoding(
        name=f"{file_name}_offline", pat_str=pattern, mergeable_ranks=ranks, special_tokens={}
    )
    encoding = native.PieceEncoder(ranks, ranks, 1 << 12)
    assert encoding.atom_characters() > 1000
    rng = random.Random(5)
    strings = fragment_contexts(ranks, rng, 3000)
    assert len(strings) > 100
    # Each alone, and all of them as one text (other neighbours, other pieces).
    for text in strings:
        out: list[int] = []
        encoding.encode_text(text, pattern, None, out)
        assert out == reference.encode_ordinary(text), text
    rng.shuffle(strings)
    text = "".join(strings)
    out = []
    encoding.encode_text(text, pattern, None, out)
    assert out == reference.encode_ordinary(text)
