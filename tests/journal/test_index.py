"""The optional journal index: never built inside a search, exact (results identical to the
whole-file algorithm whatever the journal holds, built or half built), kept outside the agent
folder, used only for the journal file and the generation it was built for, and found and
deleted by forgetting in every cache folder it was registered from."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from test_search_properties import (
    PLANT_ALPHABET,
    TAG_ALPHABET,
    TEXT_ALPHABET,
    _random_case,
    _random_line,
    _random_text,
)

import jupyter_agent_memory.journal
from jupyter_agent_memory import AgentMemory, MemoryToolError, environment, forget
from jupyter_agent_memory.journal import (
    SearchResult,
    encode_line,
    format_timestamp,
    reference_search,
)

BASE = datetime(2026, 3, 1, tzinfo=timezone.utc)
STATUS_KEYS = {
    "path", "state", "indexed_bytes", "journal_bytes", "size_bytes", "building", "keep",
    "registered", "error",
}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(environment.CACHE, str(folder))
    monkeypatch.delenv(environment.INDEX, raising=False)
    return folder


def _at(minute: int, text: str, tags: list[str] | None = None) -> bytes:
    ts = format_timestamp(BASE + timedelta(minutes=minute))
    return encode_line({"ts": ts, "tags": tags or [], "text": text})


def _journal_path(mem: AgentMemory) -> Path:
    return mem.path / "memory" / "JOURNAL.jsonl"


def _reference(mem: AgentMemory, **args: Any) -> SearchResult:
    with _journal_path(mem).open("rb") as f:
        return reference_search(f, **args)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def _agent(tmp_path: Path, lines: int = 3000, name: str = "agent") -> AgentMemory:
    """An agent whose journal has ``lines`` entries a minute apart; every 500th one holds
    'Zeppelin'."""
    mem = AgentMemory.open(tmp_path / name)
    body = b"".join(
        _at(i, f"entry {i}" + (" saw a Zeppelin" if i % 500 == 7 else ""), ["t"])
        for i in range(lines)
    )
    _journal_path(mem).write_bytes(body)
    return mem


def _wait_until_built(mem: AgentMemory, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status = mem.index_status()
        if not status["building"]:
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.01)


SHAPES: list[dict[str, Any]] = [
    {"query": "zeppelin"},
    {"query": "ZEP", "tag": "t"},
    {"query": "entry 1"},
    {"since": BASE + timedelta(minutes=1000), "until": BASE + timedelta(minutes=1010)},
    {"since": BASE + timedelta(minutes=2990)},
    {"query": "zeppelin", "until": BASE + timedelta(minutes=1500)},
    {"tag": "t", "limit": 3},
]


def test_searches_never_build_an_index_or_write_to_the_cache(
    tmp_path: Path, cache: Path
) -> None:
    """What a 137 MB journal needs: no index, so every search is a scan and writes nothing."""
    mem = _agent(tmp_path, lines=20_000)  # 1.3 MB, past every size an index was once built at
    for args in SHAPES:
        got = mem.search(**args)
        assert got == _reference(mem, **args) and got.indexed is False
    assert not cache.exists()
    status = mem.index_status()
    assert status["state"] == "missing" and not cache.exists()  # reading status creates nothing
    assert set(status) == STATUS_KEYS


def test_a_built_index_narrows_queries_and_windows_and_stays_exact(
    tmp_path: Path, cache: Path
) -> None:
    mem = _agent(tmp_path)
    status = mem.build_index()
    size = _journal_path(mem).stat().st_size
    assert status["state"] == "ready" and status["indexed_bytes"] == size == status["journal_bytes"]
    assert status["building"] is False and status["keep"] is False and status["error"] is None
    db = Path(status["path"])
    assert db.parent == cache.resolve() / "journal-index" and db.is_file()
    assert status["size_bytes"] > 0 and str(db) in status["registered"]
    for args in SHAPES[:-1]:
        got = mem.search(**args)
        assert got == _reference(mem, **args)
        assert got.indexed is True
        assert got.scanned <= 60, (args, got.scanned)  # of 3,000 lines
    assert mem.search(tag="t", limit=3).indexed is False  # no shape the index can narrow
    # Appends make it lag behind: the tail is scanned, results stay exact.
    for i in range(3000, 3100):
        mem.append(f"entry {i}" + (" another zeppelin" if i == 3050 else ""), ["t"])
    assert mem.index_status()["state"] == "behind"
    for args in SHAPES:
        assert mem.search(**args) == _reference(mem, **args)
    assert mem.search(query="zeppelin")[0]["text"] == "entry 3050 another zeppelin"
    assert mem.build_index()["state"] == "ready"  # from where it stopped
    assert mem.search(query="zeppelin").indexed is True


def test_the_setting_keeps_the_index_up_to_date_in_the_background(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = _agent(tmp_path)
    kept = AgentMemory.open(mem.path, journal_index=True)
    assert kept.search(query="zeppelin") == _reference(mem, query="zeppelin")  # a scan...
    status = _wait_until_built(kept)  # ...that started a build in the background
    assert (status["state"], status["keep"], status["error"]) == ("ready", True, None)
    kept.append("a fresh zeppelin sighting")
    status = _wait_until_built(kept)
    assert status["state"] == "ready"
    got = kept.search(query="zeppelin")
    assert got.indexed and got.scanned == 7 and got[0]["text"] == "a fresh zeppelin sighting"
    # The environment variable says the same for every agent that is not told otherwise...
    monkeypatch.setenv(environment.INDEX, "on")
    assert AgentMemory.open(mem.path).index_status()["keep"] is True
    # ...and "off" means no index is used at all, even a ready one.
    monkeypatch.setenv(environment.INDEX, "OFF")
    off = AgentMemory.open(mem.path)
    got = off.search(query="zeppelin")
    assert got == _reference(mem, query="zeppelin") and got.indexed is False


@pytest.mark.parametrize("value", ["maybe", "2", "auto"])
def test_a_bad_index_setting_is_refused_before_anything_is_written(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    mem = _agent(tmp_path, lines=10)
    before = _journal_path(mem).read_bytes()
    monkeypatch.setenv(environment.INDEX, value)
    message = (
        "$JUPYTER_AGENT_MEMORY_INDEX must be 1 or 0 (also true/false, yes/no, on/off), "
        f"got {value!r}"
    )
    for call in (lambda: mem.append("x"), lambda: mem.search(query="entry")):
        with pytest.raises(MemoryToolError) as info:
            call()
        assert (info.value.code, info.value.message) == (-32602, message)
    assert _journal_path(mem).read_bytes() == before


@contextmanager
def _write_locked(db: Path) -> Iterator[None]:
    """Hold the database's write lock, as a build in the middle of a transaction does."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def test_a_search_during_a_build_returns_at_once_with_the_exact_result(
    tmp_path: Path, cache: Path
) -> None:
    mem = _agent(tmp_path)
    db = Path(mem.build_index()["path"])
    for i in range(3000, 3200):
        mem.append(f"entry {i}" + (" zeppelin again" if i % 50 == 0 else ""), ["t"])
    with _write_locked(db):
        mem.build_index(background=True)  # waits for the lock, in its thread
        time.sleep(0.2)
        assert mem.index_status()["building"] is True
        start = time.monotonic()
        got = mem.search(query="zeppelin", limit=100)
        took = time.monotonic() - start
        assert mem.index_status()["building"] is True  # the build is still waiting
    assert took < 2, took  # a build waits up to 5 s for the lock; the search did not
    assert got == _reference(mem, query="zeppelin", limit=100)
    assert got.indexed is True, got  # what was built before stays in use meanwhile
    assert len(got) == 10
    assert _wait_until_built(mem)["state"] == "ready"


