"""Is every check that runs on model-written text linear in the text's length?

A model (perhaps a prompt-injected one) writes the text; every write and every view runs these
checks on it. For each check and each adversarial shape (a pattern's start repeated, runs that
let a backtracking pattern run on before it fails, invisible characters everywhere), this
times the check on 64 KiB and on 1 MiB of that shape in one run and prints the ratio: about
16 when the work is linear, 256 when it is quadratic. The target is a ratio below 64 for every
row (memory effects make a linear check somewhat worse than 16), and the exit code is 1 when a
row misses it.

    python bench/text_checks_bench.py [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

try:
    from jupyter_agent_memory.engine import secrets
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from jupyter_agent_memory.engine import secrets
from jupyter_agent_memory.engine.blocks import guard_block_text
from jupyter_agent_memory.render import markdown_html

SMALL = 64 * 1024
LARGE = 1024 * 1024
TARGET = 64.0

#: check name -> (the check, the adversarial units it is timed on)
CHECKS: dict[str, tuple[Callable[[str], object], tuple[str, ...]]] = {
    "credential guard": (
        secrets.find,
        ("sk-", "sk-a-", "eyJ-", "eyJaaaaaaaa.eyJ-", "bearer ", "://a:", "aws secret key ",
         "-----BEGIN A ", "SG.a.", "ghp_a", "a\u200b"),
    ),
    "prompt block guard": (
        guard_block_text,
        ("</", "</f", "<\u200b", "## ", "#", "Memories\n", "Memories\n===\n", "\u200b"),
    ),
    "Markdown rendering": (
        markdown_html,
        ("`", "``x", "[", "[a](", "*", "_a", "<", "&", "&#", "'", "> ", "- ", "1. ", "[a]: <"),
    ),
}


def repeated(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def best_time(check: Callable[[str], object], text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        check(text)
        best = min(best, time.perf_counter() - started)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per size (best is kept)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    rows = []
    for name, (check, units) in CHECKS.items():
        for unit in units:
            small = best_time(check, repeated(unit, SMALL), args.repeat)
            large = best_time(check, repeated(unit, LARGE), args.repeat)
            ratio = large / max(small, 1e-9)
            rows.append(
                {"check": name, "unit": unit, "64KiB_ms": small * 1000, "1MiB_ms": large * 1000,
                 "ratio": ratio, "ok": ratio < TARGET}
            )
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"Checks on model text, 64 KiB against 1 MiB of each shape (target < {TARGET:g}x)")
        for row in rows:
            print(
                f"  {row['check']:<20} {row['unit']!r:<22} {row['64KiB_ms']:8.2f} ms "
                f"{row['1MiB_ms']:9.2f} ms  {row['ratio']:6.1f}x  "
                + ("ok" if row["ok"] else "MISSED")
            )
        worst = max(rows, key=lambda row: row["1MiB_ms"])
        print(f"Slowest at 1 MiB: {worst['check']} on {worst['unit']!r}, {worst['1MiB_ms']:.0f} ms")
    return 0 if all(row["ok"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
