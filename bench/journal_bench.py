"""Benchmarks for the numbers the project holds itself to (DESIGN section 8).

Run from a checkout (or with the package installed)::

    python bench/journal_bench.py                 # 1,000,000 entries, about two minutes
    python bench/journal_bench.py --entries 20000 # a quick look; targets apply to 1,000,000

It writes a realistic journal into a temporary agent folder and measures, in one run:

- newest-first search for a frequent tag (limit 20) against the plain whole-file algorithm;
- a rare substring over the whole journal, against the plain algorithm and ``grep -c -i -F``
  on the same file (plus, for information, a rare word made only of common letters);
- peak memory of each search (tracemalloc), and of ours on a journal ten times smaller;
- appends per second through ``AgentMemory.append`` with and without fsync;
- prompt builds with unchanged files: one cached ``PromptBuilder`` against a new one each time.

It prints a table with PASS/FAIL per target, then the same figures as a Markdown table with the
machine they were measured on. The exit code is 1 when a target fails on a full-size run.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

try:
    from jupyter_agent_memory import AgentMemory, PromptBuilder, journal
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from jupyter_agent_memory import AgentMemory, PromptBuilder, journal

FULL_SIZE = 1_000_000
RARE_QUERY = "zeppelin"  # planted about once per 100,000 entries
RARE_COMMON_LETTERS = "interstate"  # likewise, but every letter of it is frequent
FREQUENT_TAG = "note"

# A vocabulary with ordinary English letter frequencies plus the words agents log about.
_VOCABULARY = """
the of and to in is that for it as was with be by on not he this are or his from at which but
have an they you were her she there been one all we their has would when if so what out up
about who them some could into only time other than then now its also two more these may first
like new used over any user data model notebook kernel result plot error fixed asked memory
agent prompt test run value cell output function import install version config file path review
plan deploy meeting query table column schema latency cache index prefers metric units timezone
dashboard pipeline training dataset accuracy baseline experiment seed batch epoch loss gradient
python pandas numpy matplotlib jupyter server extension widget panel sidebar journal fact soul
session context tokens budget template manifest provision upgrade release changelog issue bug
feature request question answer summary insight follow up tomorrow yesterday weekly monthly
quick brown fox jumps lazy dog quality size zone analyze optimize organize jazz quiz fuzzy
"""
WORDS = _VOCABULARY.split()
EXTRAS = ['"quoted"', "café", "naïve", "日本語", "🙂", "Ünïcode", "C:\\temp", "line\nbreak"]
TAGS = ["task", "bug", "idea", "meeting", "deploy", "review", "bootstrap", "preference"]


# -- the journal --------------------------------------------------------------------------------


def write_journal(path: Path, entries: int, seed: int = 7) -> None:
    """Write ``entries`` realistic journal lines to ``path`` (same format as ``append``)."""
    rng = random.Random(seed)
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    rare_every = max(entries // 10, 1)
    with path.open("wb") as out:
        batch = []
        for i in range(entries):
            words = [rng.choice(WORDS) for _ in range(rng.randint(6, 18))]
            words[0] = words[0].capitalize()
            if rng.random() < 0.15:
                words.insert(rng.randrange(len(words)), rng.choice(EXTRAS))
            if i % rare_every == rare_every // 2:
                words.insert(rng.randrange(len(words)), "Zeppelin")
            if i % rare_every == rare_every // 3:
                words.insert(rng.randrange(len(words)), "INTERSTATE")
            tags = [FREQUENT_TAG] if rng.random() < 0.4 else []
            tags += rng.sample(TAGS, rng.randint(0, 2))
            ts = journal.format_timestamp(start + timedelta(seconds=7 * i))
            batch.append(journal.encode_line({"ts": ts, "tags": tags, "text": " ".join(words)}))
            if len(batch) == 10000:
                out.write(b"".join(batch))
                batch.clear()
        out.write(b"".join(batch))


# -- measuring ----------------------------------------------------------------------------------


def best_time(fn: Callable[[], Any], *, repeat: int = 5, min_total: float = 0.2) -> float:
    """Best seconds per call over ``repeat`` rounds (fast calls are looped to be measurable)."""
    start = time.perf_counter()
    fn()
    once = time.perf_counter() - start
    number = max(1, int(min_total / max(once, 1e-7) / repeat))
    best = once
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def peak_bytes(fn: Callable[[], Any]) -> int:
    """Peak memory traced by tracemalloc while ``fn`` runs."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def appends_per_second(mem: AgentMemory, seconds: float) -> float:
    """Appends completed per second during about ``seconds``."""
    count = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        mem.append(f"benchmark entry {count}: the user prefers metric units", tags=["bench"])
        count += 1
    return count / (time.perf_counter() - start)


