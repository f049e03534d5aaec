"""Streamable HTTP for the MCP server: the app, its guards, and the uvicorn loop.

The SDK's ``streamable_http_app()`` serves the protocol; around it this module adds what a
local memory server needs:

- DNS-rebinding protection: the SDK checks ``Host`` and ``Origin`` against this server's own
  address (plus what the user allows); a web page on another origin is refused with 403, a
  foreign ``Host`` with 421.
- an optional bearer token (constant-time comparison; 401 with ``WWW-Authenticate: Bearer``);
- one socket bound before serving, so port 0 works and the start-up line names the real port.

Imported only by ``mcp_server.serve_http`` (it imports the MCP SDK and uvicorn).
"""

from __future__ import annotations

import hmac
import ipaddress
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "BearerTokenGuard",
    "build_http_app",
    "exposure_warning",
    "run_http",
    "security_settings",
]

MCP_PATH = "/mcp"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def _url_host(host: str) -> str:
    """``host`` as it appears in a URL or a Host header (IPv6 in brackets)."""
    try:
        return f"[{host}]" if ipaddress.ip_address(host).version == 6 else host
    except ValueError:
        return host


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def security_settings(
    host: str, allowed_hosts: Sequence[str] = (), allowed_origins: Sequence[str] = ()
) -> Any:
    """The SDK's Host/Origin checks for a server bound to ``host``.

    Allowed: the loopback names when bound to a loopback address, the bound host itself,
    and whatever the user adds (``host:port`` or ``host:*``; origins as
    ``scheme://host[:port]`` or ``scheme://host:*``). A request without ``Origin`` (any
    non-browser client) passes the origin check.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    names = list(LOOPBACK_NAMES) if _is_loopback(host) else []
    bound = _url_host(host)
    if bound not in names:
        names.append(bound)
    hosts = [f"{name}:*" for name in names] + list(allowed_hosts)
    origins = [f"http://{name}:*" for name in names] + list(allowed_origins)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def exposure_warning(host: str, token: str | None) -> str | None:
    """A warning for the start-up output when ``host`` is reachable from other machines
    and no token is required; None otherwise."""
    if _is_loopback(host) or token:
        return None
    return (
        f"agent-memory: warning: {host} is reachable from other machines and no bearer token "
        "is set; anyone who can reach this port can read and change this agent's memory "
        "(set --token or $JUPYTER_AGENT_MEMORY_MCP_TOKEN)"
    )


class BearerTokenGuard:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                body = b"Missing or wrong bearer token"
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b'Bearer realm="agent-memory"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def build_http_app(
    server: Any,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
) -> Any:
    """The ASGI app serving ``server`` at ``/mcp`` with the guards above."""
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        transport_security=security_settings(host, allowed_hosts, allowed_origins),
    )
    return BearerTokenGuard(app, token) if token else app


def run_http(
    server: Any,
    *,
    host: str,
    port: int,
    token: str | None,
    allowed_hosts: Sequence[str],
    allowed_origins: Sequence[str],
    announce: Callable[[str], None],
) -> None:
    """Bind ``host:port``, call ``announce(url)``, serve until SIGINT/SIGTERM."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.set_inheritable(True)
    bound_port = sock.getsockname()[1]
    app = build_http_app(
        server,
        host=host,
        token=token,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
    )
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    announce(f"http://{_url_host(host)}:{bound_port}{MCP_PATH}")
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
