"""Every docstring example in the package runs and prints what it claims.

Modules are discovered, not listed, so a new module's examples are checked
without touching this file. Examples needing optional files mark themselves
``+SKIP``; this file skips nothing.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

import streambpe


def _module_names() -> list[str]:
    names = [streambpe.__name__]
    names += [info.name for info in pkgutil.walk_packages(streambpe.__path__, "streambpe.")]
    return sorted(names)


MODULES = _module_names()


def test_every_known_module_is_discovered() -> None:
    """Guards discovery: the core modules are among those whose doctests run."""
    core = {
        "cutting.specials",
        "cutting.chunks",
        "cutting.splitter",
        "train.counting",
        "core.merge_loop",
        "train.trainer",
        "core.pretokenize",
        "core.bpe",
        "core.piece_cache",
        "tokenizer",
        "patterns",
        "errors",
        "_support.pool",
        "train.count_cache",
    }
    assert {f"streambpe.{name}" for name in core} <= set(MODULES)


@pytest.mark.parametrize("module_name", [m for m in MODULES if not m.endswith(".__main__")])
def test_doctests(module_name: str) -> None:
    """Guards the documentation: a module's examples all pass (and it imports cleanly)."""
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, verbose=False, report=True)
    assert result.failed == 0, (
        f"{result.failed} of {result.attempted} examples failed in {module_name}"
    )


@pytest.mark.parametrize("module_name", [m for m in MODULES if m.endswith(".__main__")])
def test_main_module_has_no_examples(module_name: str) -> None:
    """Guards ``__main__``: importing it runs the CLI, so it must hold no examples to run."""
    spec = importlib.util.find_spec(module_name)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef))]
    parser = doctest.DocTestParser()
    examples = [ex for node in nodes for ex in parser.get_examples(ast.get_docstring(node) or "")]
    assert examples == []
