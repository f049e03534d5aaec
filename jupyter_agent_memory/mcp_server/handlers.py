"""The protocol handlers of the MCP server (imported after ``require_mcp``): each is ``async
(ctx, params) -> result`` with a :class:`Run` as ``ctx.lifespan_context``, on public SDK names
only. No list is paginated: a cursor is answered ``-32602``."""

from __future__ import annotations

import contextlib
import functools
import logging
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp import MCPError, ServerSession, types
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp_types import CLIENT_INFO_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from ..errors import INVALID_PARAMS, MemoryToolError
from .service import PROMPT_NAME, SERVER_INFO, Changes, MemoryService
from .stdio import PARKED_METHOD, ParkedRequests

__all__ = ["SESSION_STARTS", "Run", "ServerState", "assemble"]

SESSION_STARTS = ("initialize", "server/discover")  # the handshake; 2026-era discovery
NO_CURSOR = (
    "Invalid cursor: this server answers every list in one page and never hands out a cursor"
)

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(eq=False)
class Peer:
    """A handshake-era connection: the session of its latest request, its subscriptions."""

    session: ServerSession
    uris: set[str] = field(default_factory=set)


@dataclass(eq=False)
class ServerState:
    """What every run of one server shares: the content, the bus, the stdio helpers."""

    service: MemoryService
    poll_seconds: float
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    parked: ParkedRequests = field(default_factory=ParkedRequests)
    # What a stdio handshake answered before the SDK loaded, for the replayed ``initialize``.
    answered_start: str | None = None
    runs: weakref.WeakSet[Run] = field(default_factory=weakref.WeakSet)

    def forget_session(self, session_id: str) -> None:
        """Drop a Streamable HTTP session that ended (deleted, expired or refused)."""
        for run in list(self.runs):
            run.peers.pop(session_id, None)


@dataclass(eq=False)
class Run:
    """One entry of the server's lifespan and the handshake-era connections it serves."""

    state: ServerState
    # By Streamable HTTP session id; "" is the one connection of a stdio or in-process run.
    peers: dict[str, Peer] = field(default_factory=dict)


Context = ServerRequestContext[Run, Any]
Page = types.PaginatedRequestParams | None


def assemble(service: MemoryService, poll_seconds: float) -> tuple[Server[Run], ServerState]:
    """The low-level server for ``service`` and the state its runs share."""
    state = ServerState(service, poll_seconds)
    server: Server[Run] = Server(
        SERVER_INFO["name"], version=SERVER_INFO["version"], title=SERVER_INFO["title"],
        lifespan=functools.partial(lifespan, state),
        on_list_tools=list_tools, on_call_tool=call_tool,
        on_list_resources=list_resources, on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe, on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=ListenHandler(state.bus),
        on_list_prompts=list_prompts, on_get_prompt=get_prompt,
    )
    server.middleware.append(track_sessions)
    server.add_request_handler(PARKED_METHOD, ParkedParams, answer_parked)
    return server, state


async def off_loop(function: Callable[..., T], *args: Any) -> T:
    """Run ``function`` in a worker thread (file I/O and the journal lock never block the event
    loop); an engine error becomes the protocol error of the same code."""
    try:
        return await anyio.to_thread.run_sync(function, *args)
    except MemoryToolError as exc:
        raise MCPError(code=exc.code, message=exc.message) from None


def check_no_cursor(params: Page) -> None:
    """Refuse a cursor: none was ever handed out, so any cursor is invalid."""
    if params is not None and params.cursor is not None:
        raise MCPError(code=INVALID_PARAMS, message=NO_CURSOR)


def client_info(params: Any) -> dict[str, Any] | None:
    """The client's ``{"name", "version"}``: ``clientInfo`` of an ``initialize``, or the
    2026-era ``_meta`` entry of the same name."""
    if not isinstance(params, Mapping):
        return None
    meta = params.get("_meta")
    in_meta = meta.get(CLIENT_INFO_META_KEY) if isinstance(meta, Mapping) else None
    infos = (params.get("clientInfo"), in_meta)
    return next((dict(info) for info in infos if isinstance(info, Mapping)), None)


