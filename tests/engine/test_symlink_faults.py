"""Fault suite, symlink swaps: while a process writes through the ``memory`` tool, folders and
files of the agent are swapped for symlinks to an outside tree, atomically and over and over
(``renameat2(RENAME_EXCHANGE)``, so the path never stops existing). Nothing may ever be written
outside the agent folder, and every refusal must be the documented internal error.
"""

from __future__ import annotations

import ctypes
import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jupyter_agent_memory import AgentMemory

pytestmark = pytest.mark.slow

_libc = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2

WRITER = """
    import hashlib, json, sys, time
    from jupyter_agent_memory import AgentMemory, MemoryToolError
    folder, seconds = sys.argv[1], float(sys.argv[2])
    mem = AgentMemory.open(folder)
    print("ready", flush=True)
    done, refused = {}, {}
    end = time.time() + seconds
    i = 0
    while time.time() < end:
        body = f"fact {i} " * (1 + i % 50)
        digest = hashlib.sha256(body.encode()).hexdigest()[:16]
        calls = [
            ("update", lambda: mem.call_tool({"action": "update",
                                              "content": f"version {i} {digest}\\n{body}"})),
            ("append", lambda: mem.call_tool({"action": "append", "text": f"entry {i}",
                                              "tags": ["swap"]})),
            ("search", lambda: mem.call_tool({"action": "search", "query": "entry"})),
            ("read", lambda: mem.facts),
            ("soul", lambda: mem.write_soul(f"# Soul {i}\\n")),
        ]
        for name, call in calls:
            try:
                call()
                done[name] = done.get(name, 0) + 1
            except MemoryToolError as exc:
                key = f"{type(exc).__name__} {exc.code}"
                messages = refused.setdefault(key, {})
                messages[exc.message] = messages.get(exc.message, 0) + 1
        i += 1
    print(json.dumps({"done": done, "refused": refused,
                      "refusals": sum(sum(v.values()) for v in refused.values())}))
"""


def exchange(a: Path, b: Path) -> None:
    """Atomically swap two paths (Linux ``renameat2`` with ``RENAME_EXCHANGE``)."""
    if _libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(a))


def snapshot(root: Path) -> dict[str, tuple[str, bytes, int]]:
    """Everything under ``root``: kind, content (or link target) and mode of each entry."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                found[str(path.relative_to(root))] = ("link", os.fsencode(os.readlink(path)), 0)
            elif stat.S_ISDIR(st.st_mode):
                found[str(path.relative_to(root))] = ("dir", b"", stat.S_IMODE(st.st_mode))
            else:
                found[str(path.relative_to(root))] = (
                    "file",
                    path.read_bytes(),
                    stat.S_IMODE(st.st_mode),
                )
    return found


def _supports_exchange(tmp_path: Path) -> bool:
    a, b = tmp_path / "probe-a", tmp_path / "probe-b"
    a.mkdir()
    b.symlink_to(a)
    try:
        exchange(a, b)
    except OSError:
        return False
    finally:
        for p in (a, b):
            if p.is_symlink():
                p.unlink()
        for p in (a, b):
            if p.is_dir():
                p.rmdir()
    return True


def test_swapping_folders_and_files_for_symlinks_never_writes_outside(
    tmp_path: Path, agents_root: Path
) -> None:
    if sys.platform != "linux" or not _supports_exchange(tmp_path):
        pytest.fail("this suite needs Linux renameat2(RENAME_EXCHANGE) on the temp filesystem")
    root = tmp_path / "root"
    root.mkdir()
    agent = root / "agent"
    mem = AgentMemory.open(agent)
    mem.update_facts("version -2 x\n")
    mem.update_facts("version -1 x\n")  # the second update creates memory/.history
    mem.append("first", ["swap"])
    assert (agent / "memory" / ".history").is_dir()

    # The outside tree: look-alike folders and files an attacker would like us to write into.
    outside = tmp_path / "outside"
    (outside / "agent" / "memory" / ".history").mkdir(parents=True)
    for base in (outside, outside / "agent" / "memory"):
        (base / "FACT.md").write_text("OUTSIDE FACT\n")
        (base / "JOURNAL.jsonl").write_text('{"text":"outside"}\n')
    (outside / "agent" / "SOUL.md").write_text("OUTSIDE SOUL\n")
    (outside / "history").mkdir()
    before = snapshot(outside)
    missing = outside / "does-not-exist"

    memory = agent / "memory"
    swaps = [  # (path inside the agent, what its stand-in link points to)
        (memory, outside / "agent" / "memory"),
        (agent, outside / "agent"),
        (memory / "FACT.md", outside / "FACT.md"),
        (memory / "JOURNAL.jsonl", outside / "JOURNAL.jsonl"),
        (memory / ".history", outside / "history"),
        (agent / "SOUL.md", outside / "agent" / "SOUL.md"),
        (memory, missing),  # a dangling link: its target must never be created
    ]
    writer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(WRITER), str(agent), "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
    cycles = 0
    deadline = time.time() + 3.5
    while time.time() < deadline and writer.poll() is None:
        for target, points_to in swaps:
            link = target.with_name(target.name + ".swap-link")
            link.symlink_to(points_to)
            exchange(target, link)  # target is now the link; the real thing sits at `link`
            time.sleep(0.002 + 0.001 * (cycles % 5))
            exchange(target, link)
            link.unlink()
            time.sleep(0.001 * (cycles % 3))  # unswapped too, so swaps land mid-operation
        cycles += 1
    out, err = writer.communicate(timeout=30)
    assert writer.returncode == 0, err
    report = json.loads(out)

    assert snapshot(outside) == before  # nothing written, created, removed or chmod-ed
    assert not missing.exists()
    assert cycles > 20
    # Work went through between swaps, and refusals did happen.
    assert report["done"].get("update", 0) > 0 and report["done"].get("append", 0) > 0
    assert report["refusals"] > 0
    # Every refusal is an UnsafePathError (-32603) naming a path inside the agent folder.
    assert set(report["refused"]) == {"UnsafePathError -32603"}, report["refused"]
    named = set()
    for message in report["refused"]["UnsafePathError -32603"]:
        # A write refused by the folder walk, or SOUL.md/USER.md refused when they are opened.
        assert message.startswith(
            ("Refusing to ", "Agent data file must be a real file: ")
        ), message
        assert str(agent) in message, message
        named.add(message.split(str(agent), 1)[1].split(":")[0])
    # Each swapped folder and file was caught by name (the agent folder, memory/, the files).
    expected = {"", "/memory", "/memory/FACT.md", "/memory/JOURNAL.jsonl", "/memory/.history"}
    assert expected | {"/SOUL.md"} <= named, named

    # The agent folder is whole and consistent afterwards.
    final = AgentMemory.open(agent)
    head = final.facts.split("\n", 1)[0].split(" ")
    assert head[0] == "version"
    entries = list(final.entries())
    assert entries[0]["text"] == "first" and all(e["tags"] == ["swap"] for e in entries)
    assert final.search(tag="swap", limit=10**6).skipped == 0
    assert not any(p.name.endswith(".swap-link") for p in agent.rglob("*"))
