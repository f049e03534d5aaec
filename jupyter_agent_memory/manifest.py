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
    """Sub-commands of ``jupyter-agent-memory`` with their help text, in registration order.

    Read from ``cli.py``'s source (the engine never imports a surface): the sub-commands are
    the ``add_parser`` calls on the collection ``build_parser`` creates first, followed into
    the module's helper functions it hands that collection to.
    """
    try:
        tree = ast.parse(Path(__file__).with_name("cli.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return []
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    build = functions.get("build_parser")
    if build is None:
        return []
    root = next(
        (
            node.targets[0].id
            for node in _in_order(build)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and _method(node.value) == "add_subparsers"
            and isinstance(node.targets[0], ast.Name)
        ),
        None,
    )
    commands: list[dict[str, str]] = []
    if root is not None:
        _collect_commands(build, root, functions, commands, depth=0)
    return commands


def _in_order(node: ast.AST) -> list[ast.AST]:
    """Every node below ``node``, in source order."""
    found = [n for n in ast.walk(node) if hasattr(n, "lineno")]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _method(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _collect_commands(
    function: ast.FunctionDef,
    collection: str,
    functions: dict[str, ast.FunctionDef],
    commands: list[dict[str, str]],
    depth: int,
) -> None:
    for node in _in_order(function):
        if not isinstance(node, ast.Call):
            continue
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        if (
            _method(node) == "add_parser"
            and isinstance(receiver, ast.Name)
            and receiver.id == collection
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            helps = [k.value for k in node.keywords if k.arg == "help"]
            summary = helps[0].value if helps and isinstance(helps[0], ast.Constant) else ""
            commands.append(
                {"command": f"jupyter-agent-memory {node.args[0].value}", "summary": summary}
            )
        elif isinstance(node.func, ast.Name) and node.func.id in functions and depth < 4:
            helper = functions[node.func.id]
            params = [a.arg for a in helper.args.args]
            for position, argument in enumerate(node.args[: len(params)]):
                if isinstance(argument, ast.Name) and argument.id == collection:
                    _collect_commands(helper, params[position], functions, commands, depth + 1)


def rest_routes() -> list[dict[str, str]]:
    """The REST API routes served by the jupyter_server extension.

    ``server/routes.py`` is plain data (no tornado, no jupyter_server) kept for documentation
    and this manifest; it is run as a file so the engine never imports the server package.
    """
    import runpy

    try:
        routes = runpy.run_path(str(Path(__file__).parent / "server" / "routes.py"))["ROUTES"]
    except (OSError, KeyError, SyntaxError):
        return []
    return [
        {"methods": "/".join(methods), "path": path, "summary": summary}
        for methods, path, summary in routes
    ]
