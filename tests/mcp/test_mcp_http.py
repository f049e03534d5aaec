"""The MCP server over Streamable HTTP (a real server process on 127.0.0.1, the official Python
client): every action and error, sessions that see each other's writes, many clients on one
engine, DNS-rebinding protection (Host/Origin) and the bearer token."""

from __future__ import annotations

import json
import re
import signal

import anyio
import httpx2
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_harness import (
    TIMEOUT,
    TS,
    child_env,
    host_prompt,
    http_server,
    initialize_request,
    text_of,
)
from test_mcp_server import exercise_plain_agent

from jupyter_agent_memory import AgentMemory

INITIALIZE = initialize_request("raw-http-test")
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def over_http(url: str, body, headers: dict[str, str] | None = None):
    with anyio.fail_after(TIMEOUT):
        async with (
            httpx2.AsyncClient(headers=headers or {}, timeout=TIMEOUT) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.server_info.name == "agent-memory"
            return await body(session, init)


def raw_post(url: str, **headers: str) -> httpx2.Response:
    with httpx2.Client(timeout=TIMEOUT) as http:
        return http.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **headers})


@pytest.mark.slow
def test_http_every_action_error_and_a_clean_stop(tmp_path):
    agent = tmp_path / "agents" / "plain"
    AgentMemory.open(agent)
    with http_server(agent, tmp_path, "--workspace", str(tmp_path)) as server:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", server["url"])
        assert server["line"] == (
            f"agent-memory: serving agent folder {agent} over streamable-http at "
            f"{server['url']}; tools: memory"
        )

        async def body(session, init):
            assert init.capabilities.tools.list_changed is True
            await exercise_plain_agent(session, agent)

        anyio.run(over_http, server["url"], body)
        proc = server["process"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=TIMEOUT) == 0


@pytest.mark.slow
def test_http_sessions_see_what_earlier_sessions_learned(tmp_path):
    agent = tmp_path / "agent"
    mem = AgentMemory.open(agent)
    with http_server(agent, tmp_path, "--workspace", str(tmp_path)) as server:

        async def learn(session, init):
            assert "<facts>" not in init.instructions
            result = await session.call_tool(
                "memory", {"action": "update", "content": "- The user's name is Ada.\n"}
            )
            assert text_of(result) == "Memory updated."

        async def recall(session, init):
            assert init.instructions == host_prompt(mem, tmp_path).context
            assert "<facts>\n- The user's name is Ada.\n</facts>" in init.instructions
            (content,) = (
                await session.read_resource("agent-memory://agent/memory/FACT.md")
            ).contents
            assert content.text == "- The user's name is Ada.\n"

        anyio.run(over_http, server["url"], learn)
        anyio.run(over_http, server["url"], recall)


@pytest.mark.slow
def test_many_http_clients_and_two_servers_share_one_engine(tmp_path):
    agent = tmp_path / "agent"
    AgentMemory.open(agent)
    clients, appends = 6, 10

    async def writer(url: str, name: str) -> list[str]:
        async def body(session, init):
            texts = []
            for i in range(appends):
                result = await session.call_tool(
                    "memory", {"action": "append", "text": f"{name}-{i}", "tags": [name]}
                )
                assert not result.is_error, text_of(result)
                assert re.fullmatch(rf"Journal entry added at {TS}\.", text_of(result))
                texts.append(f"{name}-{i}")
            return texts

        return await over_http(url, body)

    with (
        http_server(agent, tmp_path) as first,
        http_server(agent, tmp_path) as second,
    ):
        written: list[str] = []

        async def main():
            async def one(url, name):
                written.extend(await writer(url, name))

            async with anyio.create_task_group() as group:
                for n in range(clients):
                    group.start_soon(one, (first, second)[n % 2]["url"], f"c{n}")

        anyio.run(main)
    lines = (agent / "memory" / "JOURNAL.jsonl").read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line) for line in lines]
    assert len(entries) == clients * appends
    assert sorted(e["text"] for e in entries) == sorted(written)
    for n in range(clients):  # each client's own appends stay in order
        own = [e["text"] for e in entries if e["tags"] == [f"c{n}"]]
        assert own == [f"c{n}-{i}" for i in range(appends)]


