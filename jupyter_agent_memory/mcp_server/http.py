"""Streamable HTTP for the MCP server: the SDK's app behind Host/Origin checks (421/403), an
optional bearer token (401) and the :class:`HttpLimits`, served by uvicorn. Imported only by
``serve_http`` (it imports the MCP SDK and uvicorn)."""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import math
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from uvicorn.protocols.http.h11_impl import H11Protocol

from .limits import HttpLimits

__all__ = [
    "BearerTokenGuard", "ConnectionGuard", "GuardedProtocol", "SessionLimits",
    "exposure_warning", "run_http", "security_settings",
]

MCP_PATH = "/mcp"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: The SDK's own cap on a request body (4 MiB), applied before the SDK sees the request.
MAX_BODY_BYTES = 4 * 1024 * 1024
SESSION_HEADER = b"mcp-session-id"
PROTOCOL_HEADER = b"mcp-protocol-version"
INVALID_REQUEST = -32600
LIMIT_REACHED = -32603  # the code the SDK answers its own session cap with
_CLOSE = ((b"connection", b"close"),)


def _url_host(host: str) -> str:
    """``host`` as it appears in a URL or a Host header (IPv6 in brackets)."""
    try:
        return f"[{host}]" if ipaddress.ip_address(host).version == 6 else host
    except ValueError:
        return host


def _is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def security_settings(
    host: str, allowed_hosts: Sequence[str] = (), allowed_origins: Sequence[str] = ()
) -> TransportSecuritySettings:
    """The SDK's Host/Origin checks for a server bound to ``host``: the loopback names (when
    it is one), ``host``, and what the user allows (``host:port``, ``host:*``; origins
    ``scheme://host[:port]``, ``scheme://host:*``). A request without ``Origin`` passes."""
    loopback = LOOPBACK_NAMES if _is_loopback(host) else ()
    names = list(dict.fromkeys((*loopback, _url_host(host))))
    hosts = [f"{name}:*" for name in names] + list(allowed_hosts)
    origins = [f"http://{name}:*" for name in names] + list(allowed_origins)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def exposure_warning(host: str, token: str | None) -> str | None:
    """The start-up warning when ``host`` is reachable from other machines without a token."""
    if _is_loopback(host) or token:
        return None
    return (
        f"agent-memory: warning: {host} is reachable from other machines and no bearer token "
        "is set; anyone who can reach this port can read and change this agent's memory "
        "(set --token or $JUPYTER_AGENT_MEMORY_MCP_TOKEN)"
    )


