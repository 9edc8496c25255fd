""":class:`TextPipeline`: what a ``tokenizer.json`` does to text before and after the model.

The encoder hands the kernel one text and the spans of the added tokens in
it (``(start, end, id)``); :meth:`TextPipeline.prepare` builds both the way
Hugging Face ``tokenizers`` does: raw added tokens first, then the
normalizer on each stretch between them, then normalized added tokens in
the normalized stretches, and the prefix space of a ``ByteLevel``
pre-tokenizer in front of each stretch that does not start with one.

>>> from streambpe.pipeline.normalizers import Lowercase
>>> pipeline = TextPipeline((AddedToken("<s>", 9), AddedToken("hey", 8, normalized=True)),
...                         Lowercase(), prefix_space=True)
>>> pipeline.prepare("<s>HEY You")
('<s>hey you', [(0, 3, 9), (3, 6, 8)])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streambpe.pipeline.added_tokens import AddedToken, AddedTokenSplitter
from streambpe.pipeline.normalizers import Normalizer
from streambpe.pipeline.templates import Template

#: An added token in a prepared text: ``(start, end, id)``, offsets in characters.
TokenSpan = tuple[int, int, int]


@dataclass(frozen=True)
class TextPipeline:
    """Added tokens, normalizer, prefix space, post-processing template and decoding overrides.

    Args:
        added_tokens: every added token, special or not.
        normalizer: the normalizer, or None.
        prefix_space: a ``ByteLevel`` pre-tokenizer's ``add_prefix_space``.
        template: the ids ``add_special_tokens=True`` adds, or None.
        decoded: bytes that decoding gives for some ids instead of their token
            bytes (added tokens, through the decoder).
    """

    added_tokens: tuple[AddedToken, ...] = ()
    normalizer: Normalizer | None = None
    prefix_space: bool = False
    template: Template | None = None
    decoded: Mapping[int, bytes] = field(default_factory=dict)
    _raw: AddedTokenSplitter = field(init=False, repr=False, compare=False)
    _normalized: AddedTokenSplitter = field(init=False, repr=False, compare=False)
    _rewrites_nothing: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        raw = [token for token in self.added_tokens if not token.normalized]
        normalized = [token for token in self.added_tokens if token.normalized]
        object.__setattr__(self, "_raw", AddedTokenSplitter(raw))
        rewrites_nothing = (
            self.normalizer is None and not self.prefix_space and not normalized
        ) and not any(token.looks_around for token in raw)
        object.__setattr__(self, "_rewrites_nothing", rewrites_nothing)
        object.__setattr__(
            self,
            "_normalized",
            AddedTokenSplitter(normalized, [self.normalize(token.content) for token in normalized]),
        )

    @property
    def special_ids(self) -> frozenset[int]:
        """The ids of the special added tokens (what ``skip_special_tokens`` leaves out)."""
        return frozenset(token.id for token in self.added_tokens if token.special)

    @property
    def raw_tokens(self) -> list[AddedToken]:
        """The added tokens matched in the raw text, before normalizing."""
        return [token for token in self.added_tokens if not token.normalized]

    def normalize(self, text: str) -> str:
        """``text`` through the normalizer (unchanged without one)."""
        return text if self.normalizer is None else self.normalizer.normalize(text)

    def cuts_inside_stretches(self) -> bool:
        """Whether a stream may be cut between two added tokens, not only at them.

        Not when a stretch's start is special (a prefix space, ``Prepend``),
        when an added token looks at the text around it, or when a normalized
        added token holds whitespace (a cut before that whitespace would split it).
        """
        if self.prefix_space or any(token.looks_around for token in self.added_tokens):
            return False
        if self.normalizer is not None and not self.normalizer.cuts_inside():
            return False
        # Raw added tokens are kept whole by the cutter itself; normalized ones it cannot see.
        spellings = [self.normalize(t.content) for t in self.added_tokens if t.normalized]
        return not any(char.isspace() for spelling in spellings for char in spelling)

    def is_safe_start(self, char: str) -> bool:
        """Whether the normalizer allows a cut right before ``char``."""
        return self.normalizer is None or self.normalizer.is_safe_start(char)

    def _stretch(self, text: str) -> str:
        if self.prefix_space and text and not text.startswith(" "):
            return " " + text
        return text

    def prepare(self, text: str) -> tuple[str, list[TokenSpan]]:
        """The text the kernel encodes and the spans of the added tokens in it."""
        if self._rewrites_nothing:
            # The text as it is: no copy, one pass of the scanner.
            return text, self._raw.spans(text)
        parts: list[str] = []
        spans: list[TokenSpan] = []
        length = 0
        for raw, raw_id in self._raw.split(text):
            if raw_id is not None:
                spans.append((length, length + len(raw), raw_id))
                parts.append(raw)
                length += len(raw)
                continue
            for piece, token_id in self._normalized.split(self.normalize(raw)):
                if token_id is None:
                    piece = self._stretch(piece)
                else:
                    spans.append((length, length + len(piece), token_id))
                parts.append(piece)
                length += len(piece)
        return "".join(parts), spans

    def prepare_ordinary(self, text: str) -> str:
        """``text`` as one stretch, added tokens not looked for (``encode_ordinary``)."""
        return self._stretch(self.normalize(text))
