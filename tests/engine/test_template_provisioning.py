"""Templates as Cherry Studio provisions them, and prompt files that cannot be read.

Cherry Studio: BuiltinAgentProvisioner.ts (localised fields, recursive copy),
builtinAgentDefinition.ts (configuration validated at load), prompt.ts (a required
system.md that cannot be read fails the build).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent_memory import AgentMemory, MemoryToolError, PromptBuilder, TemplateError
from jupyter_agent_memory import provision as provision_agent
from jupyter_agent_memory.engine.templates import load_template, pick_localized, template_for


def make_template(folder: Path, spec: Any, memory: dict[str, bytes] | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "agent.json").write_text(json.dumps(spec))
    (folder / "SOUL.md").write_text("# Soul\n")
    for relative, data in (memory or {}).items():
        path = folder / "memory" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return folder


# -- configuration is validated when the template loads -----------------------------------------


@pytest.mark.parametrize(
    ("configuration", "problem"),
    [
        ({"budget_tokens": "4000"}, "'budget_tokens' must be a positive integer, got \"4000\""),
        ({"budget_tokens": 0}, "'budget_tokens' must be a positive integer, got 0"),
        ({"budget_tokens": True}, "'budget_tokens' must be a positive integer, got true"),
        ({"budget_tokens": 12.5}, "'budget_tokens' must be a positive integer, got 12.5"),
        ({"bootstrap_completed": "yes"},
         "'bootstrap_completed' must be true or false, got \"yes\""),
        ({"bootstrap_completed": 1}, "'bootstrap_completed' must be true or false, got 1"),
    ],
)
def test_an_invalid_configuration_is_refused_at_load_naming_the_key(
    tmp_path: Path, configuration: dict[str, Any], problem: str
) -> None:
    template = make_template(tmp_path / "tpl", {"name": "T", "configuration": configuration})
    with pytest.raises(TemplateError) as info:
        load_template(template)
    assert info.value.code == -32602
    assert info.value.message == (
        f"Invalid template {template / 'agent.json'}: invalid configuration: {problem}"
    )
    with pytest.raises(TemplateError):
        provision_agent(template, tmp_path / "agent")
    assert not (tmp_path / "agent").exists()


def test_every_bad_key_is_named_at_once(tmp_path: Path) -> None:
    spec = {"name": "T", "configuration": {"budget_tokens": "4000", "bootstrap_completed": "no"}}
    template = make_template(tmp_path / "tpl", spec)
    with pytest.raises(TemplateError) as info:
        load_template(template)
    assert "'budget_tokens' must be" in info.value.message
    assert "'bootstrap_completed' must be" in info.value.message


def test_valid_configuration_values_are_normalised(tmp_path: Path) -> None:
    spec = {
        "name": "T",
        "configuration": {"budget_tokens": 4000.0, "bootstrap_completed": None, "theme": "x"},
    }
    definition = load_template(make_template(tmp_path / "tpl", spec))
    assert definition.configuration == {"budget_tokens": 4000, "theme": "x"}
    assert type(definition.configuration["budget_tokens"]) is int


def test_a_template_broken_after_provisioning_never_breaks_a_session_build(
    tmp_path: Path,
) -> None:
    template = make_template(tmp_path / "tpl", {"name": "T", "configuration": {}})
    mem = AgentMemory.open(tmp_path / "agent")
    provision_agent(template, mem)
    (template / "agent.json").write_text(
        json.dumps({"name": "T", "configuration": {"budget_tokens": "4000"}})
    )
    assert template_for(mem) is None
    prompt = PromptBuilder().build_session(mem, workspace=tmp_path)
    assert prompt.budget_tokens is None and "## Memories" in prompt.context


@pytest.mark.parametrize("budget", ["4000", 0, -3, True, [1]])
def test_build_refuses_a_bad_budget_with_a_clear_error(mem: AgentMemory, budget: Any) -> None:
    with pytest.raises(MemoryToolError) as info:
        PromptBuilder().build(mem, config={"budget_tokens": budget})
    assert info.value.code == -32602
    assert info.value.message.startswith("'budget_tokens' must be a positive integer, got ")


def cli_prompt(agent: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``jupyter-agent-memory prompt`` for ``agent`` in a child process (bounded wait)."""
    env = {**os.environ, "JUPYTER_AGENT_MEMORY_ROOT": str(tmp_path / "root")}
    return subprocess.run(
        [sys.executable, "-m", "jupyter_agent_memory", "prompt", "--agent", str(agent),
         "--workspace", str(tmp_path)],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )


