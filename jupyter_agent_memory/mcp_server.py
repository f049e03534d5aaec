"""MCP server: an agent folder as the memory of any Model Context Protocol client.

Run it with ``jupyter-agent-memory mcp --agent TARGET`` (stdio transport). The server is named
``agent-memory`` and offers:

- ``memory`` -- exactly the engine's tool (``MEMORY_TOOL``: same description, same JSON schema,
  same result texts);
- ``product_info`` -- only when the agent was provisioned from a template that ships a product
  manifest (design section 6).

Arguments go to the engine unchanged; this layer adds no validation of its own. Every failure is
an ``isError`` tool result whose text is ``Error: MCP error <code>: <message>`` (the formatting
shared with ``functions.dispatch``); an unexpected exception becomes code ``-32603`` with its
message. Nothing but protocol is written to stdout: logs go to stderr.

Clients that prefix tool names with the server name (Claude Code, Cherry Studio style agents)
see the tool as ``mcp__agent-memory__memory``; build prompts for them with the default
``PromptBuilder()`` tool name.

The ``mcp`` package (``pip install "jupyter-agent-memory[mcp]"``) is imported only inside the
functions below: importing it costs well over a second.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

from . import functions

if TYPE_CHECKING:
    from mcp.server import Server

    from . import AgentMemory

__all__ = ["SERVER_NAME", "build_server", "require_mcp", "serve_stdio"]

SERVER_NAME = "agent-memory"
INSTALL_HINT = 'pip install "jupyter-agent-memory[mcp]"'

log = logging.getLogger(__name__)


def require_mcp() -> None:
    """Check that the MCP SDK can be imported; raise one actionable ``ImportError`` if not.

    The message names ``pip install "jupyter-agent-memory[mcp]"``. ``build_server`` and
    ``serve_stdio`` call it first; a command line can call it before serving to report the
    missing extra without a traceback.
    """
    try:
        import mcp.server  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"The MCP server needs the 'mcp' package (version 2.3 or later): {INSTALL_HINT}"
        ) from exc


def build_server(mem: AgentMemory) -> Server:
    """Build the ``agent-memory`` MCP server object for ``mem`` without running it.

    The result is a low-level ``mcp.server.Server``: run it on any transport, or connect to it
    in-process with ``mcp.Client(build_server(mem))`` (fast tests). The tool list is computed on
    every ``tools/list`` request, so ``product_info`` appears as soon as the agent has a
    manifest. Raises ``ImportError`` naming the install command when ``mcp`` is missing.
    """
    require_mcp()
    import anyio.to_thread
    from mcp import types
    from mcp.server import Server

    from .__about__ import __version__

    def tool_object(spec: dict[str, Any]) -> types.Tool:
        return types.Tool(
            name=spec["name"], description=spec["description"], input_schema=spec["input_schema"]
        )

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        specs = await anyio.to_thread.run_sync(functions.available_tools, mem)
        return types.ListToolsResult(tools=[tool_object(spec) for spec in specs])

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # A call without arguments is the same as an empty object; anything else goes to the
        # engine as the client sent it. File I/O and the journal lock run off the event loop.
        arguments = params.arguments if params.arguments is not None else {}
        text, is_error = await anyio.to_thread.run_sync(
            functions.run_tool, mem, params.name, arguments
        )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=is_error
        )

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=(
            "Long-term memory for this agent: FACT.md for durable knowledge (the memory tool's "
            "update action) and an append-only journal (append and search)."
        ),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


def serve_stdio(mem: AgentMemory) -> None:
    """Serve ``mem`` over stdio until the client closes the connection.

    Blocks. Only protocol messages go to stdout; log records go to stderr. Raises
    ``ImportError`` naming ``pip install "jupyter-agent-memory[mcp]"`` when ``mcp`` is missing.
    """
    server = build_server(mem)
    import anyio
    from mcp.server.stdio import stdio_server

    if not logging.getLogger().handlers:
        # stdout carries the protocol, so make sure nothing logs there by default.
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    log.info("serving agent folder %s over stdio", mem.path)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
