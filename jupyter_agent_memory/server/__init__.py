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

from .routes import API_PREFIX, ROUTES


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Point jupyter_server at this module (also usable as ``jpserver_extensions`` key)."""
    return [{"module": "jupyter_agent_memory.server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Register the REST handlers on a running ``ServerApp``."""
    from .handlers import setup_handlers

    setup_handlers(serverapp)

__all__ = ["API_PREFIX", "ROUTES"]