def test_cli_prompt_reports_a_bad_template_without_a_traceback(tmp_path: Path) -> None:
    # The case: "budget_tokens": "4000" made `prompt` exit 1 with a traceback.
    template = make_template(tmp_path / "tpl", {"name": "T", "configuration": {}})
    agent = tmp_path / "agent"
    provision_agent(template, agent)
    (template / "agent.json").write_text(
        json.dumps({"name": "T", "configuration": {"budget_tokens": "4000"}})
    )
    done = cli_prompt(agent, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "## Memories" in done.stdout


# -- a FIFO in a template never hangs anything ---------------------------------------------------


def test_a_template_whose_agent_json_is_a_fifo_does_not_hang_prompt(tmp_path: Path) -> None:
    template = make_template(tmp_path / "tpl", {"name": "T"})
    agent = tmp_path / "agent"
    provision_agent(template, agent)
    (template / "agent.json").unlink()
    os.mkfifo(template / "agent.json")
    done = cli_prompt(agent, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "## Memories" in done.stdout
    with pytest.raises(TemplateError) as info:
        load_template(template)
    assert info.value.message == (
        f"Invalid template: {template / 'agent.json'} is a named pipe (FIFO), not a regular file"
    )


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_special_file_in_a_template_is_refused_before_anything_is_written(
    tmp_path: Path, kind: str
) -> None:
    template = make_template(tmp_path / "tpl", {"name": "T"}, {"FACT.md": b"# Facts\n"})
    special = template / "memory" / "notes" / "odd.md"
    special.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(special)
    else:
        (tmp_path / "target.md").write_text("outside")
        special.symlink_to(tmp_path / "target.md")
    with pytest.raises(TemplateError) as info:
        provision_agent(template, tmp_path / "agent")
    assert str(special) in info.value.message
    assert not (tmp_path / "agent").exists()


# -- localised fields ----------------------------------------------------------------------------

NAMES = {"en-US": "Guide", "zh-CN": "向导", "fr": "Guide FR", "de-DE": "Führer"}


@pytest.mark.parametrize(
    ("locale", "expected"),
    [
        ("zh-CN", "向导"),  # the exact key
        ("zh-TW", "向导"),  # Cherry Studio: the first key starting with the language prefix
        ("fr-CA", "Guide FR"),
        ("de_DE.UTF-8", "Führer"),  # a POSIX locale spells the same language tag
        ("ja-JP", "Guide"),  # then en-US
        (None, "Guide"),
    ],
)
def test_localised_names_fall_back_like_the_reference(locale: str | None, expected: str) -> None:
    # Cherry Studio: BuiltinAgentProvisioner.ts resolveLocalizedField
    assert pick_localized(NAMES, locale) == expected


def test_without_en_us_the_first_value_is_used() -> None:
    assert pick_localized({"ko-KR": "안내", "es-ES": "Guía"}, "ja-JP") == "안내"


def test_localised_instructions_in_a_template(tmp_path: Path) -> None:
    spec = {
        "name": {"en-US": "Guide", "zh-CN": "向导"},
        "instructions": {"en-US": "Help in English.", "zh-CN": "用中文帮助。"},
    }
    template = make_template(tmp_path / "tpl", spec)
    definition = load_template(template, locale="zh-TW")
    assert (definition.name, definition.instructions) == ("向导", "用中文帮助。")
    assert load_template(template).instructions == "Help in English."


# -- memory/ is copied recursively ---------------------------------------------------------------


def test_every_missing_memory_file_is_copied_at_any_depth(tmp_path: Path) -> None:
    # Cherry Studio: BuiltinAgentProvisioner.ts copyDirSync copies the whole tree
    files = {
        "FACT.md": b"# Facts\n",
        "notes/README.md": b"notes\n",
        "notes/deep/er/leaf.txt": b"leaf\n",
        ".hidden": b"kept too\n",
    }
    template = make_template(tmp_path / "tpl", {"name": "T"}, files)
    mem = AgentMemory.open(tmp_path / "agent")
    (mem.path / "memory" / "Notes").mkdir()  # a case variant of a template folder
    (mem.path / "memory" / "Notes" / "readme.md").write_text("user's own\n")
    provision_agent(template, mem)
    memory = mem.path / "memory"
    assert (memory / "FACT.md").read_bytes() == b"# Facts\n"
    assert (memory / ".hidden").read_bytes() == b"kept too\n"
    assert (memory / "Notes" / "readme.md").read_text() == "user's own\n"  # never overwritten
    assert not (memory / "notes").exists()  # the existing spelling is used
    assert (memory / "Notes" / "deep" / "er" / "leaf.txt").read_bytes() == b"leaf\n"
    assert stat.S_IMODE((memory / "Notes" / "deep").stat().st_mode) == 0o700
    assert stat.S_IMODE((memory / "Notes" / "deep" / "er" / "leaf.txt").stat().st_mode) == 0o600
    # A second provisioning changes nothing.
    before = {p: p.read_bytes() for p in memory.rglob("*") if p.is_file()}
    provision_agent(template, mem)
    assert {p: p.read_bytes() for p in memory.rglob("*") if p.is_file()} == before


def test_a_linked_folder_on_the_way_stops_provisioning(tmp_path: Path) -> None:
    template = make_template(tmp_path / "tpl", {"name": "T"}, {"notes/a.md": b"a\n"})
    mem = AgentMemory.open(tmp_path / "agent")
    (tmp_path / "elsewhere").mkdir()
    (mem.path / "memory" / "notes").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(MemoryToolError) as info:
        provision_agent(template, mem)
    assert str(mem.path / "memory" / "notes") in info.value.message
    assert os.listdir(tmp_path / "elsewhere") == []
    assert not (mem.path / ".template.json").exists()


# -- system.md that exists but cannot be read ----------------------------------------------------


def test_an_unreadable_system_md_fails_with_the_reference_text_and_cause(
    mem: AgentMemory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "system.md").write_text("Custom base")
    inode = (workspace / "system.md").stat().st_ino
    real_fstat = os.fstat

    def failing_fstat(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        if st.st_ino == inode and stat.S_ISREG(st.st_mode):
            raise OSError(errno.EIO, "Input/output error")
        return st

    from jupyter_agent_memory.engine import prompt as prompt_module

    monkeypatch.setattr(prompt_module.os, "fstat", failing_fstat)
    with pytest.raises(MemoryToolError) as info:
        PromptBuilder().build(mem, workspace=workspace)
    # Cherry Studio: prompt.ts readCachedFile(failOnError)
    assert info.value.code == -32603
    assert info.value.message == (
        f"Failed to read required agent prompt file: {workspace / 'system.md'} "
        "(Input/output error)"
    )
    assert isinstance(info.value.__cause__, OSError)
    assert info.value.__cause__.errno == errno.EIO
