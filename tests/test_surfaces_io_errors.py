"""One error boundary: a failing filesystem reads the same on every surface.

FACT.md's atomic replacement is made to fail the way a full disk or a permission problem
does (``Folder.write_atomic`` raising ``OSError`` with ``ENOSPC`` or ``EACCES``). The engine
wraps it in ``MemoryIOError`` (a ``MemoryToolError`` that is also an ``OSError``, code
-32603), and the Python API, the ``memory`` tool, function calling, MCP (a real client), the
CLI, REST (a real server), the magics (a real shell) and the panel all report that same text:
none of them catches an ``OSError`` of its own. Nothing is written, and FACT.md and its
history are left as they were.
"""

from __future__ import annotations

import errno
import json
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import anyio
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from mcp import Client

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.cli import main
from jupyter_agent_memory.engine.functions import dispatch, run_tool
from jupyter_agent_memory.errors import INTERNAL_ERROR, MemoryIOError, MemoryToolError
from jupyter_agent_memory.folder import Folder
from jupyter_agent_memory.mcp_server.server import build_server
from jupyter_agent_memory.notebook.panel import MemoryPanel

KEPT = "- kept\n"
NEW = "- the new text\n"
UPDATE = {"action": "update", "content": NEW}


@dataclass(frozen=True)
class Failure:
    """One simulated filesystem failure and what every surface must say about it."""

    errno: int
    strerror: str
    http_status: int  # REST maps the errno: 507 Insufficient Storage, 403 Forbidden

    @property
    def message(self) -> str:
        """The engine's text: the OS's words and the file."""
        return f"{self.strerror} (FACT.md)"

    @property
    def tool_text(self) -> str:
        """What a model sees (function calling and MCP)."""
        return f"Error: MCP error {INTERNAL_ERROR}: {self.message}"


FAILURES = {
    "disk-full": Failure(errno.ENOSPC, "No space left on device", 507),
    "permission-denied": Failure(errno.EACCES, "Permission denied", 403),
}


