"""The MCP server driven by the official ``mcp`` client: over stdio (a real child process
started through the command line, as an MCP host does) and in-process (``mcp.Client``)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp_harness import (
    INITIALIZED,
    TIMEOUT,
    TS,
    child_env,
    initialize_request,
    raw_stdio_exchange,
    stdio_params,
    stdio_session,
    text_of,
    tool_call_request,
)
from processes import run_python

from jupyter_agent_memory import MEMORY_TOOL, AgentMemory, MemoryToolError, product_info, provision
from jupyter_agent_memory.engine.functions import PRODUCT_INFO_TOOL
from jupyter_agent_memory.mcp_server.server import build_server, require_mcp


def engine_error(mem: AgentMemory, args: dict) -> str:
    """What the engine itself raises for ``args``, formatted as the MCP text must be."""
    with pytest.raises(MemoryToolError) as info:
        mem.call_tool(args)
    return f"Error: MCP error {info.value.code}: {info.value.message}"


ERROR_CASES = [
    (
        {"action": "delete"},
        'Error: MCP error -32602: Unknown action "delete", expected update/append/search',
    ),
    ({}, 'Error: MCP error -32602: Unknown action "", expected update/append/search'),
    (
        {"action": "update"},
        "Error: MCP error -32602: 'content' is required for update action",
    ),
    (
        {"action": "update", "content": ""},
        "Error: MCP error -32602: 'content' is required for update action",
    ),
    (
        {"action": "append", "tags": ["x"]},
        "Error: MCP error -32602: 'text' is required for append action",
    ),
    (
        {"action": "append", "text": 7},
        "Error: MCP error -32602: 'text' is required for append action",
    ),
]


async def exercise_plain_agent(session, agent: Path) -> None:
    """Every action and every error through one connected client."""
    tools = (await session.list_tools()).tools
    assert [tool.name for tool in tools] == ["memory"]
    assert tools[0].description == MEMORY_TOOL["description"]
    assert tools[0].input_schema == MEMORY_TOOL["input_schema"]
    assert tools[0].title == "Agent memory"
    notes = tools[0].annotations
    assert (notes.read_only_hint, notes.destructive_hint, notes.idempotent_hint) == (
        False,
        True,
        False,
    )
    assert notes.open_world_hint is False

    # Bad arguments are reported before any file is touched.
    for args, expected in ERROR_CASES:
        result = await session.call_tool("memory", args)
        assert result.is_error, args
        assert text_of(result) == expected
    assert not (agent / "memory" / "JOURNAL.jsonl").exists()
    assert not (agent / "memory" / "FACT.md").exists()

    # Unknown tools, and product_info on an agent without a manifest.
    for name in ("shell", "product_info"):
        result = await session.call_tool(name, {"source": "manifest"})
        assert result.is_error
        assert text_of(result) == (
            f"Error: MCP error -32601: Unknown tool: {name}; offered tools: memory"
        )

    result = await session.call_tool("memory", {"action": "search"})
    assert (result.is_error, text_of(result)) == (False, "No journal entries found.")

    result = await session.call_tool(
        "memory", {"action": "update", "content": "# Facts\n- The user is Ada.\n"}
    )
    assert (result.is_error, text_of(result)) == (False, "Memory updated.")
    assert (agent / "memory" / "FACT.md").read_text() == "# Facts\n- The user is Ada.\n"

    stamps = []
    for text, tags in [("met Ada", ["intro", "people"]), ("Ada likes tea ☕", "not-a-list")]:
        result = await session.call_tool("memory", {"action": "append", "text": text, "tags": tags})
        assert not result.is_error
        match = re.fullmatch(rf"Journal entry added at ({TS})\.", text_of(result))
        assert match, text_of(result)
        stamps.append(match.group(1))
    lines = (agent / "memory" / "JOURNAL.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        {"ts": stamps[0], "tags": ["intro", "people"], "text": "met Ada"},
        {"ts": stamps[1], "tags": [], "text": "Ada likes tea ☕"},
    ]

    result = await session.call_tool("memory", {"action": "search", "query": "ADA"})
    assert not result.is_error
    assert text_of(result) == json.dumps(
        [
            {"ts": stamps[1], "tags": [], "text": "Ada likes tea ☕"},
            {"ts": stamps[0], "tags": ["intro", "people"], "text": "met Ada"},
        ],
        indent=2,
        ensure_ascii=False,
    )
    result = await session.call_tool("memory", {"action": "search", "tag": "INTRO", "limit": "1"})
    assert [e["text"] for e in json.loads(text_of(result))] == ["met Ada"]
    result = await session.call_tool("memory", {"action": "search", "query": "coffee"})
    assert (result.is_error, text_of(result)) == (False, "No matching journal entries found.")
    result = await session.call_tool("memory", {"action": "search", "since": "yesterday"})
    assert result.is_error
    assert text_of(result).startswith("Error: MCP error -32602: ")
    assert "since" in text_of(result)

    # A FACT.md that is a symlink is refused, and the link's target is left alone.
    outside = agent.parent / "outside.md"
    outside.write_text("not yours\n")
    fact = agent / "memory" / "FACT.md"
    fact.unlink()
    os.symlink(outside, fact)
    args = {"action": "update", "content": "- overwritten\n"}
    result = await session.call_tool("memory", args)
    assert result.is_error
    expected = engine_error(AgentMemory.open(agent), args)
    assert expected.startswith("Error: MCP error -32603: ")
    assert text_of(result) == expected
    assert outside.read_text() == "not yours\n"
    assert fact.is_symlink()


async def over_stdio(params: StdioServerParameters, body) -> None:
    with anyio.fail_after(TIMEOUT):
        async with stdio_session(params) as (session, init):
            assert init.server_info.name == "agent-memory"
            await body(session)


@pytest.mark.slow
def test_stdio_plain_agent_lists_tools_runs_every_action_and_error(tmp_path):
    agent = tmp_path / "agents" / "plain"
    AgentMemory.open(agent)

    async def body(session):
        await exercise_plain_agent(session, agent)

    anyio.run(over_stdio, stdio_params(agent, tmp_path), body)


@pytest.mark.slow
def test_stdio_product_info_sections_for_the_guide_template(tmp_path):
    agent = tmp_path / "agents" / "guide"
    mem = AgentMemory.open(agent)
    provision("guide", mem)
    overview = json.loads(product_info(mem, {"source": "manifest"}))
    sections = overview["sections"]
    names = list(sections) if not isinstance(sections, list) else sections
    names = [n if isinstance(n, str) else n["name"] for n in names]
    assert names, "the guide manifest has sections"

    async def body(session):
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert list(tools) == ["memory", "product_info"]
        assert tools["product_info"].title == "Product information"
        assert tools["product_info"].annotations.read_only_hint is True
        assert tools["product_info"].annotations.destructive_hint is False
        assert tools["product_info"].input_schema == PRODUCT_INFO_TOOL["input_schema"]
        assert tools["product_info"].description == PRODUCT_INFO_TOOL["description"]
        for args in [{"source": "manifest"}, {"source": "manifest", "section": "all"}] + [
            {"source": "manifest", "section": name} for name in names
        ]:
            result = await session.call_tool("product_info", args)
            assert not result.is_error, (args, text_of(result))
            assert text_of(result) == product_info(mem, args)
            json.loads(text_of(result))
        overview_text = text_of(await session.call_tool("product_info", {"source": "manifest"}))
        from jupyter_agent_memory.__about__ import __version__

        assert json.loads(overview_text)["runtimeVersion"] == __version__
        for bad in [{"source": "manifest", "section": "no-such-section"}, {"source": "web"}]:
            result = await session.call_tool("product_info", bad)
            assert result.is_error, bad
            with pytest.raises(MemoryToolError) as info:
                product_info(mem, bad)
            assert text_of(result) == (f"Error: MCP error {info.value.code}: {info.value.message}")
        # The memory tool is there too and works as for any agent.
        result = await session.call_tool("memory", {"action": "search"})
        assert text_of(result) == "No journal entries found."

    anyio.run(over_stdio, stdio_params(agent, tmp_path), body)


@pytest.mark.slow
def test_stdio_agent_id_resolves_under_the_root(tmp_path):
    AgentMemory.open("notebook-helper", root=tmp_path / "root")
    params = stdio_params("notebook-helper", tmp_path)

    async def body(session):
        result = await session.call_tool("memory", {"action": "update", "content": "- x\n"})
        assert text_of(result) == "Memory updated."

    anyio.run(over_stdio, params, body)
    fact = tmp_path / "root" / "notebook-helper" / "memory" / "FACT.md"
    assert fact.read_text() == "- x\n"


@pytest.mark.slow
def test_stdout_carries_only_protocol_messages(tmp_path):
    """Raw JSON-RPC over the child's pipes: every stdout line is a protocol message."""
    agent = tmp_path / "agent"
    AgentMemory.open(agent)
    messages = [
        initialize_request("raw-test"),
        INITIALIZED,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        tool_call_request(3, "memory", {"action": "append", "text": "hello"}),
        tool_call_request(4, "memory", {"action": "bogus"}),
    ]
    replies, rest, status = raw_stdio_exchange(
        agent, tmp_path, [json.dumps(message) for message in messages]
    )
    assert (rest, status) == ("", 0)
    assert all(reply["jsonrpc"] == "2.0" for reply in replies)
    by_id = {reply["id"]: reply for reply in replies}
    assert sorted(by_id) == [1, 2, 3, 4]
    assert by_id[1]["result"]["serverInfo"]["name"] == "agent-memory"
    assert by_id[2]["result"]["tools"][0]["inputSchema"] == MEMORY_TOOL["input_schema"]
    assert re.fullmatch(rf"Journal entry added at {TS}\.", by_id[3]["result"]["content"][0]["text"])
    assert by_id[4]["result"]["isError"] is True
    assert by_id[4]["result"]["content"][0]["text"] == (
        'Error: MCP error -32602: Unknown action "bogus", expected update/append/search'
    )


