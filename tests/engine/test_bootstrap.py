"""Bootstrap as Cherry Studio runs it: the 50-character test, both variants, completion.

Cherry Studio: prompt.ts (shouldRunBootstrap, buildPromptParts) and bootstrap.ts
(buildBootstrapInstructions, SOUL_CONTENT_THRESHOLD).
"""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

import pytest

from jupyter_agent_memory import AgentMemory, PromptBuilder, Toolset, provision
from jupyter_agent_memory import journal as journal_module
from jupyter_agent_memory.engine.bootstrap import (
    STATE_FILE,
    BootstrapStateWarning,
    set_bootstrap_completed,
    soul_is_configured,
)

PIP = "I am Pip: cheerful, brief, and kind."


# -- the 50-character arithmetic ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("soul", "configured"),
    [
        # Cherry Studio: prompt.ts — trim, then `content.length > 50`
        ("x" * 50, False),
        ("x" * 51, True),
        ("  \n" + "x" * 51 + "\n\n", True),
        # Heading and quote lines are blanked in place: their line breaks still count.
        # Removing them (the old rule) gives 50 characters here, Cherry Studio 51.
        ("a" * 25 + "\n# heading\n" + "b" * 24, True),
        ("a" * 25 + "\n> quote\n" + "b" * 24, True),
        ("a" * 25 + "\n" + "b" * 24, False),
        # Trimmed first: an indented heading is a heading; a heading's own text never counts.
        ("   # " + "h" * 80 + "\n" + "x" * 50, False),
        ("# " + "h" * 200 + "\n> " + "q" * 200, False),
        # JavaScript counts UTF-16 code units: 26 emoji are 52.
        ("😀" * 26, True),
        ("😀" * 25, False),
        ("é" * 51, True),
        # Every JavaScript line terminator starts a line for ^ and ends one for .
        ("x" * 30 + "\r# " + "h" * 40 + "\r" + "y" * 19, True),
        ("x" * 30 + "\u2028# " + "h" * 40 + "\u2028" + "y" * 18, False),
        # U+FEFF is trimmed by JavaScript (Python's strip keeps it); U+001C is not.
        ("\ufeff" * 5 + "x" * 50, False),
        ("\x1c" + "x" * 50, True),
    ],
)
def test_soul_length_follows_the_reference_arithmetic(soul: str, configured: bool) -> None:
    assert soul_is_configured(soul) is configured
    assert PromptBuilder.needs_bootstrap(soul) is (not configured)


def test_a_short_persona_bootstraps_until_completed(mem: AgentMemory, workspace: Path) -> None:
    mem.write_soul(PIP)
    assert PromptBuilder().build(mem, workspace=workspace).bootstrap is True


# -- completion --------------------------------------------------------------------------------


