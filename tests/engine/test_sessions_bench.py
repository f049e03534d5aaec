"""The sessions bench runs and prints every figure (a reduced run; the figures are its job)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "sessions_bench.py"


def test_the_bench_runs_and_reports_cost_and_storage() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--rounds", "2", "--calls", "20"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode in (0, 1), done.stderr
    figure = r"recording costs \d+ us over a cached build: .* of our own work .* (PASS|FAIL)"
    assert re.search(figure, done.stdout)
    assert "stored texts: 4 before, 4 after 40 more sessions of the same prompt" in done.stdout
