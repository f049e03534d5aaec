"""MCP server: an agent folder as the memory of any Model Context Protocol client.

Run it with ``jupyter-agent-memory mcp --agent TARGET`` (stdio), or with ``--transport
streamable-http --port N`` (Streamable HTTP on 127.0.0.1). The server is named
``agent-memory`` and offers (see :mod:`.service` for the content):

- ``instructions``: the session context the prompt builder makes for the agent (bootstrap
  block when due, ``## Memories`` with SOUL.md, USER.md and FACT.md), built fresh for every
  session that connects;
- tools ``memory`` (exactly the engine's tool) and ``product_info`` when the agent's template
  ships a product manifest -- the reference's list -- plus ``memory_read`` with
  ``--read-tool``; every tool has a title and annotations;
- resources SOUL.md, USER.md, FACT.md (with its sha256), the latest journal entries and the
  session system prompt, with ``notifications/resources/updated`` for subscribers and
  ``notifications/tools/list_changed`` when ``product_info`` appears;
- a prompt, ``new-session``, whose message is a new session's system prompt.

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
functions below: importing it costs well over a second.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from .service import PROMPT_NAME, MemoryService

if TYPE_CHECKING:
    from mcp.server import Server

    from .. import AgentMemory

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

SERVER_NAME = "agent-memory"
INSTALL_HINT = 'pip install "jupyter-agent-memory[mcp]"'
# How often the agent folder is checked for changes while the server runs (see watch).
POLL_SECONDS = 0.5
# Requests that start a session: the handshake, and discovery for 2026-era clients.
SESSION_STARTS = ("initialize", "server/discover")

log = logging.getLogger(__name__)


def require_mcp() -> None:
    """Check that the MCP SDK can be imported; raise one actionable ``ImportError`` if not.

    The message names ``pip install "jupyter-agent-memory[mcp]"``. ``build_server`` and the
    ``serve_*`` functions call it first; a command line can call it before serving to report
    the missing extra without a traceback.
    """
    try:
        import mcp.server  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"The MCP server needs the 'mcp' package (version 2.3 or later): {INSTALL_HINT}"
        ) from exc


def _service(memory_or_service: AgentMemory | MemoryService) -> MemoryService:
    if isinstance(memory_or_service, MemoryService):
        return memory_or_service
    return MemoryService(memory_or_service)


def build_server(
    memory: AgentMemory | MemoryService, *, poll_seconds: float = POLL_SECONDS
) -> Server:
    """Build the ``agent-memory`` MCP server for an agent without running it.

    ``memory`` is an ``AgentMemory`` (default settings) or a :class:`MemoryService` (prompt
    tool name, budget, workspace, read tool). The result is a low-level ``mcp.server.Server``:
    run it on any transport, or connect to it in-process with ``mcp.Client(build_server(mem))``.
    While it runs, the agent folder is checked every ``poll_seconds`` for changes to notify.
    Raises ``ImportError`` naming the install command when ``mcp`` is missing.
    """
    require_mcp()
    import anyio
    import anyio.to_thread
    from mcp import types
    from mcp.server import Server
    from mcp.server.lowlevel.server import NotificationOptions
    from mcp.server.subscriptions import (
        InMemorySubscriptionBus,
        ListenHandler,
        ResourceUpdated,
        ToolsListChanged,
    )
    from mcp.shared.exceptions import MCPError
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    from ..__about__ import __version__

    service = _service(memory)
    bus = InMemorySubscriptionBus()
    # The instructions of the session being started by the request in flight (see track).
    starting: contextvars.ContextVar[str | None] = contextvars.ContextVar(
        "agent_memory_session_instructions", default=None
    )
    # Handshake-era connections that finished initialising, and the resource URIs each one
    # subscribed to. A connection removes itself when it closes (its exit stack).
    connections: dict[Any, Any] = {}
    subscriptions: dict[Any, set[str]] = {}

    async def off_loop(function: Any, *args: Any) -> Any:
        # File I/O and the journal lock never run on the event loop.
        return await anyio.to_thread.run_sync(function, *args)

    def remember(ctx: Any) -> Any:
        """The connection of a handshake-era request (None for a 2026-era one)."""
        if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None
        # The SDK gives handlers a fresh session object per request; the connection behind it
        # is what lives as long as the client (pinned: mcp>=2.3,<3).
        connection = getattr(ctx.session, "_connection", None)
        if connection is None or connection in connections:
            return connection
        connections[connection] = ctx.session

        def forget() -> None:
            connections.pop(connection, None)
            subscriptions.pop(connection, None)

        connection.exit_stack.callback(forget)
        return connection

    async def track(ctx: Any, call_next: Any) -> Any:
        if ctx.method in SESSION_STARTS:
            # A session starts: its instructions are built once, put on record (section 12
            # of the design), and served by the `instructions` property below.
            client = _client_info(ctx.params)
            text = await off_loop(service.start_session, client)
            token = starting.set(text)
            try:
                return await call_next(ctx)
            finally:
                starting.reset(token)
        result = await call_next(ctx)
        remember(ctx)  # after initialize: the protocol version is negotiated by then
        return result

    def tool_object(spec: dict[str, Any]) -> types.Tool:
        notes = spec["annotations"]
        return types.Tool(
            name=spec["name"],
            title=spec["title"],
            description=spec["description"],
            input_schema=spec["input_schema"],
            output_schema=spec.get("output_schema"),
            annotations=types.ToolAnnotations(
                title=notes["title"],
                read_only_hint=notes["readOnlyHint"],
                destructive_hint=notes["destructiveHint"],
                idempotent_hint=notes["idempotentHint"],
                open_world_hint=notes["openWorldHint"],
            ),
        )

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        specs = await off_loop(service.tools)
        return types.ListToolsResult(tools=[tool_object(spec) for spec in specs])

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text, is_error, structured = await off_loop(service.call, params.name, params.arguments)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=structured,
            is_error=is_error,
        )

    async def on_list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=spec.uri,
                    name=spec.name,
                    title=spec.title,
                    description=spec.description,
                    mime_type=spec.mime_type,
                )
                for spec in service.resources()
            ]
        )

    async def on_read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        from ..errors import MemoryToolError

        try:
            resource = await off_loop(service.read, str(params.uri))
        except MemoryToolError as exc:
            raise MCPError(code=exc.code, message=exc.message) from None
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=resource.uri,
                    mime_type=resource.mime_type,
                    text=resource.text,
                    _meta=resource.meta,  # the field's alias: the name the SDK's types declare
                )
            ]
        )

    async def on_subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        connection = remember(ctx)
        if connection is not None:
            subscriptions.setdefault(connection, set()).add(str(params.uri))
        return types.EmptyResult()

    async def on_unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        connection = remember(ctx)
        if connection is not None:
            subscriptions.get(connection, set()).discard(str(params.uri))
        return types.EmptyResult()

    async def on_list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=PROMPT_NAME,
                    title="New session with this agent's memory",
                    description=(
                        "The system prompt a new session starts with: the agent's memory "
                        "(SOUL.md, USER.md, FACT.md) and how to keep it up to date."
                    ),
                )
            ]
        )

    async def on_get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> Any:
        from ..errors import MemoryToolError

        if params.name != PROMPT_NAME:
            raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")
        try:
            prompt = await off_loop(service.prompt)
        except MemoryToolError as exc:
            raise MCPError(code=exc.code, message=exc.message) from None
        return types.GetPromptResult(
            description="System prompt for a new session with this agent",
            messages=[
                types.PromptMessage(
                    role="user", content=types.TextContent(type="text", text=prompt.text)
                )
            ],
        )

    async def notify(changes: Any) -> None:
        for uri in changes.resources:
            await bus.publish(ResourceUpdated(uri=uri))
        if changes.tools:
            await bus.publish(ToolsListChanged())
        for connection, session in list(connections.items()):
            try:
                for uri in changes.resources:
                    if uri in subscriptions.get(connection, ()):
                        await session.send_resource_updated(uri)
                if changes.tools:
                    await session.send_tool_list_changed()
            except Exception:  # a client that went away mid-send: notifications are advisory
                log.debug("dropped a notification for a closed connection", exc_info=True)
                connections.pop(connection, None)
                subscriptions.pop(connection, None)

    async def watch() -> None:
        # A timer, not a busy loop: every poll_seconds one AgentMemory.file_stats() call (an
        # lstat per entry of the agent folder and memory/, nothing read), compared by the
        # engine's stat keys (paths.file_key, as the prompt cache). Files are read only when
        # a client asks for them.
        before = await off_loop(service.snapshot)
        tools = await off_loop(service.tool_names)
        while True:
            await anyio.sleep(poll_seconds)
            try:
                after = await off_loop(service.snapshot)
                changes = service.changes(before, after)
                before = after
                if changes.tools:
                    now = await off_loop(service.tool_names)
                    changed_tools, tools = now != tools, now
                    changes = type(changes)(changes.resources, changed_tools)
                if changes:
                    await notify(changes)
            except Exception:  # the watcher must outlive any one bad poll
                log.warning("checking the agent folder for changes failed", exc_info=True)

    @contextlib.asynccontextmanager
    async def lifespan(server: Any) -> AsyncIterator[dict[str, Any]]:
        # Entered once per run: per process on stdio, once for all HTTP sessions.
        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            try:
                yield {}
            finally:
                group.cancel_scope.cancel()

    class MemoryServer(Server):
        # The session context is built when a client initialises, not when the server
        # starts: an HTTP server outlives many sessions, and each must see the memory as it
        # is then. The base class stores `instructions` in __init__; the setter ignores it.
        @property
        def instructions(self) -> str:
            text = starting.get()
            return text if text is not None else service.instructions()

        @instructions.setter
        def instructions(self, value: str | None) -> None:
            pass

        def create_initialization_options(
            self, notification_options: Any = None, *args: Any, **kw: Any
        ) -> Any:
            options = notification_options or NotificationOptions(tools_changed=True)
            return super().create_initialization_options(options, *args, **kw)

    server = MemoryServer(
        SERVER_NAME,
        version=__version__,
        title="Agent memory",
        lifespan=lifespan,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=on_list_resources,
        on_read_resource=on_read_resource,
        on_subscribe_resource=on_subscribe,
        on_unsubscribe_resource=on_unsubscribe,
        on_subscriptions_listen=ListenHandler(bus),
        on_list_prompts=on_list_prompts,
        on_get_prompt=on_get_prompt,
    )
    server.middleware.append(track)

    # Requests the stdio reader could not hand to the SDK (see mcp_stdio) get their answer
    # here, under the id the client is waiting on.
    from .stdio import PARKED_METHOD, ParkedRequests

    class ParkedParams(types.RequestParams):
        token: int

    parked = ParkedRequests()

    async def on_parked(ctx: Any, params: ParkedParams) -> Any:
        request = parked.take(params.token) or {}
        sent = request.get("params")
        body: dict[str, Any] = sent if isinstance(sent, dict) else {}
        if request.get("method") == "tools/call" and isinstance(body.get("name"), str):
            arguments = body.get("arguments")
            if arguments is None or isinstance(arguments, dict):
                text, is_error, structured = await off_loop(service.call, body["name"], arguments)
                result = types.CallToolResult(
                    content=[types.TextContent(type="text", text=text)],
                    structured_content=structured,
                    is_error=is_error,
                ).model_dump(by_alias=True, mode="json", exclude_none=True)
                # Shaped by hand (the SDK only shapes its own methods): a tools/call answer.
                result.pop("resultType", None)
                return result
        raise MCPError(
            code=-32602,
            message="Invalid request: its text holds an unpaired surrogate, which is not "
            "valid Unicode",
        )

    server.add_request_handler(PARKED_METHOD, ParkedParams, on_parked)
    # serve_stdio hands the same instance to the stdin reader; the SDK's Server declares no
    # such attribute, so the checker is told it is added here on purpose.
    server.parked_requests = parked  # type: ignore[attr-defined]
    return server


def _client_info(params: Any) -> dict[str, Any] | None:
    """The client's ``{"name", "version"}``: ``clientInfo`` of an ``initialize``, or the
    2026-era ``_meta`` entry of the same name."""
    from mcp_types import CLIENT_INFO_META_KEY

    if not isinstance(params, Mapping):
        return None
    meta = params.get("_meta")
    candidates = (
        params.get("clientInfo"),
        meta.get(CLIENT_INFO_META_KEY) if isinstance(meta, Mapping) else None,
    )
    for info in candidates:
        if isinstance(info, Mapping):
            return dict(info)
    return None


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
    """
    service = _service(memory)
    server = build_server(service)
    import anyio
    from mcp.server.stdio import stdio_server

    _quiet_stdout_logging()
    print(startup_line(service, "stdio", problem), file=sys.stderr, flush=True)

    from .stdio import surrogate_safe_stdin

    stdin = surrogate_safe_stdin(server.parked_requests)  # type: ignore[attr-defined]  # see build_server

    async def main() -> None:
        # The SDK declares an anyio AsyncFile but only iterates its lines (`async for`), which
        # this async generator of lines does too.
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
            await server.run(read_stream, write_stream, server.create_initialization_options())

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
) -> None:
    """Serve the agent over Streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted.

    Binds ``host`` (127.0.0.1 by default; port 0 picks a free one, named in the start-up
    line). Requests whose ``Host`` or ``Origin`` header is not this server's (or listed in
    ``allowed_hosts`` / ``allowed_origins``) are refused (DNS rebinding); with ``token`` every
    request needs ``Authorization: Bearer <token>``. All clients share one engine and its
    locks.
    """
    service = _service(memory)
    server = build_server(service)
    from .http import run_http

    _quiet_stdout_logging()
    run_http(
        server,
        host=host,
        port=port,
        token=token,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        announce=lambda url: print(
            startup_line(service, f"streamable-http at {url}", problem), file=sys.stderr, flush=True
        ),
    )
