"""The MCP server's entry points, over stdio or Streamable HTTP. Only protocol goes to stdout;
one start-up line and logs go to stderr. The ``mcp`` package is imported only inside the
functions below: over stdio it loads in a thread while ``initialize`` is answered."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from typing import TYPE_CHECKING

from .service import SERVER_INFO, SERVER_NAME, MemoryService
from .stdio import SkipReply, early_reply, initialize_request, surrogate_safe_stdin

if TYPE_CHECKING:
    from mcp.server import Server

    from .. import AgentMemory
    from .limits import HttpLimits

__all__ = [
    "POLL_SECONDS", "SERVER_NAME", "MemoryService", "build_server", "require_mcp", "serve_http",
    "serve_stdio",
]

INSTALL_HINT = 'pip install "jupyter-agent-memory[mcp]"'
MISSING_SDK = f"The MCP server needs the 'mcp' package (version 2.3 or later): {INSTALL_HINT}"
POLL_SECONDS = 0.5  # how often the agent folder is checked for changes

log = logging.getLogger(__name__)


def require_mcp() -> None:
    """Check that the MCP SDK is installed, without importing it (that takes most of a
    second); raise one ``ImportError`` naming ``pip install "jupyter-agent-memory[mcp]"``."""
    import importlib.util

    with contextlib.suppress(ImportError, ValueError):
        if all(importlib.util.find_spec(name) for name in ("mcp", "mcp_types")):
            return
    raise ImportError(MISSING_SDK)


def _service(memory: AgentMemory | MemoryService) -> MemoryService:
    return memory if isinstance(memory, MemoryService) else MemoryService(memory)


def build_server(
    memory: AgentMemory | MemoryService, *, poll_seconds: float = POLL_SECONDS
) -> Server:
    """The low-level ``mcp.server.Server`` for an ``AgentMemory`` (default settings) or a
    :class:`MemoryService`, for any transport or ``mcp.Client(build_server(mem))``; it checks
    the folder for changes every ``poll_seconds``. ``ImportError`` when ``mcp`` is missing."""
    require_mcp()
    from .handlers import assemble

    return assemble(_service(memory), poll_seconds)[0]


def _announce(service: MemoryService, transport: str, problem: str | None) -> None:
    """Write the one start-up line to stderr: folder, transport, tools (and ``problem``)."""
    if not logging.getLogger().handlers:
        # stdout carries the protocol, so make sure nothing logs there by default.
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    line = (
        f"{SERVER_NAME}: serving agent folder {service.memory.path} over {transport}; "
        f"tools: {', '.join(service.tool_names())}"
    )
    if problem:
        line += f"; every call will report: {problem}"
    print(line, file=sys.stderr, flush=True)


def serve_stdio(memory: AgentMemory | MemoryService, problem: str | None = None) -> None:
    """Serve the agent over stdio until the client closes the connection; ``problem`` (the
    engine's refusal every call reports) is named in the start-up line. ``ImportError`` naming
    the install command when ``mcp`` is missing."""
    from concurrent.futures import ThreadPoolExecutor
    from importlib import import_module

    service = _service(memory)
    require_mcp()
    with ThreadPoolExecutor(1, thread_name_prefix="agent-memory-sdk-loader") as pool:
        # The handlers import the SDK, its stdio transport included.
        loading = pool.submit(import_module, f"{__package__}.handlers")
        _announce(service, "stdio", problem)
        # A private duplicate of fd 0, so closing it never closes sys.stdin.
        source = os.fdopen(os.dup(0), encoding="utf-8", errors="replace", newline="\n")
        first = source.readline()
        request = initialize_request(first)
        sent = None
        if request is not None:
            try:
                instructions = service.start_session(request[1]["clientInfo"])
            except Exception:  # a bug, not a refusal: the SDK answers instead
                log.warning("answering initialize early failed", exc_info=True)
            else:
                sent = early_reply(*request, SERVER_INFO, instructions)
                data = (json.dumps(sent) + "\n").encode("utf-8")
                while data:
                    data = data[os.write(1, data) :]
    try:
        loading.result()
    except BaseException as exc:
        raise ImportError(MISSING_SDK) from exc
    import anyio
    from mcp.server.stdio import stdio_server

    from .handlers import assemble

    server, state = assemble(service, POLL_SECONDS)
    if sent is not None:
        # The session is on record already; the replayed initialize reuses its text.
        state.answered_start = sent["result"]["instructions"]
    stdin = surrogate_safe_stdin(state.parked, source, first)

    async def main() -> None:
        # The SDK declares an anyio AsyncFile but only iterates its lines, as this generator does.
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
            out = write_stream if sent is None else SkipReply(write_stream, sent)
            await server.run(read_stream, out, server.create_initialization_options())

    anyio.run(main)


def serve_http(
    memory: AgentMemory | MemoryService, *, host: str = "127.0.0.1", port: int = 8765,
    token: str | None = None, allowed_hosts: tuple[str, ...] = (),
    allowed_origins: tuple[str, ...] = (), problem: str | None = None,
    limits: HttpLimits | None = None,
) -> None:
    """Serve the agent over Streamable HTTP at ``http://HOST:PORT/mcp`` (port 0: a free one)
    until interrupted. Hosts and origins other than this server's or those allowed are refused;
    with ``token`` every request needs ``Authorization: Bearer <token>``; ``limits`` (default
    ``HttpLimits()``) caps sessions, idle time, slow requests and sockets."""
    service = _service(memory)
    require_mcp()
    from .handlers import assemble
    from .http import run_http

    server, state = assemble(service, POLL_SECONDS)
    run_http(
        server, host=host, port=port, token=token, allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins, limits=limits, on_session_end=state.forget_session,
        announce=lambda url: _announce(service, f"streamable-http at {url}", problem),
    )
