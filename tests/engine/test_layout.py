"""The agent data folder (docs/formats.md): ids, root, open(), layout, modes, case variants."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jupyter_agent_memory import (
    AgentMemory,
    AgentNotFoundError,
    InvalidAgentIdError,
    MemoryToolError,
    UnsafePathError,
    default_agent_id,
    default_root,
    list_agents,
    validate_agent_id,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def tree(folder: Path) -> list[str]:
    """Every entry under ``folder`` (relative, sorted), links not followed."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# -- agent ids ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("", "Invalid agent id: it must be a non-empty string"),
        (None, "Invalid agent id: it must be a non-empty string"),
        (".", 'Invalid agent id ".": it cannot be "." or ".."'),
        ("..", 'Invalid agent id "..": it cannot be "." or ".."'),
        ("a/b", 'Invalid agent id "a/b": it cannot contain "/" or "\\"'),
        ("a\\b", 'Invalid agent id "a\\b": it cannot contain "/" or "\\"'),
        ("system", 'Invalid agent id "system": "system" is reserved'),
        ("SYSTEM", 'Invalid agent id "SYSTEM": "system" is reserved'),
        ("SyStEm", 'Invalid agent id "SyStEm": "system" is reserved'),
        ("a\0b", "Invalid agent id: it cannot contain control characters"),
        ("a\x1b[31mb", "Invalid agent id: it cannot contain control characters"),
        ("a\nb", "Invalid agent id: it cannot contain control characters"),
    ],
)
def test_invalid_agent_ids_raise_one_clear_error(bad: object, message: str) -> None:
    with pytest.raises(InvalidAgentIdError) as info:
        validate_agent_id(bad)
    assert str(info.value) == message
    # One error type that both plain Python code and tool surfaces can catch.
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, MemoryToolError)
    assert info.value.code == -32602


@pytest.mark.parametrize("good", ["default", "demo-agent", "a b", "système", "systems", "x.y", "_"])
def test_valid_agent_ids_are_returned_unchanged(good: str) -> None:
    assert validate_agent_id(good) == good


@pytest.mark.parametrize("bad", ["system", "System", ""])
def test_open_by_invalid_id_creates_nothing(agents_root: Path, bad: str) -> None:
    with pytest.raises(InvalidAgentIdError):
        AgentMemory.open(bad)
    assert not agents_root.exists()


def test_open_id_rejects_slash_even_though_it_looks_like_a_path(agents_root: Path) -> None:
    with pytest.raises(InvalidAgentIdError, match='cannot contain "/"'):
        AgentMemory.open_id("a/b")
    assert not agents_root.exists()


# -- root and default agent --------------------------------------------------------------------


def test_root_comes_from_the_environment(agents_root: Path) -> None:
    assert default_root() == agents_root


