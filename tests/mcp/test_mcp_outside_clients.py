"""The MCP server driven by clients nobody here wrote: the MCP Inspector CLI and the official
TypeScript SDK (both pinned in ``tests/mcp_clients/package-lock.json``, installed with
``npm ci`` on first use). They must see the same tools, resources, prompt and texts as the
Python client, and a fresh session over MCP alone must see what an earlier one learned."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time

import anyio
import pytest
from mcp_harness import (
    TIMEOUT,
    TS,
    child_env,
    host_prompt,
    http_server,
    inspector,
    node_clients,
    sdk_client,
    server_command,
    stdio_params,
    stdio_session,
    text_of,
)

from jupyter_agent_memory import MEMORY_TOOL, AgentMemory, product_info, provision

# Outside clients (TypeScript, the Inspector) against server processes.
pytestmark = pytest.mark.slow

URI = "agent-memory://agent/"
FACT_URI = URI + "memory/FACT.md"

# Every action and every error case, in an order that starts from an empty agent.
CALLS = [
    ("memory", {"action": "search"}),
    ("memory", {"action": "delete"}),
    ("memory", {}),
    ("memory", {"action": "update"}),
    ("memory", {"action": "update", "content": ""}),
    ("memory", {"action": "append", "tags": ["x"]}),
    ("memory", {"action": "append", "text": 7}),
    ("memory", {"action": "search", "since": "yesterday"}),
    ("shell", {"command": "ls"}),
    ("product_info", {"source": "manifest"}),
    ("memory", {"action": "update", "content": "# Facts\n- The user is Ada.\n"}),
    ("memory", {"action": "append", "text": "met Ada", "tags": ["intro", "people"]}),
    ("memory", {"action": "append", "text": "Ada likes tea ☕", "tags": "not-a-list"}),
    ("memory", {"action": "search", "query": "ADA"}),
    ("memory", {"action": "search", "tag": "INTRO", "limit": "1"}),
    ("memory", {"action": "search", "limit": 1}),
    ("memory", {"action": "search", "query": "coffee"}),
]
# The Inspector checks tools/list itself and never sends a call to a tool it did not see.
NOT_LISTED = {"shell", "product_info"}


def normalise(text: str) -> str:
    """Timestamps differ between runs; everything else must not."""
    return re.sub(TS, "<ts>", text)


def python_results(agent, tmp_path, calls) -> list[tuple[str, bool]]:
    params = stdio_params(agent, tmp_path)
    results = []

    async def main():
        with anyio.fail_after(TIMEOUT):
            async with stdio_session(params) as (session, _init):
                for name, args in calls:
                    result = await session.call_tool(name, args)
                    results.append((normalise(text_of(result)), result.is_error))

    anyio.run(main)
    return results


def stdio_plan(agent, tmp_path, steps, *options: str) -> dict:
    return {
        "server": {
            "command": sys.executable,
            "args": server_command(agent, *options)[1:],
            "env": child_env(tmp_path),
            "cwd": str(tmp_path),
        },
        "steps": steps,
    }


def tool_args(args: dict) -> list[str]:
    """``args`` as the Inspector's ``--tool-arg key=value`` flags (values as JSON)."""
    flags = []
    for key, value in args.items():
        flags += ["--tool-arg", f"{key}={json.dumps(value, ensure_ascii=False)}"]
    return flags


def journal_lines(agent) -> list[str]:
    text = (agent / "memory" / "JOURNAL.jsonl").read_text(encoding="utf-8")
    return [normalise(line) for line in text.splitlines()]


