"""The public names: what type checkers see is exactly what loads at run time."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import jupyter_agent_memory

INIT = Path(jupyter_agent_memory.__file__)


def _type_checking_imports() -> dict[str, str]:
    """name -> module (".store", ...) imported in the package's ``if TYPE_CHECKING:`` block."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for child in node.body:
                assert isinstance(child, ast.ImportFrom) and child.level == 1
                for alias in child.names:
                    found[alias.asname or alias.name] = "." + str(child.module)
    return found


def test_the_type_checking_mirror_matches_the_lazy_exports() -> None:
    assert _type_checking_imports() == jupyter_agent_memory._EXPORTS


def test_every_public_name_loads_and_comes_from_its_module() -> None:
    for name, module in jupyter_agent_memory._EXPORTS.items():
        value = getattr(jupyter_agent_memory, name)
        assert value is getattr(importlib.import_module(module, "jupyter_agent_memory"), name)
    assert set(jupyter_agent_memory.__all__) == {"__version__", *jupyter_agent_memory._EXPORTS}


def test_the_package_is_marked_as_typed() -> None:
    assert (INIT.parent / "py.typed").is_file()
