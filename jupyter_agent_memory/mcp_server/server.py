"""MCP server: an agent folder as the memory of any Model Context Protocol client.

Run it with ``jupyter-agent-memory mcp --agent TARGET`` (stdio), or with ``--transport
streamable-http --port N`` (Streamable HTTP on 127.0.0.1). The server is named
``agent-memory`` and offers (see :mod:`.service` for the content):

- ``instructions``: the session context the prompt builder makes for the agent (bootstrap
  block when due, ``## Memories`` with SOUL.md, USER.md and FACT.md), built fresh for every
  session that connects;
- tools ``memory`` (exactly the engine's tool) and ``product_info`` when the agent's template
  ships a product manifest (Cherry Studio's list), plus ``memory_read`` with
  ``--read-tool``; every tool has a title and annotations;
- resources SOUL.md, USER.md, FACT.md (with its sha256), the latest journal entries and the
  session system prompt, with ``notifications/resources/updated`` for subscribers and
  ``notifications/tools/list_changed`` when ``product_info`` appears;
- a prompt, ``new-session``, whose message is a new session's system prompt; no resource
  templates (``resources/templates/list`` answers an empty list) and no pagination (a cursor
  is refused with ``-32602``).

The protocol handlers are the module-level functions of :mod:`.handlers`; this module builds
and serves the server, and imports none of the SDK until then.

Tool arguments go to the engine unchanged; this layer adds no validation of its own. Every
failure is an ``isError`` tool result whose text is ``Error: MCP error <code>: <message>``; an
unknown tool is ``-32601`` ``Unknown tool: <name>``. Nothing but protocol is written to stdout;
one start-up line and logs go to stderr.

Every session start (``initialize``, or ``server/discover`` for a 2026-era client) is put on
record in the agent's sessions log with the exact prompt it was given
(``PromptBuilder.start_session``); previews (the prompt resource and the prompt) are not.

Over stdio, a request whose JSON holds an unpaired surrogate is answered too (the SDK's reader
would drop it; see :mod:`.stdio`). Both protocol eras of the SDK are served: handshake-era
clients (``initialize``, every released host) get notifications on their connection, 2026-era
clients on ``subscriptions/listen``.

The ``mcp`` package (``pip install "jupyter-agent-memory[mcp]"``) is imported only inside the
functions below: importing it takes most of the server's start-up, so over stdio it loads in
a thread while ``initialize`` is answered (see :mod:`.stdio`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, TextIO

from .service import SERVER_INFO, SERVER_NAME, MemoryService

if TYPE_CHECKING:
    from mcp.server import Server

    from .. import AgentMemory
    from .limits import HttpLimits

__all__ = [
    "POLL_SECONDS",
    "SERVER_NAME",
    "MemoryService",
    "build_server",
    "require_mcp",
    "serve_http",
    "serve_stdio",
    "startup_line",
]

INSTALL_HINT = 'pip install "jupyter-agent-memory[mcp]"'
MISSING_SDK = f"The MCP server needs the 'mcp' package (version 2.3 or later): {INSTALL_HINT}"
# How often the agent folder is checked for changes while the server runs.
POLL_SECONDS = 0.5

log = logging.getLogger(__name__)


def require_mcp() -> None:
    """Check that the MCP SDK is installed; raise one actionable ``ImportError`` if not.

    The message names ``pip install "jupyter-agent-memory[mcp]"``. Looks the packages up
    without importing them (that costs most of a second). ``build_server`` and the
    ``serve_*`` functions call it first; a command line can call it before serving to report
    the missing extra without a traceback.
    """
    import importlib.util

    try:
        found = all(importlib.util.find_spec(name) for name in ("mcp", "mcp_types"))
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ImportError(MISSING_SDK)


def _service(memory_or_service: AgentMemory | MemoryService) -> MemoryService:
    if isinstance(memory_or_service, MemoryService):
        return memory_or_service
    return MemoryService(memory_or_service)


def build_server(
    memory: AgentMemory | MemoryService, *, poll_seconds: float = POLL_SECONDS
) -> Server:
    """Build the ``agent-memory`` MCP server for an agent without running it.

    ``memory`` is an ``AgentMemory`` (default settings) or a :class:`MemoryService` (prompt
    tool name, budget, workspace, read tool). The result is a low-level ``mcp.server.Server``
    whose handlers are the functions of :mod:`.handlers`: run it on any transport, or connect
    to it in-process with ``mcp.Client(build_server(mem))``. While it runs, the agent folder
    is checked every ``poll_seconds`` for changes to notify. Raises ``ImportError`` naming
    the install command when ``mcp`` is missing.
    """
    require_mcp()
    from .handlers import assemble

    server, _state = assemble(_service(memory), poll_seconds)
    return server


def startup_line(service: MemoryService, transport: str, problem: str | None = None) -> str:
    """The one line the server writes to stderr on start: folder, transport, tools."""
    line = (
        f"{SERVER_NAME}: serving agent folder {service.memory.path} over {transport}; "
        f"tools: {', '.join(service.tool_names())}"
    )
    if problem:
        line += f"; every call will report: {problem}"
    return line


def _quiet_stdout_logging() -> None:
    if not logging.getLogger().handlers:
        # stdout carries the protocol, so make sure nothing logs there by default.
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING)


def serve_stdio(memory: AgentMemory | MemoryService, problem: str | None = None) -> None:
    """Serve the agent over stdio until the client closes the connection.

    Blocks. Only protocol messages go to stdout; the start-up line (``problem``, when given,
    is the engine's refusal every call will report) and logs go to stderr. Raises
    ``ImportError`` naming ``pip install "jupyter-agent-memory[mcp]"`` when ``mcp`` is missing.

    The SDK loads in a thread while the client's first line is awaited; a plain
    ``initialize`` is answered without waiting for it (see :mod:`.stdio`).
    """
    from .stdio import early_reply, initialize_request, open_stdin

    service = _service(memory)
    require_mcp()
    loader = _SdkLoader()
    loader.start()
    _quiet_stdout_logging()
    print(startup_line(service, "stdio", problem), file=sys.stderr, flush=True)
    source = open_stdin()
    first = source.readline()
    request = initialize_request(first)
    sent = None
    if request is not None:
        request_id, params = request
        try:
            instructions = service.start_session(params["clientInfo"])
        except Exception:  # a bug, not a refusal (start_session handles those): the SDK answers
            log.warning("answering initialize early failed", exc_info=True)
        else:
            sent = early_reply(request_id, params, SERVER_INFO, instructions)
            _write_stdout(json.dumps(sent) + "\n")
    loader.wait()
    _run_stdio(service, source, first, sent)


class _SdkLoader(threading.Thread):
    """Imports the SDK and the handlers in the background; :meth:`wait` re-raises a failure
    as the install hint."""

    def __init__(self) -> None:
        super().__init__(name="agent-memory-sdk-loader", daemon=True)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            import mcp.server.stdio  # noqa: F401

            from . import handlers  # noqa: F401
        except BaseException as exc:  # reported by wait(), in the main thread
            self.error = exc

    def wait(self) -> None:
        self.join()
        if self.error is not None:
            raise ImportError(MISSING_SDK) from self.error


def _write_stdout(text: str) -> None:
    data = text.encode("utf-8")
    while data:
        data = data[os.write(1, data) :]


def _run_stdio(
    service: MemoryService, source: TextIO, first: str, sent: dict[str, Any] | None
) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    from .handlers import assemble
    from .stdio import SkipReply, surrogate_safe_stdin

    server, state = assemble(service, POLL_SECONDS)
    if sent is not None:
        # The session is on record already; the replayed initialize reuses its text.
        state.answered_start = sent["result"]["instructions"]
    stdin = surrogate_safe_stdin(state.parked, source, first)

    async def main() -> None:
        # The SDK declares an anyio AsyncFile but only iterates its lines (`async for`), which
        # this async generator of lines does too.
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
            out = write_stream if sent is None else SkipReply(write_stream, sent)
            await server.run(read_stream, out, server.create_initialization_options())

    anyio.run(main)


def serve_http(
    memory: AgentMemory | MemoryService,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allowed_hosts: tuple[str, ...] = (),
    allowed_origins: tuple[str, ...] = (),
    problem: str | None = None,
    limits: HttpLimits | None = None,
) -> None:
    """Serve the agent over Streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted.

    Binds ``host`` (127.0.0.1 by default; port 0 picks a free one, named in the start-up
    line). Requests whose ``Host`` or ``Origin`` header is not this server's (or listed in
    ``allowed_hosts`` / ``allowed_origins``) are refused (DNS rebinding); with ``token`` every
    request needs ``Authorization: Bearer <token>``. ``limits`` caps sessions, idle time,
    slow requests and open sockets (:class:`~.http.HttpLimits`; its defaults when None).
    All clients share one engine and its locks.
    """
    service = _service(memory)
    require_mcp()
    from .handlers import assemble
    from .http import run_http

    server, state = assemble(service, POLL_SECONDS)
    _quiet_stdout_logging()
    run_http(
        server,
        host=host,
        port=port,
        token=token,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        limits=limits,
        on_session_end=state.forget_session,
        announce=lambda url: print(
            startup_line(service, f"streamable-http at {url}", problem), file=sys.stderr, flush=True
        ),
    )