def test_every_call_gives_the_same_text_in_python_typescript_and_the_inspector(tmp_path):
    agents = {who: tmp_path / who for who in ("python", "typescript", "inspector")}
    for agent in agents.values():
        AgentMemory.open(agent)
    expected = python_results(agents["python"], tmp_path, CALLS)

    report = sdk_client(
        stdio_plan(
            agents["typescript"],
            tmp_path,
            [{"op": "callTool", "name": name, "arguments": args} for name, args in CALLS],
        ),
        tmp_path,
    )
    typescript = [
        (normalise(r["content"][0]["text"]), r.get("isError", False)) for r in report["results"]
    ]
    assert typescript == expected

    command = server_command(agents["inspector"])
    for (name, args), (text, is_error) in zip(CALLS, expected, strict=True):
        call = ["--method", "tools/call", "--tool-name", name, *tool_args(args)]
        if name in NOT_LISTED:
            refused = inspector(tmp_path, command, *call, codes=(5,))
            assert f"Tool '{name}' not found on server." in refused["err"]
            continue
        result = inspector(tmp_path, command, *call, codes=(5,) if is_error else (0,))
        assert normalise(result["out"]["content"][0]["text"]) == text, (name, args)
        assert result["out"]["isError"] is is_error

    # The three agents ended in the same state, byte for byte but the timestamps.
    facts = {who: (agent / "memory" / "FACT.md").read_bytes() for who, agent in agents.items()}
    assert len(set(facts.values())) == 1
    journals = {who: journal_lines(agent) for who, agent in agents.items()}
    assert journals["python"] == journals["typescript"] == journals["inspector"]
    assert len(journals["python"]) == 2
    # Spot-check the texts themselves (the engine's, unchanged).
    assert expected[0] == ("No journal entries found.", False)
    assert expected[8] == (
        "Error: MCP error -32601: Unknown tool: shell; offered tools: memory", True
    )
    assert expected[-1] == ("No matching journal entries found.", False)


def test_outside_clients_list_and_read_what_the_python_side_sees(tmp_path):
    agent = tmp_path / "agent"
    mem = AgentMemory.open(agent)
    provision("guide", mem)
    mem.update_facts("# Facts\n- Ada prefers metric units.\n")
    options = ("--workspace", str(tmp_path))
    command = server_command(agent, *options)
    session_prompt = host_prompt(mem, tmp_path)
    facts, sha = mem.read_facts()

    report = sdk_client(
        stdio_plan(
            agent,
            tmp_path,
            [
                {"op": "listTools"},
                {"op": "listResources"},
                {"op": "listPrompts"},
                {"op": "readResource", "uri": FACT_URI},
                {"op": "getPrompt", "name": "new-session"},
                {"op": "callTool", "name": "product_info", "arguments": {"source": "manifest"}},
                {"op": "readResource", "uri": URI + "nothing-here"},
                {"op": "listResourceTemplates"},
                {"op": "listTools", "cursor": "page-2"},
            ],
            *options,
        ),
        tmp_path,
    )
    tools, resources, prompts, fact, prompt, info, missing, templates, paged = report["results"]
    assert templates == {"resourceTemplates": []}
    assert paged == {
        "error": {
            "code": -32602,
            "message": "MCP error -32602: Invalid cursor: this server answers every list in one "
            "page and never hands out a cursor",
        }
    }
    assert report["serverVersion"]["name"] == "agent-memory"
    assert report["capabilities"]["tools"] == {"listChanged": True}
    assert report["capabilities"]["resources"]["subscribe"] is True
    assert report["instructions"] == session_prompt.context
    assert report["stderr"].splitlines()[0] == (
        f"agent-memory: serving agent folder {agent} over stdio; tools: memory, product_info"
    )

    by_name = {tool["name"]: tool for tool in tools["tools"]}
    assert list(by_name) == ["memory", "product_info"]
    assert by_name["memory"]["inputSchema"] == MEMORY_TOOL["input_schema"]
    assert by_name["memory"]["title"] == "Agent memory"
    assert by_name["memory"]["annotations"] == {
        "title": "Agent memory",
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": False,
    }
    assert by_name["product_info"]["annotations"]["readOnlyHint"] is True
    uris = [r["uri"] for r in resources["resources"]]
    assert uris == [
        URI + "SOUL.md",
        URI + "USER.md",
        FACT_URI,
        URI + "journal/latest",
        URI + "prompt",
    ]
    assert [p["name"] for p in prompts["prompts"]] == ["new-session"]
    (content,) = fact["contents"]
    assert (content["text"], content["_meta"]["sha256"]) == (facts, sha)
    assert content["mimeType"] == "text/markdown"
    assert prompt["messages"][0]["content"]["text"] == session_prompt.text
    assert info["content"][0]["text"] == product_info(mem, {"source": "manifest"})
    assert info["structuredContent"] == json.loads(info["content"][0]["text"])
    assert missing == {
        "error": {
            "code": -32002,
            "message": f"MCP error -32002: Resource not found: {URI}nothing-here",
        }
    }

    # The Inspector CLI sees the same.
    listed = inspector(tmp_path, command, "--method", "tools/list")["out"]
    assert [t["name"] for t in listed["tools"]] == ["memory", "product_info"]
    assert listed["tools"] == tools["tools"]
    listed = inspector(tmp_path, command, "--method", "resources/list")["out"]
    assert listed["resources"] == resources["resources"]
    listed = inspector(tmp_path, command, "--method", "resources/templates/list")["out"]
    assert listed == {"resourceTemplates": []}
    listed = inspector(tmp_path, command, "--method", "prompts/list")["out"]
    assert listed["prompts"] == prompts["prompts"]
    read = inspector(tmp_path, command, "--method", "resources/read", "--uri", FACT_URI)["out"]
    assert read["contents"] == fact["contents"]
    got = inspector(tmp_path, command, "--method", "prompts/get", "--prompt-name", "new-session")[
        "out"
    ]
    assert got["messages"][0]["content"]["text"] == session_prompt.text
    gone = inspector(
        tmp_path, command, "--method", "resources/read", "--uri", URI + "nothing-here", codes=(1,)
    )
    assert f"Resource not found: {URI}nothing-here" in gone["err"]


