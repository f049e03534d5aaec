"""Safety and durability (design 4.2, 4.4): links refused, nothing written, temp files, CAS."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import signal
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent_memory import (
    AgentMemory,
    MemoryConflictError,
    MemoryToolError,
    UnsafePathError,
)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def snapshot(base: Path) -> dict[str, Any]:
    """Everything under ``base`` without following links: kind and content of each entry."""
    found: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = os.lstat(path)
            rel = str(path.relative_to(base))
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                found[rel] = ("file", path.read_bytes())
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir",)
            else:
                found[rel] = ("other", stat.S_IFMT(st.st_mode))
    return found


def refused(action: Callable[[], Any], path: Path, code: int = -32603) -> MemoryToolError:
    """Run ``action``; it must raise the safety error naming ``path``."""
    with pytest.raises(MemoryToolError) as info:
        action()
    assert info.value.code == code
    assert str(path) in info.value.message, info.value.message
    return info.value


@contextlib.contextmanager
def no_hang(seconds: int = 5) -> Iterator[None]:
    """Fail instead of hanging forever (a FIFO opened for reading blocks without a writer)."""

    def alarm(*_: object) -> None:
        raise TimeoutError("the engine blocked on a FIFO")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the agents root holding a file an attacker would like overwritten."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "target.md").write_bytes(b"outside content\n")
    return folder


# -- FACT.md -----------------------------------------------------------------------------------


def test_fact_symlink_to_outside_file_is_refused(
    mem: AgentMemory, outside: Path, tmp_path: Path
) -> None:
    fact = mem.path / "memory" / "FACT.md"
    fact.symlink_to(outside / "target.md")
    before = snapshot(tmp_path)
    error = refused(lambda: mem.call_tool({"action": "update", "content": "evil\n"}), fact)
    assert isinstance(error, UnsafePathError)
    assert error.message == f"Refusing to write {fact}: it is a symbolic link"
    refused(lambda: mem.update_facts("evil\n"), fact)
    refused(lambda: mem.facts, fact)
    refused(lambda: mem.facts_sha256, fact)
    assert snapshot(tmp_path) == before


def test_dangling_fact_symlink_is_refused_and_its_target_not_created(
    mem: AgentMemory, outside: Path, tmp_path: Path
) -> None:
    fact = mem.path / "memory" / "FACT.md"
    fact.symlink_to(outside / "created-by-attack.md")
    before = snapshot(tmp_path)
    refused(lambda: mem.call_tool({"action": "update", "content": "evil\n"}), fact)
    refused(lambda: mem.facts, fact)
    assert not (outside / "created-by-attack.md").exists()
    assert snapshot(tmp_path) == before


def test_lowercase_fact_symlink_is_refused_too(
    mem: AgentMemory, outside: Path, tmp_path: Path
) -> None:
    fact = mem.path / "memory" / "fact.md"
    fact.symlink_to(outside / "target.md")
    before = snapshot(tmp_path)
    refused(lambda: mem.update_facts("evil\n"), fact)
    assert snapshot(tmp_path) == before


def test_fact_that_is_a_directory_is_refused(mem: AgentMemory, tmp_path: Path) -> None:
    fact = mem.path / "memory" / "FACT.md"
    fact.mkdir()
    before = snapshot(tmp_path)
    error = refused(lambda: mem.update_facts("x\n"), fact)
    assert error.message == f"Refusing to write {fact}: it is a directory"
    refused(lambda: mem.facts, fact)
    assert snapshot(tmp_path) == before


def test_fifo_at_fact_does_not_hang(mem: AgentMemory, tmp_path: Path) -> None:
    fact = mem.path / "memory" / "FACT.md"
    os.mkfifo(fact)
    before = snapshot(tmp_path)
    with no_hang():
        error = refused(lambda: mem.facts, fact)
        refused(lambda: mem.call_tool({"action": "update", "content": "x\n"}), fact)
    assert stat.S_ISFIFO(os.lstat(fact).st_mode)
    assert snapshot(tmp_path) == before
    assert error.message.startswith(f"Refusing to use {fact}: it is ")
    # One clear reason, not "it is not a regular file, not a regular file".
    assert error.message.count("not a regular file") == 1, error.message


def test_fifo_at_journal_does_not_hang(mem: AgentMemory, tmp_path: Path) -> None:
    journal = mem.path / "memory" / "JOURNAL.jsonl"
    os.mkfifo(journal)
    before = snapshot(tmp_path)
    with no_hang():
        refused(lambda: mem.call_tool({"action": "search"}), journal)
        refused(lambda: mem.call_tool({"action": "append", "text": "x"}), journal)
    assert snapshot(tmp_path) == before


# -- memory/ and the agent folder --------------------------------------------------------------


def test_symlinked_memory_folder_is_refused(
    mem: AgentMemory, outside: Path, tmp_path: Path
) -> None:
    memory = mem.path / "memory"
    (memory / ".lock").unlink()
    memory.rmdir()
    (outside / "FACT.md").write_bytes(b"outside facts\n")
    (outside / "JOURNAL.jsonl").write_bytes(b"")
    memory.symlink_to(outside)
    before = snapshot(tmp_path)
    for action in (
        lambda: mem.call_tool({"action": "update", "content": "evil\n"}),
        lambda: mem.call_tool({"action": "append", "text": "evil"}),
        lambda: mem.call_tool({"action": "search"}),
        lambda: mem.facts,
        lambda: mem.history(),
        lambda: list(mem.entries()),
        lambda: mem.write_soul("evil\n"),
        lambda: AgentMemory.open("t"),
    ):
        error = refused(action, memory)
        assert error.message == (
            f"Refusing to use {memory}: it is a symbolic link, not a directory"
        )
    assert snapshot(tmp_path) == before


def test_symlinked_agent_folder_is_refused(
    agents_root: Path, outside: Path, tmp_path: Path
) -> None:
    AgentMemory.open(outside)  # a complete agent layout, but outside the root
    agents_root.mkdir()
    link = agents_root / "linked"
    link.symlink_to(outside)
    before = snapshot(tmp_path)
    error = refused(lambda: AgentMemory.open("linked"), link)
    assert error.message == f"Refusing to use {link}: it is a symbolic link, not a directory"
    refused(lambda: AgentMemory.open(link), link)
    refused(lambda: AgentMemory.open("linked", create=False), link)
    lazy = AgentMemory(link)  # not opened: every action checks again
    refused(lambda: lazy.call_tool({"action": "update", "content": "evil\n"}), link)
    refused(lambda: lazy.call_tool({"action": "append", "text": "evil"}), link)
    refused(lambda: lazy.call_tool({"action": "search"}), link)
    refused(lambda: lazy.facts, link)
    refused(lambda: lazy.soul, link)
    assert snapshot(tmp_path) == before


def test_agent_folder_swapped_for_a_link_after_open_is_refused(
    mem: AgentMemory, outside: Path, tmp_path: Path
) -> None:
    moved = tmp_path / "moved"
    mem.path.rename(moved)
    mem.path.symlink_to(outside)
    before = snapshot(tmp_path)
    refused(lambda: mem.update_facts("evil\n"), mem.path)
    refused(lambda: mem.append("evil"), mem.path)
    assert snapshot(tmp_path) == before


def test_symlinked_history_folder_is_refused_before_fact_changes(
    mem: AgentMemory, outside: Path, tmp_path: Path
) -> None:
    mem.update_facts("v1\n")
    history = mem.path / "memory" / ".history"
    history.symlink_to(outside)
    before = snapshot(tmp_path)
    refused(lambda: mem.update_facts("v2\n"), history)
    refused(lambda: mem.history(), history)
    assert mem.facts == "v1\n"
    assert snapshot(tmp_path) == before


def test_symlinked_parent_above_the_agent_folder_is_fine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real-root"
    real.mkdir()
    link = tmp_path / "link-root"
    link.symlink_to(real)
    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_ROOT", str(link))
    mem = AgentMemory.open("a")
    assert mem.path == real / "a"
    assert mem.root == real
    assert mem.call_tool({"action": "update", "content": "fact\n"}) == "Memory updated."
    mem.append("entry", ["t"])
    assert [e["text"] for e in mem.search(tag="t")] == ["entry"]
    assert (real / "a" / "memory" / "FACT.md").read_text() == "fact\n"

    by_path = AgentMemory.open(link / "b")
    assert by_path.path == real / "b"
    by_path.update_facts("b fact\n")
    assert (real / "b" / "memory" / "FACT.md").read_text() == "b fact\n"


# -- the journal -------------------------------------------------------------------------------


def test_journal_symlink_is_refused_for_append_and_search(
    mem: AgentMemory, outside: Path, tmp_path: Path
) -> None:
    journal = mem.path / "memory" / "JOURNAL.jsonl"
    (outside / "j.jsonl").write_bytes(b'{"ts":"2026-01-01T00:00:00.000Z","tags":[],"text":"x"}\n')
    journal.symlink_to(outside / "j.jsonl")
    before = snapshot(tmp_path)
    error = refused(lambda: mem.call_tool({"action": "append", "text": "evil"}), journal)
    assert error.message == (
        f"Refusing to use {journal}: it is a symbolic link, not a regular file"
    )
    refused(lambda: mem.call_tool({"action": "search"}), journal)
    refused(lambda: mem.search(query="x"), journal)
    refused(lambda: list(mem.entries()), journal)
    assert snapshot(tmp_path) == before


def test_dangling_journal_symlink_is_refused_and_not_created(
    mem: AgentMemory, outside: Path, tmp_path: Path
) -> None:
    journal = mem.path / "memory" / "JOURNAL.jsonl"
    journal.symlink_to(outside / "new.jsonl")
    before = snapshot(tmp_path)
    refused(lambda: mem.call_tool({"action": "append", "text": "evil"}), journal)
    refused(lambda: mem.call_tool({"action": "search"}), journal)
    assert not (outside / "new.jsonl").exists()
    assert snapshot(tmp_path) == before


# -- SOUL.md / USER.md -------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "attr", "writer"), [
    ("SOUL.md", "soul", "write_soul"),
    ("USER.md", "user", "write_user"),
])
def test_persona_symlinks_are_refused_for_reads_and_writes(
    mem: AgentMemory, outside: Path, tmp_path: Path, name: str, attr: str, writer: str
) -> None:
    path = mem.path / name
    path.unlink()
    path.symlink_to(outside / "target.md")
    before = snapshot(tmp_path)
    error = refused(lambda: getattr(mem, attr), path)
    assert error.message == f"Refusing to use {path}: it is a symbolic link, not a regular file"
    refused(lambda: getattr(mem, f"{attr}_sha256"), path)
    error = refused(lambda: getattr(mem, writer)("evil\n"), path)
    assert error.message == f"Refusing to write {path}: it is a symbolic link"
    assert snapshot(tmp_path) == before


def test_dangling_soul_symlink_is_refused(mem: AgentMemory, outside: Path, tmp_path: Path) -> None:
    soul = mem.path / "SOUL.md"
    soul.unlink()
    soul.symlink_to(outside / "missing.md")
    before = snapshot(tmp_path)
    refused(lambda: mem.write_soul("evil\n"), soul)
    refused(lambda: mem.soul, soul)
    assert snapshot(tmp_path) == before
    assert not (outside / "missing.md").exists()


# -- atomic writes: temp files ----------------------------------------------------------------


def temp_files(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith(".tmp"))


def test_failed_rename_removes_the_temp_file(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem.update_facts("old\n")
    memory = mem.path / "memory"
    before = snapshot(memory)

    def broken_replace(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(MemoryToolError) as info:
        mem.call_tool({"action": "update", "content": "new\n"})
    monkeypatch.undo()
    assert (info.value.code, info.value.message) == (-32603, "Input/output error")
    assert mem.facts == "old\n"
    assert temp_files(memory) == []
    # A failed update writes nothing: no history version of a FACT.md that is still current.
    assert snapshot(memory) == before
    assert mem.history() == []


def test_failed_fsync_removes_the_temp_file(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem.write_soul("soul\n")

    def broken_fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(MemoryToolError) as info:
        mem.call_tool({"action": "update", "content": "new\n"})
    with pytest.raises(OSError):
        mem.write_soul("other\n")
    monkeypatch.undo()
    assert (info.value.code, info.value.message) == (-32603, "No space left on device")
    assert mem.facts == ""
    assert mem.soul == "soul\n"
    assert temp_files(mem.path / "memory") == []
    assert temp_files(mem.path) == []


def test_crash_leftovers_are_swept_when_the_agent_is_opened(mem: AgentMemory) -> None:
    memory = mem.path / "memory"
    mem.update_facts("v1\n")
    mem.update_facts("v2\n")
    history = memory / ".history"
    leftovers = [
        memory / ".FACT.md.0123456789abcdef.tmp",
        mem.path / ".SOUL.md.fedcba9876543210.tmp",
        history / ".20260101T000000.000000Z-0123456789ab.md.aaaaaaaaaaaaaaaa.tmp",
    ]
    for path in leftovers:
        path.write_bytes(b"partial")
    kept = [
        memory / "notes.tmp",
        memory / ".FACT.md.backup",
        memory / ".FACT.md.short.tmp",
    ]
    for path in kept:
        path.write_bytes(b"user file")
    AgentMemory.open("t")
    assert [p for p in leftovers if p.exists()] == []
    assert [p for p in kept if p.read_bytes() == b"user file"] == kept
    assert mem.facts == "v2\n"
    assert len(mem.history()) == 1


# -- compare-and-swap --------------------------------------------------------------------------


def test_cas_with_matching_hash_writes(mem: AgentMemory) -> None:
    assert mem.facts_sha256 == sha(b"")
    first = mem.update_facts("one\n", expected_sha256=sha(b""))
    assert first == sha(b"one\n") == mem.facts_sha256
    second = mem.update_facts("two\n", expected_sha256=first.upper())
    assert second == sha(b"two\n")
    assert mem.facts == "two\n"


def test_read_facts_pairs_text_with_its_own_hash(mem: AgentMemory) -> None:
    assert mem.read_facts() == ("", hashlib.sha256(b"").hexdigest())
    sha = mem.update_facts("- caf\u00e9\n")
    assert mem.read_facts() == ("- caf\u00e9\n", sha)
    assert sha == hashlib.sha256("- caf\u00e9\n".encode()).hexdigest()


def test_file_stats_list_entries_without_following_links(
    mem: AgentMemory, outside: Path
) -> None:
    mem.update_facts("x\n")
    mem.append("e")
    (mem.path / "memory" / "link.md").symlink_to(outside)
    stats = mem.file_stats()
    assert sorted(stats) == [
        "SOUL.md",
        "USER.md",
        "memory",
        "memory/FACT.md",
        "memory/JOURNAL.jsonl",
        "memory/link.md",
    ]
    assert stat.S_ISLNK(stats["memory/link.md"].st_mode)
    assert stats["memory/FACT.md"].st_size == 2
    assert AgentMemory(mem.path.parent / "missing").file_stats() == {}


def test_read_soul_and_user_pair_text_with_hash(mem: AgentMemory) -> None:
    assert mem.read_soul() == ("", hashlib.sha256(b"").hexdigest())
    soul = mem.write_soul("I am Ada.\n")
    user = mem.write_user("Grace.\n")
    assert mem.read_soul() == ("I am Ada.\n", soul) and mem.soul_sha256 == soul
    assert mem.read_user() == ("Grace.\n", user) and mem.user_sha256 == user


def test_cas_mismatch_raises_and_writes_nothing(mem: AgentMemory, tmp_path: Path) -> None:
    mem.update_facts("agent wrote this\n")
    before = snapshot(tmp_path)
    stale = sha(b"what the editor saw\n")
    with pytest.raises(MemoryConflictError) as info:
        mem.update_facts("editor text\n", expected_sha256=stale)
    error = info.value
    actual = sha(b"agent wrote this\n")
    fact = mem.path / "memory" / "FACT.md"
    assert isinstance(error, MemoryToolError)
    assert error.code == -32603
    assert (error.expected, error.actual) == (stale, actual)
    assert error.message == (
        f"{fact} changed since it was read: expected sha256 {stale}, "
        f"found {actual}; nothing was written"
    )
    assert snapshot(tmp_path) == before
    assert mem.history() == []


def test_cas_on_a_missing_file_expects_the_empty_hash(mem: AgentMemory) -> None:
    with pytest.raises(MemoryConflictError) as info:
        mem.update_facts("x\n", expected_sha256=sha(b"something\n"))
    assert info.value.actual == sha(b"")
    assert not (mem.path / "memory" / "FACT.md").exists()


@pytest.mark.parametrize(("writer", "name", "reader"), [
    ("write_soul", "SOUL.md", "soul_sha256"),
    ("write_user", "USER.md", "user_sha256"),
])
def test_cas_for_persona_files(mem: AgentMemory, writer: str, name: str, reader: str) -> None:
    write = getattr(mem, writer)
    assert getattr(mem, reader) == sha(b"")
    token = write("first\n", expected_sha256=sha(b""))
    assert token == getattr(mem, reader) == sha(b"first\n")
    with pytest.raises(MemoryConflictError) as info:
        write("second\n", expected_sha256=sha(b""))
    assert info.value.message == (
        f"{mem.path / name} changed since it was read: expected sha256 {sha(b'')}, "
        f"found {token}; nothing was written"
    )
    assert (mem.path / name).read_bytes() == b"first\n"
    write("third\n", expected_sha256=token)
    assert (mem.path / name).read_bytes() == b"third\n"


def test_non_string_content_is_rejected_by_the_python_api(mem: AgentMemory) -> None:
    with pytest.raises(MemoryToolError, match="'content' must be a string"):
        mem.update_facts(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(MemoryToolError, match="'text' is required for append action"):
        mem.append("")
    assert not (mem.path / "memory" / "FACT.md").exists()


def test_agent_folder_that_is_a_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "not-a-folder"
    target.write_text("x")
    error = refused(lambda: AgentMemory.open(target), target)
    assert error.message == f"Refusing to use {target}: it is a regular file, not a directory"
    assert target.read_text() == "x"


def test_removed_memory_folder_is_recreated_privately_on_write(mem: AgentMemory) -> None:
    memory = mem.path / "memory"
    (memory / ".lock").unlink()
    memory.rmdir()
    assert mem.call_tool({"action": "search"}) == "No journal entries found."
    assert mem.facts == ""
    assert not memory.exists()  # reads never create anything
    mem.call_tool({"action": "append", "text": "back"})
    assert stat.S_IMODE(os.lstat(memory).st_mode) == 0o700
    assert [e["text"] for e in mem.entries()] == ["back"]


def test_removed_agent_folder_is_an_internal_error_naming_it(mem: AgentMemory) -> None:
    for name in ("SOUL.md", "USER.md", "memory/.lock"):
        (mem.path / name).unlink()
    (mem.path / "memory").rmdir()
    mem.path.rmdir()
    for args in ({"action": "update", "content": "x"}, {"action": "append", "text": "x"}):
        error = refused(lambda args=args: mem.call_tool(args), mem.path)
        assert error.message == f"No such file or directory ({mem.path})"
    assert mem.call_tool({"action": "search"}) == "No journal entries found."
    assert not mem.path.exists()
