"""The optional journal index: a derived SQLite database in a cache folder outside every agent
folder, built only when asked (never inside a search), deletable at any time.

For the journal's first ``end`` bytes it holds a trigram FTS5 index of ``text.lower()`` keyed
by line offset, and a time map (runs of about 32 KiB with their entries' earliest and latest
``ts``); the part past ``end`` is always scanned, so a lagging index is only slower. It is used
only while the journal's identity, a fingerprint of the part it covers and the agent's
generation hold; every index is registered in ``memory/.indexes.json`` so forgetting deletes
it. An edit in the middle keeping size, identity and both fingerprints is the one miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote

from .. import environment
from ..folder import Folder
from .format import _CANONICAL_TS, CORRUPT, decode_line, parse_time
from .reader import INDEX_REGISTRY, file_reader
from .scan import IndexFailed

#: What a failing index raises; a search then goes on without it.
INDEX_ERRORS = (OSError, sqlite3.Error)

_SCHEMA = 2
_RUN_BYTES = 32 * 1024
_READ_BLOCK = 4 * 1024 * 1024  # journal bytes per build transaction
# A build adding this much (and what was there before) merges the segments a query reads.
_OPTIMIZE_BYTES = 8 * 1024 * 1024
_FINGERPRINT = 4096
_BUILD_TIMEOUT = 5.0  # seconds a build waits for another build's transaction
# A reader waits only this long for SQLite's whole-database locks, then scans instead.
_READ_TIMEOUT = 0.05
_MAX_REGISTERED = 64
_DB_NAME = re.compile(r"[0-9a-f]{32}\.sqlite")
_TABLES = """
    CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS runs (start INTEGER PRIMARY KEY, stop INTEGER NOT NULL,
        lo TEXT, hi TEXT);
    CREATE VIRTUAL TABLE IF NOT EXISTS texts USING fts5(body, content='',
        tokenize='trigram case_sensitive 1');
