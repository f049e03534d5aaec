"""A notebook's kernel hands its agent folder over; nothing else opens a folder outside.

Real jupyter_server (pytest-jupyter), real ipykernel kernels started by the server's own
kernel manager: the kernel runs ``%agent_memory PATH`` as a notebook would, then
``POST handover {"kernel_id"}`` makes the server ask that kernel. Every other way of naming a
folder outside the server's root and the agents root is refused.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent_memory import AgentMemory

pytestmark = pytest.mark.slow  # each test starts a kernel

Kernel = Callable[[str], Awaitable[None]]


@pytest.fixture
def agents_root(server_only_root: Path) -> Path:
    return server_only_root


@contextlib.asynccontextmanager
async def started_kernel(serverapp: Any) -> AsyncIterator[tuple[str, Kernel]]:
    """A kernel started by the server, and ``run(code)`` that executes code in it."""
    manager = serverapp.kernel_manager
    kernel_id = await manager.start_kernel()
    client = manager.get_kernel(kernel_id).client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=60)

        async def run(code: str) -> None:
            reply = await client.execute_interactive(code, timeout=60)
            assert reply["content"]["status"] == "ok", reply["content"]

        yield kernel_id, run
    finally:
        client.stop_channels()
        await manager.shutdown_kernel(kernel_id, now=True)


async def test_a_folder_outside_both_roots_is_reachable_once_its_kernel_hands_it_over(
    call: Any, jp_serverapp: Any, tmp_path: Path, jp_root_dir: Path, agents_root: Path
) -> None:
    async with started_kernel(jp_serverapp) as (kernel_id, run):
        outside = tmp_path / "elsewhere" / "tutorial-agent"
        assert not outside.is_relative_to(jp_root_dir) and not outside.is_relative_to(agents_root)
        await run(f"%load_ext jupyter_agent_memory\n%agent_memory {outside}\n"
                  "%journal append learned in the notebook")
        mem = AgentMemory.open(outside, create=False)
        mem.update_facts("- The user wants metric units.\n")

        status, body = await call("POST", "handover", body={"kernel_id": kernel_id})
        assert status == 200, body
        handle = body["agent"]
        assert re.fullmatch(r"~[0-9a-f]{16}", handle)
        assert body == {"agent": handle, "path": str(outside.resolve()), "how": "handed-over",
                        "agent_id": None}
        # The same folder keeps its handle.
        assert (await call("POST", "handover", body={"kernel_id": kernel_id}))[1]["agent"] == handle

        status, facts = await call("GET", "agents", handle, "facts", params={"render": "html"})
        assert status == 200
        assert facts["content"] == "- The user wants metric units.\n"
        assert facts["path"] == str(outside.resolve() / "memory" / "FACT.md")
        assert "<li>The user wants metric units.</li>" in facts["html"]
        status, journal = await call("GET", "agents", handle, "journal")
        assert [e["text"] for e in journal["entries"]] == ["learned in the notebook"]
        status, saved = await call("PUT", "agents", handle, "facts",
                                   body={"content": "- edited in the sidebar\n",
                                         "expected_sha256": facts["sha256"]})
        assert status == 200, saved
        assert mem.facts == "- edited in the sidebar\n"


async def test_agents_in_the_agents_root_and_below_the_server_root_keep_their_ids(
    call: Any, jp_serverapp: Any, jp_root_dir: Path, agents_root: Path
) -> None:
    async with started_kernel(jp_serverapp) as (kernel_id, run):
        await run(f"%load_ext jupyter_agent_memory\nimport os\n"
                  f"os.environ['JUPYTER_AGENT_MEMORY_ROOT'] = {str(agents_root)!r}\n"
                  "%agent_memory research\n%fact")
        status, body = await call("POST", "handover", body={"kernel_id": kernel_id})
        assert (status, body["agent"], body["how"]) == (200, "research", "agents-root"), body
        folder = jp_root_dir / "projects" / "demo-agent"
        # The kernel's other clients (a notebook's) still get every message after a handover:
        # this run waits for its own output.
        await run(f"%agent_memory {folder}")
        status, body = await call("POST", "handover", body={"kernel_id": kernel_id})
        assert (status, body["agent"], body["how"]) == (200, "@projects/demo-agent", "server-root")


async def test_a_kernel_without_the_extension_hands_nothing_over(
    call: Any, jp_serverapp: Any
) -> None:
    async with started_kernel(jp_serverapp) as (kernel_id, _run):
        status, body = await call("POST", "handover", body={"kernel_id": kernel_id})
        assert (status, body) == (409, {"message": "The notebook has not loaded the extension "
                                                   "(%load_ext jupyter_agent_memory)"})


async def test_nothing_but_a_kernel_can_hand_a_folder_over(
    call: Any, tmp_path: Path, agents_root: Path
) -> None:
    """The refusals: a handle nobody handed over, a malformed one, a path in the request,
    an unknown kernel, and the folder-by-path form escaping the server's root."""
    outside = tmp_path / "not-handed-over"
    AgentMemory.open(outside).update_facts("- secret\n")
    status, body = await call("GET", "agents", "~0123456789abcdef", "facts")
    assert status == 404
    assert body["message"].startswith('No agent folder was handed over as "~0123456789abcdef"')
    assert (await call("GET", "agents", "~nothex", "facts"))[0] == 400
    assert (await call("GET", "agents", "~0123456789abcdef..", "journal"))[0] == 400
    status, body = await call("POST", "handover", body={"kernel_id": "k", "path": str(outside)})
    assert status == 400 and "Unknown field 'path'" in body["message"]
    status, body = await call("POST", "handover", body={"path": str(outside)})
    assert status == 400
    assert await call("POST", "handover", body={"kernel_id": "no-such-kernel"}) == (
        404, {"message": 'No running kernel "no-such-kernel"'})
    for escape in ("@..", f"@..{outside}", "@%2e%2e"):
        assert (await call("GET", "agents", escape, "facts"))[0] in (400, 404)
    assert (await call("GET", "agents", str(outside), "facts"))[0] in (400, 404)
    assert AgentMemory.open(outside).facts == "- secret\n"
