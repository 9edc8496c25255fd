"""The package layout: imports run one way, from the stages up to the public API.

Every ``import`` in the package is read from the source (including imports
inside functions and under ``TYPE_CHECKING``, which a runtime check would
miss), resolved to a streambpe module, and checked two ways: the module graph
has no cycle, and each folder imports only from folders on lower layers
(``docs/design.md``, "Layout").
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import streambpe

PACKAGE_ROOT = Path(streambpe.__file__).parent

#: Each unit of the package (a top-level module or folder) and its layer: a unit
#: may import only from units on strictly lower layers.
LAYERS: dict[str, int] = {
    "errors": 0,
    "patterns": 0,
    "_support": 1,
    "sources": 2,
    "cutting": 3,
    "core": 4,
    "pipeline": 4,
    "encode": 5,
    "formats": 5,
    "train": 6,
    "streaming": 6,
    "tokenizer": 7,
    "tiktoken": 8,
    "__init__": 8,
    "cli": 9,
    "__main__": 10,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


MODULES = _modules()


def _imports(module: str, source: str, *, is_package: bool) -> set[str]:
    """The streambpe modules that ``module`` imports, anywhere in its ``source``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                # ``from package import module`` imports the module itself.
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else base)
    return {name for name in found if name in MODULES and name != module}


GRAPH = {
    module: _imports(
        module, path.read_text(encoding="utf-8"), is_package=path.name == "__init__.py"
    )
    for module, path in MODULES.items()
}


def _unit(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def test_every_unit_has_a_layer() -> None:
    """Guards the layer table: a new folder or top-level module must be placed in it."""
    assert {_unit(module) for module in MODULES} <= set(LAYERS)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_to_lower_layers(module: str) -> None:
    """Guards the one-way data flow: a stage never imports from a stage above it."""
    upward = [
        imported
        for imported in sorted(GRAPH[module])
        if _unit(imported) != _unit(module) and LAYERS[_unit(imported)] >= LAYERS[_unit(module)]
    ]
    assert upward == [], f"{module} imports from the same or a higher layer: {upward}"


def test_module_graph_has_no_cycle() -> None:
    """Guards against import cycles, lazy ones included (they hide inside functions)."""
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for imported in sorted(GRAPH[module]):
            if state.get(imported) == "open":
                cycle = [*path[path.index(imported) :], imported]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if imported not in state:
                visit(imported, [*path, imported])
        state[module] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])


def test_the_checker_sees_lazy_and_relative_imports() -> None:
    """Guards the checker itself: imports inside functions, under TYPE_CHECKING, relative."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from streambpe.tokenizer import Tokenizer\n"
        "def later():\n    from ..encode import encoder\n"
        "from . import piece_cache\n"
    )
    found = _imports("streambpe.core.bpe", source, is_package=False)
    assert found == {
        "streambpe.tokenizer",
        "streambpe.encode.encoder",
        "streambpe.core.piece_cache",
    }


#: Public packages: every package of the tree with no underscore-led part in its name.
PUBLIC_PACKAGES = sorted(
    module
    for module, path in MODULES.items()
    if path.name == "__init__.py" and not any(part.startswith("_") for part in module.split("."))
)


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_public_packages_say_what_they_export(package: str) -> None:
    """Guards the surface: a public package lists its names in ``__all__``, and each resolves."""
    imported = importlib.import_module(package)
    exported = imported.__dict__.get("__all__")
    assert isinstance(exported, list), f"{package} has no __all__; add one or make it private"
    assert len(set(exported)) == len(exported), f"{package}.__all__ repeats a name"
    missing = [name for name in exported if not hasattr(imported, name)]
    assert missing == [], f"{package}.__all__ names what it does not define: {missing}"


def test_public_packages_are_found() -> None:
    """Guards the list above: it holds the subpackages, and no private one."""
    assert {"streambpe", "streambpe.formats", "streambpe.formats.hf"} <= set(PUBLIC_PACKAGES)
    assert "streambpe._support" not in PUBLIC_PACKAGES