"""


def keep_setting(value: bool | None) -> bool | None:
    """The effective index setting: ``value``, else the ``$JUPYTER_AGENT_MEMORY_INDEX`` switch.
    True: keep it up to date in the background; False: never use one; None: use one built."""
    return bool(value) if value is not None else environment.switch(environment.INDEX)


def cache_dir() -> Path:
    """The folder for derived caches: ``$JUPYTER_AGENT_MEMORY_CACHE``, else
    ``$XDG_CACHE_HOME/jupyter-agent-memory``, else ``~/.cache/jupyter-agent-memory``."""
    configured = environment.text(environment.CACHE)
    if configured:
        return Path(configured).expanduser()
    xdg = environment.text(environment.XDG_CACHE_HOME)
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "jupyter-agent-memory"


# (journal, agent folder, what decides the cache folder) -> the database path, or None
_paths: dict[tuple[object, ...], Path | None] = {}


def index_path(journal: Path, agent: Path, cache: Path | None = None) -> Path | None:
    """Where the index of ``journal`` (in the agent folder ``agent``) lives in ``cache``
    (default :func:`cache_dir`); None when that folder is the agent folder or inside it.
    Nothing is created."""
    key = (
        journal, agent, cache, environment.text(environment.CACHE),
        environment.text(environment.XDG_CACHE_HOME), os.path.expanduser("~"),
    )
    if key not in _paths:
        folder = os.fspath(cache if cache is not None else cache_dir())
        base = Path(os.path.realpath(folder))
        real_agent = Path(os.path.realpath(agent))
        inside = base == real_agent or real_agent in base.parents
        name = hashlib.sha256(os.fsencode(os.path.abspath(journal))).hexdigest()[:32]
        _paths[key] = None if inside else base / "journal-index" / f"{name}.sqlite"
    return _paths[key]


def _time_key(moment: datetime) -> str:
    """``moment`` in UTC as fixed-width text, so that text order is time order."""
    return moment.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds")


def _entry_span(ts: Any) -> tuple[str, str] | None:
    """The keys an entry's ``ts`` may take (one key twice; the widest span at the ends of
    time), or None when no window can match it."""
    if not isinstance(ts, str):
        return None
    if _CANONICAL_TS.fullmatch(ts):
        # One that is no real date never matches: its key only widens its run.
        key = ts[:-1] + "000"
        return key, key
    try:
        key = _time_key(parse_time(ts))
    except ValueError:
        return None
    except OverflowError:
        return "", "~"
    return key, key


class _Connections(threading.local):
    def __init__(self) -> None:
        # (path, for writing) -> (pid, inode of the database file, connection)
        self.held: dict[tuple[str, bool], tuple[int, int, sqlite3.Connection]] = {}
        # path -> (data_version, state, judged (journal key, verdict)) of the last reader
        self.seen: dict[str, tuple[int, dict[str, Any], tuple[Any, str]]] = {}


_connections = _Connections()


def _connect(db: Path, *, write: bool) -> sqlite3.Connection:
    """A connection to ``db`` kept for this thread (SQLite connections are per thread); a
    database deleted or replaced meanwhile gets a new one. Only a writer creates the file."""
    key = os.fspath(db)
    try:
        inode = os.stat(key).st_ino
    except FileNotFoundError:
        if not write:
            raise
        inode = -1
    held = _connections.held.get((key, write))
    if held is not None:
        if held[:2] == (os.getpid(), inode):
            return held[2]
        _close(key)
    if write:
        db.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(key, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            inode = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        conn = sqlite3.connect(key, isolation_level=None, timeout=_BUILD_TIMEOUT)
        try:
            # Derived data: speed over durability (a damaged index is rebuilt); readers
            # never wait for the writer (WAL; switching locks a moment: new databases only).
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=OFF")
            conn.executescript(_TABLES)
        except sqlite3.Error:
            conn.close()
            raise
    else:
        uri = f"file:{quote(key)}?mode=rw"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=_READ_TIMEOUT)
    _connections.held[(key, write)] = (os.getpid(), inode, conn)
    return conn


def _close(key: str) -> None:
    """Close this thread's connections to the database ``key``."""
    _connections.seen.pop(key, None)
    for write in (False, True):
        held = _connections.held.pop((key, write), None)
        if held is not None:
            with contextlib.suppress(sqlite3.Error):
                held[2].close()


def _state(conn: sqlite3.Connection) -> dict[str, Any]:
    return dict(conn.execute("SELECT key, value FROM state").fetchall())


def _fingerprint(read: Callable[[int, int], bytes], end: int) -> str:
    head = read(0, min(_FINGERPRINT, end))
    tail = read(max(0, end - _FINGERPRINT), min(_FINGERPRINT, end))
    return hashlib.sha256(head + b"\0" + tail).hexdigest()


def _identity(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}"


def _judge(
    state: dict[str, Any], read: Callable[[int, int], bytes], st: os.stat_result, generation: str
) -> str:
    """``"valid"``, ``"stale"`` (another file, or not what was indexed) or ``"forgotten"``
    (another generation of the agent) for an index whose state is ``state``."""
    if state.get("schema") != _SCHEMA:
        return "stale"
    if state.get("generation") != generation:
        return "forgotten"
    end = state.get("end")
    if state.get("identity") != _identity(st) or not isinstance(end, int) or end > st.st_size:
        return "stale"
    if end and state.get("print") != _fingerprint(read, end):
        return "stale"
    return "valid"