# ------------------------------------------------------------------------------ in-process


def run_in_process(mem: AgentMemory, body, mode: str = "auto") -> None:
    async def main():
        with anyio.fail_after(TIMEOUT):
            async with Client(build_server(mem), mode=mode) as client:
                assert client.server_info.name == "agent-memory"
                await body(client)

    anyio.run(main)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_in_process_client_every_action_and_error(tmp_path, mode):
    agent = tmp_path / "agent"
    mem = AgentMemory.open(agent)

    async def body(client):
        await exercise_plain_agent(client, agent)

    run_in_process(mem, body, mode)


def test_in_process_product_info_appears_after_provisioning(tmp_path):
    mem = AgentMemory.open(tmp_path / "agent")

    async def body(client):
        names = [tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools]
        assert names == ["memory"]
        provision("guide", mem)
        names = [tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools]
        assert names == ["memory", "product_info"]
        result = await client.call_tool("product_info", {"source": "manifest"})
        assert not result.is_error
        assert text_of(result) == product_info(mem, {"source": "manifest"})

    run_in_process(mem, body)


def test_unexpected_exception_becomes_internal_error_result(tmp_path, monkeypatch):
    mem = AgentMemory.open(tmp_path / "agent")

    def broken(args):
        raise RuntimeError("journal disk on fire")

    monkeypatch.setattr(mem, "call_tool", broken)

    async def body(client):
        result = await client.call_tool("memory", {"action": "search"})
        assert result.is_error
        assert text_of(result) == "Error: MCP error -32603: journal disk on fire"

    run_in_process(mem, body)


def test_missing_mcp_package_names_the_extra(tmp_path, monkeypatch):
    mem = AgentMemory.open(tmp_path / "agent")
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if the package were not installed
    hint = re.escape('pip install "jupyter-agent-memory[mcp]"')
    with pytest.raises(ImportError, match=hint):
        require_mcp()
    with pytest.raises(ImportError, match=hint):
        build_server(mem)


def test_importing_the_module_does_not_import_mcp(tmp_path):
    code = (
        "import sys, jupyter_agent_memory.mcp_server, jupyter_agent_memory.engine.functions; "
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))"
    )
    out = run_python(code, env=child_env(tmp_path), timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
