"""The optional journal index (time map and trigram full-text index): results byte-identical to
the whole-file algorithm whatever the journal holds, kept outside the agent folder, updated from
the tail, and rebuilt silently when stale, missing or corrupt."""

from __future__ import annotations

import json
import os
import random
import sqlite3
from contextlib import ExitStack
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from test_search_properties import (
    PLANT_ALPHABET,
    TAG_ALPHABET,
    TEXT_ALPHABET,
    _random_case,
    _random_line,
    _random_text,
)

from jupyter_agent_memory import AgentMemory, environment
from jupyter_agent_memory.journal import encode_line, format_timestamp
from jupyter_agent_memory.journal import index as journal_index
from jupyter_agent_memory.journal import scan as journal

BASE = datetime(2026, 3, 1, tzinfo=timezone.utc)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(environment.CACHE, str(folder))
    monkeypatch.delenv(environment.INDEX, raising=False)
    return folder


def _ordered_line(
    rng: random.Random, i: int, plant: str, plant_tag: str, perfect: bool = False
) -> bytes:
    """A line of ours, in time order most of the time (sometimes late, early or repeated);
    always in order (repeats allowed) when ``perfect``."""
    roll = rng.random()
    if perfect:
        roll = 0.08 + 0.92 * roll
    moment = BASE + timedelta(seconds=30 * i)
    if roll < 0.05:
        moment -= timedelta(hours=rng.randint(1, 40))  # written late by another clock
    elif roll < 0.08:
        moment += timedelta(hours=rng.randint(1, 40))
    elif roll < 0.12:
        moment = BASE + timedelta(seconds=30 * (i - 1))  # the same millisecond twice
    text = _random_text(rng, TEXT_ALPHABET, 5)
    if rng.random() < 0.5:
        text += _random_case(rng, plant) + _random_text(rng, TEXT_ALPHABET, 4)
    tags = [_random_case(rng, plant_tag)] if rng.random() < 0.4 else []
    return encode_line({"ts": format_timestamp(moment), "tags": tags, "text": text})


def _journal(rng: random.Random, start: int, count: int, plant: str, plant_tag: str) -> bytes:
    disorder = rng.choice([0.0, 0.0, 0.02, 0.3])  # many journals are perfectly clean
    perfect = rng.random() < 0.4  # and many of those in time order (bisection)
    out = []
    for i in range(start, start + count):
        if rng.random() < disorder:
            out.append(_random_line(rng, plant, plant_tag) + b"\n")
        else:
            out.append(_ordered_line(rng, i, plant, plant_tag, perfect and not disorder))
    return b"".join(out)


def _bound(rng: random.Random, count: int) -> datetime | None:
    if rng.random() < 0.3:
        return None
    moment = BASE + timedelta(seconds=30 * rng.randint(-5, count + 5))
    return moment + timedelta(microseconds=rng.choice([0, 0, -1500, 500, 999]))


def _args(rng: random.Random, count: int, plant: str, plant_tag: str) -> dict[str, Any]:
    args: dict[str, Any] = {"limit": rng.choice([1, 3, 20, 10**6])}
    shape = rng.random()
    if shape < 0.45:  # a window alone (or with a tag): the time map's case
        args["since"], args["until"] = _bound(rng, count), _bound(rng, count)
        if rng.random() < 0.3:
            args["tag"] = _random_case(rng, plant_tag)
    else:  # a substring (the trigram index when 3+ characters), maybe with more filters
        args["query"] = _random_case(rng, plant)
        if rng.random() < 0.3 and len(args["query"]) > 1:
            args["query"] = args["query"][rng.randrange(1, len(args["query"])) :]
        if rng.random() < 0.3:
            args["tag"] = _random_case(rng, plant_tag)
        if rng.random() < 0.3:
            args["since"], args["until"] = _bound(rng, count), _bound(rng, count)
    return args


def _reference(path: Path, args: dict[str, Any]) -> journal.SearchResult:
    with path.open("rb") as f:
        return journal.reference_search(f, **args)