class IndexView:
    """An index found valid for one journal file, as one search reads it; its methods raise
    :class:`~jupyter_agent_memory.journal.scan.IndexFailed` when the database fails. ``end``:
    the bytes it covers; it never names a line past it (the search scans those)."""

    def __init__(self, conn: sqlite3.Connection, end: int) -> None:
        self.conn = conn
        self.end = end

    def text_candidates(self, needle: str) -> Iterator[int] | None:
        """Offsets of the lines whose lowered text may hold ``needle`` (lower-cased), newest
        first; None when trigrams cannot narrow it (under three characters, or a NUL)."""
        if len(needle) < 3 or "\0" in needle:
            return None
        return self._candidates('"' + needle.replace('"', '""') + '"')

    def _candidates(self, phrase: str) -> Iterator[int]:
        try:
            cursor = self.conn.execute(
                "SELECT rowid FROM texts WHERE texts MATCH ? ORDER BY rowid DESC", (phrase,)
            )
            batch = 24  # most searches stop at their limit (20 by default): ask little first
            while rows := cursor.fetchmany(batch):
                for (offset,) in rows:
                    if offset < self.end:
                        yield offset
                batch = min(batch * 4, 4096)
        except sqlite3.Error as exc:
            raise IndexFailed(exc) from exc

    def window_ranges(
        self, since: datetime | None, until: datetime | None
    ) -> list[tuple[int, int]] | None:
        """Byte ranges that may hold entries with a time in ``[since, until]``, newest first;
        None without bounds (or for a bound no key can express)."""
        if since is None and until is None:
            return None
        try:
            low = _time_key(since) if since is not None else ""
            high = _time_key(until) if until is not None else "~"  # after every digit
        except (OverflowError, ValueError):
            return None  # a bound at the ends of time, which no key can express
        try:
            rows = self.conn.execute(
                "SELECT start, stop FROM runs WHERE hi >= ? AND lo <= ? AND stop <= ? "
                "ORDER BY start DESC",
                (low, high, self.end),
            ).fetchall()
        except sqlite3.Error as exc:
            raise IndexFailed(exc) from exc
        merged: list[tuple[int, int]] = []
        for start, stop in rows:
            if merged and merged[-1][0] == stop:
                merged[-1] = (start, merged[-1][1])
            else:
                merged.append((start, stop))
        return merged


def open_view(
    db: Path, read: Callable[[int, int], bytes], st: os.stat_result, generation: Callable[[], str]
) -> IndexView | None:
    """The index ``db`` for the journal read by ``read`` (its ``fstat`` ``st``), or None when
    there is none or it does not describe this journal (one of a generation other than
    ``generation()`` is deleted). Creates nothing; raises ``IndexFailed`` when it fails."""
    key = os.fspath(db)
    try:
        conn = _connect(db, write=False)
    except (FileNotFoundError, sqlite3.OperationalError):
        return None  # no index (or one just being created)
    now = generation()
    try:
        # The state is read again only when a connection committed meanwhile.
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        seen = _connections.seen.get(key)
        journal = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, now)
        if seen is not None and seen[0] == version and seen[2][0] == journal:
            state, verdict = seen[1], seen[2][1]
        else:
            state = _state(conn)
            verdict = _judge(state, read, st, now)
            _connections.seen[key] = (version, state, (journal, verdict))
    except sqlite3.Error as exc:
        raise IndexFailed(exc) from exc
    if verdict == "forgotten":
        drop(db)
    return IndexView(conn, state["end"]) if verdict == "valid" else None


def describe(db: Path | None, f: BinaryIO | None, generation: str) -> dict[str, Any]:
    """What the index ``db`` holds for the journal open as ``f`` (None when there is none):
    ``{"path", "state", "indexed_bytes", "journal_bytes", "size_bytes"}``; ``state`` is
    ``"missing"``, ``"stale"`` (of another file or generation: rebuilt by the next build),
    ``"behind"`` (searches scan the rest) or ``"ready"``. Creates nothing."""
    files = _files(db) if db is not None else []
    out: dict[str, Any] = {
        "path": None if db is None else str(db),
        "state": "missing",
        "indexed_bytes": 0,
        "journal_bytes": 0,
        "size_bytes": sum(p.stat().st_size for p in files if p.is_file()),
    }
    read, st = file_reader(f) if f is not None else (None, None)
    if st is not None:
        out["journal_bytes"] = st.st_size
    if db is None or not db.is_file():
        return out
    try:
        state = _state(_connect(db, write=False))
    except sqlite3.Error:
        state = {}  # judged stale below
    out["indexed_bytes"] = state.get("end") if isinstance(state.get("end"), int) else 0
    if read is None or st is None or _judge(state, read, st, generation) != "valid":
        out["state"] = "stale"
    else:
        out["state"] = "ready" if out["indexed_bytes"] == st.st_size else "behind"
    return out


