"""A server whose agent has a journal index: a search holding a lone surrogate gets the
engine's -32602 refusal, never an encoding crash, and an indexed search answers as a scan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_harness import INITIALIZED, initialize_request, raw_stdio_exchange, tool_call_request

from jupyter_agent_memory import AgentMemory, MemoryToolError, environment

# It runs a server process.
pytestmark = pytest.mark.slow


def test_a_lone_surrogate_search_on_an_indexed_journal_is_refused_over_stdio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server's cache folder, as its environment (a HOME of its own) makes it.
    monkeypatch.setenv(
        environment.CACHE, str(tmp_path / "home" / ".cache" / "jupyter-agent-memory")
    )
    agent = tmp_path / "agent"
    mem = AgentMemory.open(agent)
    for i in range(100):
        mem.append(f"entry {i}" + (" about the zeppelin" if i == 42 else ""))
    assert mem.build_index()["state"] == "ready"
    args = {"action": "search", "query": "zep\ud83d"}
    with pytest.raises(MemoryToolError) as info:
        mem.call_tool(args)
    refusal = f"Error: MCP error {info.value.code}: {info.value.message}"
    assert refusal == (
        "Error: MCP error -32602: 'query' is not valid Unicode text: lone surrogate U+D83D "
        "at position 3"
    )
    lines = [
        json.dumps(initialize_request("index-test", request_id=0)),
        json.dumps(INITIALIZED),
        # Written by hand: json.dumps would never produce this escape from valid text.
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory",'
        '"arguments":{"action":"search","query":"zep\\ud83d"}}}',
        json.dumps(tool_call_request(2, "memory", {"action": "search", "query": "zeppelin"})),
    ]
    replies, _rest, status = raw_stdio_exchange(agent, tmp_path, lines)
    assert status == 0
    by_id = {reply["id"]: reply for reply in replies}
    assert by_id[1]["result"] == {"content": [{"type": "text", "text": refusal}], "isError": True}
    found = by_id[2]["result"]["content"][0]["text"]
    assert found == mem.call_tool({"action": "search", "query": "zeppelin"})
    assert [e["text"] for e in json.loads(found)] == ["entry 42 about the zeppelin"]
