"""Benchmarks for the journal's numbers (the design's performance targets), in one run.

Run from a checkout (or with the package installed)::

    python bench/journal_bench.py                      # 1,000,000 entries
    python bench/journal_bench.py --entries 20000      # a quick look; targets apply to 1M
    python bench/journal_bench.py --data DIR           # build the data once, reuse it later

What it does, in one run:

- writes a realistic journal in the project's own line format (or reuses ``--data``), and the
  same entries into a SQLite database (an index on ``ts``, an FTS5 trigram table on the text);
- prints the machine's load average before and after, because a loaded machine changes
  absolute times far more than ratios;
- measures every query shape in **interleaved rounds**: each round times our search and what
  it is compared with back to back, alternating which goes first, and takes the ratio per
  round; the table shows the median ratio and the spread;
- without an index (pure Python, the default settings): the frequent tag, match-all and a
  recent time window against the plain whole-file algorithm (``journal.reference_search``);
  rare words, a rare tag and needles that fill every line's keys or timestamps against
  ``grep -c -i -F`` (and ``rg`` when installed); a time window in the middle; peak memory
  against a journal ten times smaller; and that such searches write nothing to the cache;
- builds the index (``AgentMemory.build_index``: time and size), then every shape with it
  against SQLite FTS5 trigram on the same data and the window against SQLite's indexed ``ts``;
- drops it and builds it again in the background, searching meanwhile: the search must
  return the exact result at scan speed, without waiting for the build;
- appends: one process against the raw ``write`` + ``fsync`` rate of the same filesystem, and
  four processes together against one;
- prompt builds with unchanged files: one cached ``PromptBuilder`` against a new one each time.

It exits with 1 when a target ratio fails on a full-size run (never on an absolute time).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

try:
    from jupyter_agent_memory import AgentMemory, PromptBuilder, environment, journal
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from jupyter_agent_memory import AgentMemory, PromptBuilder, environment, journal

FULL_SIZE = 1_000_000
RARE_QUERY = "zeppelin"  # planted about once per 100,000 entries
RARE_COMMON_LETTERS = "interstate"  # likewise, but every letter of it is frequent
RARE_TAG = "milestone"  # on the same entries as the rare query
FREQUENT_TAG = "note"
NOISY_NEEDLES = ("tag", "2025", "text")  # bytes in every line's keys or timestamps
UNICODE_QUERY = "naïve"
START = datetime(2025, 1, 1, tzinfo=timezone.utc)
STEP = timedelta(seconds=7)

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


# -- the data -----------------------------------------------------------------------------------


def generate(entries: int, seed: int = 7) -> Any:
    """The benchmark's entries, oldest first, as dicts (the same for every consumer)."""
    rng = random.Random(seed)
    rare_every = max(entries // 10, 1)
    for i in range(entries):
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 18))]
        words[0] = words[0].capitalize()
        if rng.random() < 0.15:
            words.insert(rng.randrange(len(words)), rng.choice(EXTRAS))
        tags = [FREQUENT_TAG] if rng.random() < 0.4 else []
        tags += rng.sample(TAGS, rng.randint(0, 2))
        if i % rare_every == rare_every // 2:
            words.insert(rng.randrange(len(words)), "Zeppelin")
            tags.append(RARE_TAG)
        if i % rare_every == rare_every // 3:
            words.insert(rng.randrange(len(words)), "INTERSTATE")
        ts = journal.format_timestamp(START + STEP * i)
        yield {"ts": ts, "tags": tags, "text": " ".join(words)}


def write_journal(path: Path, entries: int, seed: int = 7) -> None:
    """Write ``entries`` realistic journal lines to ``path`` (same format as ``append``)."""
    with path.open("wb") as out:
        batch = []
        for entry in generate(entries, seed):
            batch.append(journal.encode_line(entry))
            if len(batch) == 10000:
                out.write(b"".join(batch))
                batch.clear()
        out.write(b"".join(batch))


