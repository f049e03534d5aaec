"""What the MCP server offers beyond the tool: instructions, resources, the prompt, the read
tool, tool metadata, and the start-up behaviour of the command (official Python client)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import (
    Client,
    Implementation,
    MCPError,
)
from mcp_harness import (
    TIMEOUT,
    child_env,
    host_prompt,
    server_command,
    stdio_params,
    stdio_session,
    text_of,
)
from processes import run_python

from jupyter_agent_memory import (
    AgentMemory,
    MemoryToolError,
    PromptBuilder,
    product_info,
    provision,
)
from jupyter_agent_memory.mcp_server.server import build_server
from jupyter_agent_memory.mcp_server.service import HOST_TOOL_NAME, MemoryService, host_tools

URI = "agent-memory://agent/"
FACT_URI = URI + "memory/FACT.md"
RESOURCES = [
    (URI + "SOUL.md", "text/markdown"),
    (URI + "USER.md", "text/markdown"),
    (FACT_URI, "text/markdown"),
    (URI + "journal/latest", "application/json"),
    (URI + "prompt", "text/markdown"),
]


def run_client(server, body, mode: str = "legacy") -> None:
    async def main():
        with anyio.fail_after(TIMEOUT):
            async with Client(server, mode=mode) as client:
                await body(client)

    anyio.run(main)


def learned_agent(tmp_path: Path) -> AgentMemory:
    mem = AgentMemory.open(tmp_path / "agent")
    mem.write_soul("# Soul\nI am Pip, a patient research assistant who explains with examples.\n")
    mem.write_user("# User\nAda Lovelace, mathematician, prefers metric units.\n")
    mem.update_facts("# Facts\n- Ada's project is the Analytical Engine notes.\n")
    mem.append("met Ada", ["intro"])
    mem.append("Ada likes tea ☕", ["prefs"])
    return mem


# ------------------------------------------------------------------------------ instructions


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_instructions_are_the_session_context_of_the_prompt_builder(tmp_path, mode):
    mem = learned_agent(tmp_path)
    service = MemoryService(mem, workspace=tmp_path)
    expected = host_prompt(mem, tmp_path).context

    async def body(client):
        assert client.instructions == expected
        assert "<facts>\n# Facts\n- Ada's project is the Analytical Engine notes.\n</facts>" in (
            client.instructions
        )
        assert "Ada Lovelace" in client.instructions
        assert "## Bootstrap Mode" not in client.instructions

    run_client(build_server(service), body, mode)


def test_instructions_carry_the_bootstrap_block_when_due_and_each_session_sees_the_files_then(
    tmp_path,
):
    mem = AgentMemory.open(tmp_path / "agent")
    server = build_server(MemoryService(mem, workspace=tmp_path))
    seen = []

    async def body(client):
        seen.append(client.instructions)

    run_client(server, body)
    mem.update_facts("- The user's name is Ada.\n")
    run_client(server, body)  # the same server object, a new session
    builder = PromptBuilder(tools=host_tools())
    assert seen[0].startswith("## Bootstrap Mode")
    assert "<facts>" not in seen[0]
    assert seen[1] == builder.build_session(mem, tmp_path).context
    assert "<facts>\n- The user's name is Ada.\n</facts>" in seen[1]


def test_instructions_follow_the_budget_rules_without_cutting(tmp_path):
    mem = learned_agent(tmp_path)
    builder = PromptBuilder(tools=host_tools(), budget_tokens=10)
    with pytest.warns(UserWarning, match="over the budget of 10"):
        expected = PromptBuilder(tools=host_tools(), budget_tokens=10).build_session(mem, tmp_path)
    service = MemoryService(mem, builder, workspace=tmp_path)

    async def body(client):
        assert client.instructions == expected.context  # nothing was cut
        result = await client.read_resource(URI + "prompt")
        meta = result.contents[0].meta
        assert meta["warnings"] == list(expected.warnings)
        assert meta["budget_tokens"] == 10
        assert [s["name"] for s in meta["sections"]] == [s.name for s in expected.sections]

    with pytest.warns(UserWarning, match="over the budget of 10"):
        run_client(build_server(service), body)


def test_the_tool_name_in_instructions_is_configurable(tmp_path):
    mem = learned_agent(tmp_path)
    service = MemoryService(mem, PromptBuilder(tools=host_tools("memory")), workspace=tmp_path)

    async def body(client):
        assert (
            client.instructions
            == PromptBuilder(tools=host_tools("memory")).build_session(mem, tmp_path).context
        )
        assert "mcp__agent-memory__memory" not in client.instructions

    run_client(build_server(service), body)


# ------------------------------------------------------------------------------ resources


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_resources_list_and_read_the_files_with_their_hashes(tmp_path, mode):
    mem = learned_agent(tmp_path)
    service = MemoryService(mem, workspace=tmp_path)

    async def body(client):
        listed = (await client.list_resources()).resources
        assert [(r.uri, r.mime_type) for r in listed] == RESOURCES
        assert all(r.title and r.description for r in listed)
        for uri, reader in [
            (URI + "SOUL.md", mem.read_soul),
            (URI + "USER.md", mem.read_user),
            (FACT_URI, mem.read_facts),
        ]:
            (content,) = (await client.read_resource(uri)).contents
            text, sha = reader()
            assert (content.uri, content.mime_type, content.text) == (uri, "text/markdown", text)
            assert content.meta["sha256"] == sha
        (journal,) = (await client.read_resource(URI + "journal/latest")).contents
        entries = json.loads(journal.text)
        assert [e["text"] for e in entries] == ["Ada likes tea ☕", "met Ada"]
        assert journal.text == json.dumps(list(mem.search(limit=20)), indent=2, ensure_ascii=False)
        (prompt,) = (await client.read_resource(URI + "prompt")).contents
        assert prompt.text == host_prompt(mem, tmp_path).text

    run_client(build_server(service), body, mode)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_resource_templates_list_is_answered_and_empty(tmp_path, mode):
    mem = AgentMemory.open(tmp_path / "agent")

    async def body(client):
        assert (await client.list_resource_templates()).resource_templates == []

    run_client(build_server(mem), body, mode)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_every_list_refuses_a_cursor_it_never_handed_out(tmp_path, mode):
    mem = AgentMemory.open(tmp_path / "agent")
    lists = ("list_tools", "list_resources", "list_resource_templates", "list_prompts")

    async def body(client):
        for name in lists:
            first = await getattr(client, name)()
            assert first.next_cursor is None, name  # one page: nothing to continue
            for cursor in ("next", "", "eyJwYWdlIjogMn0="):
                with pytest.raises(MCPError) as info:
                    await getattr(client, name)(cursor=cursor)
                assert (info.value.error.code, info.value.error.message) == (
                    -32602,
                    "Invalid cursor: this server answers every list in one page and never "
                    "hands out a cursor",
                ), (name, cursor)
        # The session goes on.
        assert [t.name for t in (await client.list_tools()).tools] == ["memory"]

    run_client(build_server(mem), body, mode)


def test_resource_reads_are_fresh_and_unknown_uris_are_refused(tmp_path):
    mem = AgentMemory.open(tmp_path / "agent")
    (tmp_path / "system.md").write_text("You are a careful assistant.\n")
    service = MemoryService(mem, workspace=tmp_path)

    async def body(client):
        (content,) = (await client.read_resource(FACT_URI)).contents
        assert content.text == ""
        assert content.meta["sha256"] == mem.facts_sha256
        (journal,) = (await client.read_resource(URI + "journal/latest")).contents
        assert journal.text == "[]"
        mem.update_facts("- later\n")
        (content,) = (await client.read_resource(FACT_URI)).contents
        assert content.text == "- later\n"
        (prompt,) = (await client.read_resource(URI + "prompt")).contents
        assert prompt.text.startswith("You are a careful assistant.\n\n")
        with pytest.raises(MCPError) as info:
            await client.read_resource(URI + "secrets")
        assert info.value.error.code == -32002
        assert info.value.error.message == f"Resource not found: {URI}secrets"

    run_client(build_server(service), body)


def test_undecodable_fact_bytes_read_as_replacement_characters(tmp_path):
    mem = AgentMemory.open(tmp_path / "agent")
    (mem.path / "memory" / "FACT.md").write_bytes(b"- caf\xe9\n")

    async def body(client):
        (content,) = (await client.read_resource(FACT_URI)).contents
        assert content.text == mem.facts == "- caf\ufffd\n"

    run_client(build_server(mem), body)


# ------------------------------------------------------------------------------ prompt


def test_the_new_session_prompt_returns_the_system_prompt(tmp_path):
    mem = learned_agent(tmp_path)
    service = MemoryService(mem, workspace=tmp_path)

    async def body(client):
        (listed,) = (await client.list_prompts()).prompts
        assert (listed.name, listed.arguments) == ("new-session", None)
        assert listed.title and listed.description
        result = await client.get_prompt("new-session")
        (message,) = result.messages
        assert message.role == "user"
        assert message.content.text == host_prompt(mem, tmp_path).text
        with pytest.raises(MCPError) as info:
            await client.get_prompt("old-session")
        assert info.value.error.message == "Unknown prompt: old-session"

    run_client(build_server(service), body)


# ------------------------------------------------------------------------------ tools


def test_the_read_tool_is_opt_in_read_only_and_structured(tmp_path):
    mem = learned_agent(tmp_path)

    async def without(client):
        assert [t.name for t in (await client.list_tools()).tools] == ["memory"]
        result = await client.call_tool("memory_read", {})
        assert text_of(result) == (
            "Error: MCP error -32601: Unknown tool: memory_read; offered tools: memory"
        )

    run_client(build_server(mem), without)

    async def body(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert list(tools) == ["memory", "memory_read"]
        tool = tools["memory_read"]
        assert tool.title == "Read agent memory"
        notes = tool.annotations
        assert (notes.read_only_hint, notes.destructive_hint, notes.idempotent_hint) == (
            True,
            False,
            True,
        )
        assert notes.open_world_hint is False
        result = await client.call_tool("memory_read", {"limit": 1})
        assert not result.is_error
        facts, sha = mem.read_facts()
        expected = {
            "path": str(mem.path / "memory" / "FACT.md"),
            "facts": facts,
            "sha256": sha,
            "entries": list(mem.search(limit=1)),
        }
        assert text_of(result) == json.dumps(expected, indent=2, ensure_ascii=False)
        assert result.structured_content == expected
        assert [e["text"] for e in expected["entries"]] == ["Ada likes tea ☕"]
        default = await client.call_tool("memory_read", {})
        assert len(json.loads(text_of(default))["entries"]) == 2

    run_client(build_server(MemoryService(mem, read_tool=True)), body)


def test_product_info_results_are_structured_without_changing_the_text(tmp_path):
    mem = AgentMemory.open(tmp_path / "agent")
    provision("guide", mem)

    async def body(client):
        args = {"source": "manifest"}
        result = await client.call_tool("product_info", args)
        assert not result.is_error
        assert text_of(result) == product_info(mem, args)
        assert result.structured_content == json.loads(text_of(result))
        memory = await client.call_tool("memory", {"action": "search"})
        assert memory.structured_content is None  # its texts are not JSON objects
        # A strict-mode client sends every property: an empty section is the overview.
        strict = await client.call_tool("product_info", {"source": "manifest", "section": ""})
        assert (strict.is_error, text_of(strict)) == (False, text_of(result))

    run_client(build_server(mem), body)


def reference_template(folder: Path) -> Path:
    """A template folder with a manifest in Cherry Studio's format."""
    (folder / "memory").mkdir(parents=True)
    (folder / "agent.json").write_text(json.dumps({"name": "Helper"}))
    (folder / "SOUL.md").write_text("# Soul\n")
    (folder / "USER.md").write_text("# User\n")
    (folder / "memory" / "FACT.md").write_text("")
    manifest = {
        "schemaVersion": 1,
        "package": {"name": "helper", "version": "1.2.3"},
        "features": {"search": "journal search"},
    }
    (folder / "product-manifest.json").write_text(json.dumps(manifest))
    return folder


