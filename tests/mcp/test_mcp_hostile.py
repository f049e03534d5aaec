"""Bad input over MCP gets an answer, never silence: unpaired surrogates in requests (stdio and
HTTP), oversized text, and well-formed surrogate pairs that must still work."""

from __future__ import annotations

import json

import httpx2
import pytest
from mcp_harness import (
    INITIALIZED,
    TIMEOUT,
    child_env,
    http_server,
    initialize_request,
    raw_stdio_exchange,
    sdk_client,
    server_command,
    tool_call_request,
)

from jupyter_agent_memory import AgentMemory, MemoryToolError

# Every test here runs a server process (stdio or HTTP) or an outside client.
pytestmark = pytest.mark.slow

INIT = [initialize_request("hostile-test", request_id=0), INITIALIZED]


def converse(agent, tmp_path, lines: list[str]) -> dict:
    """Send raw lines (JSON text, escapes as written) to a stdio server; replies by id."""
    replies, _rest, status = raw_stdio_exchange(
        agent, tmp_path, [json.dumps(m) for m in INIT] + lines
    )
    assert status == 0
    return {reply["id"]: reply for reply in replies}


def engine_refusal(mem: AgentMemory, args: dict) -> str:
    with pytest.raises(MemoryToolError) as info:
        mem.call_tool(args)
    return f"Error: MCP error {info.value.code}: {info.value.message}"


def test_stdio_answers_requests_with_unpaired_surrogates(tmp_path):
    agent = tmp_path / "agent"
    mem = AgentMemory.open(agent)
    mem.update_facts("- kept\n")
    lines = [
        # Written by hand: json.dumps would never produce these escapes from valid text.
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory",'
        '"arguments":{"action":"append","text":"half \\udfff"}}}',
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory",'
        '"arguments":{"action":"update","content":"- \\ud800 replaced\\n"}}}',
        # A well-formed pair is an ordinary character.
        '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory",'
        '"arguments":{"action":"append","text":"smile \\ud83d\\ude00"}}}',
        '{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"agent-memory://\\udc00"}}',
        # A notification nobody answers, then the server still serves.
        '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"\\ud800"}}',
        json.dumps(tool_call_request(5, "memory", {"action": "search"})),
    ]
    replies = converse(agent, tmp_path, lines)
    assert sorted(replies) == [0, 1, 2, 3, 4, 5]
    first, second = replies[1]["result"], replies[2]["result"]
    assert first == {
        "content": [
            {
                "type": "text",
                "text": engine_refusal(mem, {"action": "append", "text": "half \udfff"}),
            }
        ],
        "isError": True,
    }
    assert "lone surrogate U+DFFF" in first["content"][0]["text"]
    assert second["isError"] is True
    expected = engine_refusal(mem, {"action": "update", "content": "- \ud800 replaced\n"})
    assert second["content"][0]["text"] == expected
    assert replies[3]["result"]["isError"] is False
    assert replies[4]["error"]["code"] == -32602
    assert "unpaired surrogate" in replies[4]["error"]["message"]
    entries = json.loads(replies[5]["result"]["content"][0]["text"])
    assert [e["text"] for e in entries] == ["smile 😀"]
    assert mem.facts == "- kept\n"


def test_typescript_client_gets_the_engine_refusal_for_a_lone_surrogate(tmp_path):
    agent = tmp_path / "agent"
    mem = AgentMemory.open(agent)
    args = {"action": "append", "text": "lone \udfff"}
    plan = {
        "server": {
            "command": server_command(agent)[0],
            "args": server_command(agent)[1:],
            "env": child_env(tmp_path),
        },
        "steps": [{"op": "callTool", "name": "memory", "arguments": args}],
    }
    # JSON text with the escape (the JS client turns it back into a lone surrogate string).
    report = sdk_client(plan, tmp_path)
    (result,) = report["results"]
    assert result == {
        "content": [{"type": "text", "text": engine_refusal(mem, args)}],
        "isError": True,
    }
    assert not (agent / "memory" / "JOURNAL.jsonl").exists()


def test_http_refuses_unpaired_surrogates_with_a_parse_error(tmp_path):
    agent = tmp_path / "agent"
    AgentMemory.open(agent)
    body = (
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        '"capabilities":{},"clientInfo":{"name":"\\ud800","version":"0"}}}'
    )
    with http_server(agent, tmp_path) as server, httpx2.Client(timeout=TIMEOUT) as http:
        reply = http.post(
            server["url"],
            content=body.encode(),
            headers={
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
            },
        )
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == -32700


def test_oversized_text_is_refused_over_mcp_with_the_engine_message(tmp_path):
    agent = tmp_path / "agent"
    mem = AgentMemory.open(agent)
    big = "x" * (mem.max_bytes + 1)
    update = tool_call_request(1, "memory", {"action": "update", "content": big})
    replies = converse(agent, tmp_path, [json.dumps(update)])
    result = replies[1]["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == engine_refusal(mem, {"action": "update", "content": big})
    assert "content" in result["content"][0]["text"]
    assert mem.facts == ""
