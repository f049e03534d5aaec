"""The MCP server: an agent folder as the memory of any Model Context Protocol client. The
``mcp`` package (the ``[mcp]`` extra) is imported only when a server is built or served."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import build_server, require_mcp, serve_http, serve_stdio
    from .service import MemoryService

__all__ = ["MemoryService", "build_server", "require_mcp", "serve_http", "serve_stdio"]


def __getattr__(name: str) -> Any:
    # Loaded on first use: a command line that reads only .limits loads nothing else.
    if name in __all__:
        from . import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
