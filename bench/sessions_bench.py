"""What putting a session on record costs over a cached prompt build.

docs/performance.md: recording a session start costs at most about
1 ms over a cached build, and storage grows only with distinct prompts. This runs both in
interleaved rounds on one agent (a realistic FACT.md, SOUL.md and USER.md) and prints, per
round, the median cost of ``build_session`` (cached) and of ``start_session`` (the same build
plus the receipt), the difference, and the stored texts' count before and after. Exit status 1
only when the median difference is over the target.

    python bench/sessions_bench.py [--rounds 7] [--calls 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

TARGET_SECONDS = 0.001


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["JUPYTER_AGENT_MEMORY_ROOT"] = str(Path(scratch) / "agents")
        from jupyter_agent_memory import AgentMemory, PromptBuilder

        mem = AgentMemory.open("bench")
        mem.write_soul("# Soul\n\nI am Mnemo: patient, precise and brief.\n" * 4)
        mem.write_user("- Name: Ada\n- Timezone: Europe/Paris\n- Prefers metric units.\n")
        facts = "".join(f"- Durable fact number {i} about the project.\n" for i in range(150))
        mem.update_facts(facts)
        builder = PromptBuilder()
        builder.start_session(mem, scratch)  # the first receipt stores the texts
        blobs = mem.path / "memory" / ".sessions"
        stored_before = len(list(blobs.iterdir()))
        builds, starts = [], []
        for _ in range(args.rounds):
            started = time.perf_counter()
            for _ in range(args.calls):
                builder.build_session(mem, scratch)
            builds.append((time.perf_counter() - started) / args.calls)
            started = time.perf_counter()
            for _ in range(args.calls):
                builder.start_session(mem, scratch)
            starts.append((time.perf_counter() - started) / args.calls)
        stored_after = len(list(blobs.iterdir()))
        receipts = len(mem.sessions())
    extra = [s - b for s, b in zip(starts, builds, strict=True)]
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"{'round':>5}  {'cached build':>12}  {'start_session':>13}  {'difference':>10}")
    for i, (b, s, d) in enumerate(zip(builds, starts, extra, strict=True), 1):
        print(f"{i:>5}  {b * 1e6:>10.1f}us  {s * 1e6:>11.1f}us  {d * 1e6:>8.1f}us")
    median = statistics.median(extra)
    verdict = "PASS" if median <= TARGET_SECONDS else "FAIL"
    print(
        f"recording costs {median * 1e6:.0f} us over a cached build (median of "
        f"{args.rounds} rounds; target <= {TARGET_SECONDS * 1e6:.0f} us) {verdict}"
    )
    print(
        f"stored texts: {stored_before} before, {stored_after} after "
        f"{receipts - 1} more sessions of the same prompt"
    )
    return 0 if verdict == "PASS" and stored_after == stored_before else 1


if __name__ == "__main__":
    sys.exit(main())