def grep_seconds(pattern: str, path: Path) -> float | None:
    """Best wall time of ``grep -c -i -F pattern path``, or None without grep."""
    grep = shutil.which("grep")
    if grep is None:
        return None
    command = [grep, "-c", "-i", "-F", pattern, str(path)]
    return best_time(lambda: subprocess.run(command, capture_output=True, check=False), repeat=7)


# -- report -------------------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or the platform's description)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fmt_seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.1f} ms"
    return f"{value * 1e6:.0f} µs"


def fmt_bytes(value: int) -> str:
    return f"{value / 2**20:.1f} MiB" if value >= 2**20 else f"{value / 2**10:.0f} KiB"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=FULL_SIZE, help="journal size")
    parser.add_argument("--append-seconds", type=float, default=2.0, help="time per append run")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="agent-memory-bench-"))
    try:
        return run(args, workdir)
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def run(args: argparse.Namespace, workdir: Path) -> int:
    """All measurements, in the folder ``workdir``."""
    mem = AgentMemory.open(workdir / "agent", fsync_appends=False)
    path = mem.path / "memory" / "JOURNAL.jsonl"
    start = time.perf_counter()
    write_journal(path, args.entries)
    small = workdir / "small.jsonl"
    write_journal(small, max(args.entries // 10, 1), seed=8)
    size = path.stat().st_size
    print(
        f"journal: {args.entries:,} entries, {size / 1e6:.1f} MB "
        f"(written in {time.perf_counter() - start:.1f} s)\n"
    )

    def reference(**kwargs: Any) -> journal.SearchResult:
        with path.open("rb") as f:
            return journal.reference_search(f, **kwargs)

    rows: list[tuple[str, str, str, str]] = []  # measure, ours, other, ratio / verdict
    verdicts: list[bool] = []

    def target(name: str, ok: bool) -> str:
        verdicts.append(ok)
        return f"{'PASS' if ok else 'FAIL'} ({name})"

    # 1. frequent tag, newest first, limit 20
    frequent = {"tag": FREQUENT_TAG, "limit": 20}
    got = mem.search(**frequent)
    want = reference(**frequent)
    assert got == want and len(got) == 20, "search disagrees with the reference"
    ours_frequent = best_time(lambda: mem.search(**frequent))
    ref_frequent = best_time(lambda: reference(**frequent), repeat=2, min_total=0)
    ratio = ref_frequent / ours_frequent
    rows.append(
        (
            f"tag {FREQUENT_TAG!r}, limit 20 (lines decoded: {got.scanned} vs {want.scanned:,})",
            fmt_seconds(ours_frequent),
            fmt_seconds(ref_frequent) + " reference",
            f"{ratio:,.0f}x faster " + target(">= 1,000x", ratio >= 1000),
        )
    )

    # 2. rare substring over the whole journal
    rare_rows = []
    for query, is_target in ((RARE_QUERY, True), (RARE_COMMON_LETTERS, False)):
        got = mem.search(query=query, limit=20)
        want = reference(query=query, limit=20)
        assert got == want and 0 < len(got) < 20, "search disagrees with the reference"
        ours = best_time(lambda q=query: mem.search(query=q, limit=20))
        ref = best_time(lambda q=query: reference(query=q, limit=20), repeat=2, min_total=0)
        grep = grep_seconds(query, path)
        rare_rows.append((query, ours, ref, grep))
        label = f"query {query!r} ({len(got)} matches, whole file)"
        if is_target:
            rows.append(
                (
                    label,
                    fmt_seconds(ours),
                    fmt_seconds(ref) + " reference",
                    f"{ref / ours:,.1f}x faster " + target(">= 10x", ref / ours >= 10),
                )
            )
        if grep is not None:
            verdict = (
                target("<= 2x grep", ours / grep <= 2)
                if is_target
                else "(information: only common letters)"
            )
            rows.append(
                (
                    label if not is_target else "  same, against grep -c -i -F",
                    fmt_seconds(ours),
                    fmt_seconds(grep) + " grep",
                    f"{ours / grep:.2f}x grep's time {verdict}",
                )
            )

    # 3. memory
    def peak_ours(file: Path, **kwargs: Any) -> int:
        def go() -> None:
            with file.open("rb") as f:
                journal.search(f, **kwargs)

        return peak_bytes(go)

    peak_frequent = peak_ours(path, **frequent)
    peak_rare = peak_ours(path, query=RARE_QUERY)
    peak_rare_small = peak_ours(small, query=RARE_QUERY)
    peak_reference = peak_bytes(lambda: reference(query=RARE_QUERY))
    bounded = peak_rare <= max(2 * peak_rare_small, 8 * 2**20)
    rows.append(("peak memory, frequent tag", fmt_bytes(peak_frequent), "", ""))
    rows.append(
        (
            "peak memory, rare query",
            fmt_bytes(peak_rare),
            fmt_bytes(peak_reference) + " reference",
            f"{fmt_bytes(peak_rare_small)} on a 10x smaller journal "
            + target("independent of size", bounded),
        )
    )

    # 4. appends per second
    fast = AgentMemory.open(workdir / "appends-nofsync", fsync_appends=False)
    durable = AgentMemory.open(workdir / "appends-fsync", fsync_appends=True)
    nofsync_rate = appends_per_second(fast, args.append_seconds)
    fsync_rate = appends_per_second(durable, args.append_seconds)
    rows.append(
        (
            "appends/s through AgentMemory.append",
            f"{fsync_rate:,.0f} with fsync",
            f"{nofsync_rate:,.0f} without",
            "",
        )
    )

    # 5. prompt builds with unchanged files
    agent = AgentMemory.open(workdir / "prompt-agent")
    agent.write_soul("# Soul\n\nI am Ada, a patient assistant for data notebooks.\n" * 20)
    agent.write_user("# User\n\nName: Sam. Timezone: Europe/Paris. Prefers metric units.\n" * 20)
    agent.update_facts(
        "".join(f"- Fact {i}: the pipeline step {i} is idempotent.\n" for i in range(200))
    )
    builder = PromptBuilder()
    cached_prompt = builder.build(agent, workspace=workdir)
    assert PromptBuilder().build(agent, workspace=workdir).text == cached_prompt.text
    cached = best_time(lambda: builder.build(agent, workspace=workdir))
    uncached = best_time(lambda: PromptBuilder().build(agent, workspace=workdir))
    rows.append(
        (
            f"prompt build, unchanged files ({cached_prompt.tokens:,} tokens)",
            fmt_seconds(cached) + " cached",
            fmt_seconds(uncached) + " uncached",
            f"{uncached / cached:,.0f}x faster " + target(">= 20x", uncached / cached >= 20),
        )
    )

    # -- print ----------------------------------------------------------------------------------
    width = max(len(r[0]) for r in rows)
    for measure, ours_text, other, verdict in rows:
        print(f"{measure:<{width}}  {ours_text:>16}  {other:>22}  {verdict}")
    full = args.entries >= FULL_SIZE
    print()
    if not full:
        print(
            f"note: the targets are defined for {FULL_SIZE:,} entries; this run used "
            f"{args.entries:,}, so FAIL lines are not conclusive"
        )
    print(markdown(rows, args.entries, size))
    return 0 if all(verdicts) or not full else 1


def markdown(rows: list[tuple[str, str, str, str]], entries: int, size: int) -> str:
    """The figures as a Markdown section for the README."""
    machine = (
        f"{os.cpu_count()} cores, {cpu_model()}, Python {platform.python_version()} "
        f"({platform.system()} {platform.machine()})"
    )
    lines = [
        f"Journal of {entries:,} entries ({size / 1e6:.0f} MB), measured in one run of "
        f"`python bench/journal_bench.py` on: {machine}.",
        "",
        "| measure | ours | compared with | result |",
        "|---|---|---|---|",
    ]
    for measure, ours, other, verdict in rows:
        lines.append(f"| {measure.strip()} | {ours} | {other} | {verdict} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
