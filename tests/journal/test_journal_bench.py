"""The benchmark script keeps working (a small run; the targets apply to 1,000,000 entries)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

# Runs the benchmark script in a child process.
pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "bench" / "journal_bench.py"


def test_bench_runs_and_prints_every_figure(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--entries",
            "3000",
            "--rounds",
            "1",
            "--append-seconds",
            "0.1",
            "--data",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert re.match(r"load average before: [0-9.]+ [0-9.]+ [0-9.]+\n", out)
    assert "journal: 3,000 entries" in out
    for label in (
        "tag 'note', limit 20 (lines decoded: 20)",
        "match-all, limit 20 (lines decoded: 20)",
        "time window: the last 2 h, limit 20",
        "query 'zeppelin': 10 matches, whole file",
        "same, against grep -c -i -F",
        "query 'interstate': 10 matches, whole file",
        "query 'tag' (in every line's keys/ts)",
        "query '2025' (in every line's keys/ts)",
        "query 'naïve' (non-ASCII)",
        "tag 'milestone' (rare): 10 matches, whole file",
        "time window of 2 h in the middle, no index",
        "default settings, no index: query, window, both",
        "0 files written to the cache",
        "index build (AgentMemory.build_index)",
        "indexed query 'zeppelin' (10 matches)",
        "indexed time window of 2 h in the middle",
        "same, against SQLite indexed ts",
        "during a background build",
        "peak memory, time window",
        "appends/s, one process (fsync)",
        "appends/s, four processes together",
        "prompt build, unchanged files",
        "| measure | ours | compared with | result |",
        "load average after:",
    ):
        assert label in out, label
    # ratios come with their spread over the rounds
    assert re.search(r"x faster \(rounds [0-9.,]+x-[0-9.,]+x\)", out)
    assert "the targets are defined for 1,000,000 entries" in out
    assert re.search(r"targets: \d+ passed, \d+ failed", out)
    assert "cores" in out and "SQLite" in out
    # the data folder is reused by the next run instead of being rebuilt
    assert (tmp_path / "data" / "JOURNAL.jsonl").stat().st_size > 300_000
    assert (tmp_path / "data" / "entries.txt").read_text() == "3000"
