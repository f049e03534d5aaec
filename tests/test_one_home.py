"""Each shared text and default is written once, in its home module; surfaces refer to it.

The tool name a model sees, the engine's result texts and the eval install hint are found as
string literals in the package's source: outside docstrings, each appears in its home module
only. The surfaces' defaults (the tool name, the search limit) are the home's own objects.
"""

from __future__ import annotations

import ast
import functools
import inspect
from pathlib import Path

import pytest

import jupyter_agent_memory
from jupyter_agent_memory.engine import prompt, tool

PACKAGE = Path(jupyter_agent_memory.__file__).parent

HOMES = {
    "mcp__agent-memory__memory": "mcp_server/service.py",
    tool.UPDATED: "engine/tool.py",
    tool.NO_JOURNAL: "engine/tool.py",
    tool.NO_MATCHES: "engine/tool.py",
    'pip install "jupyter-agent-memory[eval]"': "evaluation/models.py",
}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the constant nodes that are docstrings (of the module, classes and functions)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


@functools.cache
def _string_literals() -> tuple[tuple[str, int, str], ...]:
    """``(module, line, value)`` of every string literal of the package but docstrings."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        module = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(tree):
            is_text = isinstance(node, ast.Constant) and isinstance(node.value, str)
            if is_text and id(node) not in skip:
                found.append((module, node.lineno, node.value))
    return tuple(found)


def literal_places(text: str) -> list[str]:
    """``module:line`` of every string literal (docstrings aside) that contains ``text``."""
    return [f"{module}:{line}" for module, line, value in _string_literals() if text in value]


@pytest.mark.parametrize("text", sorted(HOMES))
def test_each_text_is_written_once_in_its_home(text: str) -> None:
    places = literal_places(text)
    assert len(places) == 1 and places[0].startswith(HOMES[text] + ":"), places


def test_the_scan_sees_literals_outside_docstrings() -> None:
    # The home's own definition is found, so a copy elsewhere would be too.
    assert literal_places("Memory updated.") == [
        f"engine/tool.py:{_line_of(PACKAGE / 'engine' / 'tool.py', 'UPDATED = ')}"
    ]


def _line_of(path: Path, start: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if line.startswith(start))


def test_surfaces_take_the_tool_name_from_the_prompt_module() -> None:
    from jupyter_agent_memory.notebook import magics, panel
    from jupyter_agent_memory.server.config import AgentMemoryServer

    assert magics.DEFAULT_TOOL_NAME is prompt.DEFAULT_TOOL_NAME
    assert panel.DEFAULT_TOOL_NAME is prompt.DEFAULT_TOOL_NAME
    assert magics.AgentMemoryMagics.class_traits()["tool_name"].default_value == (
        prompt.DEFAULT_TOOL_NAME
    )
    assert AgentMemoryServer().tool_name == prompt.DEFAULT_TOOL_NAME
    assert prompt.PromptBuilder().tool_name == prompt.DEFAULT_TOOL_NAME


def test_surfaces_take_the_default_limit_from_the_tool() -> None:
    from jupyter_agent_memory.cli import build_parser
    from jupyter_agent_memory.notebook.magics import AgentMemoryMagics

    assert tool.normalize_limit(None) == tool.DEFAULT_LIMIT
    assert AgentMemoryMagics.class_traits()["journal_limit"].default_value == tool.DEFAULT_LIMIT
    args = build_parser().parse_args(["journal", "search", "x"])
    assert args.limit == tool.DEFAULT_LIMIT


def test_result_texts_and_install_hint_have_one_object() -> None:
    from jupyter_agent_memory.evaluation import models, results
    from jupyter_agent_memory.notebook.display import JournalResult

    assert JournalResult().empty_message is tool.NO_MATCHES
    # Every missing optional package is reported by one function, with the one hint.
    assert results.import_extra is models.import_extra
    hint = inspect.signature(models.import_extra).parameters["hint"].default
    assert hint is models.EVAL_INSTALL_HINT