def _db_files(cache: Path) -> list[Path]:
    folder = cache / "journal-index"
    return sorted(folder.glob("*.sqlite")) if folder.exists() else []


def _small(stack: ExitStack, rng: random.Random) -> None:
    """Thresholds and block sizes tiny enough that a journal of a few KiB crosses every path."""
    stack.enter_context(mock.patch.object(journal_index, "MAP_MIN_BYTES", 0))
    stack.enter_context(mock.patch.object(journal_index, "CHUNK_BYTES", rng.randint(40, 600)))
    stack.enter_context(mock.patch.object(journal_index, "TAIL_BYTES", rng.randint(1, 300)))
    stack.enter_context(
        mock.patch.object(journal_index, "FTS_LAG_BYTES", rng.choice([0, 0, 200, 10**9]))
    )
    stack.enter_context(mock.patch.object(journal_index, "_READ_BLOCK", rng.randint(64, 4096)))
    stack.enter_context(
        mock.patch.object(journal_index, "OPTIMIZE_BYTES", rng.choice([0, 500, 10**9]))
    )
    stack.enter_context(mock.patch.object(journal, "_FIRST_BLOCK", rng.randint(16, 300)))
    stack.enter_context(mock.patch.object(journal, "_MAX_BLOCK", rng.randint(300, 2000)))
    stack.enter_context(mock.patch.object(journal, "_BISECT_READ", rng.choice([64, 100, 512])))
    stack.enter_context(
        mock.patch.object(journal, "_CANDIDATE_BUDGET", rng.choice([0, 1, 3, 4096]))
    )


@pytest.mark.filterwarnings("ignore::jupyter_agent_memory.engine.store.CorruptJournalWarning")
@pytest.mark.slow
def test_indexed_search_equals_reference_soak(
    tmp_path: Path, agents_root: Path, cache: Path
) -> None:
    """400 seeded journals (clean, slightly or badly out of order, foreign and torn lines),
    each searched many times while it grows, is rewritten, or its index is damaged."""
    rng = random.Random(20261201)
    compared = matched = narrowed = 0
    for round_ in range(400):
        plant = _random_text(rng, rng.choice([PLANT_ALPHABET, TEXT_ALPHABET]), 5) or "abc"
        plant_tag = _random_text(rng, TAG_ALPHABET, 2) or "x"
        mem = AgentMemory.open(tmp_path / f"agent{round_}", journal_index=rng.random() < 0.6)
        path = mem.path / "memory" / "JOURNAL.jsonl"
        count = rng.randint(1, 120)
        path.write_bytes(_journal(rng, 0, count, plant, plant_tag))
        with ExitStack() as stack:
            _small(stack, rng)
            for _step in range(8):
                event = rng.random()
                if event < 0.25:  # appends: the index catches up from the tail
                    more = rng.randint(1, 30)
                    with path.open("ab") as f:
                        f.write(_journal(rng, count, more, plant, plant_tag))
                    count += more
                elif event < 0.3:  # another file under the same name: stale
                    count = rng.randint(1, 80)
                    path.write_bytes(_journal(rng, 0, count, plant, plant_tag))
                elif event < 0.33:  # a torn last line
                    with path.open("ab") as f:
                        f.write(b'{"ts":"2026-03-01T00:00:00.000Z","text":"torn')
                elif event < 0.36:
                    for db in _db_files(cache):
                        db.write_bytes(b"not a database" * rng.randint(1, 100))
                args = _args(rng, count, plant, plant_tag)
                got = mem.search(**args)
                want = _reference(path, args)
                assert got == want, (round_, args)
                compared += 1
                matched += bool(want)
                narrowed += got.scanned < want.scanned
    assert compared == 3200 and matched > 1000 and narrowed > 1000


def _at(minute: int, text: str) -> bytes:
    ts = format_timestamp(BASE + timedelta(minutes=minute))
    return encode_line({"ts": ts, "tags": [], "text": text})