def test_a_fresh_session_over_mcp_alone_sees_what_the_last_one_learned(tmp_path):
    """Session 1 (the Inspector) learns; session 2 (the TypeScript SDK, a new process) has it
    in its instructions and in the FACT.md resource, and can keep it when it updates."""
    agent = tmp_path / "agent"
    mem = AgentMemory.open(agent)
    options = ("--workspace", str(tmp_path))
    command = server_command(agent, *options)
    first = host_prompt(mem, tmp_path).context
    assert "<facts>" not in first

    learned = "# Facts\n- The user's name is Ada Lovelace.\n- Ada prefers metric units.\n"
    for args in (
        {"action": "update", "content": learned},
        {"action": "append", "text": "First session with Ada", "tags": ["session"]},
    ):
        call = ["--method", "tools/call", "--tool-name", "memory", *tool_args(args)]
        assert inspector(tmp_path, command, *call)["out"]["isError"] is False

    report = sdk_client(
        stdio_plan(
            agent,
            tmp_path,
            [
                {"op": "readResource", "uri": FACT_URI},
                {"op": "callTool", "name": "memory", "arguments": {"action": "search"}},
            ],
            *options,
        ),
        tmp_path,
    )
    assert report["instructions"] == host_prompt(mem, tmp_path).context
    assert f"<facts>\n{learned.strip()}\n</facts>" in report["instructions"]
    fact, search = report["results"]
    assert fact["contents"][0]["text"] == learned
    assert fact["contents"][0]["_meta"]["sha256"] == mem.facts_sha256
    entries = json.loads(search["content"][0]["text"])
    assert [(e["text"], e["tags"]) for e in entries] == [("First session with Ada", ["session"])]
    # Every one of those session starts is on record (newest first): two Inspector runs,
    # then the SDK client, which got exactly the prompt it was told.
    receipts = mem.sessions()
    assert len(receipts) == 3
    assert receipts[0]["client"]["name"] == "agent-memory-sdk-test"
    assert all("inspector" in r["client"]["name"] for r in receipts[1:]), receipts
    assert report["instructions"] in mem.session_prompt(receipts[0]["session_id"])
    assert learned.strip() not in mem.session_prompt(receipts[2]["session_id"])


