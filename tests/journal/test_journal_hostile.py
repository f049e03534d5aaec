"""The journal against hostile content and failing disks: nothing unencodable goes in or comes
out, a failed append leaves the file byte for byte as it was, linked files are refused."""

from __future__ import annotations

import errno
import fcntl
import io
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from processes import spawn

from jupyter_agent_memory import AgentMemory, journal
from jupyter_agent_memory.errors import MemoryToolError, UnsafePathError
from jupyter_agent_memory.journal import append as journal_append


def journal_path(mem: AgentMemory) -> Path:
    return mem.path / "memory" / "JOURNAL.jsonl"


def refused(call: Any, *args: Any, **kwargs: Any) -> MemoryToolError:
    with pytest.raises(MemoryToolError) as info:
        call(*args, **kwargs)
    return info.value


# -- writing: lone surrogates and sizes are refused, nothing is written ------------------------


def test_append_refuses_a_lone_surrogate_in_the_text(mem: AgentMemory) -> None:
    mem.append("first")
    before = journal_path(mem).read_bytes()
    error = refused(mem.append, "half \ud83d an emoji")
    assert (error.code, error.message) == (
        -32602,
        "'text' is not valid Unicode text: lone surrogate U+D83D at position 5",
    )
    assert journal_path(mem).read_bytes() == before


def test_append_refuses_a_lone_surrogate_in_a_tag(mem: AgentMemory) -> None:
    error = refused(mem.append, "fine text", ["ok", "x\udc00"])
    assert (error.code, error.message) == (
        -32602,
        "'tags' is not valid Unicode text: lone surrogate U+DC00 at position 1",
    )
    assert not journal_path(mem).exists()
    # the same through the tool, as a model would send it
    args = json.loads('{"action": "append", "text": "t", "tags": ["\\ud800"]}')
    assert refused(mem.call_tool, args).message.startswith("'tags' is not valid Unicode text")
    assert not journal_path(mem).exists()


def test_append_refuses_an_entry_over_the_size_limit(agents_root: Path) -> None:
    mem = AgentMemory.open("small", max_bytes=100)
    mem.append("x" * 100)  # exactly at the limit: accepted
    before = journal_path(mem).read_bytes()
    error = refused(mem.append, "é" * 51)
    assert (error.code, error.message) == (
        -32602,
        "'text' is too large: 102 bytes, the limit is 100 bytes",
    )
    error = refused(mem.append, "short", ["t" * 60, "u" * 60])
    assert error.message == "'tags' is too large: 120 bytes, the limit is 100 bytes"
    assert journal_path(mem).read_bytes() == before


# -- reading: other tools' bad lines come back with U+FFFD, kept -------------------------------

FOREIGN = [
    b'{"ts":"2026-01-01T00:00:01.000Z","tags":["emoji"],"text":"half \\ud83d here"}',
    b'{"ts":"2026-01-01T00:00:02.000Z","tags":["bytes"],"text":"bad \xff\xfe byte"}',
    b'{"ts":"2026-01-01T00:00:03.000Z","tags":["t\\udfff","bytes"],"text":"tag"}',
    b'{"ts":"2026-01-01T00:00:04.000Z","tags":[],"text":"k\\ud800ey","k\\udbff":"\xc3"}',
]


def _write_foreign(mem: AgentMemory) -> None:
    mem.append("ours")
    with journal_path(mem).open("ab") as f:
        f.write(b"\n".join(FOREIGN) + b"\n")


def test_foreign_lines_with_surrogates_or_bad_bytes_read_as_replacement_characters(
    mem: AgentMemory,
) -> None:
    _write_foreign(mem)
    found = mem.search(limit=10)
    assert [e["text"] for e in found] == [
        "k\ufffdey",
        "tag",
        "bad \ufffd\ufffd byte",
        "half \ufffd here",
        "ours",
    ]
    assert found[0]["k\ufffd"] == "\ufffd"
    assert found[1]["tags"] == ["t\ufffd", "bytes"]
    assert found.skipped == 0
    # everything read can be sent anywhere
    json.dumps(list(found), ensure_ascii=False).encode("utf-8")
    assert [e["text"] for e in mem.entries()] == [e["text"] for e in reversed(found)]
    assert mem.tag_counts() == {"emoji": 1, "bytes": 2, "t\ufffd": 1}
    assert [e["text"] for e in mem.search(query="\ufffd")] == [
        "k\ufffdey",
        "bad \ufffd\ufffd byte",
        "half \ufffd here",
    ]
    assert [e["text"] for e in mem.search(tag="T\ufffd")] == ["tag"]
    with journal_path(mem).open("rb") as f:
        for args in ({"query": "\ufffd"}, {"tag": "bytes"}, {"query": "HERE"}, {}):
            assert journal.search(f, **args) == journal.reference_search(f, **args)


