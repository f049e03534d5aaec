"""Fault suite, FACT.md updates: writers killed with SIGKILL mid-loop while a reader keeps
reading, and compare-and-swap writers racing (and being killed) on one counter.

Every version starts with ``version <n> <digest of the rest>``, so a partial or mixed file is
detected by any reader.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from processes import spawn

from jupyter_agent_memory import AgentMemory

pytestmark = pytest.mark.slow

UPDATER = """
    import hashlib, sys
    from jupyter_agent_memory import AgentMemory
    folder = sys.argv[1]
    sizes = [100, 70_000, 1_000, 300_000, 300]
    mem = AgentMemory.open(folder)
    current = mem.facts
    i = int(current.split()[1]) + 1 if current else 0
    while True:
        body = (f"fact {i} " * (sizes[i % len(sizes)] // 7 + 1))[: sizes[i % len(sizes)]]
        digest = hashlib.sha256(body.encode()).hexdigest()[:16]
        mem.update_facts(f"version {i} {digest}\\n{body}")
        print(i, flush=True)  # acknowledged: update_facts() has returned
        i += 1
"""

READER = """
    import hashlib, os, sys
    from jupyter_agent_memory import AgentMemory
    folder, stop = sys.argv[1], sys.argv[2]
    mem = AgentMemory.open(folder)
    reads = 0
    while not os.path.exists(stop):
        text, sha = mem.read_facts()
        assert hashlib.sha256(text.encode()).hexdigest() == sha
        if text:
            head, _, body = text.partition("\\n")
            _, number, digest = head.split(" ")
            assert hashlib.sha256(body.encode()).hexdigest()[:16] == digest, number
        reads += 1
    print(reads, flush=True)
"""

COUNTER = """
    import sys, time
    from jupyter_agent_memory import AgentMemory, MemoryConflictError
    folder, count, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    mem = AgentMemory.open(folder)
    while time.time() < start:
        time.sleep(0.001)
    done = conflicts = 0
    while count < 0 or done < count:
        text, sha = mem.read_facts()
        value = int(text.split()[1]) if text else 0
        # Every fifth value is large, which widens the window between read and write.
        pad = "." * (200_000 if value % 5 == 0 else 10)
        try:
            mem.update_facts(f"counter {value + 1}\\n{pad}", expected_sha256=sha)
        except MemoryConflictError:
            conflicts += 1
            continue
        print(value + 1, flush=True)  # acknowledged
        done += 1
    print("conflicts", conflicts, file=sys.stderr)
"""


def collect(proc: subprocess.Popen[str], acked: list[int]) -> threading.Thread:
    """Gather a process's acknowledgements (whole lines) while it runs."""

    def run() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.endswith("\n"):
                acked.append(int(line))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def version_of(data: bytes) -> int:
    """The number of a complete version; fails on anything partial or mixed."""
    head, _, body = data.partition(b"\n")
    word, number, digest = head.decode().split(" ")
    assert word == "version"
    assert hashlib.sha256(body).hexdigest()[:16] == digest, f"version {number} is damaged"
    return int(number)


def leftovers(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.suffix == ".tmp")


def test_sigkill_during_update_loops_with_a_reader(tmp_path: Path, agents_root: Path) -> None:
    """Five writers killed at random moments: FACT.md is always one complete version, never
    older than the last acknowledged one; every replaced version is in the history; no temp
    file survives a reopen; a reader running throughout never sees a partial file."""
    folder = tmp_path / "agent"
    AgentMemory.open(folder)
    fact = folder / "memory" / "FACT.md"
    stop = tmp_path / "stop"
    reader = spawn(READER, folder, stop)
    rng = random.Random(2)
    acked: list[int] = []
    for _cycle in range(5):
        writer = spawn(UPDATER, folder)
        thread = collect(writer, acked)
        time.sleep(0.25 + rng.random() * 0.35)
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=30)
        thread.join(timeout=30)
        assert writer.returncode == -signal.SIGKILL

        current = version_of(fact.read_bytes())
        assert acked and current >= acked[-1]  # no acknowledged update lost
        AgentMemory.open(folder)  # reopening sweeps what the killed writer left
        assert leftovers(folder) == []
        kept = sorted(version_of(p.read_bytes()) for p in (folder / "memory/.history").iterdir())
        for version in acked:
            if current - 90 < version < current:  # within the history's 100 slots
                assert version in kept, f"replaced version {version} missing from history"
        assert max(kept) <= current
    stop.touch()
    out, err = reader.communicate(timeout=30)
    assert reader.returncode == 0, err
    assert int(out) > 10
    assert len(acked) > 10 and acked == sorted(acked)


def test_cas_writers_lose_no_update_and_history_holds_each_value(
    tmp_path: Path, agents_root: Path
) -> None:
    """Three compare-and-swap incrementers: the counter reaches 3 x 15, every acknowledged value
    is distinct, and the history holds each intermediate value exactly once."""
    folder = tmp_path / "agent"
    AgentMemory.open(folder)
    start = time.time() + 1.0
    procs = [spawn(COUNTER, folder, 15, start) for _ in range(3)]
    acked: list[int] = []
    conflicts = 0
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
        acked += [int(x) for x in out.split()]
        conflicts += int(re.search(r"conflicts (\d+)", err).group(1))  # type: ignore[union-attr]
    mem = AgentMemory.open(folder)
    assert int(mem.facts.split()[1]) == 45
    assert sorted(acked) == list(range(1, 46))
    kept = sorted(int(mem.history_text(h["sha256"]).split()[1]) for h in mem.history())
    assert kept == list(range(1, 45))
    assert leftovers(folder) == []
    assert conflicts >= 0  # reported for information; a 2-core machine may serialise them


def test_sigkill_during_cas_loops(tmp_path: Path, agents_root: Path) -> None:
    """Incrementers killed mid-loop: the counter equals the acknowledged increments plus at
    most one unacknowledged per killed writer; every value below it is in the history."""
    folder = tmp_path / "agent"
    AgentMemory.open(folder)
    acked: list[int] = []
    for round_ in range(3):
        procs = [spawn(COUNTER, folder, -1, 0) for _ in range(2)]
        threads = [collect(proc, acked) for proc in procs]
        time.sleep(0.3 + 0.1 * round_)
        for proc in procs:
            os.kill(proc.pid, signal.SIGKILL)
        for proc, thread in zip(procs, threads, strict=True):
            proc.wait(timeout=30)
            thread.join(timeout=30)
        mem = AgentMemory.open(folder)
        assert leftovers(folder) == []
        value = int(mem.facts.split()[1])
        assert len(acked) == len(set(acked))  # no value was granted twice
        assert len(acked) <= value <= len(acked) + 2 * (round_ + 1)
        kept = {int(mem.history_text(h["sha256"]).split()[1]) for h in mem.history()}
        assert set(range(max(1, value - 90), value)) <= kept
        assert max(kept, default=0) <= value
    assert len(acked) > 5
