"""Real processes against one agent folder: concurrent appends, SIGKILL mid-update, CAS writers."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from processes import spawn

from jupyter_agent_memory import AgentMemory

pytestmark = pytest.mark.slow

BIG = 70 * 1024  # more than the 64 KiB a pipe or a single small write would carry


def finish(procs: list[subprocess.Popen[str]], timeout: float = 120) -> list[str]:
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err
        outputs.append(out)
    return outputs


def temp_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.tmp"))


APPENDER = """
    import sys, time
    from jupyter_agent_memory import AgentMemory
    folder, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    start = float(sys.argv[4])
    mem = AgentMemory.open(folder)
    while time.time() < start:
        pass
    for i in range(count):
        text = f"w{worker}-{i}|" + ("x" * {big} if i % 4 == 0 else "short")
        mem.append(text, [f"w{worker}"])
""".replace("{big}", str(BIG))


def test_concurrent_appends_lose_and_tear_nothing(tmp_path: Path, agents_root: Path) -> None:
    folder = tmp_path / "agent"
    AgentMemory.open(folder)
    workers, count = 4, 24
    start = time.time() + 1.0
    finish([spawn(APPENDER, folder, w, count, start) for w in range(workers)])

    raw = (folder / "memory" / "JOURNAL.jsonl").read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.split(b"\n")[:-1]
    assert len(lines) == workers * count
    entries = [json.loads(line) for line in lines]  # every line is one whole JSON object
    seen = sorted(e["text"].split("|")[0] for e in entries)
    assert seen == sorted(f"w{w}-{i}" for w in range(workers) for i in range(count))
    for entry in entries:
        worker, index = entry["text"].split("|")[0][1:].split("-")
        assert entry["tags"] == [f"w{worker}"]
        assert entry["text"].endswith("x" * BIG if int(index) % 4 == 0 else "|short")
    # Each writer's own entries stay in its order.
    for w in range(workers):
        own = [e["text"].split("|")[0] for e in entries if e["tags"] == [f"w{w}"]]
        assert own == [f"w{w}-{i}" for i in range(count)]
    result = AgentMemory.open(folder).search(tag="w1", limit=100)
    assert result.skipped == 0
    assert len(result) == count


UPDATER = """
    import sys
    from jupyter_agent_memory import AgentMemory
    mem = AgentMemory.open(sys.argv[1], history_limit=3)
    i = 0
    while True:
        mem.update_facts(f"version {i}\\n" + "payload line of a fairly large FACT.md\\n" * 8000)
        if i == 0:
            print("ready", flush=True)
        i += 1
"""


def valid_version(data: bytes) -> bool:
    head, _, rest = data.partition(b"\n")
    return (
        head.startswith(b"version ")
        and head[8:].isdigit()
        and rest == b"payload line of a fairly large FACT.md\n" * 8000
    )


def test_sigkill_during_updates_never_leaves_a_partial_fact(
    tmp_path: Path, agents_root: Path
) -> None:
    folder = tmp_path / "agent"
    AgentMemory.open(folder)
    fact = folder / "memory" / "FACT.md"
    for delay in (0.0, 0.03, 0.07, 0.13, 0.21):
        proc = spawn(UPDATER, folder)
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        assert valid_version(fact.read_bytes())
        mem = AgentMemory.open(folder)  # sweeps what the killed writer left behind
        assert temp_files(folder) == []
        assert valid_version(mem.facts.encode())
        for version in (folder / "memory" / ".history").glob("*"):
            assert valid_version(version.read_bytes()), version.name


CAS_WRITER = """
    import hashlib, sys, time
    from jupyter_agent_memory import AgentMemory, MemoryConflictError
    folder, worker, count, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    mem = AgentMemory.open(folder)
    while time.time() < start:
        pass
    done = conflicts = 0
    while done < count:
        current = mem.facts
        token = hashlib.sha256(current.encode()).hexdigest()
        try:
            new = mem.update_facts(current + f"{worker}-{done}\\n", expected_sha256=token)
        except MemoryConflictError:
            conflicts += 1
            continue
        print(new, flush=True)
        done += 1
    print("conflicts", conflicts, file=sys.stderr)
"""


def test_concurrent_cas_writers_lose_no_update(tmp_path: Path, agents_root: Path) -> None:
    folder = tmp_path / "agent"
    AgentMemory.open(folder)
    workers, count = 4, 12
    start = time.time() + 1.0
    outputs = finish([spawn(CAS_WRITER, folder, f"w{w}", count, start) for w in range(workers)])

    successes = [line for out in outputs for line in out.split()]
    assert len(successes) == workers * count
    assert len(set(successes)) == workers * count  # each success is a distinct version
    final = AgentMemory.open(folder).facts
    lines = final.splitlines()
    assert sorted(lines) == sorted(f"w{w}-{i}" for w in range(workers) for i in range(count))
    for w in range(workers):
        assert [x for x in lines if x.startswith(f"w{w}-")] == [f"w{w}-{i}" for i in range(count)]
    # The file on disk is the last successful version: the one holding every line.
    assert hashlib.sha256(final.encode()).hexdigest() in successes
    assert temp_files(folder) == []
