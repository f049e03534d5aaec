"""The product manifest of the built-in ``guide`` template, computed from this package.

It is generated on every call from the installed version and the declared tables of
:mod:`.manifest_catalog` (magics, CLI commands, REST routes), which tests check against the real
magics, argument parser and server handlers, so it cannot drift from what the user actually
has. Nothing here imports IPython, argparse parsers, tornado or mcp.
"""

from __future__ import annotations

from typing import Any

from .catalog import COMMANDS, MAGICS, PROG, ROUTES

#: The product manifest format (``schemaVersion`` 1, versioned by ``package.version``, as
#: Cherry Studio's), which ``product_info`` requires of every manifest.
SCHEMA_VERSION = 1


def package_manifest() -> dict[str, Any]:
    """The installed jupyter-agent-memory as a product manifest.

    ``{"schemaVersion": 1, "package": {"name", "version", ...}, "files", "tools", "magics",
    "cli", "rest"}``: ``package.version`` is the installed version, so ``product_info``'s
    ``manifestVersion`` can be compared with its ``runtimeVersion``.
    """
    from ..__about__ import __version__

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
    """Every magic of the package: name as typed, kind and the docstring's first paragraph."""
    return [
        {"name": magic.spelled, "kind": magic.kind, "summary": magic.summary}
        for magic in sorted(MAGICS, key=lambda m: m.name)
    ]


def cli_commands() -> list[dict[str, str]]:
    """Sub-commands of ``jupyter-agent-memory`` with their help text, in ``--help`` order."""
    return [
        {"command": f"{PROG} {command.name}", "summary": command.summary} for command in COMMANDS
    ]


def rest_routes() -> list[dict[str, str]]:
    """The REST API routes served by the jupyter_server extension, in registration order."""
    return [
        {"methods": "/".join(route.methods), "path": route.path, "summary": route.summary}
        for route in ROUTES
    ]
