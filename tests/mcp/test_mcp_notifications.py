"""Change notifications from the MCP server: resources a client subscribed to, and the tool
list, on both protocol eras (handshake-era sessions over stdio, 2026-era listen streams)."""

from __future__ import annotations

import time
import warnings

import anyio
import pytest
from mcp import Client, MCPDeprecationWarning, stdio_client
from mcp.client.subscriptions import ResourceUpdated, ToolsListChanged
from mcp_harness import TIMEOUT, stdio_params, stdio_session, text_of

from jupyter_agent_memory import AgentMemory, provision
from jupyter_agent_memory.mcp_server.server import build_server
from jupyter_agent_memory.mcp_server.service import MemoryService

URI = "agent-memory://agent/"
FACT_URI = URI + "memory/FACT.md"
JOURNAL_URI = URI + "journal/latest"
PROMPT_URI = URI + "prompt"
SOUL_URI = URI + "SOUL.md"
# Long enough for a few polls of the server (every 0.5 s), short enough to keep tests quick.
WAIT = 10


class Inbox:
    """Notifications a client received, with a bounded wait for the next matching one."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str | None]] = []
        self._changed = anyio.Event()

    async def __call__(self, message) -> None:
        if isinstance(message, Exception):
            return
        uri = getattr(getattr(message, "params", None), "uri", None)
        self.received.append((message.method, str(uri) if uri is not None else None))
        self._changed.set()

    async def wait_for(self, method: str, uri: str | None = None) -> None:
        with anyio.fail_after(WAIT):
            while (method, uri) not in self.received:
                self._changed = anyio.Event()
                await self._changed.wait()


async def legacy(subscription, uri: str) -> None:
    """``resources/(un)subscribe``, which the SDK marks deprecated for 2026-era use."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await subscription(uri)


@pytest.mark.slow
def test_stdio_subscribers_hear_about_their_resources_only(tmp_path):
    agent = tmp_path / "agent"
    other = AgentMemory.open(agent)  # another process-like writer on the same folder
    inbox = Inbox()

    async def main():
        with anyio.fail_after(TIMEOUT * 2):
            async with stdio_session(
                stdio_params(agent, tmp_path), message_handler=inbox
            ) as (session, init):
                assert init.capabilities.resources.subscribe is True
                assert init.capabilities.tools.list_changed is True
                await legacy(session.subscribe_resource, FACT_URI)
                await legacy(session.subscribe_resource, PROMPT_URI)
                # A change through the tool, then one made outside the server.
                result = await session.call_tool("memory", {"action": "append", "text": "x"})
                assert text_of(result).startswith("Journal entry added at ")
                result = await session.call_tool(
                    "memory", {"action": "update", "content": "- one\n"}
                )
                assert text_of(result) == "Memory updated."
                await inbox.wait_for("notifications/resources/updated", FACT_URI)
                await inbox.wait_for("notifications/resources/updated", PROMPT_URI)
                other.write_soul("# Soul\nI am Pip.\n")  # SOUL is not subscribed; the prompt is
                inbox.received.clear()
                await inbox.wait_for("notifications/resources/updated", PROMPT_URI)
                assert ("notifications/resources/updated", SOUL_URI) not in inbox.received
                await legacy(session.unsubscribe_resource, PROMPT_URI)
                inbox.received.clear()
                other.update_facts("- two\n")
                await inbox.wait_for("notifications/resources/updated", FACT_URI)
                await anyio.sleep(1.5)  # three more polls: anything else would have come
                # The journal was never subscribed to: appends were not announced.
                assert all(uri != JOURNAL_URI for _m, uri in inbox.received)
                assert ("notifications/resources/updated", PROMPT_URI) not in inbox.received

    anyio.run(main)


@pytest.mark.slow
def test_stdio_tools_list_changed_when_product_info_appears(tmp_path):
    agent = tmp_path / "agent"
    mem = AgentMemory.open(agent)
    inbox = Inbox()

    async def main():
        with anyio.fail_after(TIMEOUT * 2):
            async with stdio_session(
                stdio_params(agent, tmp_path), message_handler=inbox
            ) as (session, _init):
                assert [t.name for t in (await session.list_tools()).tools] == ["memory"]
                provision("guide", mem)
                await inbox.wait_for("notifications/tools/list_changed")
                names = [t.name for t in (await session.list_tools()).tools]
                assert names == ["memory", "product_info"]

    anyio.run(main)