def test_the_bootstrap_append_ends_bootstrap_for_the_following_sessions(
    mem: AgentMemory, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = PromptBuilder()
    mem.write_soul(PIP)
    first = builder.build_session(mem, workspace=workspace)
    assert first.bootstrap is True
    block = first.context[: first.sections[0].chars]
    assert "That append completes bootstrap" in block

    # The model follows the block to the letter.
    mem.call_tool({"action": "append", "text": "Set up Pip with Grace.", "tags": ["bootstrap"]})
    state = json.loads((mem.path / STATE_FILE).read_text())
    assert state["bootstrap_completed"] is True
    (entry,) = mem.search(tag="bootstrap")
    assert state["bootstrap_completed_at"] == entry["ts"]

    # No prompt build reads the journal to know it.
    def no_journal(*args: object, **kwargs: object) -> None:
        raise AssertionError("a prompt build must not read the journal")

    monkeypatch.setattr(journal_module, "search", no_journal)
    monkeypatch.setattr(journal_module, "iter_entries", no_journal)
    monkeypatch.setattr(AgentMemory, "_journal_file", no_journal)
    for current in (builder, PromptBuilder()):
        later = current.build_session(mem, workspace=workspace)
        assert later.bootstrap is False
        assert "## Bootstrap Mode" not in later.context
        assert f"<soul>\n{PIP}\n</soul>" in later.context


@pytest.mark.parametrize("tags", [["bootstrap"], ["Bootstrap"], ["setup", "BOOTSTRAP"]])
def test_any_append_tagged_bootstrap_completes(mem: AgentMemory, tags: list[str]) -> None:
    mem.append("done", tags=tags)
    assert PromptBuilder.needs_bootstrap("") is True
    assert PromptBuilder().build(mem).bootstrap is False


@pytest.mark.parametrize("tags", [[], ["bootstrapping"], ["boot", "strap"]])
def test_other_appends_write_no_state(mem: AgentMemory, tags: list[str]) -> None:
    before = sorted(os.listdir(mem.path))
    mem.append("hello", tags=tags)
    assert sorted(os.listdir(mem.path)) == before
    assert PromptBuilder().build(mem).bootstrap is True


def test_recorded_completion_outranks_the_configuration(mem: AgentMemory, workspace: Path) -> None:
    forced = {"bootstrap_completed": False}
    builder = PromptBuilder()
    assert builder.build(mem, workspace=workspace, config=forced).bootstrap is True
    mem.append("done", tags=["bootstrap"])
    assert builder.build(mem, workspace=workspace, config=forced).bootstrap is False


def test_a_reset_brings_bootstrap_back_even_with_instructions(
    mem: AgentMemory, workspace: Path
) -> None:
    builder = PromptBuilder()
    mem.append("done", tags=["bootstrap"])
    set_bootstrap_completed(mem, False)
    # Cherry Studio: prompt.ts — an explicit false runs bootstrap even with instructions
    assert builder.build(mem, workspace=workspace, has_user_instructions=True).bootstrap is True
    set_bootstrap_completed(mem, None)
    assert builder.build(mem, workspace=workspace, has_user_instructions=True).bootstrap is False
    assert builder.build(mem, workspace=workspace).bootstrap is True


def test_a_guide_agent_completes_too(mem: AgentMemory, workspace: Path) -> None:
    provision("guide", mem)
    mem.write_soul(PIP)  # short: without completion, bootstrap would come back
    set_bootstrap_completed(mem, False)
    assert PromptBuilder().build_session(mem, workspace=workspace).bootstrap is True
    mem.append("done", tags=["bootstrap"])
    assert PromptBuilder().build_session(mem, workspace=workspace).bootstrap is False


def test_a_state_that_cannot_be_written_keeps_the_entry_and_warns(mem: AgentMemory) -> None:
    (mem.path / STATE_FILE).mkdir()  # a folder where the state file belongs
    with pytest.warns(BootstrapStateWarning, match="could not be recorded"):
        entry = mem.append("done", tags=["bootstrap"])
    assert [e["text"] for e in mem.search(tag="bootstrap")] == [entry["text"]]


def test_a_hand_edited_state_is_seen_by_a_cached_builder(mem: AgentMemory, workspace: Path) -> None:
    builder = PromptBuilder()
    mem.append("done", tags=["bootstrap"])
    builder.build(mem, workspace=workspace)
    assert builder.build(mem, workspace=workspace).bootstrap is False
    state = mem.path / STATE_FILE
    with open(state, "r+") as handle:  # in place, no rename: only the held handle sees it
        text = handle.read().replace("true", "false")
        handle.seek(0)
        handle.write(text + " " * 8)
    assert builder.build(mem, workspace=workspace).bootstrap is True


def test_the_state_write_leaves_no_temp_file(mem: AgentMemory) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mem.append("done", tags=["bootstrap"])
    assert sorted(os.listdir(mem.path)) == [STATE_FILE, "SOUL.md", "USER.md", "memory"]


# -- the two variants --------------------------------------------------------------------------


FILE_TOOLS = Toolset(file_edits=True)


def blocks(mem: AgentMemory, workspace: Path, tools: Toolset = FILE_TOOLS) -> tuple[str, str]:
    """The bootstrap block without and with instructions. The default toolset is the
    situation of Cherry Studio's agents: the model edits SOUL.md and USER.md with file tools
    of its host."""
    builder = PromptBuilder(tools=tools)
    plain = builder.build(mem, workspace=workspace)
    guided = builder.build(
        mem, workspace=workspace, config={"bootstrap_completed": False},
        has_user_instructions=True,
    )
    return (
        plain.context[: plain.sections[0].chars],
        guided.context[: guided.sections[0].chars],
    )


def test_both_variants_keep_the_reference_rules(mem: AgentMemory, workspace: Path) -> None:
    # Cherry Studio: bootstrap.ts — both variants
    for block in blocks(mem, workspace):
        assert block.startswith("## Bootstrap Mode\n\n")
        for needed in (
            "Introduce yourself",
            "3 to 5 questions in total",
            "answer in the user's language",
            "timezone and working hours",
            "language, level of detail, formality",
            f"`{mem.path / 'SOUL.md'}`",
            f"`{mem.path / 'USER.md'}`",
            '`memory`: action `append`, tags `["bootstrap"]`',
            "That append completes bootstrap",
            "never change the configured system prompt or instructions",
            "natural and warm",
        ):
            assert needed in block, needed


def test_the_instructions_variant_keeps_role_out_of_soul(mem: AgentMemory, workspace: Path) -> None:
    # Cherry Studio: bootstrap.ts — hasAgentInstructions
    _plain, guided = blocks(mem, workspace)
    for needed in (
        "instructions already define your role, goals, capability scope and constraints",
        "never change, restate or replace those instructions",
        "how you should present yourself",
        "Never put role, goals, capability scope or constraints in SOUL.md",
        "without repeating the role your instructions define",
    ):
        assert needed in guided, needed
    # The old rule copied the instructions' purpose into SOUL.md; Cherry Studio forbids it.
    assert "purpose" not in guided


def test_the_plain_variant_discovers_the_role(mem: AgentMemory, workspace: Path) -> None:
    # Cherry Studio: bootstrap.ts — no instructions: the role is discovered and kept in SOUL.md
    plain, _guided = blocks(mem, workspace)
    for needed in (
        "SOUL.md will be your role definition",
        "what role you should play for them",
        "what kind of assistant they need",
        "Write your role definition, name, personality, tone, principles and boundaries",
    ):
        assert needed in plain, needed


@pytest.mark.parametrize(
    ("tools", "soul_step"),
    [
        (Toolset(file_edits=True), "- Write {} to `{}`."),
        (Toolset(profile="profile"), "- Save {} with `profile` (`file`: `soul`"),
        (Toolset(), "- No tool of this session can write SOUL.md or USER.md"),
    ],
    ids=["file tools", "profile tool", "memory tool only"],
)
def test_each_toolset_gets_steps_it_can_carry_out(
    mem: AgentMemory, workspace: Path, tools: Toolset, soul_step: str
) -> None:
    offered = [spec["name"] for spec in tools.specs(mem)]
    for block, soul_part in zip(
        blocks(mem, workspace, tools),
        (
            "your role definition, name, personality, tone, principles and boundaries",
            "your name, personality, tone and communication style",
        ),
        strict=True,
    ):
        assert soul_step.format(soul_part, mem.path / "SOUL.md") in block
        # Every tool the block tells the model to call is one it is offered.
        named = set(re.findall(r"(?:with|Finish with) `([A-Za-z_][\w.:/-]*)`", block))
        assert named <= set(offered), (named, offered)
        # ... and the one step that completes bootstrap is always possible.
        assert '`memory`: action `append`, tags `["bootstrap"]`' in block
        if not tools.can_write_persona:
            assert "Write only SOUL.md and USER.md" not in block
    mem.call_tool({"action": "append", "text": "setup done", "tags": ["bootstrap"]})
    assert PromptBuilder(tools=tools).build(mem, workspace=workspace).bootstrap is False


def test_the_memories_table_says_how_each_toolset_changes_the_persona(
    mem: AgentMemory, workspace: Path
) -> None:
    def rows(tools: Toolset) -> list[str]:
        intro = PromptBuilder(tools=tools).build(mem, workspace=workspace).sections[-1].text
        return [line for line in intro.splitlines() if "SOUL.md`" in line or "USER.md`" in line]

    assert all(r.endswith("| edit the file directly |") for r in rows(Toolset(file_edits=True)))
    soul, user = rows(Toolset(profile="persona"))
    through = "| only through `persona` (`file`: `{}`), sending the whole new file |"
    assert soul.endswith(through.format("soul")) and user.endswith(through.format("user"))
    assert all(
        r.endswith("| the user edits it; no tool of this session can change it |")
        for r in rows(Toolset())
    )


def test_a_state_write_left_by_a_crash_is_swept(mem: AgentMemory) -> None:
    leftover = mem.path / f".{STATE_FILE}.0123456789abcdef.tmp"
    leftover.write_text('{"bootstrap_completed": tr')
    AgentMemory.open(mem.path)
    assert not leftover.exists()


def test_concurrent_bootstrap_appends_record_one_consistent_state(mem: AgentMemory) -> None:
    import threading

    errors: list[BaseException] = []

    def append(index: int) -> None:
        try:
            AgentMemory.open(mem.path).append(f"setup {index}", tags=["bootstrap"])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    state = json.loads((mem.path / STATE_FILE).read_text())
    assert state["bootstrap_completed"] is True
    assert state["bootstrap_completed_at"] in {e["ts"] for e in mem.search(tag="bootstrap")}
    assert len(mem.search(tag="bootstrap")) == 8
