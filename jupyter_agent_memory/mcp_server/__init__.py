"""The MCP server: an agent folder as the memory of any Model Context Protocol client.

- :mod:`.service`: what the server offers (tools, resources, the prompt, instructions), in
  plain Python over the engine, with no ``mcp`` import;
- :mod:`.server`: the protocol handlers and the stdio and Streamable HTTP entry points;
- :mod:`.stdio`: a stdin reader that answers requests the SDK's reader would drop;
- :mod:`.http`: Host/Origin checks, the bearer token and the HTTP server's limits.

The ``mcp`` package (the ``[mcp]`` extra) is imported only when a server is built or served.
"""

from __future__ import annotations

from .server import build_server, require_mcp, serve_http, serve_stdio
from .service import MemoryService

__all__ = ["MemoryService", "build_server", "require_mcp", "serve_http", "serve_stdio"]
