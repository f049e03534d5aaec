"""The Streamable HTTP server's limits, against a real server process over real sockets:
sessions per client address and in total, idle sessions, requests whose headers or body never
complete (with and without a token), open sockets, and oversized bodies. Every refusal is an
HTTP status with a JSON-RPC error body."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import time
from urllib.parse import urlsplit

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_harness import TIMEOUT, child_env, http_server, initialize_request, text_of

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.mcp_server.limits import HttpLimits

pytestmark = pytest.mark.slow

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
ADVICE = (
    "close one (HTTP DELETE with its Mcp-Session-Id) or wait: a session with no request in "
    "flight for {idle} s is closed"
)
TOKEN = "limits-" + "9" * 20


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname and parts.port
    return parts.hostname, parts.port


def request(
    url: str,
    method: str,
    body: dict | None = None,
    source: str = "127.0.0.1",
    **headers: str,
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request from the loopback address ``source``: status, headers, body."""
    host, port = address(url)
    connection = http.client.HTTPConnection(host, port, timeout=TIMEOUT, source_address=(source, 0))
    try:
        payload = json.dumps(body).encode() if body is not None else None
        connection.request(method, "/mcp", body=payload, headers={**MCP_HEADERS, **headers})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def open_session(url: str, source: str = "127.0.0.1", **headers: str):
    return request(url, "POST", initialize_request(f"limits-{source}"), source, **headers)


@contextlib.contextmanager
def limited_server(tmp_path, *options: str, token: str | None = None):
    """A server for a new agent with ``options``, with ``token`` required when given."""
    agent = tmp_path / "agent"
    AgentMemory.open(agent)
    env = child_env(tmp_path, **({"JUPYTER_AGENT_MEMORY_MCP_TOKEN": token} if token else {}))
    with http_server(agent, tmp_path, *options, env=env) as server:
        yield server["url"]


def error_of(body: bytes) -> tuple[int, str]:
    answer = json.loads(body)
    assert answer["jsonrpc"] == "2.0" and answer["id"] is None
    return answer["error"]["code"], answer["error"]["message"]


def test_the_documented_defaults():
    limits = HttpLimits()
    assert (
        limits.max_sessions,
        limits.max_sessions_per_client,
        limits.session_idle_timeout,
        limits.request_timeout,
        limits.max_connections,
    ) == (128, 32, 300.0, 10.0, 512)
    with pytest.raises(ValueError, match="max_sessions must be a whole number of at least 1"):
        HttpLimits(max_sessions=0)
    with pytest.raises(ValueError, match="request_timeout must be a positive number"):
        HttpLimits(request_timeout=float("inf"))


def test_sessions_are_capped_per_client_address_and_in_total(tmp_path):
    options = ("--max-sessions", "3", "--max-sessions-per-client", "2")
    with limited_server(tmp_path, *options) as url:
        opened = time.monotonic()
        first = [open_session(url) for _ in range(2)]
        assert [status for status, _h, _b in first] == [200, 200]
        ids = [headers["mcp-session-id"] for _s, headers, _b in first]

        status, headers, body = open_session(url)
        assert status == 429
        assert error_of(body) == (
            -32603,
            "Too many open sessions for client 127.0.0.1: 2 of 2; " + ADVICE.format(idle=300),
        )
        assert headers["content-type"] == "application/json"
        # Until the older of the two idle sessions expires: 300 s after it was last seen.
        since = time.monotonic() - opened
        assert 300 - since - 1 <= int(headers["retry-after"]) <= 300

        # Another address still gets in, until the server holds its total.
        status, headers, _body = open_session(url, "127.0.0.2")
        assert status == 200
        other = headers["mcp-session-id"]
        status, headers, body = open_session(url, "127.0.0.3")
        assert status == 503
        assert error_of(body) == (
            -32603,
            "Too many open sessions: 3 of 3; " + ADVICE.format(idle=300),
        )
        assert int(headers["retry-after"]) >= 1

        # Closing a session makes room for its client again.
        version = {"mcp-protocol-version": "2025-06-18"}
        status, _h, _b = request(url, "DELETE", None, **{"mcp-session-id": ids[0]}, **version)
        assert status == 200
        status, _h, _b = open_session(url)
        assert status == 200

        # The sessions that were let in work.
        status, _h, _b = request(
            url,
            "POST",
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            "127.0.0.2",
            **{"mcp-session-id": other},
            **version,
        )
        assert status == 202
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        in_session = {"mcp-session-id": other, **version}
        status, _h, body = request(url, "POST", call, "127.0.0.2", **in_session)
        assert status == 200
        assert b'"name":"memory"' in body


def test_idle_sessions_expire_and_free_their_place(tmp_path):
    options = ("--session-idle-timeout", "1", "--max-sessions-per-client", "1")
    with limited_server(tmp_path, *options) as url:
        status, headers, _body = open_session(url)
        assert status == 200
        idle = headers["mcp-session-id"]
        status, headers, body = open_session(url)
        assert status == 429
        assert error_of(body)[1].endswith(ADVICE.format(idle=1))
        assert headers["retry-after"] == "1"
        time.sleep(1.6)
        status, _h, _b = open_session(url)
        assert status == 200
        status, _h, body = request(
            url,
            "POST",
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            **{"mcp-session-id": idle, "mcp-protocol-version": "2025-06-18"},
        )
        assert status == 404
        assert error_of(body)[1] == "Session not found"