def _bump_generation(mem: AgentMemory, token: str) -> None:
    """What every forget does: a new generation in memory/.generation."""
    (mem.path / "memory" / ".generation").write_text(token + "\n")


def test_an_index_of_another_generation_never_serves_and_is_deleted(
    tmp_path: Path, cache: Path
) -> None:
    mem = _agent(tmp_path)
    assert mem.generation() == ""
    assert not (mem.path / "memory" / ".generation").exists()  # reading created nothing
    db = Path(mem.build_index()["path"])
    assert mem.search(query="zeppelin").indexed is True
    _bump_generation(mem, "0123456789abcdef0123456789abcdef")
    assert mem.generation() == "0123456789abcdef0123456789abcdef"
    got = mem.search(query="zeppelin")
    assert got == _reference(mem, query="zeppelin") and got.indexed is False
    assert not db.exists()  # stale: deleted on sight
    assert mem.build_index()["state"] == "ready"
    assert mem.search(query="zeppelin").indexed is True  # built for the new generation
    # A file holding anything else is the empty generation, as a missing one is.
    (mem.path / "memory" / ".generation").write_bytes(b"not hex at all")
    assert mem.generation() == ""
    assert mem.search(query="zeppelin").indexed is False and not db.exists()
    _bump_generation(mem, "0123456789ABCDEF0123456789ABCDEF")
    assert mem.generation() == "0123456789abcdef0123456789abcdef"


