"""The prompt benchmark keeps working, and its exit code follows the target only."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "prompt_bench.py"
SMALL = ["--rounds", "2", "--cached-calls", "50", "--uncached-calls", "10"]


def bench(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JUPYTER_AGENT_MEMORY_ROOT": str(tmp_path / "root")}
    return subprocess.run(
        [sys.executable, str(BENCH), *SMALL, *options],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_bench_prints_every_figure_and_passes_a_reachable_target(tmp_path: Path) -> None:
    proc = bench(tmp_path, "--target", "1")
    assert (proc.returncode, proc.stderr) == (0, "")
    lines = proc.stdout.splitlines()
    assert len(lines) == 8
    assert re.fullmatch(
        r"Prompt builds: 2 interleaved rounds, FACT.md \d+ bytes, prompt \d+ characters", lines[0]
    )
    for name, line in zip(
        [
            "build_session cached",
            "build_session uncached",
            "build cached",
            "build uncached",
            "build cached, hold_files=False",
        ],
        lines[1:6],
        strict=True,
    ):
        assert re.fullmatch(rf"  {re.escape(name)} +[0-9.]+ us per call \(median\)", line)
    for kind, line in zip(["build_session", "build"], lines[6:], strict=True):
        assert re.fullmatch(
            rf"  {kind}: uncached / cached = [0-9.]+x median \([0-9.]+x to [0-9.]+x per "
            r"round\); target 1x: ok",
            line,
        )
    assert not (tmp_path / "root").exists()  # the agent lives in a temporary folder


def test_bench_exits_1_only_when_a_ratio_misses_the_target(tmp_path: Path) -> None:
    proc = bench(tmp_path, "--target", "1e9", "--json")
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["passed"] is False and result["target"] == 1e9
    assert set(result["ratios"]) == {"build_session", "build"}
    for ratio in result["ratios"].values():
        assert 0 < ratio["lowest"] <= ratio["median"] <= ratio["highest"] < 1e9
