"""Reading a parsed ``tokenizer.json`` node by node, each error naming its JSON path.

:class:`Node` wraps one JSON value with the file it came from and its path
(``pre_tokenizer.pretokenizers[2].behavior``); its accessors check types
and raise :class:`~streambpe.errors.FormatError` saying which path holds
what, and what was expected.

>>> node = Node({"a": [1, "x"]}, "tokenizer.json")
>>> node.child("a").item(1).path, node.child("a").item(1).string()
('a[1]', 'x')
>>> node.child("a").item(0).string()
Traceback (most recent call last):
streambpe.errors.FormatError: tokenizer.json: a[0]: expected a string, found 1
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

from streambpe.errors import FormatError

#: What a component's reader makes of its node.
ComponentT = TypeVar("ComponentT")


@dataclass(frozen=True)
class Node:
    """One JSON value of ``file``, found at ``path`` (``""`` for the top level)."""

    value: object
    file: str
    path: str = ""

    def fail(self, problem: str) -> FormatError:
        """A :class:`FormatError` about this node (for the caller to raise)."""
        where = self.path or "the top level"
        return FormatError(self.file, None, f"{where}: {problem}")

    def unsupported(self, what: str) -> FormatError:
        """A :class:`FormatError` saying this node's setting is not supported."""
        return self.fail(f"{what} is not supported; streambpe would encode it differently")

    def _at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def fields(self) -> dict[str, object]:
        if not isinstance(self.value, dict):
            raise self.fail(f"expected an object, found {_shown(self.value)}")
        return self.value

    def child(self, key: str) -> Node:
        """The value under ``key`` (JSON ``null`` when absent)."""
        return Node(self.fields().get(key), self.file, self._at(key))

    def has(self, key: str) -> bool:
        return self.fields().get(key) is not None

    def item(self, index: int) -> Node:
        return Node(self.elements()[index], self.file, f"{self.path}[{index}]")

    def items(self) -> Iterator[Node]:
        for index in range(len(self.elements())):
            yield self.item(index)

    def elements(self) -> list[object]:
        if not isinstance(self.value, list):
            raise self.fail(f"expected an array, found {_shown(self.value)}")
        return self.value

    def string(self) -> str:
        if not isinstance(self.value, str):
            raise self.fail(f"expected a string, found {_shown(self.value)}")
        return self.value

    def boolean(self, default: bool | None = None) -> bool:
        if self.value is None and default is not None:
            return default
        if not isinstance(self.value, bool):
            raise self.fail(f"expected true or false, found {_shown(self.value)}")
        return self.value

    def integer(self) -> int:
        if isinstance(self.value, bool) or not isinstance(self.value, int) or self.value < 0:
            raise self.fail(f"expected a non-negative integer, found {_shown(self.value)}")
        return self.value

    def type_name(self) -> str:
        """The node's ``"type"`` field."""
        return self.child("type").string()

    def read_by_type(
        self, readers: Mapping[str, Callable[[Node], ComponentT]], family: str
    ) -> ComponentT:
        """What the reader of this node's ``"type"`` makes of it; other types are unsupported.

        ``readers`` is a component family's table of supported types, and
        ``family`` its name in the error (``"decoder"``, ``"normalizer"``...).

        >>> readers = {"Lowercase": lambda node: "lower"}
        >>> Node({"type": "Lowercase"}, "t.json", "normalizer").read_by_type(readers, "normalizer")
        'lower'
        >>> Node({"type": "Nmt"}, "t.json", "normalizer").read_by_type(readers, "normalizer")
        Traceback (most recent call last):
        streambpe.errors.FormatError: t.json: normalizer.type: normalizer 'Nmt' is not supported; \
streambpe would encode it differently
        """
        kind = self.type_name()
        reader = readers.get(kind)
        if reader is None:
            raise self.child("type").unsupported(f"{family} {kind!r}")
        return reader(self)


def _shown(value: object) -> str:
    text = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return "null" if value is None else text[:60]