def test_the_tool_and_cli_output_of_such_a_journal_encode(mem: AgentMemory) -> None:
    _write_foreign(mem)
    text = mem.call_tool({"action": "search", "query": "e"})
    text.encode("utf-8")  # strict
    assert "\ufffd" in text


# -- time windows: a duplicate ts key, however it is spelled -----------------------------------


@pytest.mark.parametrize("key", [b'"ts"', b'"t\\u0073"', b'"\\u0074s"', b'"\\u0074\\u0073"'])
def test_a_duplicate_ts_key_decides_the_window_as_json_does(key: bytes) -> None:
    line = (
        b'{"ts":"2026-01-01T00:00:00.000Z","tags":[],"text":"dup",'
        + key
        + b':"2026-06-01T00:00:00.000Z"}'
    )
    f = io.BytesIO(line + b"\n")
    from datetime import datetime, timezone

    june = {"since": datetime(2026, 5, 1, tzinfo=timezone.utc)}
    january = {"until": datetime(2026, 2, 1, tzinfo=timezone.utc)}
    assert [e["text"] for e in journal.search(f, **june)] == ["dup"]
    assert journal.search(f, **june) == journal.reference_search(f, **june)
    assert journal.search(f, **january) == journal.reference_search(f, **january) == []


# -- failing disks: the journal is left byte for byte as it was --------------------------------

FSIZE_WRITER = """
    import resource, signal, sys
    from jupyter_agent_memory import AgentMemory
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
    folder, limit = sys.argv[1], int(sys.argv[2])
    mem = AgentMemory.open(folder)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    try:
        mem.append("y" * 5000, ["big"])
    except OSError as exc:
        print("error", exc.errno)
    else:
        print("stored")
"""