def test_a_time_window_reads_only_the_runs_it_overlaps(
    tmp_path: Path, agents_root: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_index, "MAP_MIN_BYTES", 0)
    mem = AgentMemory.open(tmp_path / "agent")
    path = mem.path / "memory" / "JOURNAL.jsonl"
    lines = [_at(i, f"e{i}") for i in range(20_000)]
    path.write_bytes(b"".join(lines))
    since, until = BASE + timedelta(minutes=9_000), BASE + timedelta(minutes=9_004)
    got = mem.search(since=since, until=until)
    assert [e["text"] for e in got] == ["e9004", "e9003", "e9002", "e9001", "e9000"]
    assert got.scanned == 5  # the lines around it were judged by bisection, never decoded
    assert got == _reference(path, {"since": since, "until": until})
    assert len(_db_files(cache)) == 1
    # an out-of-order line anywhere is still found
    late = _at(9_002, "late")
    path.write_bytes(b"".join(lines[:100]) + late + b"".join(lines[100:]))
    got = mem.search(since=since, until=until)
    assert [e["text"] for e in got] == ["e9004", "e9003", "e9002", "e9001", "e9000", "late"]


def test_the_full_text_index_confirms_every_candidate(
    tmp_path: Path, agents_root: Path, cache: Path
) -> None:
    mem = AgentMemory.open(tmp_path / "agent", journal_index=True)
    for i in range(300):
        mem.append(f"entry {i} " + ("Zeppelin over the bay" if i % 100 == 7 else "plain"), ["t"])
    got = mem.search(query="zEPPELIN")
    assert [e["text"] for e in got] == [f"entry {i} Zeppelin over the bay" for i in (207, 107, 7)]
    assert got.scanned == 3  # only the index's candidates were decoded
    # Python's lowering, not SQLite's: KELVIN SIGN lowers to "k", "İ" to "i̇"
    special = "the \u212aelvin scale, \u0130stanbul"
    mem.append(special)
    assert [e["text"] for e in mem.search(query="kelvin")] == [special]
    assert [e["text"] for e in mem.search(query="i\u0307stanbul")] == [special]
    assert mem.search(query="kelvin") == _reference(
        mem.path / "memory" / "JOURNAL.jsonl", {"query": "kelvin"}
    )