def test_a_manifest_that_disappears_mid_session_answers_unavailable_not_unknown_tool(tmp_path):
    template = reference_template(tmp_path / "template")
    mem = AgentMemory.open(tmp_path / "agent")
    provision(str(template), mem)

    async def body(client):
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == ["memory", "product_info"]
        (template / "product-manifest.json").unlink()
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == ["memory", "product_info"]
        args = {"source": "manifest"}
        result = await client.call_tool("product_info", args)
        assert result.is_error
        with pytest.raises(MemoryToolError) as info:
            product_info(mem, args)
        assert text_of(result) == f"Error: MCP error {info.value.code}: {info.value.message}"
        assert text_of(result).endswith(": Product manifest is unavailable")

    run_client(build_server(mem), body)


# ------------------------------------------------------------------------------ the command


@pytest.mark.slow
def test_a_missing_agent_is_refused_with_its_path_before_mcp_is_imported(tmp_path):
    code = (
        "import sys\n"
        "from jupyter_agent_memory.cli import main\n"
        "rc = main(['mcp', '--agent', 'typo'])\n"
        "print(rc, 'mcp' in sys.modules)\n"
    )
    out = run_python(code, env=child_env(tmp_path), timeout=TIMEOUT)
    assert out.stdout.strip() == "1 False"
    path = tmp_path / "root" / "typo"
    assert f"no folder at {path}" in out.stderr
    assert out.stderr.startswith("jupyter-agent-memory: error: Agent 'typo' does not exist")
    assert not path.exists()
    assert not (tmp_path / "root").exists() or list((tmp_path / "root").iterdir()) == []


