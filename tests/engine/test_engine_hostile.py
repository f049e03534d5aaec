"""Hostile and careless input at the engine (issue "Hostile content and bad input").

Hard links, look-alike temp files, held locks, tampered agent folders, unwritable folders,
failing directory fsyncs and oversized or unencodable text: each is refused with a specific
error, or survived, and nothing is lost or written where it should not be.
"""

from __future__ import annotations

import errno
import fcntl
import os
import textwrap
import time
from pathlib import Path

import pytest
from processes import run_python

from jupyter_agent_memory import AgentMemory, AgentNotFoundError, UnsafePathError
from jupyter_agent_memory.engine.store import DEFAULT_MAX_BYTES
from jupyter_agent_memory.errors import (
    ContentTooLargeError,
    InvalidAgentIdError,
    LockTimeoutError,
    MemoryToolError,
)


def fact_file(mem: AgentMemory) -> Path:
    return mem.path / "memory" / "FACT.md"


# -- hard links ---------------------------------------------------------------------------------


def test_a_hard_linked_fact_md_is_neither_read_nor_written(
    mem: AgentMemory, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("secret from elsewhere\n")
    os.link(outside, fact_file(mem))
    with pytest.raises(UnsafePathError, match="has 2 hard links"):
        _ = mem.facts
    with pytest.raises(UnsafePathError, match="has 2 hard links"):
        mem.update_facts("- overwrite\n")
    error = pytest.raises(MemoryToolError, mem.call_tool, {"action": "update", "content": "x"})
    assert error.value.code == -32603
    assert outside.read_text() == "secret from elsewhere\n"


def test_a_hard_linked_soul_md_is_refused(mem: AgentMemory, tmp_path: Path) -> None:
    (mem.path / "SOUL.md").unlink()
    outside = tmp_path / "persona.md"
    outside.write_text("I am someone else\n")
    os.link(outside, mem.path / "SOUL.md")
    with pytest.raises(UnsafePathError, match="SOUL.md: it has 2 hard links"):
        _ = mem.soul
    with pytest.raises(UnsafePathError):
        mem.write_soul("changed\n")
    assert outside.read_text() == "I am someone else\n"


# -- the temp-file sweep ------------------------------------------------------------------------


def test_the_sweep_removes_only_temp_files_of_our_own_writes(agents_root: Path) -> None:
    mem = AgentMemory.open("t")
    memory = mem.path / "memory"
    ours = [memory / ".FACT.md.0123456789abcdef.tmp", mem.path / ".SOUL.md.fedcba9876543210.tmp"]
    for path in ours:
        path.write_text("left by a crash")
    user_file = memory / ".notes.0123456789abcdef.tmp"
    user_file.write_text("the user's own file")
    look_alike_dir = memory / ".FACT.md.aaaaaaaaaaaaaaaa.tmp"
    look_alike_dir.mkdir()
    (look_alike_dir / "inside").write_text("kept")
    fifo = mem.path / ".USER.md.bbbbbbbbbbbbbbbb.tmp"
    os.mkfifo(fifo)

    again = AgentMemory.open("t")  # opening sweeps, under the lock

    assert [p.exists() for p in ours] == [False, False]
    assert user_file.read_text() == "the user's own file"
    assert (look_alike_dir / "inside").read_text() == "kept"
    assert fifo.exists()
    again.update_facts("- still works\n")
    assert again.facts == "- still works\n"


# -- locks --------------------------------------------------------------------------------------


def test_a_writer_waits_a_bounded_time_for_a_held_lock(agents_root: Path) -> None:
    mem = AgentMemory.open("t", lock_timeout=0.3)
    mem.update_facts("- before\n")
    fd = os.open(mem.path / "memory" / ".lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        started = time.monotonic()
        with pytest.raises(LockTimeoutError) as info:
            mem.update_facts("- after\n")
        waited = time.monotonic() - started
        with pytest.raises(LockTimeoutError):
            mem.append("an entry")
        text = mem.call_tool({"action": "search"})  # reads take no lock
    finally:
        os.close(fd)
    assert 0.3 <= waited < 3
    assert info.value.code == -32603
    assert info.value.message == (
        f"Timed out after 0.3 s waiting for the lock {mem.path / 'memory' / '.lock'}: another "
        "process is writing this agent's memory; nothing was written, try again"
    )
    assert text == "No journal entries found."
    assert mem.facts == "- before\n"
    mem.update_facts("- after\n")  # the lock is free again
    assert mem.facts == "- after\n"


def test_reads_need_no_write_access(agents_root: Path) -> None:
    import shutil
    import tempfile

    # A folder another user can reach (pytest's own temp folders are private to this user).
    shared = Path(tempfile.mkdtemp(prefix="agent-memory-ro-"))
    try:
        shared.chmod(0o755)
        mem = AgentMemory.open(shared / "agent")
        mem.update_facts("- readable\n")
        mem.append("an entry", ["x"])
        (mem.path / "memory" / ".lock").unlink()
        for path in [mem.path, mem.path / "memory"]:
            path.chmod(0o755)
        for path in [mem.path / "SOUL.md", mem.path / "USER.md", fact_file(mem),
                     mem.path / "memory" / "JOURNAL.jsonl"]:
            path.chmod(0o644)
        # Another user (or, without root, this user on a read-only folder) reads everything.
        reader = textwrap.dedent(
            f"""
            import os, sys
            # Import first: the interpreter's own files may be private to this user.
            import sqlite3  # the optional search index's module, imported on first search
            from jupyter_agent_memory import AgentMemory, journal
            from jupyter_agent_memory.engine import tool
            if os.geteuid() == 0:
                os.setgid(65534); os.setuid(65534)
            else:
                for p in [{str(mem.path)!r}, {str(mem.path / 'memory')!r}]:
                    os.chmod(p, 0o555)
            mem = AgentMemory.open({str(mem.path)!r}, create=False)
            print(mem.facts, end="")
            print(mem.call_tool({{"action": "search", "tag": "x"}}).count("an entry"))
            """
        )
        done = run_python(reader)
        for path in [mem.path, mem.path / "memory"]:
            path.chmod(0o700)
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout == "- readable\n1\n"
        assert not (mem.path / "memory" / ".lock").exists()
    finally:
        shutil.rmtree(shared)


# -- tampered folders ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["SOUL.md", "USER.md"])
@pytest.mark.parametrize(
    "args",
    [
        {"action": "update", "content": "- x\n"},
        {"action": "append", "text": "x"},
        {"action": "search"},
    ],
)
def test_a_linked_soul_or_user_invalidates_every_memory_action(
    mem: AgentMemory, tmp_path: Path, name: str, args: dict
) -> None:
    # Cherry Studio: memoryTools.ts validates the agent folder (SOUL.md/USER.md no symlink) first.
    (mem.path / name).unlink()
    target = tmp_path / "elsewhere.md"
    target.write_text("outside\n")
    (mem.path / name).symlink_to(target)
    with pytest.raises(UnsafePathError) as info:
        mem.call_tool(args)
    assert info.value.code == -32603
    # Cherry Studio's text, here and when the folder is opened (ensureAgentDataDirectory).
    assert info.value.message == f"Agent data file must be a real file: {mem.path / name}"
    for create in (True, False):
        with pytest.raises(UnsafePathError) as opened:
            AgentMemory.open(mem.path, create=create)
        assert opened.value.message == info.value.message
    assert not fact_file(mem).exists()
    assert not (mem.path / "memory" / "JOURNAL.jsonl").exists()
    assert target.read_text() == "outside\n"


def test_a_missing_agent_is_refused_by_a_read_only_open(agents_root: Path, tmp_path: Path) -> None:
    for target in ["nosuch", "./nosuch-folder", tmp_path / "deep" / "nosuch"]:
        with pytest.raises(AgentNotFoundError, match="does not exist"):
            AgentMemory.open(target, create=False)
    assert not agents_root.exists()
    assert not (tmp_path / "nosuch-folder").exists()
    assert not (tmp_path / "deep").exists()


@pytest.mark.parametrize(
    ("agent_id", "message"),
    [
        ("a" * 256, "Invalid agent id: it is 256 bytes long; the limit is 255 (a folder name)"),
        ("é" * 128, "Invalid agent id: it is 256 bytes long; the limit is 255 (a folder name)"),
        ("x\ud83d", "Invalid agent id: it is not valid Unicode text (a lone surrogate)"),
    ],
)
def test_agent_ids_that_cannot_name_a_folder_are_refused(
    agents_root: Path, agent_id: str, message: str
) -> None:
    with pytest.raises(InvalidAgentIdError) as info:
        AgentMemory.open(agent_id)
    assert info.value.message == message
    assert not agents_root.exists()


# -- durability ---------------------------------------------------------------------------------


def test_a_directory_fsync_failure_is_reported_unless_unsupported(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stat

    from jupyter_agent_memory import folder

    real = folder.full_fsync
    failure = {"errno": errno.EIO}

    def flaky(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(failure["errno"], os.strerror(failure["errno"]))
        real(fd)

    monkeypatch.setattr(folder, "full_fsync", flaky)
    failure["errno"] = errno.EINVAL  # "this filesystem cannot fsync a directory"
    mem.update_facts("- one\n")
    assert mem.facts == "- one\n"
    failure["errno"] = errno.EIO
    with pytest.raises(OSError) as info:
        mem.update_facts("- two\n")
    assert info.value.errno == errno.EIO
    error = pytest.raises(MemoryToolError, mem.call_tool, {"action": "update", "content": "3"})
    assert error.value.code == -32603


# -- text that can always be sent ---------------------------------------------------------------


@pytest.mark.parametrize("write", ["update_facts", "write_soul", "write_user"])
def test_text_over_the_size_limit_is_refused_and_nothing_changes(
    mem: AgentMemory, write: str
) -> None:
    getattr(mem, write)("- kept\n")
    with pytest.raises(ContentTooLargeError) as info:
        getattr(mem, write)("x" * (DEFAULT_MAX_BYTES + 1))
    assert info.value.message == (
        f"'content' is too large: {DEFAULT_MAX_BYTES + 1} bytes, the limit is "
        f"{DEFAULT_MAX_BYTES} bytes"
    )
    assert info.value.code == -32602
    assert getattr(mem, {"update_facts": "facts", "write_soul": "soul",
                         "write_user": "user"}[write]) == "- kept\n"


def test_the_size_limit_is_configurable(agents_root: Path) -> None:
    mem = AgentMemory.open("t", max_bytes=10)
    mem.update_facts("0123456789")
    with pytest.raises(ContentTooLargeError, match="11 bytes, the limit is 10 bytes"):
        mem.call_tool({"action": "update", "content": "0123456789a"})
    assert mem.facts == "0123456789"


@pytest.mark.parametrize(("limit", "count"), [(3.0, 3), (2.5, 5), ("3", 3), (True, 5)])
def test_limit_accepts_integral_floats(mem: AgentMemory, limit: object, count: int) -> None:
    for i in range(5):
        mem.append(f"entry {i}")
    import json

    result = json.loads(mem.call_tool({"action": "search", "limit": limit}))
    assert len(result) == min(count, 5)
