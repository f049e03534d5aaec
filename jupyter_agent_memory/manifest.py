"""The product manifest of the built-in ``guide`` template, computed from this package.

Because it is generated from the installed package on every call (version, magics, CLI
commands, REST routes), it cannot drift from what the user actually has. Nothing here imports
IPython, tornado or mcp: magics are read from their module's source with :mod:`ast`.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

#: The product manifest format of the reference (``schemaVersion`` 1, versioned by
#: ``package.version``), which ``product_info`` requires of every manifest.
SCHEMA_VERSION = 1
_MAGIC_DECORATORS = {"line_magic": "line", "cell_magic": "cell", "line_cell_magic": "line/cell"}


def package_manifest() -> dict[str, Any]:
    """The installed jupyter-agent-memory as a product manifest in the reference's format.

    ``{"schemaVersion": 1, "package": {"name", "version", ...}, "files", "tools", "magics",
    "cli", "rest"}``: ``package.version`` is the installed version, so ``product_info``'s
    ``manifestVersion`` can be compared with its ``runtimeVersion``.
    """
    from .__about__ import __version__

    return {
        "schemaVersion": SCHEMA_VERSION,
        "package": {
            "name": "jupyter-agent-memory",
            "version": _installed_version() or __version__,
            "import": "jupyter_agent_memory",
            "extras": {
                "mcp": 'MCP server (pip install "jupyter-agent-memory[mcp]")',
                "eval": "model adapters for the evaluation harness",
                "test": "everything the test suite needs",
            },
        },
        "files": {
            "SOUL.md": "who the agent is; edited directly",
            "USER.md": "who the user is; edited directly",
            "memory/FACT.md": "durable knowledge; rewritten whole by memory action update",
            "memory/JOURNAL.jsonl": "dated events; memory actions append and search; "
            "never loaded into the prompt",
        },
        "tools": {
            "memory": "actions update, append, search",
            "product_info": "this manifest, read fresh on every call",
        },
        "magics": magics(),
        "cli": cli_commands(),
        "rest": rest_routes(),
    }


def _installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jupyter-agent-memory")
    except PackageNotFoundError:
        return None


def magics() -> list[dict[str, str]]:
    """Every magic declared in ``magics.py``: name, kind and the first docstring line."""
    source = Path(__file__).with_name("magics.py")
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            name = getattr(target, "id", getattr(target, "attr", None))
            if name in _MAGIC_DECORATORS:
                prefix = "%%" if name == "cell_magic" else "%"
                doc = (ast.get_docstring(node) or "").strip().splitlines()
                found.append(
                    {
                        "name": f"{prefix}{node.name}",
                        "kind": _MAGIC_DECORATORS[name],
                        "summary": doc[0] if doc else "",
                    }
                )
    return sorted(found, key=lambda m: m["name"].lstrip("%"))


def cli_commands() -> list[dict[str, str]]:
    """Sub-commands of ``jupyter-agent-memory`` with their help text."""
    import argparse

    from .cli import build_parser

    parser = build_parser()
    commands = []
    for action in parser._actions:  # argparse keeps sub-parsers only here
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name in action.choices:
                commands.append(
                    {"command": f"jupyter-agent-memory {name}", "summary": helps.get(name, "")}
                )
    return commands


def rest_routes() -> list[dict[str, str]]:
    """The REST API routes served by the jupyter_server extension."""
    try:
        from .server import ROUTES
    except ImportError:
        return []
    return [
        {"methods": "/".join(methods), "path": path, "summary": summary}
        for methods, path, summary in ROUTES
    ]