async def track_sessions(ctx: Context, call_next: Any) -> Any:
    """Middleware: record session starts the SDK accepted, answered with the session's
    instructions and ``tools`` marked ``listChanged`` (``product_info`` can appear while a
    session runs); remember handshake-era connections (once the protocol version is known)."""
    result = await call_next(ctx)
    if ctx.method not in SESSION_STARTS:
        remember(ctx)
        return result
    state = ctx.lifespan_context.state
    text, state.answered_start = state.answered_start, None
    if text is None:
        text = await off_loop(state.service.start_session, client_info(ctx.params))
    if isinstance(result, Mapping):
        answer = dict(result)
    else:  # a model: what the runner would have put on the wire
        answer = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    answer["instructions"] = text
    capabilities = answer.get("capabilities")
    if isinstance(capabilities, Mapping) and isinstance(capabilities.get("tools"), Mapping):
        tools = {**capabilities["tools"], "listChanged": True}
        answer["capabilities"] = {**capabilities, "tools": tools}
    return answer


def remember(ctx: Context) -> Peer | None:
    """The handshake-era connection ``ctx`` came on, remembered so it hears about changes;
    None for a 2026-era request, or the HTTP request that opens a session (no id yet)."""
    if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None
    headers = getattr(ctx.request, "headers", None)
    key = "" if headers is None else headers.get(MCP_SESSION_ID_HEADER)
    if not isinstance(key, str):
        return None
    peer = ctx.lifespan_context.peers.setdefault(key, Peer(ctx.session))
    peer.session = ctx.session
    return peer


async def list_tools(ctx: Context, params: Page) -> types.ListToolsResult:
    """``tools/list``: the tools offered now (the service's specs, in the SDK's types)."""
    check_no_cursor(params)
    specs = await off_loop(ctx.lifespan_context.state.service.tools)
    return types.ListToolsResult(tools=[types.Tool.model_validate(spec) for spec in specs])


async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
    """``tools/call``: the engine's answer; every failure is an ``isError`` result."""
    service = ctx.lifespan_context.state.service
    text, is_error, structured = await off_loop(service.call, params.name, params.arguments)
    content = types.TextContent(type="text", text=text)
    return types.CallToolResult(content=[content], structured_content=structured, is_error=is_error)


async def list_resources(ctx: Context, params: Page) -> types.ListResourcesResult:
    """``resources/list``: SOUL.md, USER.md, FACT.md, the journal and the prompt."""
    check_no_cursor(params)
    specs = ctx.lifespan_context.state.service.resources()
    return types.ListResourcesResult(resources=[types.Resource(**asdict(s)) for s in specs])


async def list_resource_templates(ctx: Context, params: Page) -> types.ListResourceTemplatesResult:
    """``resources/templates/list``: every resource has a fixed URI, so none."""
    check_no_cursor(params)
    return types.ListResourceTemplatesResult(resource_templates=[])


