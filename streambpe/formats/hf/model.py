"""The ``model`` of a ``tokenizer.json``: a BPE vocabulary and merge list, made exact for the engine.

``tokenizers`` merges by its merge list: the adjacent pair listed first
merges first, into the vocabulary's token for the two spellings joined.
streambpe's engine merges by rank: the adjacent pair whose concatenation
has the lowest rank. The two agree once the merges that can never fire are
dropped: a merge ``(l, r)`` fires only where a piece's bytes of ``l + r``
have become exactly ``l`` and ``r``, which is what BPE on ``l + r`` alone,
with the merges before it, gives. So each merge is kept when rank-based BPE
on its own bytes, with the merges kept so far, ends in exactly its two
sides (``docs/design.md``, "Loading a tokenizer.json").

``ignore_merges`` decides what a piece that is itself in the vocabulary
becomes. ``true``: that token, as tiktoken and the engine do. ``false``
(the default when absent): whatever the merges make of it, which is that
token only when the token is made by a merge; the other tokens of two bytes
or more are then left out of the engine's vocabulary (decoding keeps them).

>>> spec = read_bpe_model(Node({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "ba": 3},
...                             "merges": ["a b"]}, "t.json", "model"), complete=False)
>>> spec.vocab, spec.merges, spec.decode_only
({0: b'a', 1: b'b', 2: b'ab'}, [(b'a', b'b')], {3: b'ba'})
"""

from __future__ import annotations

from dataclasses import dataclass

from streambpe._support.utf8 import NEVER_IN_UTF8
from streambpe.core.bpe import merge_piece
from streambpe.formats.byte_unicode import decode_token, encode_token
from streambpe.formats.hf.nodes import Node


@dataclass(frozen=True)
class BPEModelSpec:
    """The engine's view of a BPE model.

    Attributes:
        vocab: id -> bytes of the tokens the engine may produce.
        merges: the merges that can fire, in order (their ranks).
        decode_only: id -> bytes of tokens decoding knows but encoding never gives.
        spellings: spelling -> id, every entry of ``model.vocab``.
    """

    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    decode_only: dict[int, bytes]
    spellings: dict[str, int]


def read_bpe_model(node: Node, *, complete: bool = True) -> BPEModelSpec:
    """Read a ``BPE`` model node; ``complete`` requires every byte UTF-8 text can hold."""
    if node.has("type") and node.type_name() != "BPE":
        raise node.child("type").unsupported(f"model {node.type_name()!r} (only BPE is)")
    if node.has("dropout"):
        raise node.child("dropout").unsupported("BPE dropout (random merges)")
    for affix in ("continuing_subword_prefix", "end_of_word_suffix"):
        if node.child(affix).value not in (None, ""):
            raise node.child(affix).unsupported(f"a non-empty {affix}")
    spellings = _read_vocab(node.child("vocab"))
    vocab: dict[int, bytes] = {}
    decode_only: dict[int, bytes] = {}
    for spelling, token_id in spellings.items():
        try:
            vocab[token_id] = decode_token(spelling)
        except ValueError:
            # Not a byte-level spelling: no piece is ever spelled so. Decoders
            # give such a token's own UTF-8.
            decode_only[token_id] = spelling.encode("utf-8")
    missing = [b for b in range(256) if encode_token(bytes([b])) not in spellings]
    if node.child("byte_fallback").boolean(default=False) and missing:
        raise node.child("byte_fallback").unsupported("byte_fallback with bytes missing")
    if complete:
        _check_bytes(node.child("vocab"), [b for b in missing if b not in NEVER_IN_UTF8])
    merges = _firing_merges(_read_merges(node.child("merges"), spellings))
    if not node.child("ignore_merges").boolean(default=False):
        made = {left + right for left, right in merges}
        for token_id, token in list(vocab.items()):
            if len(token) > 1 and token not in made:
                decode_only[token_id] = vocab.pop(token_id)
    return BPEModelSpec(vocab, merges, decode_only, spellings)


def _read_vocab(node: Node) -> dict[str, int]:
    spellings: dict[str, int] = {}
    seen: dict[int, str] = {}
    for spelling, token_id in node.fields().items():
        if isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < 0:
            where = Node(token_id, node.file, f"{node.path}[{spelling!r}]")
            raise where.fail(f"expected a non-negative integer, found {token_id!r}")
        if token_id in seen:
            raise node.fail(f"tokens {seen[token_id]!r} and {spelling!r} both have id {token_id}")
        seen[token_id] = spelling
        spellings[spelling] = token_id
    return spellings


def _check_bytes(node: Node, missing: list[int]) -> None:
    if missing:
        byte = missing[0]
        raise node.fail(
            f"lacks {len(missing)} single byte(s) that text can hold (first: 0x{byte:02x}, "
            f"spelled {encode_token(bytes([byte]))!r}); tokenizers drops such bytes "
            "without a word, streambpe refuses to"
        )


def _read_merges(node: Node, spellings: dict[str, int]) -> list[tuple[bytes, bytes]]:
    """The merges whose sides are byte-level spellings (no other merge can ever fire)."""
    merges: list[tuple[bytes, bytes]] = []
    # Plain loops: a Node per entry made reading 280K merges take seconds.
    for index, value in enumerate(node.elements()):
        sides: list[str]
        if isinstance(value, str):
            sides = value.split(" ")
        elif isinstance(value, list) and all(isinstance(side, str) for side in value):
            sides = [str(side) for side in value]
        else:
            raise node.item(index).fail(f'expected "left right" or [left, right], found {value!r}')
        if len(sides) != 2 or not sides[0] or not sides[1]:
            raise node.item(index).fail(f"expected two non-empty tokens, found {value!r}")
        left, right = sides
        for spelling in (left, right, left + right):
            if spelling not in spellings:
                raise node.item(index).fail(
                    f"{spelling!r} is not in model.vocab (tokenizers refuses it too)"
                )
        try:
            merges.append((decode_token(left), decode_token(right)))
        except ValueError:
            continue
    return merges


def _firing_merges(merges: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The merges that merge-list BPE can fire; rank-based BPE over them gives the same parts.

    >>> _firing_merges([(b"a", b"b"), (b"b", b"c"), (b"a", b"bc"), (b"ab", b"c")])
    [(b'a', b'b'), (b'b', b'c'), (b'ab', b'c')]
    """
    ranks: dict[bytes, int] = {}
    kept: list[tuple[bytes, bytes]] = []
    for left, right in merges:
        token = left + right
        if token in ranks:
            continue
        if len(token) > 2:
            # A side that no kept merge makes never appears: no BPE needed to say so.
            if (len(left) > 1 and left not in ranks) or (len(right) > 1 and right not in ranks):
                continue
            if merge_piece(token, ranks) != [left, right]:
                continue
        ranks[token] = len(kept)
        kept.append((left, right))
    return kept