def _whole_lines(
    read: Callable[[int, int], bytes], start: int, stop: int
) -> Iterator[tuple[int, bytes]]:
    """``(offset, block)`` of ``[start, stop)`` in big reads, each block whole lines (ending in
    ``\\n``); a final part without a newline is not returned."""
    pos, carry = start, b""
    while pos < stop:
        data = read(pos, min(_READ_BLOCK, stop - pos))
        if not data:
            return
        block, base = carry + data, pos - len(carry)
        pos += len(data)
        cut = block.rfind(b"\n") + 1
        carry = block[cut:]
        if cut:
            yield base, block[:cut]


def _rows(base: int, block: bytes) -> tuple[list[tuple[int, str]], list[tuple[Any, ...]]]:
    """The full-text rows and the time-map runs of ``block`` (whole lines at offset ``base``)."""
    texts: list[tuple[int, str]] = []
    runs: list[tuple[Any, ...]] = []
    pos = 0
    while pos < len(block):
        cut = block.find(b"\n", pos + _RUN_BYTES - 1) + 1 or len(block)
        low: str | None = None
        high: str | None = None
        offset = base + pos
        for line in block[pos : cut - 1].split(b"\n"):
            entry = decode_line(line)
            if entry is not None and entry is not CORRUPT:
                text = entry.get("text")
                if isinstance(text, str):
                    # The tokenizer stops at NUL; queries holding one scan, so losing it is safe.
                    texts.append((offset, text.lower().replace("\0", "\ufffd")))
                span = _entry_span(entry.get("ts"))
                if span is not None:
                    low = span[0] if low is None else min(low, span[0])
                    high = span[1] if high is None else max(high, span[1])
            offset += len(line) + 1
        runs.append((base + pos, base + cut, low, high))
        pos = cut
    return texts, runs


def build(db: Path, f: BinaryIO, generation: str, *, generation_now: Callable[[], str]) -> int:
    """Bring the index ``db`` of the journal open as ``f`` up to its end (a stale one afresh,
    in a new file), committing every few MiB; deleted when ``generation_now()`` differs from
    ``generation`` at the end. Returns the bytes indexed; raises :data:`INDEX_ERRORS`."""
    read, st = file_reader(f)
    if st is None:
        raise OSError(f"cannot index {f!r}: it has no file descriptor")
    try:
        conn = _connect(db, write=True)
        start = _state(conn)
    except sqlite3.DatabaseError:
        start = {}  # not a database, or a damaged one: start afresh
    if _judge(start, read, st, generation) != "valid":
        drop(db)
        conn = _connect(db, write=True)
        conn.executemany(
            "INSERT OR REPLACE INTO state VALUES (?, ?)",
            [("schema", _SCHEMA), ("identity", _identity(st)), ("generation", generation),
             ("end", 0), ("print", "")],
        )
        start = _state(conn)
    inode = os.stat(db).st_ino
    end = first = start["end"]
    for base, block in _whole_lines(read, end, st.st_size):
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another build (another process) may have gone further meanwhile.
            state = _state(conn)
            if _judge(state, read, st, generation) != "valid" or os.stat(db).st_ino != inode:
                conn.execute("ROLLBACK")
                return 0  # replaced or dropped under us: that build's result stands
            if state["end"] == base:
                texts, runs = _rows(base, block)
                conn.executemany("INSERT INTO texts (rowid, body) VALUES (?, ?)", texts)
                conn.executemany("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?)", runs)
                end = base + len(block)
                conn.executemany(
                    "INSERT OR REPLACE INTO state VALUES (?, ?)",
                    [("end", end), ("print", _fingerprint(read, end))],
                )
            else:
                end = state["end"]
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
    if end - first >= _OPTIMIZE_BYTES and end - first >= first:
        conn.execute("INSERT INTO texts (texts) VALUES ('optimize')")
    if generation_now() != generation:
        drop(db)
        return 0
    return end


def _files(db: Path) -> list[Path]:
    """The database ``db`` and its companion files."""
    return [Path(f"{db}{suffix}") for suffix in ("", "-wal", "-shm", "-journal")]


