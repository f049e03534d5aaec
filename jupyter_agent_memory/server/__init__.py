"""jupyter_server extension: a REST API over the agent-memory engine, used by the sidebar.

Importing this package is light on purpose (no tornado, no jupyter_server): ``jupyter server
extension list`` and the product-manifest generator import it, and ``%load_ext`` must stay fast.
The handlers are imported only when a server loads the extension.

``ROUTES`` is plain data describing every route, so documentation and the product manifest can
list the API without importing the server stack. ``tests/test_server_*`` check that it matches the
handlers that are actually registered.
"""

from __future__ import annotations

from typing import Any

#: URL prefix (below the server's base URL) of every route.
API_PREFIX = "/agent-memory/api"

#: ``(methods, path pattern, description)`` for every route, in registration order. Path
#: patterns use ``{id}`` for an agent id and ``{sha}`` for a FACT.md version (sha256 or prefix).
ROUTES: list[tuple[tuple[str, ...], str, str]] = [
    (
        ("GET", "POST"),
        f"{API_PREFIX}/agents",
        "List agents and templates; create an agent, optionally provisioned from a template.",
    ),
    (
        ("GET", "PUT"),
        f"{API_PREFIX}/agents/{{id}}/facts",
        "Read FACT.md with its sha256; replace it with compare-and-swap (409 on conflict).",
    ),
    (
        ("GET", "POST"),
        f"{API_PREFIX}/agents/{{id}}/journal",
        "Search the journal (query, tag, limit, since, until), newest first; append an entry.",
    ),
    (
        ("GET",),
        f"{API_PREFIX}/agents/{{id}}/prompt",
        "Build the system prompt the agent would get, with per-section sizes.",
    ),
    (
        ("GET",),
        f"{API_PREFIX}/agents/{{id}}/history",
        "List previous FACT.md versions, newest first.",
    ),
    (
        ("GET",),
        f"{API_PREFIX}/agents/{{id}}/history/{{sha}}",
        "Read one previous FACT.md version by sha256 or unique prefix.",
    ),
]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Point jupyter_server at this module (also usable as ``jpserver_extensions`` key)."""
    return [{"module": "jupyter_agent_memory.server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Register the REST handlers on a running ``ServerApp``."""
    from .handlers import setup_handlers

    setup_handlers(serverapp)

__all__ = ["API_PREFIX", "ROUTES"]
