"""How fast does ``jupyter-agent-memory mcp`` start over stdio?

An MCP host spawns the server and sends ``initialize``; many hosts give that answer a deadline
(pydantic-ai: 5 s). Each run here spawns a fresh process, writes ``initialize`` the moment it
starts, and times the answer; then times the answer to ``tools/list`` (the SDK loaded and
serving). The same is measured, interleaved in one run, for the official memory server
(``@modelcontextprotocol/server-memory``, installed with npm into a cache folder on first use;
skipped when npm or the registry is not there) and for a bare interpreter that imports the
MCP SDK and answers one line (the floor for any server built on the SDK that waits for it).

    python bench/mcp_bench.py [--runs 7] [--no-reference]

Target: spawn + initialize under 1 s (the median), printed with its ratio to the official server.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_SECONDS = 1.0
REFERENCE = "@modelcontextprotocol/server-memory"
REFERENCE_VERSION = "2026.8.31"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "agent-memory-bench"
TIMEOUT = 60

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "mcp-bench", "version": "1"},
    },
}
FOLLOW_UP = [
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]
# A process that imports the SDK, then answers every request line with an empty result.
BARE_SDK = (
    "import json, sys, mcp\n"
    "for line in sys.stdin:\n"
    "    message = json.loads(line)\n"
    "    if 'id' in message:\n"
    "        print(json.dumps({'jsonrpc': '2.0', 'id': message['id'], 'result': {}}), flush=True)\n"
)


# Where a start-up's time goes: each import step, timed in a fresh interpreter.
PHASES = (
    "import time\n"
    "marks = [('interpreter start', time.perf_counter())]\n"
    "woke = time.time()\n"
    "import json\n"
    "import jupyter_agent_memory.cli\n"
    "marks.append(('import jupyter_agent_memory.cli (engine)', time.perf_counter()))\n"
    "import mcp_types\n"
    "marks.append(('import mcp_types (protocol models)', time.perf_counter()))\n"
    "import mcp.server.stdio\n"
    "marks.append(('import mcp.server (rest of the SDK)', time.perf_counter()))\n"
    "import jupyter_agent_memory.mcp_server.handlers\n"
    "marks.append(('import the handlers', time.perf_counter()))\n"
    "print(json.dumps([woke, [(label, t - marks[0][1]) for label, t in marks]]))\n"
)


def phases(runs: int, env: dict[str, str]) -> list[tuple[str, float]]:
    """Median seconds of each import step (from interpreter start to that step's end)."""
    samples: list[list[tuple[str, float]]] = []
    for _ in range(runs):
        started = time.time()  # wall clock: the child reads the same one
        out = subprocess.run(
            [sys.executable, "-c", PHASES], capture_output=True, text=True, env=env, check=True
        )
        woke, marks = json.loads(out.stdout)
        boot = woke - started
        # Every step is counted from the spawn.
        samples.append([(marks[0][0], boot)] + [(label, boot + t) for label, t in marks[1:]])
    steps = []
    for index, (label, _t) in enumerate(samples[0]):
        steps.append((label, statistics.median(sample[index][1] for sample in samples)))
    return steps


def exchange(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Seconds from spawn to the ``initialize`` answer, and to the ``tools/list`` answer."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(INITIALIZE) + "\n")
        proc.stdin.flush()
        first = json.loads(proc.stdout.readline())
        initialized = time.perf_counter() - started
        assert first.get("id") == 1 and "result" in first, first
        for message in FOLLOW_UP:
            proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        second = json.loads(proc.stdout.readline())
        listed = time.perf_counter() - started
        assert second.get("id") == 2 and "result" in second, second
        return initialized, listed
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def reference_command() -> list[str] | None:
    """The reference server's command line, installing it into the cache on first use."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        return None
    folder = CACHE / f"server-memory-{REFERENCE_VERSION}"
    script = folder / "node_modules" / REFERENCE / "dist" / "index.js"
    if not script.exists():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text('{"private": true}\n')
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error",
             f"{REFERENCE}@{REFERENCE_VERSION}"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0 or not script.exists():
            print(f"(reference not installed: {done.stderr.strip()[:200]})", file=sys.stderr)
            return None
    return [node, str(script)]


def main() -> int:
    """Run the benchmark; exit 1 when the median spawn + initialize misses the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-reference", action="store_true", help="skip the npm server")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        agent = Path(tmp) / "agent"
        agent.mkdir()
        env = {
            **os.environ,
            "JUPYTER_AGENT_MEMORY_ROOT": str(Path(tmp) / "root"),
            "MEMORY_FILE_PATH": str(Path(tmp) / "reference-memory.jsonl"),
        }
        commands = {
            "jupyter-agent-memory mcp": [
                sys.executable, "-m", "jupyter_agent_memory", "mcp", "--agent", str(agent),
            ],
            "python -c 'import mcp' (bare SDK)": [sys.executable, "-c", BARE_SDK],
        }
        reference = None if args.no_reference else reference_command()
        if reference:
            commands[f"reference server-memory {REFERENCE_VERSION}"] = reference
        timings: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for command in commands.values():  # one warm-up each: disk caches
            exchange(command, env)
        for _ in range(args.runs):  # interleaved, so load changes hit every row alike
            for name, command in commands.items():
                timings[name].append(exchange(command, env))
        steps = phases(args.runs, env)
    medians = {
        name: (statistics.median(t[0] for t in runs), statistics.median(t[1] for t in runs))
        for name, runs in timings.items()
    }
    ours = medians["jupyter-agent-memory mcp"][0]
    print(f"spawn + initialize over stdio, median of {args.runs} (load {os.getloadavg()[0]:.1f})")
    print(f"{'server':<48} {'initialize':>11} {'tools/list':>11}")
    for name, (initialized, listed) in medians.items():
        print(f"{name:<48} {initialized * 1000:>8.0f} ms {listed * 1000:>8.0f} ms")
    for name, (initialized, _listed) in medians.items():
        if name != "jupyter-agent-memory mcp":
            label = "ratio ours / " + name.split(" (")[0]
            print(f"{label:<48} {ours / initialized:>10.2f}x")
    verdict = "PASS" if ours < TARGET_SECONDS else "FAIL"
    print(f"{'target: initialize under 1 s':<48} {ours * 1000:>8.0f} ms  [{verdict}]")
    print("\nwhere the time goes (median, each step after the one above):")
    previous = 0.0
    for label, seconds in steps:
        print(f"  {label:<46} {(seconds - previous) * 1000:>8.0f} ms")
        previous = seconds
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