@pytest.mark.slow
def test_foreign_origins_and_hosts_are_refused(tmp_path):
    agent = tmp_path / "agent"
    AgentMemory.open(agent)
    extra = "http://app.example:3000"
    with http_server(agent, tmp_path, "--allow-origin", extra) as server:
        url = server["url"]
        port = url.split(":")[2].split("/")[0]
        refused = raw_post(url, Origin="http://evil.example")
        assert (refused.status_code, refused.text) == (403, "Invalid Origin header")
        refused = raw_post(url, Origin=f"http://evil.example:{port}")
        assert refused.status_code == 403
        rebound = raw_post(url, Host=f"evil.example:{port}")
        assert (rebound.status_code, rebound.text) == (421, "Invalid Host header")
        for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}", extra):
            accepted = raw_post(url, Origin=origin)
            assert accepted.status_code == 200, (origin, accepted.text)
        plain = raw_post(url)  # no Origin: a non-browser client
        assert plain.status_code == 200
    assert not (agent / "memory" / "JOURNAL.jsonl").exists()


@pytest.mark.parametrize("how", ["flag", "environment"])
@pytest.mark.slow
def test_the_bearer_token_is_required(tmp_path, how):
    agent = tmp_path / "agent"
    AgentMemory.open(agent)
    token = "s3cret-token"
    options = ("--token", token) if how == "flag" else ()
    env = child_env(
        tmp_path, **({"JUPYTER_AGENT_MEMORY_MCP_TOKEN": token} if how != "flag" else {})
    )
    with http_server(agent, tmp_path, *options, env=env) as server:
        url = server["url"]
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
            refused = raw_post(url, **headers)
            assert refused.status_code == 401, headers
            assert refused.headers["www-authenticate"] == 'Bearer realm="agent-memory"'
            assert refused.text == "Missing or wrong bearer token"
        # A foreign origin with the right token is still refused by the origin check.
        foreign = raw_post(url, Authorization=f"Bearer {token}", Origin="http://evil.example")
        assert foreign.status_code == 403

        async def body(session, init):
            result = await session.call_tool("memory", {"action": "append", "text": "authorised"})
            assert re.fullmatch(rf"Journal entry added at {TS}\.", text_of(result))

        anyio.run(over_http, url, body, {"Authorization": f"Bearer {token}"})
    assert "authorised" in (agent / "memory" / "JOURNAL.jsonl").read_text()


@pytest.mark.slow
def test_http_serves_2026_clients_too(tmp_path):
    agent = tmp_path / "agent"
    AgentMemory.open(agent).update_facts("- The user is Ada.\n")
    with http_server(agent, tmp_path) as server:

        async def main():
            with anyio.fail_after(TIMEOUT):
                async with Client(streamable_http_client(server["url"]), mode="auto") as client:
                    assert client.protocol_version == "2026-07-28"
                    assert "<facts>\n- The user is Ada.\n</facts>" in client.instructions
                    result = await client.call_tool("memory", {"action": "search"})
                    assert text_of(result) == "No journal entries found."

        anyio.run(main)


def test_guards_for_other_addresses():
    from jupyter_agent_memory.mcp_server.http import exposure_warning, security_settings

    loopback = security_settings("127.0.0.1")
    assert loopback.allowed_hosts == ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    assert loopback.allowed_origins == [
        "http://127.0.0.1:*",
        "http://localhost:*",
        "http://[::1]:*",
    ]
    wide = security_settings("0.0.0.0", ["mybox:8765"], ["http://app.example:3000"])
    assert wide.allowed_hosts == ["0.0.0.0:*", "mybox:8765"]
    assert wide.allowed_origins == ["http://0.0.0.0:*", "http://app.example:3000"]
    assert security_settings("::1").allowed_hosts[-1] == "[::1]:*"
    assert exposure_warning("127.0.0.1", None) is None
    assert exposure_warning("localhost", None) is None
    assert exposure_warning("0.0.0.0", "secret") is None
    warning = exposure_warning("0.0.0.0", None)
    assert warning is not None and "no bearer token" in warning
