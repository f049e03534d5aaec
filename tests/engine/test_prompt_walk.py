"""The prompt builder walks folders as the store does: by descriptor, never following a link.

Swaps are made at the worst moment (between opening one folder and the next), FIFOs and
hard links are planted, and nothing from outside the agent folder may reach the prompt;
a FIFO never blocks a build.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from jupyter_agent_memory import AgentMemory, PromptBuilder, UnsafePathError
from jupyter_agent_memory.engine.prompt import Prompt
from jupyter_agent_memory.engine.prompt import PromptBuilder as Builder

SECRET = "SECRET-FROM-OUTSIDE"


@pytest.fixture
def agent(mem: AgentMemory) -> AgentMemory:
    mem.write_soul("I am Ada, a patient research assistant who explains every step clearly.")
    mem.update_facts("- inside fact\n")
    return mem


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """An agent-shaped folder outside the agents root, full of secrets."""
    folder = tmp_path / "outside"
    (folder / "memory").mkdir(parents=True)
    for name in ("SOUL.md", "USER.md", "memory/FACT.md"):
        (folder / name).write_text(f"{SECRET} {name}\n")
    return folder


def within_seconds(seconds: float, function, *args):  # noqa: ANN001, ANN201
    """Run ``function`` in a thread; fail (instead of hanging the suite) when it blocks."""
    result: dict[str, object] = {}

    def target() -> None:
        try:
            result["value"] = function(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{function.__name__} blocked for more than {seconds}s"
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    return result["value"]


def build_swapping_after_listing(
    agent: AgentMemory, workspace: Path, monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]
) -> Prompt:
    """Build ``agent``'s prompt, running ``swap()`` once, right after the agent folder's listing."""
    original = Builder._names
    swapped: list[bool] = []

    def list_then_swap(self, folder):  # noqa: ANN001, ANN202
        listing = original(self, folder)
        if folder.path == agent.path and not swapped:
            swap()
            swapped.append(True)
        return listing

    monkeypatch.setattr(Builder, "_names", list_then_swap)
    prompt = PromptBuilder().build(agent, workspace=workspace)
    assert swapped, "the build never listed the agent folder"
    return prompt


def test_memory_folder_swapped_for_a_link_after_the_listing_is_refused(
    agent: AgentMemory, workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def swap() -> None:
        memory = agent.path / "memory"
        memory.rename(agent.path / "memory.away")
        memory.symlink_to(outside / "memory")

    prompt = build_swapping_after_listing(agent, workspace, monkeypatch, swap)
    assert SECRET not in prompt.text
    assert "<facts>" not in prompt.context


def test_agent_folder_swapped_for_a_link_mid_build_reads_the_opened_folder(
    agent: AgentMemory, workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def swap() -> None:
        agent.path.rename(agent.path.with_name("t.away"))
        agent.path.symlink_to(outside)

    prompt = build_swapping_after_listing(agent, workspace, monkeypatch, swap)
    assert SECRET not in prompt.text
    # The folder that was opened is the one read, from first file to last.
    assert "I am Ada" in prompt.context and "- inside fact" in prompt.context


def test_a_linked_agent_folder_loads_nothing_and_a_cached_builder_notices(
    agent: AgentMemory, workspace: Path, outside: Path
) -> None:
    builder = PromptBuilder()
    assert "I am Ada" in builder.build(agent, workspace=workspace).context
    builder.build(agent, workspace=workspace)
    shutil.move(agent.path, agent.path.with_name("t.away"))
    agent.path.symlink_to(outside)
    prompt = builder.build(agent, workspace=workspace)
    assert SECRET not in prompt.text
    assert "I am Ada" not in prompt.context


def test_hard_linked_fact_md_is_not_read(
    agent: AgentMemory, workspace: Path, outside: Path
) -> None:
    builder = PromptBuilder()
    assert "- inside fact" in builder.build(agent, workspace=workspace).context
    fact = agent.path / "memory" / "FACT.md"
    fact.unlink()
    os.link(outside / "memory" / "FACT.md", fact)
    prompt = builder.build(agent, workspace=workspace)
    assert SECRET not in prompt.text and "<facts>" not in prompt.context
    # The other name going away makes FACT.md an ordinary file again: the cache sees it.
    (outside / "memory" / "FACT.md").unlink()
    assert SECRET in builder.build(agent, workspace=workspace).context


@pytest.mark.parametrize("name", ["SOUL.md", "USER.md"])
def test_hard_linked_persona_files_are_not_read(
    agent: AgentMemory, workspace: Path, outside: Path, name: str
) -> None:
    (agent.path / name).unlink()
    os.link(outside / name, agent.path / name)
    assert SECRET not in PromptBuilder().build(agent, workspace=workspace).text


@pytest.mark.parametrize("name", ["SOUL.md", "memory/FACT.md"])
def test_a_fifo_memory_file_is_left_out_at_once(
    agent: AgentMemory, workspace: Path, name: str
) -> None:
    path = agent.path / name
    path.unlink()
    os.mkfifo(path)
    prompt = within_seconds(5, PromptBuilder().build, agent, workspace)
    assert ("<soul>" in prompt.context) is (name != "SOUL.md")
    assert ("<facts>" in prompt.context) is (name != "memory/FACT.md")


def test_a_fifo_system_md_is_refused_at_once(agent: AgentMemory, workspace: Path) -> None:
    os.mkfifo(workspace / "system.md")
    with pytest.raises(UnsafePathError) as info:
        within_seconds(5, PromptBuilder().build, agent, workspace)
    assert info.value.message == (
        f"Refusing to read {workspace / 'system.md'}: it is a named pipe (FIFO), "
        "not a regular file"
    )


def test_a_symlinked_workspace_is_resolved_once_and_its_system_md_read(
    agent: AgentMemory, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "system.md").write_text("Base from the real folder.")
    link = tmp_path / "ws-link"
    link.symlink_to(workspace)
    prompt = PromptBuilder().build(agent, workspace=link)
    assert prompt.base == "Base from the real folder."
    assert f"(`{workspace}`)" in prompt.context


def test_a_hard_linked_system_md_is_the_users_and_is_read(
    agent: AgentMemory, workspace: Path, tmp_path: Path
) -> None:
    # Cherry Studio: prompt.ts reads a hard-linked system.md (only agent files are refused)
    shared = tmp_path / "shared-system.md"
    shared.write_text("Shared base.")
    os.link(shared, workspace / "system.md")
    assert PromptBuilder().build(agent, workspace=workspace).base == "Shared base."


def test_a_symlinked_system_md_is_refused(
    agent: AgentMemory, workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "real.md").write_text("Base.")
    (workspace / "system.md").symlink_to(tmp_path / "real.md")
    with pytest.raises(UnsafePathError, match="it is a symbolic link, not a regular file"):
        PromptBuilder().build(agent, workspace=workspace)
