"""Post-processing templates: the ids ``add_special_tokens=True`` puts around a text's ids.

Hugging Face's ``TemplateProcessing`` for a single sequence is a list of
special tokens and one ``$A`` (the text); only the ids matter here, so a
template is the ids before the text and the ids after it.

>>> Template(before=(1,), after=(2,)).apply([7, 8])
[1, 7, 8, 2]
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Template:
    """The ids that go before and after the ids of one text."""

    before: tuple[int, ...] = ()
    after: tuple[int, ...] = ()

    def apply(self, ids: list[int]) -> list[int]:
        """``ids`` with the template's ids around them (a new list)."""
        return [*self.before, *ids, *self.after]
