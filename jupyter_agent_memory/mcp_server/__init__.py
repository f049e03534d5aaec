"""The MCP server: an agent folder as the memory of any Model Context Protocol client.

- :mod:`.service`: what the server offers (tools, resources, the prompt, instructions), in
  plain Python over the engine, with no ``mcp`` import;
- :mod:`.handlers`: the protocol handlers, module-level functions over the service (the only
  module that imports the SDK at the top);
- :mod:`.server`: ``build_server`` and the stdio and Streamable HTTP entry points;
- :mod:`.stdio`: a stdin reader that answers requests the SDK's reader would drop, and the
  ``initialize`` answer given before the SDK has loaded;
- :mod:`.http`: Host/Origin checks, the bearer token and the HTTP server's limits
  (:mod:`.limits` holds their numbers).

The ``mcp`` package (the ``[mcp]`` extra) is imported only when a server is built or served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import build_server, require_mcp, serve_http, serve_stdio
    from .service import MemoryService

__all__ = ["MemoryService", "build_server", "require_mcp", "serve_http", "serve_stdio"]


def __getattr__(name: str) -> Any:
    # Loaded on first use, so a command line that only reads the HTTP limits' defaults
    # (.limits) loads nothing else of the server.
    if name == "MemoryService":
        from .service import MemoryService

        return MemoryService
    if name in __all__:
        from . import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