def test_root_in_the_environment_expands_tilde(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_ROOT", "~/memories")
    assert default_root() == tmp_path / "home" / "memories"


def test_root_defaults_to_the_jupyter_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JUPYTER_AGENT_MEMORY_ROOT", raising=False)
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    assert default_root() == tmp_path / "data" / "agent-memory"


def test_empty_root_variable_falls_back_to_the_jupyter_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_ROOT", "")
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    assert default_root() == tmp_path / "data" / "agent-memory"


def test_default_agent_and_its_override(agents_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_agent_id() == "default"
    mem = AgentMemory.open()
    assert mem.agent_id == "default"
    assert mem.path == agents_root / "default"

    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_AGENT", "research")
    assert default_agent_id() == "research"
    mem = AgentMemory.open()
    assert (mem.agent_id, mem.path) == ("research", agents_root / "research")


def test_invalid_default_agent_override_is_an_error(
    agents_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_AGENT", "System")
    with pytest.raises(InvalidAgentIdError, match='"system" is reserved'):
        AgentMemory.open()
    assert not agents_root.exists()


def test_explicit_root_argument_wins_over_the_environment(
    agents_root: Path, tmp_path: Path
) -> None:
    mem = AgentMemory.open("x", root=tmp_path / "other")
    assert mem.path == tmp_path / "other" / "x"
    assert mem.root == tmp_path / "other"
    assert (tmp_path / "other" / "x" / "memory").is_dir()
    assert not agents_root.exists()


# -- open(): path or id ------------------------------------------------------------------------


def test_plain_string_is_an_agent_id_under_the_root(agents_root: Path) -> None:
    mem = AgentMemory.open("demo")
    assert mem.agent_id == "demo"
    assert mem.path == agents_root / "demo"
    assert mem.root == agents_root
    assert mem.path.is_absolute()


def test_path_object_is_a_folder_even_without_separator(
    agents_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    mem = AgentMemory.open(Path("demo"))
    assert mem.agent_id is None
    assert mem.path == tmp_path / "demo"
    assert (tmp_path / "demo" / "SOUL.md").is_file()
    assert not agents_root.exists()


def test_dot_slash_string_is_relative_to_the_working_directory(
    agents_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    mem = AgentMemory.open("./demo-agent")
    assert mem.agent_id is None
    assert mem.path == tmp_path / "demo-agent"
    assert mem.path.is_absolute()
    assert not agents_root.exists()


def test_leading_dot_string_is_a_folder_path(
    agents_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    mem = AgentMemory.open(".hidden")
    assert (mem.agent_id, mem.path) == (None, tmp_path / ".hidden")


def test_tilde_string_is_under_home(
    agents_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    mem = AgentMemory.open("~/agent")
    assert (mem.agent_id, mem.path) == (None, home / "agent")
    assert (home / "agent" / "memory").is_dir()


def test_string_with_separator_is_a_folder_path(
    agents_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    mem = AgentMemory.open("a/b")
    assert (mem.agent_id, mem.path) == (None, tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b" / "USER.md").is_file()


def test_open_id_treats_path_like_ids_as_ids(agents_root: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    mem = AgentMemory.open_id(".notes")
    assert (mem.agent_id, mem.path) == (".notes", agents_root / ".notes")
    assert not (tmp_path / ".notes").exists()
    assert list_agents() == [".notes"]


def test_filesystem_root_is_refused_as_an_agent_folder() -> None:
    with pytest.raises(UnsafePathError, match="filesystem root"):
        AgentMemory.open(Path("/"))


@pytest.mark.parametrize("target", [".", "..", "~", "~/", "./x/..", "sub/."])
def test_current_parent_and_home_folders_are_refused(
    target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsafePathError) as info:
        AgentMemory.open(target)
    assert info.value.code == -32603
    assert info.value.message == (
        f'Refusing to use "{target}" as an agent folder: name a dedicated folder '
        "(for example ./demo-agent)"
    )
    assert os.listdir(tmp_path) == []


def test_home_folder_spelled_out_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UnsafePathError, match="the filesystem root or the home folder"):
        AgentMemory.open(Path.home(), create=False)


def test_open_without_create_refuses_a_missing_agent_and_makes_nothing(
    agents_root: Path,
) -> None:
    with pytest.raises(AgentNotFoundError) as info:
        AgentMemory.open("lazy", create=False)
    assert str(agents_root / "lazy") in str(info.value)
    assert "jupyter-agent-memory init --agent lazy" in str(info.value)
    assert info.value.code == -32602
    assert not agents_root.exists()


def test_an_unopened_agent_reads_as_empty_and_makes_nothing(agents_root: Path) -> None:
    mem = AgentMemory(agents_root / "lazy")
    assert not agents_root.exists()
    assert (mem.facts, mem.soul, mem.user) == ("", "", "")
    assert mem.history() == []
    assert list(mem.entries()) == []


# -- creation ----------------------------------------------------------------------------------


def test_creation_makes_the_layout_with_private_modes(agents_root: Path) -> None:
    old = os.umask(0o022)
    try:
        mem = AgentMemory.open("fresh")
    finally:
        os.umask(old)
    folder = agents_root / "fresh"
    assert tree(folder) == ["SOUL.md", "USER.md", "memory", "memory/.lock"]
    assert (folder / "SOUL.md").read_bytes() == b""
    assert (folder / "USER.md").read_bytes() == b""
    assert mode(folder) == 0o700
    assert mode(folder / "memory") == 0o700
    assert mode(folder / "SOUL.md") == 0o600
    assert mode(folder / "USER.md") == 0o600
    assert mode(folder / "memory" / ".lock") == 0o600
    assert mode(agents_root) == 0o700
    assert (mem.facts, mem.soul, mem.user) == ("", "", "")
    assert mem.facts_sha256 == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_files_written_later_are_private_too(mem: AgentMemory) -> None:
    mem.update_facts("a\n")
    mem.update_facts("b\n")
    mem.append("entry")
    mem.write_soul("soul\n")
    memory = mem.path / "memory"
    assert mode(memory / "FACT.md") == 0o600
    assert mode(memory / "JOURNAL.jsonl") == 0o600
    assert mode(mem.path / "SOUL.md") == 0o600
    assert mode(memory / ".history") == 0o700
    (version,) = list((memory / ".history").iterdir())
    assert mode(version) == 0o600


def test_creation_is_idempotent_and_keeps_content(agents_root: Path) -> None:
    mem = AgentMemory.open("again")
    mem.write_soul("I am Ada.\n")
    mem.update_facts("- fact\n")
    before = tree(mem.path)
    again = AgentMemory.open("again")
    assert tree(mem.path) == before
    assert again.soul == "I am Ada.\n"
    assert again.facts == "- fact\n"


def test_existing_lowercase_files_keep_their_casing(agents_root: Path) -> None:
    folder = agents_root / "cased"
    (folder / "Memory").mkdir(parents=True)
    (folder / "soul.md").write_text("lower soul\n")
    (folder / "User.MD").write_text("mixed user\n")
    (folder / "Memory" / "fact.md").write_text("lower fact\n")
    mem = AgentMemory.open("cased")
    assert sorted(os.listdir(folder)) == ["Memory", "User.MD", "soul.md"]
    assert (mem.soul, mem.user, mem.facts) == ("lower soul\n", "mixed user\n", "lower fact\n")
    mem.update_facts("new fact\n")
    mem.write_soul("new soul\n")
    assert (folder / "Memory" / "fact.md").read_text() == "new fact\n"
    assert (folder / "soul.md").read_text() == "new soul\n"
    assert sorted(os.listdir(folder)) == ["Memory", "User.MD", "soul.md"]
    assert "FACT.md" not in os.listdir(folder / "Memory")


def test_exact_name_wins_when_both_variants_exist(agents_root: Path) -> None:
    folder = agents_root / "both"
    (folder / "memory").mkdir(parents=True)
    (folder / "soul.md").write_text("variant\n")
    (folder / "SOUL.md").write_text("exact\n")
    (folder / "memory" / "fact.md").write_text("variant fact\n")
    (folder / "memory" / "FACT.md").write_text("exact fact\n")
    mem = AgentMemory.open("both")
    assert mem.soul == "exact\n"
    assert mem.facts == "exact fact\n"
    mem.update_facts("changed\n")
    assert (folder / "memory" / "FACT.md").read_text() == "changed\n"
    assert (folder / "memory" / "fact.md").read_text() == "variant fact\n"


def test_journal_name_is_case_insensitive(mem: AgentMemory) -> None:
    journal = mem.path / "memory" / "journal.JSONL"
    journal.write_bytes(b'{"ts":"2026-01-01T00:00:00.000Z","tags":[],"text":"old"}\n')
    mem.append("new")
    assert "JOURNAL.jsonl" not in os.listdir(mem.path / "memory")
    assert [e["text"] for e in mem.entries()] == ["old", "new"]


def test_list_agents_lists_real_folders_with_valid_ids(agents_root: Path, tmp_path: Path) -> None:
    assert list_agents() == []
    AgentMemory.open("b")
    AgentMemory.open("a")
    (agents_root / "system").mkdir()
    (agents_root / "file.txt").write_text("x")
    (tmp_path / "elsewhere").mkdir()
    (agents_root / "linked").symlink_to(tmp_path / "elsewhere")
    assert list_agents() == ["a", "b"]


@pytest.mark.slow
def test_concurrent_creation_from_several_processes(agents_root: Path) -> None:
    code = textwrap.dedent(
        """
        import sys, time
        from jupyter_agent_memory import AgentMemory
        start = float(sys.argv[1])
        while time.time() < start:
            pass
        mem = AgentMemory.open("shared")
        mem.append("hello from " + sys.argv[2])
        print(mem.path)
        """
    )
    import time

    start = str(time.time() + 1.5)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, start, str(i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert out.strip() == str(agents_root / "shared")
    folder = agents_root / "shared"
    assert tree(folder) == [
        "SOUL.md", "USER.md", "memory", "memory/.lock", "memory/JOURNAL.jsonl"
    ]
    texts = sorted(e["text"] for e in AgentMemory.open("shared").entries())
    assert texts == [f"hello from {i}" for i in range(4)]
