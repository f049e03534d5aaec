"""The product manifest of the built-in ``guide`` template, computed on every call from the
installed version and the tables of :mod:`.catalog`, so it cannot drift from what users have."""

from __future__ import annotations

from typing import Any

from .catalog import COMMANDS, MAGICS, PROG, ROUTES

#: The product manifest format (as Cherry Studio's), which ``product_info`` requires.
SCHEMA_VERSION = 1


def package_manifest() -> dict[str, Any]:
    """The installed jupyter-agent-memory as a product manifest: ``{"schemaVersion": 1,
    "package": {"name", "version", ...}, "files", "tools", "magics", "cli", "rest"}``."""
    from importlib.metadata import PackageNotFoundError, version

    from ..__about__ import __version__

    try:
        installed = version("jupyter-agent-memory") or __version__
    except PackageNotFoundError:
        installed = __version__
    return {
        "schemaVersion": SCHEMA_VERSION,
        "package": {
            "name": "jupyter-agent-memory",
            "version": installed,
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
        "magics": [
            {"name": magic.spelled, "kind": magic.kind, "summary": magic.summary}
            for magic in sorted(MAGICS, key=lambda m: m.name)
        ],
        "cli": [{"command": f"{PROG} {cmd.name}", "summary": cmd.summary} for cmd in COMMANDS],
        "rest": [
            {"methods": "/".join(route.methods), "path": route.path, "summary": route.summary}
            for route in ROUTES
        ],
    }
