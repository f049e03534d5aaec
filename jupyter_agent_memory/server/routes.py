"""Every route of the REST API as plain data (no tornado, no jupyter_server).

The table is declared in the engine's :mod:`~jupyter_agent_memory.engine.catalog` (the
product manifest lists the API from there without importing the server); ``tests/test_server_*``
check that it matches the handlers that are actually registered.
"""

from __future__ import annotations

from ..engine.catalog import API_PREFIX, ROUTES

__all__ = ["API_PREFIX", "ROUTES"]
