"""Figures for the memory panel and the views on big memory (issue: views that stay fast).

Run from a checkout::

    python bench/panel_bench.py                    # 3 MB FACT.md, 1,000,000 journal entries
    python bench/panel_bench.py --entries 100000   # a quicker look (targets apply to 1M)
    python bench/panel_bench.py --data DIR         # build the agents once, reuse them later

What it measures:

- **open**: constructing ``MemoryPanel`` (every tab filled: FACT.md editor and rendering,
  history, the latest journal entries, the prompt, the persona, the sessions) on an agent with
  a 3 MB FACT.md and a journal of ``--entries`` lines written by the journal benchmark's own
  generator. Target: under one second.
- **refresh after a cell**: one entry appended (what a cell that writes memory does), then the
  post-cell hook's ``refresh_if_changed``, on the same agent with 1,000 entries and with
  ``--entries``, in interleaved rounds; the median of each and their ratio. Target: the ratio
  stays under 2 (the same cost, within noise), because no refresh reads the whole journal.
- **what a view sends**: the HTML and text sizes of the prompt and FACT.md views on that
  agent, against the ~100 KB view limit.

It exits with 1 only when a target is missed. How long the panel takes to appear in a
browser (its widget models travel to the page and are built there) is
``bench/panel_browser_bench.py``'s measurement.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from journal_bench import write_journal  # noqa: E402  (the journal benchmark's generator)

from jupyter_agent_memory import AgentMemory  # noqa: E402

OPEN_TARGET_SECONDS = 1.0
REFRESH_RATIO_TARGET = 2.0
SMALL_ENTRIES = 1000
FACT_BYTES = 3 * 1024 * 1024


def big_facts(size: int = FACT_BYTES) -> str:
    """A FACT.md of about ``size`` bytes: sections of Markdown bullets, as a long-lived agent's
    file looks."""
    lines, total, n = [], 0, 0
    while total < size:
        if n % 50 == 0:
            line = f"\n## Topic {n // 50}\n"
        else:
            line = f"- Fact {n}: the user mentioned project {n % 97} and prefers option {n % 7}.\n"
        lines.append(line)
        total += len(line)
        n += 1
    return "# Facts\n" + "".join(lines)


def prepare(folder: Path, name: str, entries: int, facts: str) -> AgentMemory:
    """An agent folder with ``facts`` as FACT.md (a human edit: written as a file, beyond the
    memory tool's size limit) and a journal of ``entries`` generated lines."""
    mem = AgentMemory.open(folder / name)
    journal = mem.path / "memory" / "JOURNAL.jsonl"
    stamp = mem.path / "memory" / "bench-entries.txt"
    if not (stamp.exists() and stamp.read_text() == str(entries) and journal.exists()):
        write_journal(journal, entries)
        stamp.write_text(str(entries))
    fact = mem.path / "memory" / "FACT.md"
    if not fact.exists() or fact.read_text(encoding="utf-8") != facts:
        fact.write_text(facts, encoding="utf-8")
    return mem


def time_open(mem: AgentMemory) -> tuple[float, object]:
    from jupyter_agent_memory.notebook.panel import MemoryPanel

    start = time.perf_counter()
    panel = MemoryPanel(mem)
    return time.perf_counter() - start, panel


def refresh_rounds(panels: dict[str, object], rounds: int) -> dict[str, list[float]]:
    """Append one entry and time the post-cell refresh, alternating agents each round."""
    times: dict[str, list[float]] = {name: [] for name in panels}
    names = list(panels)
    for i in range(rounds):
        order = names if i % 2 == 0 else names[::-1]
        for name in order:
            panel = panels[name]
            panel.mem.append(f"bench round {i}", ["bench"])  # type: ignore[attr-defined]
            start = time.perf_counter()
            changed = panel.refresh_if_changed()  # type: ignore[attr-defined]
            times[name].append(time.perf_counter() - start)
            assert changed, "the append was not noticed"
            assert panel.last_results[0]["text"] == f"bench round {i}"  # type: ignore[attr-defined]
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000,
                        help="journal entries of the big agent (default 1,000,000)")
    parser.add_argument("--rounds", type=int, default=15, help="refresh rounds (default 15)")
    parser.add_argument("--data", type=Path, default=None,
                        help="folder to build the agents in and reuse (default: a temp folder)")
    args = parser.parse_args(argv)

    from IPython.core.interactiveshell import InteractiveShell
    from IPython.lib.pretty import pretty

    InteractiveShell.instance()  # the Output widget formats FACT.md through the shell
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.data or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        facts = big_facts()
        start = time.perf_counter()
        big = prepare(folder, "big", args.entries, facts)
        small = prepare(folder, "small", SMALL_ENTRIES, facts)
        built = time.perf_counter() - start
        journal_bytes = (big.path / "memory" / "JOURNAL.jsonl").stat().st_size
        print(f"data: FACT.md {len(facts.encode()) / 2**20:.1f} MiB, journal {args.entries:,} "
              f"entries ({journal_bytes / 2**20:.0f} MiB), built or checked in {built:.1f} s")

        import ipywidgets  # noqa: F401  (imported once, not part of opening a panel)

        opened, panel_big = time_open(big)
        _, panel_small = time_open(small)
        reopened, again = time_open(big)
        again.close()  # type: ignore[attr-defined]
        times = refresh_rounds({"small": panel_small, "big": panel_big}, args.rounds)
        small_median = statistics.median(times["small"])
        big_median = statistics.median(times["big"])
        ratio = big_median / small_median

        from jupyter_agent_memory.notebook.display import VIEW_LIMIT, FactsView, PromptView

        prompt_html = len(panel_big.prompt_view.value)  # type: ignore[attr-defined]
        facts_html = len(FactsView(facts)._repr_html_())
        prompt = panel_big.last_prompt  # type: ignore[attr-defined]
        plain = len(str(PromptView(prompt.text, limit=None)))
        bounded_plain = len(pretty(PromptView(prompt.text)))

        full = args.entries >= 1_000_000 and len(facts.encode()) >= FACT_BYTES
        open_ok = opened < OPEN_TARGET_SECONDS
        ratio_ok = ratio < REFRESH_RATIO_TARGET
        rows = [
            ("open, 3 MB FACT.md + journal", f"{opened * 1000:.0f} ms",
             f"target < {OPEN_TARGET_SECONDS * 1000:.0f} ms", "ok" if open_ok else "MISSED"),
            ("open again (warm)", f"{reopened * 1000:.0f} ms", "", ""),
            (f"refresh after a cell, {SMALL_ENTRIES:,} entries", f"{small_median * 1000:.1f} ms",
             f"median of {args.rounds}", ""),
            (f"refresh after a cell, {args.entries:,} entries", f"{big_median * 1000:.1f} ms",
             f"median of {args.rounds}", ""),
            ("refresh ratio big / small", f"{ratio:.2f}", f"target < {REFRESH_RATIO_TARGET}",
             "ok" if ratio_ok else "MISSED"),
            ("prompt view HTML sent", f"{prompt_html / 1000:.0f} KB",
             f"limit ~{VIEW_LIMIT // 1000} KB of text; prompt is {plain / 1e6:.1f} MB", ""),
            ("prompt view text/plain sent", f"{bounded_plain / 1000:.0f} KB", "", ""),
            ("FACT.md view HTML sent", f"{facts_html / 1000:.0f} KB", "", ""),
        ]
        width = max(len(r[0]) for r in rows)
        for measure, value, note, result in rows:
            print(f"{measure:<{width}}  {value:>9}  {note:<44} {result}".rstrip())
        if not full:
            print("(a reduced run: targets are checked on 1,000,000 entries and a 3 MB FACT.md)")
        for panel in (panel_big, panel_small):
            panel.close()  # type: ignore[attr-defined]
        if full and not (open_ok and ratio_ok):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