def _remove(paths: list[Path]) -> list[Path]:
    """Close this thread's connections to ``paths`` and delete them; returns what was."""
    removed = []
    for path in paths:
        _close(os.fspath(path))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            removed.append(path)
    return removed


def drop(db: Path) -> list[Path]:
    """Delete the index ``db`` (the database and its companions); returns what was deleted."""
    return _remove(_files(db))


def _registered(mem: Folder) -> list[Path]:
    """The index databases the registry of ``mem`` names (only names an index can have)."""
    try:
        record = json.loads(mem.read_bytes(INDEX_REGISTRY) or b"{}")
    except ValueError:
        return []
    listed = record.get("indexes") if isinstance(record, dict) else None
    if not isinstance(listed, list):
        return []
    paths = [Path(item) for item in listed if isinstance(item, str) and os.path.isabs(item)]
    return [p for p in paths if _DB_NAME.fullmatch(p.name) and p.parent.name == "journal-index"]


def register(mem: Folder, db: Path, recheck: Callable[[], None]) -> None:
    """Add ``db`` to the registry of the memory folder ``mem``, dropping entries whose database
    is gone (under the agent's lock; ``recheck``: the store's check of its folders)."""
    known = _registered(mem)
    kept = [path for path in known if path == db or path.exists()]
    if db not in kept:
        kept.append(db)
    kept = kept[-_MAX_REGISTERED:]
    if kept != known:
        data = json.dumps({"indexes": [str(path) for path in kept]}, indent=1) + "\n"
        mem.write_atomic(INDEX_REGISTRY, data.encode(), recheck)


def registered_index_files(memory_folder: Path, journal: Path | None = None) -> list[Path]:
    """The existing regular files of every index registered in ``memory_folder`` and, with
    ``journal``, of its index in this process's cache folder (links never followed)."""
    try:
        with Folder.open(memory_folder) as mem:
            databases = _registered(mem)
    except FileNotFoundError:
        databases = []
    if journal is not None:
        local = index_path(journal, memory_folder.parent)
        if local is not None and local not in databases:
            databases.append(local)
    files = []
    for db in databases:
        for path in _files(db):
            with contextlib.suppress(OSError):
                if stat.S_ISREG(os.lstat(path).st_mode):
                    files.append(path)
    return files


def drop_registered(memory_folder: Path, journal: Path | None = None) -> list[Path]:
    """Delete every file :func:`registered_index_files` names; returns what was deleted."""
    return _remove(registered_index_files(memory_folder, journal))


# Keys whose build runs in the background -> whether another pass was asked for meanwhile.
_workers: dict[str, bool] = {}
_errors: dict[str, str] = {}
_workers_lock = threading.Lock()


def _passes(key: str, work: Callable[[], object]) -> None:
    """Run ``work`` until no one asked for another pass meanwhile."""
    while True:
        with _workers_lock:
            if not _workers.get(key):
                _workers.pop(key, None)
                return
            _workers[key] = False
        try:
            work()
            _errors.pop(key, None)
        except Exception as exc:  # derived data: remembered for the status, never raised
            _errors[key] = f"{type(exc).__name__}: {exc}"


def in_background(key: str, work: Callable[[], object]) -> None:
    """Run ``work`` (a build) in this process's background thread for ``key`` (once more after
    its current pass when one runs already). Returns at once."""
    with _workers_lock:
        running = key in _workers
        _workers[key] = True
    if not running:
        worker = threading.Thread(target=_passes, args=(key, work), name="journal-index")
        worker.daemon = True
        worker.start()


def building(key: str) -> bool:
    """Whether this process is building the index ``key`` in the background."""
    with _workers_lock:
        return key in _workers


def last_error(key: str) -> str | None:
    """The error of this process's last background build of ``key`` (None after a success)."""
    return _errors.get(key)


def _reset_after_fork() -> None:
    """A forked child has none of the parent's threads (and maybe a lock one of them held)."""
    global _workers_lock
    _workers_lock = threading.Lock()
    _workers.clear()


os.register_at_fork(after_in_child=_reset_after_fork)
