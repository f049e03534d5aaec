"""SIGKILL soak: writer processes append, update FACT.md by compare-and-swap, forget (by text
and by pattern), start sessions, restore and search one agent while the test kills them at
random and starts new ones. Afterwards every acknowledged append is stored exactly once, no
forgotten text is anywhere (a byte scan of the agent folder and of every cache folder), and
the folder keeps its rules.

A worker acknowledges an operation by printing a line after the call returned; an operation
killed before that line is not acknowledged and may or may not have happened.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from harness_checks import environment, exactly_once, forgotten_nowhere, well_formed

from jupyter_agent_memory import AgentMemory

WORKER = textwrap.dedent(
    """
    import random, sys
    from jupyter_agent_memory import AgentMemory, PromptBuilder, forget
    from jupyter_agent_memory.errors import MemoryConflictError, MemoryToolError

    folder, name, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    mem = AgentMemory.open(folder, keep_sessions=5)
    builder = PromptBuilder()

    def ack(*words):
        print(*words, flush=True)

    n = 0
    while True:
        n += 1
        choice = rng.random()
        try:
            if choice < 0.35:
                text = f"{name}-entry-{n}"
                mem.append(text, ["soak"])
                ack("A", text)
            elif choice < 0.50:
                doomed = f"{name}-doomed-{n}-end"  # no doomed text holds another
                current, sha = mem.read_facts()
                mem.update_facts(current + f"- {doomed}\\n", expected_sha256=sha)
                mem.append(f"about {doomed}")
                ack("D", doomed)  # stored in FACT.md and the journal; forgotten next
                builder.start_session(mem)
                receipt = forget(mem, doomed) if rng.random() < 0.5 else forget(
                    mem, pattern=doomed.replace("-", "[-]")
                )
                ack("F", doomed, receipt["verified"])
            elif choice < 0.70:
                current, sha = mem.read_facts()
                lines = [x for x in current.splitlines() if "-doomed-" not in x][-5:]
                mem.update_facts("\\n".join(lines + [f"- {name} fact {n}"]) + "\\n",
                                 expected_sha256=sha)
                ack("U")
            elif choice < 0.80:
                builder.start_session(mem)
                ack("S")
            elif choice < 0.90:
                versions = mem.history()
                if versions:
                    mem.restore(rng.choice(versions)["sha256"])
                ack("R")
            else:
                mem.search("entry", limit=5)
                ack("Q")
        except MemoryConflictError:
            ack("C")
        except MemoryToolError as exc:
            ack("E", repr(exc.message)[:80])
    """
)


def soak(tmp_path: Path, seconds: float, workers: int, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    root = tmp_path / "agents"
    cache = tmp_path / "cache"
    folder = root / "soak"
    AgentMemory.open(folder).update_facts("- start\n")
    env = environment(root, cache)
    outputs: list[Path] = []
    procs: dict[int, subprocess.Popen[bytes]] = {}
    counter = 0

    def start() -> None:
        nonlocal counter
        counter += 1
        out = tmp_path / f"worker-{counter}.out"
        outputs.append(out)
        with open(out, "wb") as handle:
            proc = subprocess.Popen(
                [sys.executable, "-c", WORKER, str(folder), f"w{counter}", str(rng.random())[2:9]],
                stdout=handle, stderr=subprocess.DEVNULL, env=env,
            )
        procs[proc.pid] = proc

    for _ in range(workers):
        start()
    # Kills start once a worker has acknowledged a write: on a loaded machine the interpreter's
    # start-up alone can outlast many kill intervals, and a soak of only start-ups tests nothing.
    started = time.monotonic() + 60
    while time.monotonic() < started and not any(
        out.read_bytes().startswith(b"A ") or b"\nA " in out.read_bytes() for out in outputs
    ):
        time.sleep(0.02)
    kills = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(rng.uniform(0.05, 0.4))
        victim = rng.choice(list(procs))
        os.kill(victim, signal.SIGKILL)
        procs.pop(victim).wait()
        kills += 1
        start()
    for proc in procs.values():
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
    appended, forgotten, unverified, errors = [], [], [], []
    for out in outputs:
        for line in out.read_text(errors="replace").splitlines():
            parts = line.split(" ")
            if parts[0] == "A" and len(parts) == 2:
                appended.append(parts[1])
            elif parts[0] == "F" and len(parts) == 3:
                forgotten.append(parts[1])
                if parts[2] != "True":
                    unverified.append(parts[1])
            elif parts[0] == "E":
                errors.append(line)
    violations = exactly_once(folder, appended)
    violations += forgotten_nowhere(folder, forgotten, [cache])
    violations += well_formed(folder)
    violations += [f"forget of {text} was acknowledged as unverified" for text in unverified]
    return {
        "kills": kills,
        "appends": len(appended),
        "forgets": len(forgotten),
        "errors": errors,
        "violations": violations,
    }


def _report(result: dict[str, object]) -> None:
    print(
        f"\nsoak: {result['kills']} kills, {result['appends']} acknowledged appends, "
        f"{result['forgets']} acknowledged forgets, {len(result['violations'])} violations "
        f"(errors reported to workers: {len(result['errors'])})"
    )


def test_a_short_kill_soak_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    result = soak(tmp_path, seconds=3, workers=3, seed=1)
    _report(result)
    assert result["kills"] >= 10 and result["appends"] > 0
    assert result["violations"] == []


@pytest.mark.slow
def test_a_long_kill_soak_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    result = soak(tmp_path, seconds=90, workers=4, seed=2)
    _report(result)
    assert result["forgets"] > 0
    assert result["violations"] == []