def jsonrpc_error(code: int, message: str) -> bytes:
    """A JSON-RPC error object that answers no particular request (``id`` null)."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return json.dumps(body).encode()


async def respond(
    send: Any, status: int, body: bytes, content_type: str = "application/json",
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Send a whole ASGI response."""
    length = str(len(body)).encode()
    head = [(b"content-type", content_type.encode()), (b"content-length", length), *headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


def _address(value: Any) -> tuple[str, int] | None:
    """``(host, port)`` from a socket's peer name or an ASGI scope's ``client``."""
    if isinstance(value, (tuple, list)) and len(value) >= 2:
        return (str(value[0]), int(value[1]))
    return None


class BearerTokenGuard:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                challenge = ((b"www-authenticate", b'Bearer realm="agent-memory"'),)
                body = b"Missing or wrong bearer token"
                await respond(send, 401, body, "text/plain; charset=utf-8", challenge)
                return
        await self.app(scope, receive, send)


class GuardedProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with the :class:`ConnectionGuard`'s clock and socket cap."""

    guard: ConnectionGuard
    peer: tuple[str, int] | None
    busy = 0
    heard = False  # bytes came since the clock was last armed
    timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        super().connection_made(transport)
        self.peer = _address(transport.get_extra_info("peername"))
        cap = self.guard.limits.max_connections
        if len(self.guard.connections) >= cap:
            message = f"Too many open connections ({cap}); try again when some have closed"
            self.refuse(503, "Service Unavailable", LIMIT_REACHED, message)
            return
        if self.peer is not None:
            self.guard.connections[self.peer] = self
        self.arm()

    def data_received(self, data: bytes) -> None:
        if not self.busy:
            self.heard = True
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        if self.peer is not None and self.guard.connections.get(self.peer) is self:
            del self.guard.connections[self.peer]
        super().connection_lost(exc)

    def arm(self) -> None:
        """Start the clock for the next request's line and headers."""
        self.disarm()
        self.heard = False
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(self.guard.limits.request_timeout, self.expire)

    def disarm(self) -> None:
        """Stop the clock."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def expire(self) -> None:
        """The clock ran out: close the connection (408 when a request had begun)."""
        self.timer = None
        if self.busy or self.transport.is_closing():
            return
        if not self.heard:
            self.transport.close()
            return
        message = (
            "Request not received in time: its line and headers must arrive within "
            f"{self.guard.limits.request_timeout:g} s"
        )
        self.refuse(408, "Request Timeout", INVALID_REQUEST, message)

    def refuse(self, status: int, reason: str, code: int, message: str) -> None:
        """Answer with a JSON-RPC error below ASGI, and close the connection."""
        body = jsonrpc_error(code, message)
        head = (
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        self.transport.write(head.encode("ascii") + body)
        self.transport.close()


class ConnectionGuard:
    """ASGI middleware for the socket cap and the request deadlines: a request's line and
    headers within ``request_timeout`` (the clock of :class:`GuardedProtocol`), then its whole
    body (413 past :data:`MAX_BODY_BYTES`, 408 late), read before the app sees the request."""

    def __init__(self, app: Any, limits: HttpLimits) -> None:
        self.app = app
        self.limits = limits
        # By peer address, which is unique while the connection is open.
        self.connections: dict[tuple[str, int], GuardedProtocol] = {}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        peer = _address(scope.get("client"))
        connection = self.connections.get(peer) if peer else None
        if connection is not None:
            connection.busy += 1
            connection.disarm()
        try:
            await self._serve(scope, receive, send)
        finally:
            if connection is not None:  # the one counted, even if its address was reused since
                connection.busy -= 1
                if not connection.busy and not connection.transport.is_closing():
                    connection.arm()

    async def _serve(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        timeout = self.limits.request_timeout
        body = bytearray()
        trailing: list[dict[str, Any]] = []
        with anyio.move_on_after(timeout) as deadline:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    trailing.append(message)
                    break
                body += message.get("body", b"")
                if len(body) > MAX_BODY_BYTES:
                    text = f"Request body too large: at most {MAX_BODY_BYTES} bytes"
                    await respond(send, 413, jsonrpc_error(INVALID_REQUEST, text))
                    return
                if not message.get("more_body", False):
                    break
        if deadline.cancelled_caught:
            text = f"Request body not received in time: it must arrive within {timeout:g} s"
            await respond(send, 408, jsonrpc_error(INVALID_REQUEST, text), headers=_CLOSE)
            return
        replay = [{"type": "http.request", "body": bytes(body), "more_body": False}, *trailing]

        async def replayed() -> Any:
            return replay.pop(0) if replay else await receive()

        await self.app(scope, replayed, send)


@dataclass(eq=False)
class _Session:
    client: str
    last_seen: float
    in_flight: int = 0


class SessionLimits:
    """ASGI middleware: cap handshake-era sessions per client address (429) and in total
    (503), with ``Retry-After``. A session counts from the SDK's answer carrying its id until a
    DELETE, a 404 for its id, or ``session_idle_timeout`` without a request in flight (the
    SDK's own rule); ``on_end`` hears each session id that ended."""

    def __init__(self, app: Any, limits: HttpLimits, on_end: Callable[[str], None]) -> None:
        self.app = app
        self.limits = limits
        self.on_end = on_end
        self.sessions: dict[str, _Session] = {}
        self.opening: set[_Session] = set()  # requests that may open a session
        # Later protocol versions open no session.
        self.handshake = {version.encode() for version in HANDSHAKE_PROTOCOL_VERSIONS}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or [])
        session_id, version = headers.get(SESSION_HEADER), headers.get(PROTOCOL_HEADER)
        peer = _address(scope.get("client"))
        client = peer[0] if peer else ""  # the client's identity for the session caps
        if scope["type"] == "http" and session_id is not None:
            await self._in_session(session_id.decode("latin-1"), client, scope, receive, send)
        elif scope.get("method") == "POST" and (version is None or version in self.handshake):
            await self._opening(client, scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def _end(self, session_id: str) -> None:
        self.sessions.pop(session_id, None)
        self.on_end(session_id)

    async def _opening(self, client: str, scope: dict[str, Any], receive: Any, send: Any) -> None:
        now, limits = anyio.current_time(), self.limits
        idle = limits.session_idle_timeout
        for session_id, session in list(self.sessions.items()):
            if not session.in_flight and now - session.last_seen >= idle:
                self._end(session_id)
        # A request that opens a session counts from its start (in_flight, so never idle).
        everyone = [*self.sessions.values(), *self.opening]
        caps = (
            (429, f" for client {client}", limits.max_sessions_per_client, client),
            (503, "", limits.max_sessions, None),
        )
        for status, whose, cap, only in caps:
            counted = [s for s in everyone if only is None or s.client == only]
            if len(counted) >= cap:
                text = (
                    f"Too many open sessions{whose}: {len(counted)} of {cap}; close one (HTTP "
                    "DELETE with its Mcp-Session-Id) or wait: a session with no request in "
                    f"flight for {idle:g} s is closed"
                )
                # Seconds until the first idle session among those counted expires.
                waits = [idle - (now - s.last_seen) for s in counted if not s.in_flight]
                retry = str(max(1, math.ceil(min(waits, default=idle)))).encode()
                body = jsonrpc_error(LIMIT_REACHED, text)
                await respond(send, status, body, headers=((b"retry-after", retry),))
                return
        request = _Session(client, now, 1)
        self.opening.add(request)

        async def watch(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                value = dict(message.get("headers") or []).get(SESSION_HEADER)
                if value is not None:
                    request.last_seen = anyio.current_time()
                    self.sessions[value.decode("latin-1")] = request
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            self.opening.discard(request)
            request.in_flight -= 1
            request.last_seen = anyio.current_time()

    async def _in_session(
        self, session_id: str, client: str, scope: dict[str, Any], receive: Any, send: Any
    ) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.in_flight += 1
        statuses: list[int] = []

        async def watch(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            now = anyio.current_time()
            if session is not None:  # this object, even if the id was ended and reused since
                session.in_flight -= 1
                session.last_seen = now
            status = statuses[0] if statuses else None
            deleted = scope.get("method") == "DELETE" and status is not None and status < 300
            if status == 404 or deleted:
                self._end(session_id)
            elif session is None and status is not None and status < 400:
                # Counted as expired a moment before the SDK closed it: it is open after all.
                self.sessions[session_id] = _Session(client, now)


def run_http(
    server: Any, *, host: str, port: int, token: str | None, allowed_hosts: Sequence[str],
    allowed_origins: Sequence[str], announce: Callable[[str], None],
    on_session_end: Callable[[str], None], limits: HttpLimits | None = None,
) -> None:
    """Bind ``host:port``, call ``announce(url)``, serve ``server`` at ``/mcp`` until
    SIGINT/SIGTERM: through the deadlines, the bearer token, the session caps, the SDK's app."""
    limits = limits or HttpLimits()
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.set_inheritable(True)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, host=host,
        transport_security=security_settings(host, allowed_hosts, allowed_origins),
        session_idle_timeout=limits.session_idle_timeout, max_sessions=limits.max_sessions,
        max_request_body_size=MAX_BODY_BYTES,
    )
    app = SessionLimits(app, limits, on_session_end)
    if token:
        app = BearerTokenGuard(app, token)
    guard = ConnectionGuard(app, limits)
    # The peer address is the client's identity for the session cap: never take it from
    # X-Forwarded-For (proxy_headers), which any local process could set.
    config = uvicorn.Config(
        guard, log_level="warning", lifespan="on", access_log=False, proxy_headers=False,
        http=type("GuardedHTTPProtocol", (GuardedProtocol,), {"guard": guard}), ws="none",
    )
    announce(f"http://{_url_host(host)}:{sock.getsockname()[1]}{MCP_PATH}")
    warning = exposure_warning(host, token)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again for the handler
    # that was there before; this one makes that second delivery a normal exit (status 0).
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None) if main_thread else None
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
        sock.close()
