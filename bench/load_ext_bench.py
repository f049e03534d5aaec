"""How light is ``%load_ext jupyter_agent_memory``?

Each measurement runs in a fresh interpreter (so nothing is already imported), several times,
and keeps the median. It prints what loading the extension costs on top of a bare IPython
shell, what importing the heavy optional stacks would cost, their ratio, and whether any heavy
module was imported by loading the extension.

    python bench/load_ext_bench.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

HEAVY = ("ipywidgets", "tornado", "jupyter_server", "mcp", "openai", "pandas", "matplotlib")

PROBE = r"""
import json, os, sys, time
os.environ["IPYTHONDIR"] = sys.argv[1]
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
mode = sys.argv[2]
start = time.perf_counter()
if mode == "load_ext":
    shell.run_line_magic("load_ext", "jupyter_agent_memory")
elif mode == "heavy":
    import ipywidgets, jupyter_server.serverapp, mcp  # noqa: F401
elapsed = time.perf_counter() - start
heavy = sorted(m for m in %r if m in sys.modules)
print(json.dumps({"seconds": elapsed, "heavy": heavy}))
"""


def measure(mode: str, runs: int, ipython_dir: str) -> tuple[float, list[str]]:
    """Median seconds of ``mode`` over ``runs`` fresh interpreters, and heavy modules seen."""
    times, heavy = [], set()
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", PROBE % (HEAVY,), ipython_dir, mode],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        result = json.loads(out.strip().splitlines()[-1])
        times.append(result["seconds"])
        heavy.update(result["heavy"])
    return statistics.median(times), sorted(heavy)


def main() -> int:
    """Run the benchmark; exit 1 when loading the extension imports a heavy module."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as ipython_dir:
        load_ext, load_heavy = measure("load_ext", args.runs, ipython_dir)
        heavy, _ = measure("heavy", args.runs, ipython_dir)
    verdict = "PASS" if not load_heavy else "FAIL"
    rows = [
        ("%load_ext jupyter_agent_memory", f"{load_ext * 1000:.1f} ms (median of {args.runs})"),
        ("import ipywidgets, jupyter_server, mcp", f"{heavy * 1000:.1f} ms"),
        ("ratio heavy / load_ext", f"{heavy / load_ext:.1f}x"),
        ("heavy modules after %load_ext", f"{', '.join(load_heavy) or 'none'}  [{verdict}]"),
    ]
    for label, value in rows:
        print(f"{label:<40} {value}")
    return 0 if not load_heavy else 1


if __name__ == "__main__":
    raise SystemExit(main())