def test_in_process_legacy_session_gets_notifications_too(tmp_path):
    mem = AgentMemory.open(tmp_path / "agent")
    inbox = Inbox()

    async def main():
        with anyio.fail_after(TIMEOUT):
            server = build_server(mem, poll_seconds=0.05)
            async with Client(server, mode="legacy", message_handler=inbox) as client:
                await legacy(client.subscribe_resource, JOURNAL_URI)
                mem.append("hello")
                await inbox.wait_for("notifications/resources/updated", JOURNAL_URI)
                provision("guide", mem)
                await inbox.wait_for("notifications/tools/list_changed")

    anyio.run(main)


def test_a_change_right_after_connecting_is_announced(tmp_path, monkeypatch):
    """The server's first look at the folder comes before it serves anything, however slow
    that look is, so the client's own first write is a change and not the baseline."""
    mem = AgentMemory.open(tmp_path / "agent")
    service = MemoryService(mem)
    first_look = service.snapshot
    looks = []

    def slow_first_look():
        if not looks:
            time.sleep(0.5)
        looks.append(1)
        return first_look()

    monkeypatch.setattr(service, "snapshot", slow_first_look)
    inbox = Inbox()

    async def main():
        with anyio.fail_after(TIMEOUT):
            server = build_server(service, poll_seconds=0.05)
            async with Client(server, mode="legacy", message_handler=inbox) as client:
                await legacy(client.subscribe_resource, JOURNAL_URI)
                await client.call_tool("memory", {"action": "append", "text": "first"})
                await inbox.wait_for("notifications/resources/updated", JOURNAL_URI)

    anyio.run(main)


def test_2026_clients_listen_for_resource_and_tool_changes(tmp_path):
    mem = AgentMemory.open(tmp_path / "agent")

    async def main():
        with anyio.fail_after(TIMEOUT):
            server = build_server(mem, poll_seconds=0.05)
            async with Client(server, mode="auto") as client:
                assert client.protocol_version == "2026-07-28"
                async with client.listen(
                    tools_list_changed=True, resource_subscriptions=[FACT_URI]
                ) as events:
                    mem.update_facts("- listened\n")
                    seen = []
                    async for event in events:
                        seen.append(event)
                        if isinstance(event, ResourceUpdated):
                            break
                    assert seen[-1] == ResourceUpdated(uri=FACT_URI)
                    provision("guide", mem)
                    async for event in events:
                        if isinstance(event, ToolsListChanged):
                            break
                    tools = await client.list_tools(cache_mode="refresh")
                    assert [t.name for t in tools.tools] == ["memory", "product_info"]

    anyio.run(main)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_nothing_is_announced_while_nothing_changes(tmp_path, mode):
    mem = AgentMemory.open(tmp_path / "agent")
    mem.update_facts("- still\n")
    inbox = Inbox()

    async def main():
        server = build_server(mem, poll_seconds=0.02)
        with anyio.fail_after(TIMEOUT):
            async with Client(server, mode=mode, message_handler=inbox) as client:
                if mode == "legacy":
                    await legacy(client.subscribe_resource, FACT_URI)
                for _ in range(5):
                    (await client.read_resource(FACT_URI))  # reading changes nothing
                    await client.call_tool("memory", {"action": "search"})
                await anyio.sleep(0.3)  # about 15 polls
        assert [m for m in inbox.received if m[0] != "notifications/message"] == []

    anyio.run(main)


@pytest.mark.slow
def test_2026_client_over_stdio_gets_instructions_and_listen_events(tmp_path):
    agent = tmp_path / "agent"
    mem = AgentMemory.open(agent)
    mem.update_facts("- The user is Ada.\n")
    outside = AgentMemory.open(agent)

    async def main():
        with anyio.fail_after(TIMEOUT):
            async with Client(stdio_client(stdio_params(agent, tmp_path)), mode="auto") as client:
                assert client.protocol_version == "2026-07-28"
                assert "<facts>\n- The user is Ada.\n</facts>" in client.instructions
                async with client.listen(resource_subscriptions=[FACT_URI]) as events:
                    outside.update_facts("- The user is Ada Lovelace.\n")
                    async for event in events:
                        assert event == ResourceUpdated(uri=FACT_URI)
                        break
                (content,) = (await client.read_resource(FACT_URI, cache_mode="refresh")).contents
                assert content.text == "- The user is Ada Lovelace.\n"

    anyio.run(main)