def test_typescript_client_hears_changes_and_the_new_tool(tmp_path):
    agent = tmp_path / "agent"
    mem = AgentMemory.open(agent)
    ready = tmp_path / "subscribed"

    def provision_when_ready():
        deadline = time.monotonic() + TIMEOUT
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        provision("guide", mem)

    helper = threading.Thread(target=provision_when_ready, daemon=True)
    helper.start()
    report = sdk_client(
        stdio_plan(
            agent,
            tmp_path,
            [
                {"op": "listTools"},
                {"op": "subscribe", "uri": FACT_URI},
                {"op": "touch", "path": str(ready)},
                {"op": "waitFor", "method": "notifications/tools/list_changed"},
                {"op": "listTools"},
                {
                    "op": "callTool",
                    "name": "memory",
                    "arguments": {"action": "update", "content": "- x\n"},
                },
                {"op": "waitFor", "method": "notifications/resources/updated", "uri": FACT_URI},
            ],
        ),
        tmp_path,
    )
    helper.join(timeout=TIMEOUT)
    before, _sub, _touch, changed, after, update, updated = report["results"]
    assert [t["name"] for t in before["tools"]] == ["memory"]
    assert changed == {"method": "notifications/tools/list_changed"}
    assert [t["name"] for t in after["tools"]] == ["memory", "product_info"]
    assert update["content"][0]["text"] == "Memory updated."
    assert updated == {"method": "notifications/resources/updated", "params": {"uri": FACT_URI}}


def test_typescript_and_inspector_over_http_with_a_token(tmp_path):
    agent = tmp_path / "agent"
    mem = AgentMemory.open(agent)
    token = "tok-" + "7" * 24
    env = child_env(tmp_path, JUPYTER_AGENT_MEMORY_MCP_TOKEN=token)
    with http_server(agent, tmp_path, "--read-tool", env=env) as server:
        url = server["url"]
        auth = {"Authorization": f"Bearer {token}"}
        report = sdk_client(
            {
                "server": {"url": url, "headers": auth},
                "steps": [
                    {"op": "subscribe", "uri": FACT_URI},
                    {
                        "op": "callTool",
                        "name": "memory",
                        "arguments": {"action": "update", "content": "- over http\n"},
                    },
                    {"op": "waitFor", "method": "notifications/resources/updated", "uri": FACT_URI},
                    {"op": "callTool", "name": "memory_read", "arguments": {"limit": 5}},
                ],
            },
            tmp_path,
        )
        _sub, update, updated, read = report["results"]
        assert update["content"][0]["text"] == "Memory updated."
        assert updated["params"] == {"uri": FACT_URI}
        assert read["structuredContent"] == {
            "path": str(agent / "memory" / "FACT.md"),
            "facts": "- over http\n",
            "sha256": mem.facts_sha256,
            "entries": [],
        }
        listed = inspector(
            tmp_path, [url], "--method", "tools/list", "--header", f"Authorization: Bearer {token}"
        )["out"]
        assert [t["name"] for t in listed["tools"]] == ["memory", "memory_read"]
        # Without the token the server answers 401, which the Inspector reports as a need to
        # authenticate (exit status 3).
        refused = inspector(
            tmp_path, [url], "--method", "tools/list", "--stored-auth-only", codes=(3,)
        )
        assert json.loads(refused["err"])["error"]["code"] == "auth_required"


def test_the_sdk_client_type_checks_against_the_sdk_types():
    """The client is plain ESM with JSDoc types; TypeScript checks it against the SDK's own
    declarations (strict mode), so a wrong method or shape fails here and not at run time."""
    clients = node_clients()
    out = subprocess.run(
        [str(clients / "node_modules" / ".bin" / "tsc"), "-p", str(clients)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=clients,
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")