def write_sqlite(path: Path, entries: int, seed: int = 7) -> None:
    """The same entries in SQLite: a table with an index on ``ts`` and an FTS5 trigram table
    on the lower-cased text (the substring meaning our search has)."""
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("CREATE TABLE entries (id INTEGER PRIMARY KEY, ts TEXT, tags TEXT, text TEXT)")
    conn.execute(
        "CREATE VIRTUAL TABLE texts USING fts5(body, content='', "
        "tokenize='trigram case_sensitive 1')"
    )
    batch: list[tuple[int, str, str, str]] = []

    def flush() -> None:
        conn.executemany("INSERT INTO entries VALUES (?, ?, ?, ?)", batch)
        conn.executemany(
            "INSERT INTO texts (rowid, body) VALUES (?, ?)", [(b[0], b[3].lower()) for b in batch]
        )
        batch.clear()

    for i, entry in enumerate(generate(entries, seed)):
        batch.append((i, entry["ts"], json.dumps(entry["tags"]), entry["text"]))
        if len(batch) == 20000:
            flush()
    flush()
    conn.execute("CREATE INDEX entries_ts ON entries (ts)")
    conn.commit()
    conn.close()


def prepare_data(folder: Path, entries: int) -> tuple[Path, Path, Path, float]:
    """(journal, a journal ten times smaller, SQLite database, seconds spent building)."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = folder / "entries.txt"
    big, small, db = folder / "JOURNAL.jsonl", folder / "small.jsonl", folder / "same.sqlite"
    start = time.perf_counter()
    if not (stamp.exists() and stamp.read_text() == str(entries) and big.exists() and db.exists()):
        stamp.unlink(missing_ok=True)
        write_journal(big, entries)
        write_journal(small, max(entries // 10, 1), seed=8)
        write_sqlite(db, entries)
        stamp.write_text(str(entries))
    return big, small, db, time.perf_counter() - start


# -- measuring ----------------------------------------------------------------------------------


def per_call(fn: Callable[[], Any], min_total: float) -> float:
    """Seconds per call of ``fn``, looping fast calls until ``min_total`` seconds have passed."""
    start = time.perf_counter()
    fn()
    once = time.perf_counter() - start
    if once >= min_total:
        return once
    number = max(1, int(min_total / max(once, 1e-7)))
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


@dataclass
class Comparison:
    """Per-round times of ours and of what it is compared with; ratio = theirs / ours."""

    ours: list[float]
    theirs: list[float]

    @property
    def ratios(self) -> list[float]:
        return [t / o for o, t in zip(self.ours, self.theirs, strict=True)]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    def spread(self) -> str:
        low, high = min(self.ratios), max(self.ratios)
        return f"{fmt_ratio(low)}-{fmt_ratio(high)}"


def compare(
    ours: Callable[[], Any],
    theirs: Callable[[], Any],
    rounds: int,
    *,
    min_total: float = 0.05,
    their_min_total: float | None = None,
) -> Comparison:
    """Interleaved rounds: both timed back to back, the first one alternating."""
    result = Comparison([], [])
    for round_ in range(rounds):
        if round_ % 2:
            theirs_t = per_call(theirs, their_min_total if their_min_total is not None else 0)
            ours_t = per_call(ours, min_total)
        else:
            ours_t = per_call(ours, min_total)
            theirs_t = per_call(theirs, their_min_total if their_min_total is not None else 0)
        result.ours.append(ours_t)
        result.theirs.append(theirs_t)
    return result


def peak_bytes(fn: Callable[[], Any]) -> int:
    """Peak memory traced by tracemalloc while ``fn`` runs."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def tool_command(name: str, pattern: str, path: Path) -> list[str] | None:
    """``grep -c -i -F`` or ``rg -c -i -F`` for ``pattern`` on ``path`` (None when missing)."""
    exe = shutil.which(name)
    if exe is None:
        return None
    return [exe, "-c", "-i", "-F", pattern, str(path)]


def run_command(command: list[str]) -> None:
    subprocess.run(command, capture_output=True, check=False)


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


APPENDER = """
    import sys, time
    from jupyter_agent_memory import AgentMemory
    folder, start, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    mem = AgentMemory.open(folder)
    mem.append("warm up", ["bench"])
    while time.time() < start:
        time.sleep(0.001)
    count = 0
    end = start + seconds
    while time.time() < end:
        mem.append(f"benchmark entry {count}: the user prefers metric units", ["bench"])
        count += 1
    print(count / (time.time() - start))
"""


def processes_rate(folder: Path, processes: int, seconds: float) -> float:
    """Appends per second of ``processes`` processes appending to one agent together."""
    start = time.time() + 1.5  # interpreter start-up
    code = textwrap.dedent(APPENDER)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(folder), str(start), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    total = 0.0
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        total += float(out.strip())
    return total


