"""The ``added_tokens`` of a ``tokenizer.json``, with the ids ``tokenizers`` gives them.

``tokenizers`` does not take the ids written in the file: an added token
whose text is a ``model.vocab`` entry gets that entry's id, any other the
next id past the vocabulary and the added tokens before it. Real files
agree with that; a file that does not would encode differently from what
it says, so it fails the load, naming the token.

>>> node = Node([{"id": 3, "content": "<s>", "special": True}], "t.json", "added_tokens")
>>> read_added_tokens(node, {"a": 0, "b": 1, "ab": 2})
(AddedToken(content='<s>', id=3, special=True, single_word=False, lstrip=False, rstrip=False, normalized=False),)
"""

from __future__ import annotations

from streambpe.formats.hf.nodes import Node
from streambpe.pipeline.added_tokens import AddedToken

_FLAGS = ("single_word", "lstrip", "rstrip")


def read_added_tokens(node: Node, spellings: dict[str, int]) -> tuple[AddedToken, ...]:
    """Every added token of ``node`` (an array), given the model's ``spelling -> id``."""
    if node.value is None:
        return ()
    tokens: list[AddedToken] = []
    ids: dict[str, int] = {}
    for entry in node.items():
        content = entry.child("content").string()
        if not content:
            raise entry.child("content").fail("an added token cannot be empty")
        if content in ids:
            raise entry.child("content").fail(f"{content!r} is listed twice")
        declared = entry.child("id").integer()
        given = spellings.get(content, _next_id(ids, len(spellings)))
        if declared != given:
            raise entry.child("id").fail(
                f"{content!r} is given id {declared}, but tokenizers gives it {given} "
                "(the id of the same text in model.vocab, or else the next free id)"
            )
        ids[content] = given
        special = entry.child("special").boolean(default=False)
        flags = {flag: entry.child(flag).boolean(default=False) for flag in _FLAGS}
        normalized = entry.child("normalized").boolean(default=not special)
        tokens.append(AddedToken(content, given, special, normalized=normalized, **flags))
    return tuple(tokens)


def _next_id(ids: dict[str, int], vocab_size: int) -> int:
    # tokenizers' rule: past the vocabulary, or past the highest added id if that is beyond it.
    if not ids:
        return vocab_size
    highest = max(ids.values())
    return highest + 1 if highest >= vocab_size or vocab_size == 0 else vocab_size
