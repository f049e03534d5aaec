"""Start-up over stdio: ``initialize`` is answered before the SDK is loaded, with exactly the
answer the SDK gives, and the session is on record once."""

from __future__ import annotations

import json

import pytest
from mcp_harness import INITIALIZED, initialize_request, raw_stdio_exchange

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.mcp_server.stdio import (
    CAPABILITIES,
    HANDSHAKE_VERSIONS,
    early_reply,
)
from jupyter_agent_memory.mcp_server.stdio import initialize_request as eligible

PING = {"jsonrpc": "2.0", "id": 0, "method": "ping"}


def init(version: str, request_id: int | str = 1) -> dict:
    request = initialize_request("startup-test", request_id)
    request["params"]["protocolVersion"] = version
    return request


def test_the_early_answer_knows_the_sdks_handshake_versions():
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


@pytest.mark.parametrize(
    "line",
    [
        json.dumps(init("2025-06-18")),
        json.dumps(init("1999-01-01", "abc")),
        json.dumps({**init("2025-11-25"), "params": {**init("2025-11-25")["params"],
                    "capabilities": {"roots": {"listChanged": True}, "sampling": {}}}}),
        json.dumps({**init("2025-06-18"), "params": {**init("2025-06-18")["params"],
                    "clientInfo": {"name": "x", "version": "1", "title": "X"}}}),
    ],
)
def test_plain_initialize_requests_are_answered_early(line):
    request_id, params = eligible(line + "\n")
    assert (request_id, params) == (json.loads(line)["id"], json.loads(line)["params"])


@pytest.mark.parametrize(
    "line",
    [
        "",
        "not json",
        json.dumps(PING),
        json.dumps(INITIALIZED),
        json.dumps({**init("2025-06-18"), "jsonrpc": "1.0"}),
        json.dumps({**init("2025-06-18"), "id": True}),
        json.dumps({**init("2025-06-18"), "id": None}),
        json.dumps({k: v for k, v in init("2025-06-18").items() if k != "id"}),
        json.dumps({**init("2025-06-18"), "params": []}),
        json.dumps({**init("2025-06-18"), "params": {"protocolVersion": "2025-06-18"}}),
        json.dumps({**init("2025-06-18"), "params": {**init("x")["params"], "protocolVersion": 5}}),
        json.dumps({**init("2025-06-18"), "params": {**init("x")["params"], "capabilities": []}}),
        json.dumps(
            {**init("2025-06-18"), "params": {**init("x")["params"], "capabilities": {"a": 1}}}
        ),
        json.dumps({**init("2025-06-18"), "params": {**init("x")["params"], "clientInfo": {}}}),
        json.dumps(
            {
                **init("2025-06-18"),
                "params": {**init("x")["params"], "clientInfo": {"name": "x", "version": 1}},
            }
        ),
        json.dumps(
            {
                **init("2025-06-18"),
                "params": {
                    **init("x")["params"],
                    "clientInfo": {"name": "x", "version": "1", "icons": []},
                },
            }
        ),
        # An unpaired surrogate: the stdio reader's own path answers it.
        json.dumps(init("2025-06-18")).replace("startup-test", "\\udfff"),
    ],
)
def test_anything_unusual_is_left_to_the_sdk(line):
    assert eligible(line) is None


def test_the_early_reply_negotiates_as_the_sdk_does():
    info = {"name": "agent-memory", "title": "Agent memory", "version": "1"}
    for version in HANDSHAKE_VERSIONS:
        reply = early_reply(3, init(version)["params"], info, "text")
        assert reply == {
            "jsonrpc": "2.0",
            "id": 3,
            "result": {
                "capabilities": CAPABILITIES,
                "protocolVersion": version,
                "serverInfo": info,
                "instructions": "text",
            },
        }
    for version in ("2026-07-28", "1999-01-01"):
        reply = early_reply(3, init(version)["params"], info, "text")
        assert reply["result"]["protocolVersion"] == HANDSHAKE_VERSIONS[-1]


@pytest.mark.slow
@pytest.mark.parametrize("version", [*HANDSHAKE_VERSIONS, "2026-07-28", "1999-01-01"])
def test_the_early_answer_is_the_sdks_answer_and_the_session_is_recorded_once(tmp_path, version):
    agent = tmp_path / "agent"
    mem = AgentMemory.open(agent)
    mem.update_facts("- The user is Ada.\n")
    tools_list = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    # First line initialize: answered early. A ping first: the SDK answers initialize.
    early, rest, status = raw_stdio_exchange(
        agent,
        tmp_path,
        [json.dumps(m) for m in (init(version), INITIALIZED, tools_list)],
        stderr=tmp_path / "early.err",
    )
    assert (rest, status) == ("", 0)
    late, rest, status = raw_stdio_exchange(
        agent,
        tmp_path,
        [json.dumps(m) for m in (PING, init(version), INITIALIZED, tools_list)],
        stderr=tmp_path / "late.err",
    )
    assert (rest, status) == ("", 0)
    assert late[0] == {"jsonrpc": "2.0", "id": 0, "result": {}}
    assert early[0] == late[1]
    assert "<facts>\n- The user is Ada.\n</facts>" in early[0]["result"]["instructions"]
    assert [tool["name"] for tool in early[1]["result"]["tools"]] == ["memory"]
    assert early[1] == late[2]
    # Nothing was logged: the SDK's own answer to the replayed request matched.
    for name in ("early.err", "late.err"):
        lines = (tmp_path / name).read_text().splitlines()
        assert lines[0].startswith("agent-memory: serving agent folder "), lines
        assert lines[1:] == [], lines
    receipts = mem.sessions()
    assert len(receipts) == 2
    assert [r["client"] for r in receipts] == [{"name": "startup-test", "version": "0"}] * 2
    for receipt in receipts:
        assert early[0]["result"]["instructions"] in mem.session_prompt(receipt["session_id"])