@pytest.fixture(params=sorted(FAILURES))
def failure(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Failure:
    """Make every atomic replacement of FACT.md fail (other files are written as usual, so
    the history version the update keeps first is written, and must be removed again)."""
    chosen = FAILURES[request.param]
    original = Folder.write_atomic

    def write_atomic(self: Folder, name: str, data: bytes, recheck: Any, **options: Any) -> None:
        if name == "FACT.md":
            raise OSError(chosen.errno, chosen.strerror, name)
        original(self, name, data, recheck, **options)

    monkeypatch.setattr(Folder, "write_atomic", write_atomic)
    return chosen


@pytest.fixture
def agent(agents_root: Path, monkeypatch: pytest.MonkeyPatch) -> AgentMemory:
    """The agent ``t`` with FACT.md holding ``KEPT`` (written before any failure is set up)."""
    memory = AgentMemory.open("t")
    memory.update_facts(KEPT)
    return memory


def assert_untouched(mem: AgentMemory) -> None:
    """FACT.md still holds ``KEPT`` and no history version was left behind."""
    assert (mem.path / "memory" / "FACT.md").read_text(encoding="utf-8") == KEPT
    assert mem.history() == []
    leftovers = [p.name for p in (mem.path / "memory").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


# The fixture order matters: `agent` writes KEPT before `failure` patches the folder.


def test_python_api_raises_memory_io_error(agent: AgentMemory, failure: Failure) -> None:
    with pytest.raises(MemoryIOError) as info:
        agent.update_facts(NEW)
    error = info.value
    assert isinstance(error, MemoryToolError) and isinstance(error, OSError)
    assert (error.code, error.message, str(error)) == (
        INTERNAL_ERROR, failure.message, failure.message
    )
    assert (error.errno, error.strerror, error.filename) == (
        failure.errno, failure.strerror, "FACT.md"
    )
    assert_untouched(agent)


def test_memory_tool_raises_the_same_error(agent: AgentMemory, failure: Failure) -> None:
    with pytest.raises(MemoryIOError) as info:
        agent.call_tool(UPDATE)
    assert (info.value.code, info.value.message) == (INTERNAL_ERROR, failure.message)
    assert_untouched(agent)


def test_function_calling_returns_the_engine_text(agent: AgentMemory, failure: Failure) -> None:
    assert dispatch(agent, "memory", UPDATE) == failure.tool_text
    assert dispatch(agent, "memory", json.dumps(UPDATE)) == failure.tool_text
    assert run_tool(agent, "memory", UPDATE) == (failure.tool_text, True)
    assert_untouched(agent)


def test_mcp_client_gets_an_error_result(agent: AgentMemory, failure: Failure) -> None:
    results = []

    async def session() -> None:
        with anyio.fail_after(60):
            async with Client(build_server(agent)) as client:
                results.append(await client.call_tool("memory", UPDATE))

    anyio.run(session)
    (result,) = results
    assert result.is_error is True
    assert [(c.type, c.text) for c in result.content] == [("text", failure.tool_text)]
    assert_untouched(agent)


def test_cli_prints_the_engine_text(
    agent: AgentMemory, failure: Failure, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "new.md"
    source.write_text(NEW, encoding="utf-8")
    code = main(["fact", "--agent", "t", "--set", str(source)])
    out, err = capsys.readouterr()
    assert (code, out, err) == (1, "", f"jupyter-agent-memory: error: {failure.message}\n")
    assert_untouched(agent)


def test_magic_raises_a_usage_error_with_the_engine_text(
    agent: AgentMemory, failure: Failure, ip: InteractiveShell
) -> None:
    ip.run_line_magic("load_ext", "jupyter_agent_memory")
    try:
        with capture_output(), pytest.raises(UsageError) as info:
            ip.run_cell_magic("fact_update", "--agent t", NEW)
    finally:
        ip.run_line_magic("unload_ext", "jupyter_agent_memory")
    assert str(info.value) == failure.message
    assert_untouched(agent)


def test_panel_shows_the_engine_text(
    agent: AgentMemory, failure: Failure, ip: InteractiveShell
) -> None:
    panel = MemoryPanel(agent)
    try:
        assert panel.facts_editor.value == KEPT
        panel.facts_editor.value = NEW
        panel.facts_save_button.click()
        assert escape(f"Not saved: {failure.message}") in panel.facts_status.value
        assert panel.facts_editor.value == NEW  # the person's text stays in the editor
    finally:
        panel.close()
    assert_untouched(agent)


# -- REST, on a real jupyter_server ---------------------------------------------------------


# The shared server fixtures serve the same agents root as the other surfaces.


async def test_rest_maps_the_errno_and_keeps_the_engine_text(
    agent: AgentMemory, failure: Failure, jp_fetch: Any
) -> None:
    response = await jp_fetch(
        "agent-memory", "api", "agents", "t", "facts",
        method="PUT", body=json.dumps({"content": NEW}), raise_error=False,
    )
    assert response.code == failure.http_status
    assert json.loads(response.body) == {"message": failure.message}
    assert_untouched(agent)


# -- engine entry points outside AgentMemory ------------------------------------------------


@pytest.fixture
def full_disk_for_new_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every atomic write fails as on a full disk (whatever the file)."""

    def write_atomic(self: Folder, name: str, data: bytes, recheck: Any, **options: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", name)

    monkeypatch.setattr(Folder, "write_atomic", write_atomic)


def test_a_session_start_that_cannot_be_recorded_is_an_engine_error(
    agent: AgentMemory, full_disk_for_new_files: None, tmp_path: Path
) -> None:
    from jupyter_agent_memory import PromptBuilder
    from jupyter_agent_memory.mcp_server.service import MemoryService

    builder = PromptBuilder()
    with pytest.raises(MemoryIOError) as info:
        builder.start_session(agent, tmp_path)
    assert info.value.code == INTERNAL_ERROR
    assert info.value.message.startswith("No space left on device (") and agent.sessions() == []
    # The MCP server catches that family alone, and the session still gets its context.
    service = MemoryService(agent, builder, workspace=tmp_path)
    assert service.start_session({"name": "client", "version": "1"}) == service.instructions()
    assert KEPT.strip() in service.instructions() and agent.sessions() == []


def test_provisioning_on_a_full_disk_is_an_engine_error(
    agents_root: Path, full_disk_for_new_files: None
) -> None:
    from jupyter_agent_memory import provision

    mem = AgentMemory.open("fresh")
    with pytest.raises(MemoryIOError) as info:
        provision("guide", mem)
    assert info.value.code == INTERNAL_ERROR
    assert info.value.message.startswith("No space left on device (")
    assert mem.soul == "" and mem.template_info() is None