def test_the_generation_file_is_read_without_following_links(
    tmp_path: Path, cache: Path
) -> None:
    mem = _agent(tmp_path, lines=10)
    mem.build_index()
    outside = tmp_path / "elsewhere"
    outside.write_text("0123456789abcdef0123456789abcdef\n")
    (mem.path / "memory" / ".generation").symlink_to(outside)
    for call in (mem.generation, lambda: mem.search(query="entry")):
        with pytest.raises(MemoryToolError, match="symbolic link"):
            call()


_BUILD_ELSEWHERE = """
import sys
from jupyter_agent_memory import AgentMemory
print(AgentMemory.open(sys.argv[1], create=False).build_index()["path"])
"""


def _build_in_another_process(mem: AgentMemory, cache: Path) -> Path:
    env = {**os.environ, environment.CACHE: str(cache)}
    out = subprocess.run(
        [sys.executable, "-c", _BUILD_ELSEWHERE, str(mem.path)],
        env=env, capture_output=True, text=True, check=True, timeout=120,
    ).stdout
    return Path(out.strip())


def test_forgetting_deletes_the_index_of_every_cache_folder(
    tmp_path: Path, cache: Path
) -> None:
    mem = _agent(tmp_path)
    mem.append("the door code is 4417", ["t"])
    ours = Path(mem.build_index()["path"])
    theirs = _build_in_another_process(mem, tmp_path / "server-cache")
    assert theirs.is_file() and theirs.parent != ours.parent
    assert {str(ours), str(theirs)} <= set(mem.index_status()["registered"])
    files = set(mem.index_files())
    assert ours in files and theirs in files
    got = mem.search(query="door code")
    assert got.indexed and [e["text"] for e in got] == ["the door code is 4417"]
    receipt = forget(mem, "door code is 4417")
    assert receipt["verified"] is True and receipt["changed"]["caches"] == len(files)
    assert not any(p.exists() for p in files)
    assert mem.search(query="door code") == []


def test_drop_index_deletes_every_registered_index_and_nothing_else(
    tmp_path: Path, cache: Path
) -> None:
    mem = _agent(tmp_path, lines=50)
    ours = Path(mem.build_index()["path"])
    theirs = _build_in_another_process(mem, tmp_path / "other-cache")
    # A registry someone edited by hand names other files too: those are never touched.
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    lookalike_dir = tmp_path / "x" / "journal-index"
    lookalike_dir.mkdir(parents=True)
    link = lookalike_dir / ("a" * 32 + ".sqlite")
    link.symlink_to(victim)
    registry = mem.path / "memory" / ".indexes.json"
    record = json.loads(registry.read_text())
    record["indexes"] += [str(victim), str(link), "relative/journal-index/" + "b" * 32 + ".sqlite"]
    registry.write_text(json.dumps(record))
    dropped = mem.drop_index()["dropped"]
    assert str(ours) in dropped and str(theirs) in dropped
    assert not ours.exists() and not theirs.exists()
    assert victim.read_text() == "keep me" and link.is_symlink()
    assert mem.index_status()["state"] == "missing"
    assert mem.drop_index() == {"dropped": []}


