"""The benchmark script keeps working (a small run; the targets apply to 1,000,000 entries)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "journal_bench.py"


def test_bench_runs_and_prints_every_figure() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--entries", "3000", "--append-seconds", "0.1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("journal: 3,000 entries")
    for label in (
        "tag 'note', limit 20 (lines decoded: 20 vs 3,000)",
        "query 'zeppelin' (10 matches, whole file)",
        "same, against grep -c -i -F",
        "query 'interstate' (10 matches, whole file)",
        "peak memory, rare query",
        "appends/s through AgentMemory.append",
        "prompt build, unchanged files",
        "| measure | ours | compared with | result |",
    ):
        assert label in out, label
    assert "the targets are defined for 1,000,000 entries" in out
    assert "cores" in out and "Python" in out
