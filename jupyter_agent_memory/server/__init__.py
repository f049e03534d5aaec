"""jupyter_server extension: a REST API over the agent-memory engine, used by the sidebar.

Importing this package is light on purpose (no tornado, no jupyter_server): the handlers are
imported only when a server loads the extension. ``ROUTES`` lists the API as plain data.
"""

from __future__ import annotations

from typing import Any

# The package's entry point, also here so this module works as a ``jpserver_extensions`` key.
from .. import _jupyter_server_extension_points as _jupyter_server_extension_points
from .routes import API_PREFIX, ROUTES


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Register the REST handlers on a running ``ServerApp``."""
    from .handlers import setup_handlers

    setup_handlers(serverapp)

__all__ = ["API_PREFIX", "ROUTES"]