def test_a_session_with_an_open_stream_outlives_both_timeouts(tmp_path):
    """A client that keeps its GET stream open is never idle, and a stream that stays open
    longer than the request timeout is not cut: only unfinished requests are."""
    agent = tmp_path / "agent"
    AgentMemory.open(agent)
    options = ("--session-idle-timeout", "1", "--request-timeout", "1")
    with http_server(agent, tmp_path, *options) as server:

        async def main():
            with anyio.fail_after(TIMEOUT):
                async with (
                    httpx2.AsyncClient(timeout=TIMEOUT) as client,
                    streamable_http_client(server["url"], http_client=client) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    await anyio.sleep(2.5)
                    result = await session.call_tool(
                        "memory", {"action": "append", "text": "still here"}
                    )
                    assert text_of(result).startswith("Journal entry added at ")

        anyio.run(main)
    assert "still here" in (agent / "memory" / "JOURNAL.jsonl").read_text()


def read_until_closed(sock: socket.socket) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and how long that took."""
    started = time.monotonic()
    sock.settimeout(TIMEOUT)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data, time.monotonic() - started


def parse_raw(data: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    return status, headers, body


@pytest.mark.parametrize("token", [None, TOKEN])
def test_requests_whose_headers_never_complete_are_cut_off(tmp_path, token):
    with limited_server(tmp_path, "--request-timeout", "1", token=token) as url:
        host, port = address(url)
        # Headers sent a byte at a time, never finished: the drip does not reset the clock.
        with socket.create_connection((host, port), timeout=TIMEOUT) as sock:
            started = time.monotonic()
            start = f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n"
            if token:
                start += f"Authorization: Bearer {token}\r\n"
            sock.sendall(start.encode())
            closed = False
            for byte in b"X-Slow: " + b"a" * 40:
                try:
                    sock.sendall(bytes([byte]))
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                    break
                time.sleep(0.1)
                if time.monotonic() - started > 3:
                    break
            data, _waited = read_until_closed(sock)
            assert time.monotonic() - started < 1 + 3, "held past the request timeout"
        status, headers, body = parse_raw(data)
        assert status == "HTTP/1.1 408 Request Timeout", (status, closed)
        assert headers["content-type"] == "application/json"
        assert headers["connection"] == "close"
        assert error_of(body) == (
            -32600,
            "Request not received in time: its line and headers must arrive within 1 s",
        )
        # A socket that sends nothing is closed too, without an answer.
        with socket.create_connection((host, port), timeout=TIMEOUT) as sock:
            data, waited = read_until_closed(sock)
        assert data == b""
        assert 0.5 < waited < 1 + 3
        # The server still serves.
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        assert open_session(url, **auth)[0] == 200


@pytest.mark.parametrize("token", [None, TOKEN])
def test_requests_whose_body_never_completes_are_answered_408(tmp_path, token):
    with limited_server(tmp_path, "--request-timeout", "1", token=token) as url:
        host, port = address(url)
        with socket.create_connection((host, port), timeout=TIMEOUT) as sock:
            head = (
                f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                "Content-Length: 200\r\n"
            )
            if token:
                head += f"Authorization: Bearer {token}\r\n"
            sock.sendall(head.encode() + b"\r\n" + b'{"jsonrpc": "2.0", ')
            data, waited = read_until_closed(sock)
        assert waited < 1 + 3
        status, headers, body = parse_raw(data)
        assert status == "HTTP/1.1 408 Request Timeout"
        assert headers["content-type"] == "application/json"
        assert error_of(body) == (
            -32600,
            "Request body not received in time: it must arrive within 1 s",
        )
    assert not (tmp_path / "agent" / "memory" / "JOURNAL.jsonl").exists()


def test_open_sockets_are_capped_and_bodies_too_large_refused(tmp_path):
    with limited_server(tmp_path, "--max-connections", "3") as url:
        host, port = address(url)
        held = [socket.create_connection((host, port), timeout=TIMEOUT) for _ in range(3)]
        try:
            time.sleep(0.3)  # let the server accept all three
            with socket.create_connection((host, port), timeout=TIMEOUT) as extra:
                data, _waited = read_until_closed(extra)
            status, headers, body = parse_raw(data)
            assert status == "HTTP/1.1 503 Service Unavailable"
            assert headers["connection"] == "close"
            assert error_of(body) == (
                -32603,
                "Too many open connections (3); try again when some have closed",
            )
            held.pop().close()
            time.sleep(0.3)
            too_big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "a" * 4194304}}
            status, _h, body = request(url, "POST", too_big)
            assert status == 413
            assert error_of(body) == (
                -32600,
                "Request body too large: at most 4194304 bytes",
            )
        finally:
            for sock in held:
                sock.close()