def test_a_cache_folder_inside_the_agent_folder_is_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = _agent(tmp_path, lines=20)
    inside = mem.path / "memory" / "cache"
    monkeypatch.setenv(environment.CACHE, str(inside))
    before = sorted(p.relative_to(mem.path) for p in mem.path.rglob("*"))
    with pytest.raises(MemoryToolError) as info:
        mem.build_index()
    assert info.value.code == -32603
    assert f"the cache folder {inside} is inside the agent folder" in info.value.message
    assert mem.search(query="entry 1") == _reference(mem, query="entry 1")
    assert mem.index_status()["path"] is None
    assert sorted(p.relative_to(mem.path) for p in mem.path.rglob("*")) == before


def test_the_index_lives_in_the_user_cache_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(environment.CACHE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    mem = _agent(tmp_path, lines=20)
    db = Path(mem.build_index()["path"])
    assert db.parent == (tmp_path / "xdg" / "jupyter-agent-memory" / "journal-index").resolve()
    assert oct(db.stat().st_mode & 0o777) == "0o600"
    assert oct(db.parent.stat().st_mode & 0o777) == "0o700"


def test_a_damaged_index_never_breaks_a_search_and_the_next_build_replaces_it(
    tmp_path: Path, cache: Path
) -> None:
    mem = _agent(tmp_path)
    db = Path(mem.build_index()["path"])
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    damaged = db.with_name("damaged")
    damaged.write_bytes(b"garbage " * 1000)
    os.replace(damaged, db)  # a copy cut short, a disk error: not a database any more
    got = mem.search(query="zeppelin")
    assert got == _reference(mem, query="zeppelin") and got.indexed is False
    assert mem.index_status()["state"] == "stale"
    assert mem.build_index()["state"] == "ready"
    assert mem.search(query="zeppelin").indexed is True


def test_a_journal_replaced_by_another_file_makes_the_index_stale(
    tmp_path: Path, cache: Path
) -> None:
    mem = _agent(tmp_path)
    mem.build_index()
    replacement = _journal_path(mem).with_name("replacement")
    replacement.write_bytes(b"".join(_at(i, f"new {i}") for i in range(40)))
    os.replace(replacement, _journal_path(mem))
    got = mem.search(query="new 3")
    assert got == _reference(mem, query="new 3") and got.indexed is False
    assert mem.search(query="zeppelin") == []
    assert mem.index_status()["state"] == "stale"
    assert mem.build_index()["state"] == "ready"
    assert mem.search(query="new 3").indexed is True


def test_without_sqlite3_searches_scan_and_building_says_why(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = _agent(tmp_path, lines=30)
    monkeypatch.setitem(sys.modules, "sqlite3", None)  # a Python built without it
    monkeypatch.delitem(sys.modules, "jupyter_agent_memory.journal.index")
    monkeypatch.delattr(jupyter_agent_memory.journal, "index")
    assert mem.search(query="entry 7") == _reference(mem, query="entry 7")
    with pytest.raises(MemoryToolError, match="The journal index needs Python's sqlite3 module"):
        mem.build_index()
    assert mem.index_files() == [] and not cache.exists()


@pytest.mark.parametrize(
    ("args", "field"),
    [({"query": "half \ud83d"}, "query"), ({"tag": "\udfffx"}, "tag")],
)
def test_a_lone_surrogate_search_is_refused_with_the_engine_message(
    tmp_path: Path, cache: Path, args: dict[str, str], field: str
) -> None:
    mem = _agent(tmp_path, lines=30)
    value = args[field]
    position = next(i for i, c in enumerate(value) if 0xD800 <= ord(c) <= 0xDFFF)
    message = (
        f"'{field}' is not valid Unicode text: lone surrogate "
        f"U+{ord(value[position]):04X} at position {position}"
    )
    tool_args = {"action": "search", **args}
    for built in (False, True):
        if built:
            mem.build_index()
        for call in (lambda: mem.search(**args), lambda: mem.call_tool(tool_args)):
            with pytest.raises(MemoryToolError) as info:
                call()
            assert (info.value.code, info.value.message) == (-32602, message)


# -- the soak: random journals, built, half built, grown, replaced, damaged, forgotten ---------


def _ordered_line(rng: random.Random, i: int, plant: str, plant_tag: str) -> bytes:
    """A line of ours, in time order most of the time (sometimes late, early or repeated)."""
    roll = rng.random()
    moment = BASE + timedelta(seconds=30 * i)
    if roll < 0.05:
        moment -= timedelta(hours=rng.randint(1, 40))  # written late by another clock
    elif roll < 0.08:
        moment += timedelta(hours=rng.randint(1, 40))
    text = _random_text(rng, TEXT_ALPHABET, 5)
    if rng.random() < 0.5:
        text += _random_case(rng, plant) + _random_text(rng, TEXT_ALPHABET, 4)
    tags = [_random_case(rng, plant_tag)] if rng.random() < 0.4 else []
    return encode_line({"ts": format_timestamp(moment), "tags": tags, "text": text})


def _lines(rng: random.Random, start: int, count: int, plant: str, plant_tag: str) -> bytes:
    disorder = rng.choice([0.0, 0.0, 0.02, 0.3])  # many journals are perfectly clean
    return b"".join(
        _random_line(rng, plant, plant_tag) + b"\n" if rng.random() < disorder
        else _ordered_line(rng, i, plant, plant_tag)
        for i in range(start, start + count)
    )


def _bound(rng: random.Random, count: int) -> datetime | None:
    if rng.random() < 0.3:
        return None
    moment = BASE + timedelta(seconds=30 * rng.randint(-5, count + 5))
    return moment + timedelta(microseconds=rng.choice([0, 0, -1500, 500, 999]))


def _args(rng: random.Random, count: int, plant: str, plant_tag: str) -> dict[str, Any]:
    args: dict[str, Any] = {"limit": rng.choice([1, 3, 20, 10**6])}
    if rng.random() < 0.45:  # a window alone (or with a tag): the time map's case
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


@pytest.mark.filterwarnings("ignore::jupyter_agent_memory.engine.store.CorruptJournalWarning")
@pytest.mark.slow
def test_indexed_search_equals_reference_soak(tmp_path: Path, cache: Path) -> None:
    """300 seeded journals (clean, slightly or badly out of order, foreign and torn lines),
    each searched many times while it is indexed, grows, is rewritten or forgotten, or its
    index is damaged."""
    rng = random.Random(20261201)
    compared = matched = narrowed = 0
    for round_ in range(300):
        plant = _random_text(rng, rng.choice([PLANT_ALPHABET, TEXT_ALPHABET]), 5) or "abc"
        plant_tag = _random_text(rng, TAG_ALPHABET, 2) or "x"
        mem = AgentMemory.open(tmp_path / f"agent{round_}")
        path = _journal_path(mem)
        count = rng.randint(1, 300)
        path.write_bytes(_lines(rng, 0, count, plant, plant_tag))
        for _step in range(10):
            event = rng.random()
            if event < 0.35:
                mem.build_index()
            elif event < 0.55:  # appends: the index lags behind
                more = rng.randint(1, 40)
                with path.open("ab") as f:
                    f.write(_lines(rng, count, more, plant, plant_tag))
                count += more
            elif event < 0.6:  # another file under the same name: stale
                count = rng.randint(1, 200)
                replacement = path.with_name("new.tmp")
                replacement.write_bytes(_lines(rng, 0, count, plant, plant_tag))
                os.replace(replacement, path)
            elif event < 0.63:  # a torn last line
                with path.open("ab") as f:
                    f.write(b'{"ts":"2026-03-01T00:00:00.000Z","text":"torn')
            elif event < 0.66:
                for db in _files(cache):
                    if db.suffix == ".sqlite":
                        db.write_bytes(b"not a database" * rng.randint(1, 100))
            elif event < 0.7:
                _bump_generation(mem, f"{rng.getrandbits(128):032x}")
            args = _args(rng, count, plant, plant_tag)
            got = mem.search(**args)
            want = _reference(mem, **args)
            assert got == want, (round_, args)
            compared += 1
            matched += bool(want)
            narrowed += got.indexed and got.scanned < want.scanned
    assert compared == 3000 and matched > 1000 and narrowed > 500