def paired_appends(mem: AgentMemory, raw: Path, blocks: int, per_block: int) -> Comparison:
    """Seconds per append, ours against a raw ``write`` + ``fsync``, one of each in turn (the
    order alternating), so both see the same disk at the same moment; one round per block."""
    fd = os.open(raw, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    line = journal.encode_line(
        {
            "ts": journal.format_timestamp(datetime.now(timezone.utc)),
            "tags": ["bench"],
            "text": "benchmark entry 0: " * 3,
        }
    )
    clock = time.perf_counter
    result = Comparison([], [])
    try:
        for _ in range(blocks):
            ours = theirs = 0.0
            for i in range(per_block):
                if i % 2:
                    t0 = clock()
                    mem.append(f"benchmark entry {i}: the user prefers metric units", ["bench"])
                    t1 = clock()
                    os.write(fd, line)
                    os.fsync(fd)
                    t2 = clock()
                    ours, theirs = ours + t1 - t0, theirs + t2 - t1
                else:
                    t0 = clock()
                    os.write(fd, line)
                    os.fsync(fd)
                    t1 = clock()
                    mem.append(f"benchmark entry {i}: the user prefers metric units", ["bench"])
                    t2 = clock()
                    ours, theirs = ours + t2 - t1, theirs + t1 - t0
            result.ours.append(ours / per_block)
            result.theirs.append(theirs / per_block)
    finally:
        os.close(fd)
    return result


def our_rate(mem: AgentMemory, seconds: float) -> float:
    count = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        mem.append(f"benchmark entry {count}: the user prefers metric units", ["bench"])
        count += 1
    return count / (time.perf_counter() - start)


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


def fmt_bytes(value: float) -> str:
    return f"{value / 2**20:.1f} MiB" if value >= 2**20 else f"{value / 2**10:.0f} KiB"


def fmt_ratio(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}x"
    return f"{value:.2f}x" if value < 10 else f"{value:.1f}x"


class Report:
    """Rows of the table, and the verdicts of the targets."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str]] = []
        self.verdicts: list[bool] = []

    def add(self, measure: str, ours: str, other: str, result: str) -> None:
        self.rows.append((measure, ours, other, result))
        print(f"{measure}  |  {ours}  |  {other}  |  {result}", flush=True)

    def ratio(
        self,
        measure: str,
        c: Comparison,
        other: str,
        *,
        at_least: float | None = None,
        label: str = "faster",
    ) -> None:
        """A row for ``c``: median ratio, spread, and a verdict when there is a target."""
        result = f"{fmt_ratio(c.ratio)} {label} (rounds {c.spread()})"
        if at_least is not None:
            ok = c.ratio >= at_least
            self.verdicts.append(ok)
            result += f" {'PASS' if ok else 'FAIL'} (>= {fmt_ratio(at_least)})"
        self.add(
            measure,
            fmt_seconds(statistics.median(c.ours)),
            f"{fmt_seconds(statistics.median(c.theirs))} {other}",
            result,
        )

    def target(self, ok: bool) -> str:
        self.verdicts.append(ok)
        return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=FULL_SIZE, help="journal size")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per figure")
    parser.add_argument("--append-seconds", type=float, default=1.0, help="time per append run")
    parser.add_argument("--data", type=Path, help="folder to build the data in once and reuse")
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
    load_before = load()
    print(f"load average before: {load_before}")
    data_dir = args.data if args.data is not None else workdir / "data"
    source, small, db, built = prepare_data(data_dir, args.entries)
    cache = workdir / "cache"
    os.environ[environment.CACHE] = str(cache)
    os.environ.pop(environment.INDEX, None)

    plain = AgentMemory.open(workdir / "agent", fsync_appends=False, journal_index=False)
    path = plain.path / "memory" / "JOURNAL.jsonl"
    shutil.copyfile(source, path)  # a copy: the store refuses a hard-linked journal
    default = AgentMemory.open(plain.path, fsync_appends=False)  # uses an index once built
    size = path.stat().st_size
    print(
        f"journal: {args.entries:,} entries, {size / 1e6:.1f} MB "
        f"(data ready in {built:.1f} s); rounds: {args.rounds}\n"
    )
    rounds, ref_rounds = max(1, args.rounds), max(1, min(args.rounds, 3))
    report = Report()
    sql = sqlite3.connect(db)

    def reference(**kwargs: Any) -> journal.SearchResult:
        with path.open("rb") as f:
            return journal.reference_search(f, **kwargs)

    def check(mem: AgentMemory, **kwargs: Any) -> journal.SearchResult:
        got = mem.search(**kwargs)
        want = reference(**kwargs)
        assert got == want, f"search disagrees with the plain algorithm for {kwargs}"
        return got

    # 1. newest first, stopping at the limit (no index)
    last = START + STEP * (args.entries - 1)
    recent = {"since": last - timedelta(hours=2)}
    for label, kwargs in (
        (f"tag {FREQUENT_TAG!r}, limit 20", {"tag": FREQUENT_TAG}),
        ("match-all, limit 20", {}),
        ("time window: the last 2 h, limit 20", recent),
    ):
        got = check(plain, **kwargs)
        c = compare(lambda k=kwargs: plain.search(**k), lambda k=kwargs: reference(**k), ref_rounds)
        report.ratio(f"{label} (lines decoded: {got.scanned})", c, "naive", at_least=1000)

    # 2. whole-file shapes without the index: against grep (and the naive algorithm)
    whole = [
        (f"query {RARE_QUERY!r}", {"query": RARE_QUERY}, RARE_QUERY, 0.5),
        (f"query {RARE_COMMON_LETTERS!r}", {"query": RARE_COMMON_LETTERS}, RARE_COMMON_LETTERS,
         0.5),
        (f"tag {RARE_TAG!r} (rare)", {"tag": RARE_TAG}, f'"{RARE_TAG}"', 0.5),
        *((f"query {n!r} (in every line's keys/ts)", {"query": n}, n, 0.2) for n in NOISY_NEEDLES),
        (f"query {UNICODE_QUERY!r} (non-ASCII)", {"query": UNICODE_QUERY}, UNICODE_QUERY, None),
    ]
    for label, kwargs, pattern, target in whole:
        got = check(plain, **kwargs)
        full = len(got) < 20
        shape = f"{label}: {len(got)} matches" + (", whole file" if full else "")
        c = compare(lambda k=kwargs: plain.search(**k), lambda k=kwargs: reference(**k), ref_rounds)
        report.ratio(shape, c, "naive", at_least=1 if full else None)
        for tool in ("grep", "rg"):
            command = tool_command(tool, pattern, path)
            if command is None:
                continue
            c = compare(
                lambda k=kwargs: plain.search(**k), lambda cmd=command: run_command(cmd), rounds
            )
            report.ratio(
                f"  same, against {tool} -c -i -F",
                c,
                tool,
                at_least=target if full and tool == "grep" else None,
                label="of its speed",
            )

    # 3. a time window in the middle, without the index: every line after it is read
    middle = START + STEP * (args.entries // 2)
    window = {"since": middle, "until": middle + timedelta(hours=2)}
    got = check(plain, **window)
    assert len(got) == 20
    c = compare(lambda: plain.search(**window), lambda: reference(**window), ref_rounds)
    report.ratio("time window of 2 h in the middle, no index", c, "naive")

    # 4. default settings on a journal with no index: scan time, and nothing in the cache
    untouched = workdir / "untouched-cache"
    os.environ[environment.CACHE] = str(untouched)
    took = 0.0
    for kwargs in ({"query": RARE_QUERY}, window, {"query": RARE_QUERY, **window}):
        start = time.perf_counter()
        got = default.search(**kwargs)
        took += (time.perf_counter() - start) / 3
        assert got == reference(**kwargs)
    written = [p for p in untouched.rglob("*")] if untouched.exists() else []
    report.add(
        "default settings, no index: query, window, both",
        fmt_seconds(took),
        f"{len(written)} files written to the cache",
        report.target(not written) + " (scan time, nothing written)",
    )
    os.environ[environment.CACHE] = str(cache)

    # 5. the index: build, size, and the shapes it serves against SQLite
    build_start = time.perf_counter()
    status = default.build_index()
    build_time = time.perf_counter() - build_start
    assert status["state"] == "ready", status
    report.add(
        "index build (AgentMemory.build_index)",
        fmt_seconds(build_time),
        f"{fmt_bytes(status['size_bytes'])} on disk",
        f"journal {fmt_bytes(size)}",
    )
    sql_fts = (
        "SELECT e.id, e.ts, e.tags, e.text FROM entries e JOIN (SELECT rowid FROM texts "
        "WHERE texts MATCH ? ORDER BY rowid DESC LIMIT 20) t ON e.id = t.rowid "
        "ORDER BY e.id DESC"
    )
    for label, kwargs in (
        (f"indexed query {RARE_QUERY!r}", {"query": RARE_QUERY}),
        (f"indexed query {RARE_COMMON_LETTERS!r}", {"query": RARE_COMMON_LETTERS}),
        *((f"indexed query {n!r}", {"query": n}) for n in NOISY_NEEDLES),
        (f"indexed query {UNICODE_QUERY!r}", {"query": UNICODE_QUERY}),
    ):
        got = check(default, **kwargs)
        assert got.indexed, kwargs
        phrase = '"' + kwargs["query"].lower() + '"'
        assert len(sql.execute(sql_fts, (phrase,)).fetchall()) == len(got)
        c = compare(
            lambda k=kwargs: default.search(**k),
            lambda p=phrase: sql.execute(sql_fts, (p,)).fetchall(),
            rounds,
            their_min_total=0.05,
        )
        report.ratio(f"{label} ({len(got)} matches)", c, "FTS5", at_least=0.5, label="of its speed")
    got = check(default, **window)
    assert got.indexed
    c = compare(lambda: default.search(**window), lambda: reference(**window), ref_rounds)
    report.ratio("indexed time window of 2 h in the middle", c, "naive", at_least=1000)
    sql_window = (
        "SELECT id, ts, tags, text FROM entries WHERE ts BETWEEN ? AND ? ORDER BY ts DESC LIMIT 20"
    )
    bounds = (journal.format_timestamp(middle), journal.format_timestamp(window["until"]))
    c = compare(
        lambda: default.search(**window),
        lambda: sql.execute(sql_window, bounds).fetchall(),
        rounds,
        their_min_total=0.05,
    )
    report.ratio("  same, against SQLite indexed ts", c, "SQLite", label="of its speed")

    # 6. a search while the index is being built: exact, at scan speed, never waiting
    default.drop_index()
    background_start = time.perf_counter()
    default.build_index(background=True)
    time.sleep(min(1.0, build_time / 4))  # well into the build
    during: list[float] = []  # searches that began and ended while the build ran
    while len(during) < 5:
        start = time.perf_counter()
        got = default.search(query=RARE_QUERY)
        took = time.perf_counter() - start
        assert got == reference(query=RARE_QUERY)
        if not default.index_status()["building"]:
            break
        during.append(took)
    while default.index_status()["building"]:
        time.sleep(0.05)
    background_time = time.perf_counter() - background_start
    assert default.index_status()["state"] == "ready"
    scan = statistics.median(
        per_call(lambda: plain.search(query=RARE_QUERY), 0) for _ in range(3)
    )
    # A search that waited for the build would have taken most of it.
    ok = bool(during) and max(during) < background_time / 2
    report.add(
        f"search {RARE_QUERY!r} during a background build ({len(during)} searches)",
        fmt_seconds(statistics.median(during)) if during else "-",
        f"{fmt_seconds(scan)} scan; the build {fmt_seconds(background_time)}",
        report.target(ok) + " (exact, without waiting for the build)",
    )

    # 7. memory: each shape on this journal and on one ten times smaller
    def peak(file: Path, **kwargs: Any) -> int:
        def go() -> None:
            with file.open("rb") as f:
                journal.search(f, **kwargs)

        return peak_bytes(go)

    for label, kwargs in (
        ("frequent tag", {"tag": FREQUENT_TAG}),
        ("rare query", {"query": RARE_QUERY}),
        ("query in every line's keys", {"query": NOISY_NEEDLES[0]}),
        ("non-ASCII query", {"query": UNICODE_QUERY}),
        ("time window", window),
    ):
        big_peak, small_peak = peak(path, **kwargs), peak(small, **kwargs)
        ok = big_peak <= max(2 * small_peak, 8 * 2**20)
        report.add(
            f"peak memory, {label}",
            fmt_bytes(big_peak),
            f"{fmt_bytes(small_peak)} on a 10x smaller journal",
            f"{report.target(ok)} (independent of size)",
        )
    reference_peak = peak_bytes(lambda: reference(query=RARE_QUERY))
    report.add("peak memory, naive algorithm", fmt_bytes(reference_peak), "", "")

    # 8. appends: one process against the raw rate, four processes against one
    durable = AgentMemory.open(workdir / "appends", journal_index=False)
    raw_file = workdir / "raw-appends.jsonl"
    our_rate(durable, 0.2)  # warm up: the journal, its folders and the page cache
    one_vs_raw = paired_appends(durable, raw_file, max(2 * rounds, 9), 200)
    report.ratio(
        "appends/s, one process (fsync)",
        one_vs_raw,
        "raw write+fsync",
        at_least=0.8,
        label="of the raw rate",
    )
    many = Comparison([], [])
    for round_ in range(max(1, rounds)):
        pair = [
            lambda: processes_rate(workdir / "appends", 1, args.append_seconds),
            lambda: processes_rate(workdir / "appends", 4, args.append_seconds),
        ]
        if round_ % 2:
            four, one = pair[1](), pair[0]()
        else:
            one, four = pair[0](), pair[1]()
        many.ours.append(1 / four)
        many.theirs.append(1 / one)
    report.ratio(
        "appends/s, four processes together", many, "one process", at_least=2, label="of one"
    )
    report.rows[-2] = (
        report.rows[-2][0],
        f"{1 / statistics.median(one_vs_raw.ours):,.0f}/s",
        f"{1 / statistics.median(one_vs_raw.theirs):,.0f}/s raw write+fsync",
        report.rows[-2][3],
    )
    report.rows[-1] = (
        report.rows[-1][0],
        f"{1 / statistics.median(many.ours):,.0f}/s",
        f"{1 / statistics.median(many.theirs):,.0f}/s one process",
        report.rows[-1][3],
    )

    # 9. prompt builds with unchanged files
    agent = AgentMemory.open(workdir / "prompt-agent")
    agent.write_soul("# Soul\n\nI am Ada, a patient assistant for data notebooks.\n" * 20)
    agent.write_user("# User\n\nName: Sam. Timezone: Europe/Paris. Prefers metric units.\n" * 20)
    agent.update_facts(
        "".join(f"- Fact {i}: the pipeline step {i} is idempotent.\n" for i in range(200))
    )
    builder = PromptBuilder()
    cached_prompt = builder.build(agent, workspace=workdir)
    assert PromptBuilder().build(agent, workspace=workdir).text == cached_prompt.text
    c = compare(
        lambda: builder.build(agent, workspace=workdir),
        lambda: PromptBuilder().build(agent, workspace=workdir),
        rounds,
        their_min_total=0.05,
    )
    report.ratio(
        f"prompt build, unchanged files ({cached_prompt.tokens:,} tokens)",
        c,
        "uncached",
        at_least=20,
    )

    load_after = load()
    print(f"\nload average after: {load_after}")
    full = args.entries >= FULL_SIZE
    if not full:
        print(
            f"note: the targets are defined for {FULL_SIZE:,} entries; this run used "
            f"{args.entries:,}, so FAIL lines are not conclusive"
        )
    failed = sum(not ok for ok in report.verdicts)
    print(f"targets: {len(report.verdicts) - failed} passed, {failed} failed\n")
    print(markdown(report.rows, args, size, load_before, load_after))
    return 0 if failed == 0 or not full else 1


def markdown(
    rows: list[tuple[str, str, str, str]],
    args: argparse.Namespace,
    size: int,
    load_before: str,
    load_after: str,
) -> str:
    """The figures as a Markdown section for the README."""
    machine = (
        f"{os.cpu_count()} cores, {cpu_model()}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version} ({platform.system()} {platform.machine()})"
    )
    command = "python bench/journal_bench.py" + (
        f" --entries {args.entries}" if args.entries != FULL_SIZE else ""
    )
    lines = [
        f"Journal of {args.entries:,} entries ({size / 1e6:.0f} MB), measured in one run of "
        f"`{command}` ({args.rounds} interleaved rounds per figure; ratios are medians of the "
        f"per-round ratios, spread in brackets) on: {machine}. Load average before "
        f"{load_before}, after {load_after}.",
        "",
        "| measure | ours | compared with | result |",
        "|---|---|---|---|",
    ]
    for measure, ours, other, verdict in rows:
        lines.append(f"| {measure.strip()} | {ours} | {other} | {verdict} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