@pytest.mark.parametrize("room", ["half", "all but the newline", "nothing"])
def test_a_write_that_runs_out_of_space_leaves_the_journal_as_it_was(
    tmp_path: Path, agents_root: Path, room: str
) -> None:
    """A real kernel limit (RLIMIT_FSIZE) cuts the write; nothing of the line stays."""
    folder = tmp_path / "agent"
    mem = AgentMemory.open(folder)
    mem.append("kept")
    with journal_path(mem).open("ab") as f:
        f.write(b'{"ts":"2026-01-01T00:00:00.000Z","text":"torn')  # no newline: torn
    before = journal_path(mem).read_bytes()
    line_size = 1 + len(journal.encode_line({"ts": "x" * 24, "tags": ["big"], "text": "y" * 5000}))
    extra = {"half": line_size // 2, "all but the newline": line_size - 1, "nothing": 0}[room]
    proc = spawn(FSIZE_WRITER, folder, len(before) + extra)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.split() == ["error", str(errno.EFBIG)]
    assert journal_path(mem).read_bytes() == before
    # the retry stores the entry exactly once, on a line of its own
    proc = spawn(FSIZE_WRITER, folder, 10**9)
    assert proc.communicate(timeout=60)[0].split() == ["stored"]
    assert len(mem.search(tag="big", limit=10)) == 1
    assert journal_path(mem).read_bytes().startswith(before + b"\n{")


def test_a_failed_first_append_leaves_no_journal(tmp_path: Path, agents_root: Path) -> None:
    folder = tmp_path / "agent"
    AgentMemory.open(folder)
    proc = spawn(FSIZE_WRITER, folder, 100)  # room for 100 bytes of the 5 KB line
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.split() == ["error", str(errno.EFBIG)]
    assert not (folder / "memory" / "JOURNAL.jsonl").exists()
    assert AgentMemory.open(folder).call_tool({"action": "search"}) == "No journal entries found."


def test_a_failed_flush_removes_the_line(mem: AgentMemory, monkeypatch: pytest.MonkeyPatch) -> None:
    mem.append("kept")
    before = journal_path(mem).read_bytes()

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(journal_append, "full_fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output error"):
        mem.append("lost", ["x"])
    assert journal_path(mem).read_bytes() == before
    error = refused(mem.call_tool, {"action": "append", "text": "lost too"})
    assert (error.code, error.message) == (-32603, "Input/output error")
    assert journal_path(mem).read_bytes() == before


def test_a_failed_flush_blanks_the_line_when_others_came_after(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer appended between our write and our failed flush: our line becomes a
    blank line (ignored by every reader), theirs stays."""
    mem.append("kept")
    other = AgentMemory.open(mem.path, fsync_appends=False)

    def fsync_after_another_append(fd: int) -> None:
        other.append("theirs")
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(journal_append, "full_fsync", fsync_after_another_append)
    with pytest.raises(OSError):
        mem.append("lost")
    lines = journal_path(mem).read_bytes().split(b"\n")
    assert lines[1].strip() == b"" and len(lines[1]) > 20
    assert [e["text"] for e in mem.entries()] == ["kept", "theirs"]
    assert [e["text"] for e in mem.search()] == ["theirs", "kept"]
    assert mem.search().skipped == 0


def test_a_killed_flush_never_leaves_an_acknowledged_entry_missing(
    tmp_path: Path, agents_root: Path
) -> None:
    """SIGKILL right after the write (before the flush returns): the entry was written, not
    acknowledged; the file stays well formed and the next append is on a line of its own."""
    code = """
        import os, signal, sys
        from jupyter_agent_memory import AgentMemory
        from jupyter_agent_memory.journal import append as journal_append
        mem = AgentMemory.open(sys.argv[1])
        mem.append("before")
        print("acked before", flush=True)
        journal_append.full_fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
        mem.append("during")
        print("acked during", flush=True)
    """
    proc = spawn(code, tmp_path / "agent")
    out, _err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert out.splitlines() == ["acked before"]
    mem = AgentMemory.open(tmp_path / "agent")
    mem.append("after")
    assert [e["text"] for e in mem.entries()][0] == "before"
    assert [e["text"] for e in mem.entries()][-1] == "after"
    assert journal_path(mem).read_bytes().endswith(b"\n")


# -- links and swapped files, also between appends of one AgentMemory --------------------------


def test_a_hard_linked_journal_is_refused_for_append_and_search(
    mem: AgentMemory, tmp_path: Path
) -> None:
    mem.append("mine")
    outside = tmp_path / "outside.jsonl"
    os.link(journal_path(mem), outside)
    before = outside.read_bytes()
    with pytest.raises(UnsafePathError, match="hard links"):
        mem.append("must not reach the other file")
    with pytest.raises(UnsafePathError, match="hard links"):
        AgentMemory.open(mem.path).append("nor through a fresh handle")
    with pytest.raises(UnsafePathError, match="hard links"):
        mem.search()
    assert outside.read_bytes() == before


def test_a_journal_replaced_between_appends_is_reopened(mem: AgentMemory, tmp_path: Path) -> None:
    mem.append("one")
    old = tmp_path / "old.jsonl"
    os.link(journal_path(mem), old)
    os.unlink(journal_path(mem))  # the journal moved away: `old` is its only name now
    replacement = journal_path(mem).with_name("new.jsonl")
    replacement.write_bytes(b"")
    os.replace(replacement, journal_path(mem))
    mem.append("two")
    assert [e["text"] for e in mem.entries()] == ["two"]
    assert [json.loads(x)["text"] for x in old.read_bytes().splitlines()] == ["one"]


def test_memory_folder_swapped_for_a_symlink_between_appends_is_refused(
    mem: AgentMemory, tmp_path: Path
) -> None:
    mem.append("one")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.rename(mem.path / "memory", tmp_path / "moved")
    os.symlink(elsewhere, mem.path / "memory")
    with pytest.raises(UnsafePathError):
        mem.append("two")
    assert list(elsewhere.iterdir()) == []


# -- the flush runs after the lock is released, on the appender's own descriptor ------------


def test_each_append_flushes_its_line_after_releasing_the_lock(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock_path = mem.path / "memory" / ".lock"
    journal_path = mem.path / "memory" / "JOURNAL.jsonl"
    seen: list[tuple[bool, bytes]] = []
    real = journal_append.full_fsync

    def flush(fd: int) -> None:
        probe = os.open(lock_path, os.O_RDWR)
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free: the writer let go
            fcntl.flock(probe, fcntl.LOCK_UN)
            free = True
        except BlockingIOError:
            free = False
        finally:
            os.close(probe)
        seen.append((free, os.pread(fd, 1 << 16, 0)))
        real(fd)

    monkeypatch.setattr(journal_append, "full_fsync", flush)
    mem.append("first")
    mem.append("second", ["t"])
    assert [free for free, _ in seen] == [True, True]
    # Each flush is of the journal itself, and its line is already in it.
    assert seen[0][1].endswith(b'"text":"first"}\n')
    assert seen[1][1] == journal_path.read_bytes()