async def read_resource(
    ctx: Context, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    """``resources/read``: the file as it is now, with its metadata in ``_meta``."""
    resource = await off_loop(ctx.lifespan_context.state.service.read, str(params.uri))
    # _meta: the field's alias, the name the SDK's types declare.
    content = types.TextResourceContents(
        uri=resource.uri, mime_type=resource.mime_type, text=resource.text, _meta=resource.meta
    )
    return types.ReadResourceResult(contents=[content])


async def subscribe(ctx: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
    """``resources/subscribe`` (handshake era): this connection hears about ``uri``."""
    peer = remember(ctx)
    if peer is not None:
        peer.uris.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx: Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    """``resources/unsubscribe`` (handshake era)."""
    peer = remember(ctx)
    if peer is not None:
        peer.uris.discard(str(params.uri))
    return types.EmptyResult()


async def list_prompts(ctx: Context, params: Page) -> types.ListPromptsResult:
    """``prompts/list``: the one prompt, ``new-session``."""
    check_no_cursor(params)
    prompt = types.Prompt(
        name=PROMPT_NAME, title="New session with this agent's memory",
        description="The system prompt a new session starts with: the agent's memory "
        "(SOUL.md, USER.md, FACT.md) and how to keep it up to date.",
    )
    return types.ListPromptsResult(prompts=[prompt])


async def get_prompt(ctx: Context, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    """``prompts/get``: a new session's system prompt (a preview: nothing is recorded)."""
    if params.name != PROMPT_NAME:
        raise MCPError(code=INVALID_PARAMS, message=f"Unknown prompt: {params.name}")
    prompt = await off_loop(ctx.lifespan_context.state.service.prompt)
    text = types.TextContent(type="text", text=prompt.text)
    return types.GetPromptResult(
        description="System prompt for a new session with this agent",
        messages=[types.PromptMessage(role="user", content=text)],
    )


class ParkedParams(types.RequestParams):
    """The stand-in request of :mod:`.stdio`: which parked request to answer."""

    token: int


async def answer_parked(ctx: Context, params: ParkedParams) -> Any:
    """Answer a request with an unpaired surrogate (see :mod:`.stdio`): a tool call goes to the
    engine, which names the field it refuses; anything else is ``-32602``."""
    request = ctx.lifespan_context.state.parked.take(params.token) or {}
    sent = request.get("params")
    body: dict[str, Any] = sent if isinstance(sent, dict) else {}
    name, arguments = body.get("name"), body.get("arguments")
    if (
        request.get("method") == "tools/call"
        and isinstance(name, str)
        and (arguments is None or isinstance(arguments, dict))
    ):
        answer = await call_tool(ctx, types.CallToolRequestParams(name=name, arguments=arguments))
        result = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        # Shaped by hand (the SDK only shapes its own methods): a tools/call answer.
        result.pop("resultType", None)
        return result
    raise MCPError(
        code=INVALID_PARAMS,
        message="Invalid request: its text holds an unpaired surrogate, which is not valid Unicode",
    )


async def notify(run: Run, changes: Changes) -> None:
    """Tell listeners (2026 era) and subscribed connections (handshake era) what changed."""
    for uri in changes.resources:
        await run.state.bus.publish(ResourceUpdated(uri=uri))
    if changes.tools:
        await run.state.bus.publish(ToolsListChanged())
    for key, peer in list(run.peers.items()):
        try:
            for uri in changes.resources:
                if uri in peer.uris:
                    await peer.session.send_resource_updated(uri)
            if changes.tools:
                await peer.session.send_tool_list_changed()
        except Exception:  # a client that went away mid-send: notifications are advisory
            log.debug("dropped a notification for a closed connection", exc_info=True)
            run.peers.pop(key, None)


@contextlib.asynccontextmanager
async def lifespan(state: ServerState, server: Server[Run]) -> AsyncIterator[Run]:
    """One run of the server (per process on stdio, once for all HTTP sessions); while it lasts
    the agent folder is polled (stat keys, nothing read) every ``poll_seconds`` for changes."""
    run, service = Run(state), state.service
    state.runs.add(run)

    async def watch(before: dict[str, Any], tools: list[str]) -> None:
        while True:
            await anyio.sleep(state.poll_seconds)
            try:
                after = await off_loop(service.snapshot)
                changes = service.changes(before, after)
                before = after
                if changes.tools:
                    now = await off_loop(service.tool_names)
                    changes = Changes(changes.resources, now != tools)
                    tools = now
                if changes:
                    await notify(run, changes)
            except Exception:  # the watcher must outlive any one bad poll
                log.warning("checking the agent folder for changes failed", exc_info=True)

    # The baseline is taken before any request is served, so no client's change is in it.
    before = await off_loop(service.snapshot)
    tools = await off_loop(service.tool_names)
    async with anyio.create_task_group() as group:
        group.start_soon(watch, before, tools)
        try:
            yield run
        finally:
            group.cancel_scope.cancel()