def test_the_index_lives_in_the_cache_folder_never_in_the_agent_folder(
    tmp_path: Path, agents_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(environment.CACHE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    mem = AgentMemory.open(tmp_path / "agent", journal_index=True)
    mem.append("something to find")
    assert [e["text"] for e in mem.search(query="thing")] == ["something to find"]
    assert len(list((tmp_path / "xdg" / "jupyter-agent-memory" / "journal-index").iterdir()))
    before = sorted(p.relative_to(mem.path) for p in mem.path.rglob("*"))
    # a cache folder configured inside the agent folder is not used at all
    monkeypatch.setenv(environment.CACHE, str(mem.path / "memory" / "cache"))
    assert [e["text"] for e in mem.search(query="thing")] == ["something to find"]
    assert sorted(p.relative_to(mem.path) for p in mem.path.rglob("*")) == before
    assert not (mem.path / "memory" / "cache").exists()


def test_the_index_can_be_turned_off(
    tmp_path: Path, agents_root: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_index, "MAP_MIN_BYTES", 0)
    monkeypatch.setenv(environment.INDEX, "off")
    mem = AgentMemory.open(tmp_path / "agent")
    mem.append("x")
    assert [e["text"] for e in mem.search(query="x", since="2000-01-01")] == ["x"]
    assert _db_files(cache) == []
    mem.journal_index = True  # the setting wins over the environment
    assert mem.search(query="xyz") == []
    assert len(_db_files(cache)) == 1


def test_a_damaged_or_deleted_index_is_rebuilt_silently(
    tmp_path: Path, agents_root: Path, cache: Path
) -> None:
    mem = AgentMemory.open(tmp_path / "agent", journal_index=True)
    for i in range(50):
        mem.append(f"note number {i}")
    assert len(mem.search(query="number", limit=100)) == 50
    (db,) = _db_files(cache)
    db.write_bytes(b"garbage " * 1000)
    assert len(mem.search(query="number", limit=100)) == 50
    assert sqlite3.connect(db).execute("SELECT count(*) FROM state").fetchone()[0] > 0
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{db}{suffix}"):
            os.unlink(f"{db}{suffix}")
    mem.append("note number 50")
    assert len(mem.search(query="number", limit=100)) == 51
    assert _db_files(cache) == [db]


def test_a_journal_replaced_by_another_file_is_reindexed(
    tmp_path: Path, agents_root: Path, cache: Path
) -> None:
    mem = AgentMemory.open(tmp_path / "agent", journal_index=True)
    mem.append("old words here")
    assert len(mem.search(query="old words")) == 1
    path = mem.path / "memory" / "JOURNAL.jsonl"
    replacement = path.with_name("replacement")
    replacement.write_bytes(encode_line({"ts": "2026-01-01T00:00:00.000Z", "text": "new"}))
    os.replace(replacement, path)
    assert mem.search(query="old words") == []
    assert [e["text"] for e in mem.search(query="new")] == ["new"]
    json.dumps(list(mem.search(query="new")))


def test_without_sqlite3_searches_take_the_scan(
    tmp_path: Path, agents_root: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    mem = AgentMemory.open(tmp_path / "agent", journal_index=True)
    mem.append("still found")
    monkeypatch.setitem(sys.modules, "sqlite3", None)  # a Python built without it
    monkeypatch.delitem(sys.modules, "jupyter_agent_memory.journal.index")
    assert [e["text"] for e in mem.search(query="found", since="2000-01-01")] == ["still found"]
    assert _db_files(cache) == []


def test_an_index_extended_or_rebuilt_by_another_process_is_clipped_or_refused(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What this search knows stays what it uses: lines indexed meanwhile by another
    process (past this search's end) are never named twice, and an index rebuilt for a file
    that replaced this one is not used at all."""
    monkeypatch.setattr(journal_index, "FTS_LAG_BYTES", 0)
    monkeypatch.setattr(journal_index, "TAIL_BYTES", 1)
    path = tmp_path / "JOURNAL.jsonl"
    path.write_bytes(b"".join(_at(i, f"needle {i}") for i in range(50)))

    def index_of(f: Any) -> journal_index.JournalIndex:
        def read(pos: int, size: int) -> bytes:
            return os.pread(f.fileno(), size, pos)

        found = journal_index.JournalIndex.open(
            path, tmp_path / "agent", read, os.fstat(f.fileno()), full_text=True
        )
        assert found is not None
        return found

    with path.open("rb") as mine:
        ours = index_of(mine)
        text_end, map_end = ours.update_texts(), ours.update_map()
        assert text_end == map_end == path.stat().st_size
        with path.open("ab") as f:
            f.write(b"".join(_at(i, f"needle {i}") for i in range(50, 80)))
        with path.open("rb") as theirs_file:
            theirs = index_of(theirs_file)
            assert theirs.update_texts() > text_end and theirs.update_map() > map_end
        offsets = list(ours.text_candidates("needle", text_end))
        assert len(offsets) == 50 and max(offsets) < text_end
        assert max(stop for _, stop in ours.window_ranges(None, None, map_end)) <= map_end
        # the file is replaced and another process rebuilds the index for the new one
        replacement = tmp_path / "new"
        replacement.write_bytes(_at(0, "other"))
        os.replace(replacement, path)
        with path.open("rb") as new_file:
            index_of(new_file).update_texts()
        with pytest.raises(sqlite3.DatabaseError):
            list(ours.text_candidates("needle", text_end))
        with pytest.raises(sqlite3.DatabaseError):
            ours.window_ranges(None, None, map_end)