@pytest.mark.slow
def test_the_start_up_line_names_folder_transport_and_tools(tmp_path):
    agent = tmp_path / "agent"
    provision("guide", AgentMemory.open(agent))
    proc = subprocess.run(
        server_command(agent, "--read-tool"),
        input="",
        capture_output=True,
        text=True,
        env=child_env(tmp_path),
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0
    assert proc.stdout == ""
    assert proc.stderr.splitlines()[0] == (
        f"agent-memory: serving agent folder {agent} over stdio; "
        "tools: memory, product_info, memory_read"
    )


@pytest.mark.slow
def test_a_symlinked_memory_folder_starts_and_every_call_reports_the_refusal(tmp_path):
    agent = tmp_path / "agent"
    mem = AgentMemory.open(agent)
    mem.update_facts("- kept\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.move(agent / "memory", elsewhere / "memory")
    os.symlink(elsewhere / "memory", agent / "memory")
    before = sorted(p.name for p in (elsewhere / "memory").iterdir())
    params = stdio_params(agent, tmp_path)
    calls = [
        {"action": "update", "content": "- replaced\n"},
        {"action": "append", "text": "hello"},
        {"action": "search"},
    ]

    async def main():
        with anyio.fail_after(TIMEOUT):
            async with stdio_session(params) as (session, init):
                assert "The memory folder cannot be used right now: Refusing" in init.instructions
                for args in calls:
                    result = await session.call_tool("memory", args)
                    assert result.is_error
                    with pytest.raises(MemoryToolError) as info:
                        AgentMemory(agent).call_tool(args)
                    assert info.value.code == -32603
                    assert text_of(result) == f"Error: MCP error -32603: {info.value.message}"
                with pytest.raises(MCPError) as refused:
                    await session.read_resource(FACT_URI)
                assert refused.value.error.code == -32603

    anyio.run(main)
    assert (elsewhere / "memory" / "FACT.md").read_text() == "- kept\n"
    assert sorted(p.name for p in (elsewhere / "memory").iterdir()) == before


# ------------------------------------------------------------------------------ sessions


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_each_session_start_is_on_record_with_the_exact_prompt(tmp_path, mode):
    mem = learned_agent(tmp_path)
    server = build_server(MemoryService(mem, workspace=tmp_path))
    seen = []

    async def body(client):
        seen.append(client.instructions)
        # Previews never record.
        await client.read_resource(URI + "prompt")
        await client.get_prompt("new-session")

    async def main():
        with anyio.fail_after(TIMEOUT):
            info = Implementation(name="test-host", version="1.2")
            for _ in range(2):
                async with Client(server, mode=mode, client_info=info) as client:
                    await body(client)

    anyio.run(main)
    receipts = mem.sessions()
    assert len(receipts) == 2
    prompt = host_prompt(mem, tmp_path)
    for receipt, instructions in zip(receipts, seen, strict=True):
        assert instructions == prompt.context
        assert mem.session_prompt(receipt["session_id"]) == prompt.text
        assert receipt["prompt_sha256"] == hashlib.sha256(prompt.text.encode()).hexdigest()
        assert receipt["client"] == {"name": "test-host", "version": "1.2"}
    assert receipts[0]["session_id"] != receipts[1]["session_id"]


def test_a_folder_that_refuses_the_receipt_still_gets_its_instructions(tmp_path, monkeypatch):
    mem = learned_agent(tmp_path)
    service = MemoryService(mem, workspace=tmp_path)

    def refuse(*args, **kwargs):
        raise MemoryToolError("Refusing to write the sessions log", -32603)

    monkeypatch.setattr(service.builder, "start_session", refuse)

    async def body(client):
        assert client.instructions == host_prompt(mem, tmp_path).context

    run_client(build_server(service), body)
    assert mem.sessions() == []


def test_resources_and_the_read_tool_name_the_file_as_it_is_on_disk(tmp_path):
    agent = tmp_path / "agent"
    (agent / "memory").mkdir(parents=True)
    (agent / "memory" / "fact.md").write_text("- kept in lower case\n", encoding="utf-8")
    (agent / "user.md").write_text("- a user\n", encoding="utf-8")
    mem = AgentMemory.open(agent)
    service = MemoryService(mem, workspace=tmp_path, read_tool=True)
    fact = service.read(FACT_URI)
    lower = str(agent / "memory" / "fact.md")
    assert (fact.text, fact.meta["path"]) == ("- kept in lower case\n", lower)
    assert service.read(URI + "USER.md").meta["path"] == str(agent / "user.md")
    assert service.read(URI + "SOUL.md").meta["path"] == str(agent / "SOUL.md")
    snapshot = service.read_snapshot()
    assert (snapshot["facts"], snapshot["path"]) == (fact.text, fact.meta["path"])


# ------------------------------------------------------------------------------ tool names


@pytest.mark.parametrize("guided", [False, True], ids=["new agent", "provisioned"])
def test_the_instructions_name_only_tools_the_server_offers(tmp_path: Path, guided: bool) -> None:
    # A host shows our tools under its prefix (mcp__agent-memory__<tool>); every tool the
    # instructions tell the model to call is one tools/list offers, and a bootstrap can be
    # completed with them (the host's file tools edit SOUL.md and USER.md).
    mem = AgentMemory.open(tmp_path / "agent")
    if guided:
        provision("guide", mem)
    prefix = HOST_TOOL_NAME.removesuffix("memory")

    async def body(client):
        offered = {tool.name for tool in (await client.list_tools()).tools}
        named = set(re.findall(r"(?:through|with) `([^`\s]+)`", client.instructions))
        assert named and {name.removeprefix(prefix) for name in named} <= offered, named
        if "## Bootstrap Mode" in client.instructions:
            assert f'`{HOST_TOOL_NAME}`: action `append`, tags `["bootstrap"]`' in (
                client.instructions
            )
            assert "- Write " in client.instructions  # the host's file tools do the writing

    run_client(build_server(mem), body)
