"""jupyter_server extension: a REST API over the agent-memory engine, used by the sidebar.

Importing this package is light on purpose (no tornado, no jupyter_server): the handlers are
imported only when a server loads the extension. ``ROUTES`` lists the API as plain data.
"""

from __future__ import annotations

from typing import Any

from .routes import API_PREFIX, ROUTES


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Point jupyter_server at this module (also usable as ``jpserver_extensions`` key)."""
    return [{"module": "jupyter_agent_memory.server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Register the REST handlers on a running ``ServerApp``."""
    from .handlers import setup_handlers

    setup_handlers(serverapp)

__all__ = ["API_PREFIX", "ROUTES"]
