"""Fault suite, journal appends: real processes writing at once (entries up to 300 KiB) while
others search, and appenders killed with SIGKILL in the middle of their loops.

Every entry carries a digest of its own body, so an entry that was cut or mixed with another
one is detected wherever it is read.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from processes import spawn

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.engine.store import CorruptJournalWarning

# SIGKILL, multi-process and many-thread fault suites.
pytestmark = pytest.mark.slow

SIZES = [10, 70_000, 300, 150_000, 2_000, 300_000]  # bytes of body; three are over 64 KiB

WRITER = """
    import hashlib, sys, time
    from jupyter_agent_memory import AgentMemory
    folder, worker, count, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    sizes = [int(s) for s in sys.argv[5].split(",")]
    mem = AgentMemory.open(folder)
    while time.time() < start:
        time.sleep(0.001)
    i = 0
    while count < 0 or i < count:
        size = sizes[i % len(sizes)]
        body = (f"{worker}:{i}:" * (size // 4 + 1))[:size]
        digest = hashlib.sha256(body.encode()).hexdigest()[:16]
        tags = [worker, "big" if size > 65536 else "small"]
        mem.append(f"{worker}-{i}|{digest}|{body}", tags)
        print(f"{worker}-{i}", flush=True)  # acknowledged: append() has returned
        i += 1
"""

SEARCHER = """
    import hashlib, os, sys
    from jupyter_agent_memory import AgentMemory
    folder, stop, workers = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    mem = AgentMemory.open(folder)

    def check(entry):
        ident, digest, body = entry["text"].split("|", 2)
        assert hashlib.sha256(body.encode()).hexdigest()[:16] == digest, ident
        assert entry["tags"][0] == ident.split("-")[0], ident

    searches = most_skipped = 0
    while not os.path.exists(stop):
        for worker in workers:
            found = mem.search(tag=worker, limit=5)
            for entry in found:
                check(entry)
            # newest first, and in the writer's own order
            numbers = [int(e["text"].split("|")[0].split("-")[1]) for e in found]
            assert numbers == sorted(numbers, reverse=True), numbers
            most_skipped = max(most_skipped, found.skipped)
        for entry in mem.search(tag="BIG", limit=3):
            check(entry)
        searches += 1
    print(searches, most_skipped, flush=True)
"""


def text_for(ident: str, body: str = "") -> str:
    """An entry text in the suite's self-checking form."""
    return f"{ident}|{hashlib.sha256(body.encode()).hexdigest()[:16]}|{body}"


def read_journal(path: Path) -> tuple[dict[str, dict], list[bytes], list[str]]:
    """(entries by id, corrupted lines, ids in file order); asserts every entry is intact."""
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    if raw.endswith(b"\n"):
        lines.pop()
    entries: dict[str, dict] = {}
    corrupted: list[bytes] = []
    order: list[str] = []
    for line in lines:
        try:
            entry = json.loads(line.decode("utf-8"))
        except ValueError:
            corrupted.append(line)
            continue
        ident, digest, body = entry["text"].split("|", 2)
        assert hashlib.sha256(body.encode()).hexdigest()[:16] == digest, f"{ident} is damaged"
        assert ident not in entries, f"{ident} appears twice"
        assert entry["tags"][0] == ident.split("-")[0]
        entries[ident] = entry
        order.append(ident)
    return entries, corrupted, order


def test_many_appenders_and_searchers_at_once(tmp_path: Path, agents_root: Path) -> None:
    """4 writers (half of their entries over 64 KiB) and 2 searchers: nothing lost or torn,
    each writer's order kept, and no search ever fails or returns a damaged entry."""
    folder = tmp_path / "agent"
    AgentMemory.open(folder)
    workers, count = [f"w{i}" for i in range(4)], 18
    stop = tmp_path / "stop"
    start = time.time() + 1.5
    sizes = ",".join(map(str, SIZES))
    writers = [spawn(WRITER, folder, w, count, start, sizes) for w in workers]
    searchers = [spawn(SEARCHER, folder, stop, ",".join(workers)) for _ in range(2)]
    for proc in writers:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert out.split() == [f"{proc.args[4]}-{i}" for i in range(count)]
    stop.touch()
    for proc in searchers:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        searches, _most_skipped = map(int, out.split())
        assert searches > 0

    path = folder / "memory" / "JOURNAL.jsonl"
    entries, corrupted, order = read_journal(path)
    assert corrupted == []
    assert sorted(entries) == sorted(f"{w}-{i}" for w in workers for i in range(count))
    for w in workers:
        assert [x for x in order if x.startswith(f"{w}-")] == [f"{w}-{i}" for i in range(count)]
    big = AgentMemory.open(folder).search(tag="big", limit=1000)
    assert (len(big), big.skipped) == (len(workers) * count // 2, 0)
    assert all(len(e["text"]) > 65536 for e in big)


def _collect(proc: subprocess.Popen[str], acked: list[str]) -> threading.Thread:
    """Read a writer's acknowledgements as they come (complete lines only)."""

    def run() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.endswith("\n"):
                acked.append(line.strip())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_sigkill_during_append_loops_loses_no_acknowledged_entry(
    tmp_path: Path, agents_root: Path
) -> None:
    """Writers killed at random moments: every acknowledged entry is there and intact, at most
    one torn line per kill, and the next append always starts on a line of its own."""
    folder = tmp_path / "agent"
    AgentMemory.open(folder)
    path = folder / "memory" / "JOURNAL.jsonl"
    rng = random.Random(6)
    acked: list[str] = []
    kills = 0
    sizes = "10,300,2000,500,70000,800,150,40,120000,90"
    for round_ in range(3):
        procs = [spawn(WRITER, folder, f"r{round_}w{w}", -1, 0, sizes) for w in range(2)]
        before = len(acked)
        readers = [_collect(proc, acked) for proc in procs]
        # Kill once the writers are appending (start-up takes seconds on a loaded machine),
        # at a random moment after that.
        deadline = time.monotonic() + 60
        while len(acked) < before + 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.random() * 0.3)
        for proc in procs:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        for proc, reader in zip(procs, readers, strict=True):
            proc.wait(timeout=30)
            assert proc.returncode == -signal.SIGKILL
            reader.join(timeout=30)

        entries, corrupted, _ = read_journal(path)
        assert set(acked) <= set(entries), set(acked) - set(entries)
        assert len(corrupted) <= kills  # a kill can cut only the write in progress

        # The next writer appends cleanly, even after a torn line, and searches still work.
        mem = AgentMemory.open(folder)
        mem.append(text_for(f"after{round_}-0"), [f"after{round_}"])
        assert path.read_bytes().endswith(b"\n")
        last = json.loads(path.read_bytes().rsplit(b"\n", 2)[1])
        assert last["tags"] == [f"after{round_}"]
        assert [e["tags"] for e in mem.search(tag=f"after{round_}")] == [[f"after{round_}"]]
    assert len(acked) > 6  # the writers really ran between kills


def test_append_after_a_torn_write_starts_a_new_line(tmp_path: Path, agents_root: Path) -> None:
    """A crash that cut a line (simulated byte for byte) never glues the next entry to it."""
    folder = tmp_path / "agent"
    mem = AgentMemory.open(folder)
    mem.append(text_for("x-0"), ["x"])
    path = folder / "memory" / "JOURNAL.jsonl"
    torn = b'{"ts":"2026-11-29T10:00:00.000Z","tags":["x"],"text":"cut in the mid'
    with path.open("ab") as f:
        f.write(torn)
    proc = spawn(WRITER, folder, "later", 2, 0, "100,70000")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    lines = path.read_bytes().split(b"\n")
    assert lines[1] == torn and lines[-1] == b""
    _entries, corrupted, order = read_journal(path)
    assert corrupted == [torn]
    assert order == ["x-0", "later-0", "later-1"]
    found = mem.search(tag="later", limit=10)
    assert [e["text"].split("|")[0] for e in found] == ["later-1", "later-0"]
    with pytest.warns(CorruptJournalWarning, match=r"Skipped 1 corrupted line\(s\) of 4 read"):
        everything = mem.search(limit=10)
    assert [e["tags"][0] for e in everything] == ["later", "later", "x"]
    assert everything.skipped == 1
