"""The layering rules, read in folder names: base, journal, engine, surfaces; no import cycles.

Imports are read from the source with ``ast`` (module level and inside functions alike, since a
lazy import is still a dependency); only ``if TYPE_CHECKING:`` blocks are left out. Run this
file directly to print the package's import graph by layer::

    python tests/test_architecture.py
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = "jupyter_agent_memory"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

#: Each top-level module or folder of the package, and its layer. The folder list is the
#: architecture: a new top-level name must be placed here before anything can import it.
LAYERS = {
    "__about__": "base",
    "errors": "base",
    "folder": "base",
    "environment": "base",
    "journal": "journal",
    "engine": "engine",
    "render": "surface",
    "notebook": "surface",
    "mcp_server": "surface",
    "server": "surface",
    "evaluation": "surface",
    "cli": "surface",
    "__init__": "surface",
    "__main__": "surface",
}
#: What each layer may import at run time (type-only imports may cross).
ALLOWED = {
    "base": {"base"},
    "journal": {"base", "journal"},
    "engine": {"base", "journal", "engine"},
    "surface": {"base", "journal", "engine", "surface"},
}
#: Surfaces that never import each other, in either direction.
APART = [("notebook", "mcp_server"), ("notebook", "server"), ("mcp_server", "server"),
         ("evaluation", "notebook"), ("evaluation", "server"), ("evaluation", "mcp_server")]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def unit(name: str) -> str:
    """The top-level folder or module a module belongs to."""
    return name.split(".")[0]


def layer(name: str) -> str:
    head = unit(name)
    if head not in LAYERS:
        raise AssertionError(f"{name} is in no layer: add {head!r} to LAYERS")
    return LAYERS[head]


class _Imports(ast.NodeVisitor):
    def __init__(self, name: str, is_package: bool) -> None:
        self.name = name
        self.package = name if is_package else name.rpartition(".")[0]
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                self.found.add(alias.name[len(PACKAGE) + 1 :] or "__init__")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".") if self.package else []
            if node.level > 1:
                base = base[: len(base) - (node.level - 1)]
            target = ".".join([*base, *([node.module] if node.module else [])])
        elif node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
            target = node.module[len(PACKAGE) + 1 :]
        else:
            return
        if node.module is None or target == "":
            # `from . import journal` names modules; `from .. import X` names the package.
            for alias in node.names:
                candidate = f"{target}.{alias.name}" if target else alias.name
                self.found.add(candidate if candidate in MODULES else (target or "__init__"))
        else:
            self.found.add(target)


def _modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


MODULES = _modules()


def import_graph() -> dict[str, set[str]]:
    """Module name -> the package modules it imports (outside TYPE_CHECKING blocks)."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        visitor = _Imports(name, path.name == "__init__.py")
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        deps = set()
        for target in visitor.found:
            # `from .server import handlers` resolves to the sub-module when it exists.
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                deps.add(target)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def render(graph: dict[str, set[str]]) -> str:
    lines = []
    for wanted in ("base", "journal", "engine", "surface"):
        lines.append(f"{wanted}:")
        for name in sorted(n for n in graph if layer(n) == wanted):
            deps = ", ".join(sorted(graph[name])) or "-"
            lines.append(f"  {name} -> {deps}")
    return "\n".join(lines)


def test_every_module_belongs_to_a_layer() -> None:
    for name in MODULES:
        layer(name)


def test_each_layer_imports_only_the_layers_below_it() -> None:
    graph = import_graph()
    offending = {
        name: sorted(d for d in deps if layer(d) not in ALLOWED[layer(name)])
        for name, deps in graph.items()
    }
    assert {k: v for k, v in offending.items() if v} == {}, render(graph)


def test_surfaces_that_stand_apart_never_import_each_other() -> None:
    graph = import_graph()
    crossing = sorted(
        (name, dep)
        for name, deps in graph.items()
        for dep in deps
        for a, b in APART
        if {unit(name), unit(dep)} == {a, b}
    )
    assert crossing == [], render(graph)


def test_there_are_no_import_cycles() -> None:
    graph = import_graph()
    assert cycles(graph) == [], render(graph)


def test_the_checker_sees_lazy_imports_and_cycles() -> None:
    # The contract is only as good as its reader: a lazy import inside a function counts,
    # a TYPE_CHECKING import does not, and a two-module cycle is found.
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .panel import MemoryPanel\n"
        "def f():\n    from .magics import AgentMemoryMagics\n"
    )
    visitor = _Imports("engine.store", False)
    visitor.visit(ast.parse(source))
    assert visitor.found == {"engine.magics"}
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


if __name__ == "__main__":
    graph = import_graph()
    print(render(graph))
    found = cycles(graph)
    print("cycles:", found or "none")
    sys.exit(1 if found else 0)
