"""An optional, derived index of a journal, so large journals answer in logarithmic time.

The journal file stays the only truth. The index is a SQLite database in a local cache folder
(``$JUPYTER_AGENT_MEMORY_CACHE``, else ``$XDG_CACHE_HOME/jupyter-agent-memory``, else
``~/.cache/jupyter-agent-memory``), never inside an agent folder, and it can be deleted at
any time: it is rebuilt silently when it is missing, stale or corrupt. It holds two things:

* a **time map**: the journal cut into runs of whole lines (about 32 KiB each), with the
  smallest and largest ``ts`` of each run, for runs where every line is in our own layout
  (``{"ts":"<canonical ts>"`` first and no other ``ts`` key, the lines the byte-level window
  check of :class:`~jupyter_agent_memory.journal.plans._Window` may judge). A time window then
  reads only the runs it overlaps, plus every run holding any other line, plus the tail not
  mapped yet. When the whole mapped part is in time order (the usual case, checked line by
  line when it is mapped), finding them is two indexed look-ups, and the newest end of the
  window is found by bisecting the file itself; otherwise one pass over the run table.
* a **trigram full-text index** (SQLite FTS5, ``tokenize='trigram case_sensitive 1'``) of
  ``text.lower()`` for every entry whose ``text`` is a string, keyed by the line's byte offset.
  A substring query of at least 3 characters asks it for candidate lines, newest first; each
  is decoded and confirmed by the same exact matcher as every other search, so results are
  byte-identical to the scan. It is built only when enabled: by setting, or by size
  (``FTS_MIN_BYTES``).

Both are brought up to date from the journal's tail when a search needs them (the part not
indexed yet is always scanned directly, so an index that lags behind is never wrong). An index
is *stale* when the journal is a different file (device and inode), shorter than what was
indexed, or differs in the bytes fingerprinted at the start and at the end of the indexed
part; it is then dropped and rebuilt. The journal is append-only; an edit in the middle of the
file that keeps its size and both fingerprints is the one change this cannot notice.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from .. import environment
from .format import CORRUPT, decode_line
from .plans import layout_keys

__all__ = [
    "FTS_MIN_BYTES",
    "MAP_MIN_BYTES",
    "JournalIndex",
    "cache_dir",
    "index_setting",
]

# Below these sizes a scan is already fast, so no cache file is written at all.
MAP_MIN_BYTES = 1024 * 1024
FTS_MIN_BYTES = 64 * 1024 * 1024
# The time map's runs, and how much unindexed tail a search scans before it updates the
# full-text index (each update is a database transaction).
CHUNK_BYTES = 32 * 1024
TAIL_BYTES = 4 * 1024  # the unmapped tail a search scans before it maps it
FTS_LAG_BYTES = 256 * 1024
# An update of the full-text index at least this big (and at least as big as what was indexed
# before it) ends by merging the index into one segment.
OPTIMIZE_BYTES = 8 * 1024 * 1024
_READ_BLOCK = 4 * 1024 * 1024
_FINGERPRINT = 4096
_SCHEMA = 1

def cache_dir() -> Path:
    """The folder for derived caches (``$JUPYTER_AGENT_MEMORY_CACHE`` or the user cache)."""
    configured = environment.text(environment.CACHE)
    if configured:
        return Path(configured).expanduser()
    xdg = environment.text(environment.XDG_CACHE_HOME)
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "jupyter-agent-memory"


def index_setting(value: bool | None) -> bool | None:
    """The effective full-text setting: ``value``, else ``$JUPYTER_AGENT_MEMORY_INDEX``.

    True: always; False: never (the time map too); None: by size.
    """
    if value is not None:
        return bool(value)
    return environment.switch(environment.INDEX)


class _Connections(threading.local):
    def __init__(self) -> None:
        # path -> (pid, inode of the database file, connection, tables created)
        self.by_path: dict[str, list[object]] = {}


_connections = _Connections()


def _connect(path: Path) -> tuple[sqlite3.Connection, list[object]]:
    """A connection to ``path`` kept for this thread (SQLite connections are per thread),
    with its record; a database file deleted or replaced meanwhile gets a new connection."""
    key = os.fspath(path)
    held = _connections.by_path.get(key)
    if held is not None:
        try:
            inode = os.stat(key).st_ino
        except OSError:
            inode = -1
        if held[0] == os.getpid() and held[1] == inode:
            return held[2], held  # type: ignore[return-value]
        _forget(path)
    fd = os.open(key, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        inode = os.fstat(fd).st_ino
    finally:
        os.close(fd)
    conn = sqlite3.connect(key, isolation_level=None, timeout=5.0)
    try:
        # Derived data: durability does not matter (a damaged index is rebuilt), speed does.
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=OFF")
    except sqlite3.DatabaseError:
        conn.close()
        raise
    # [pid, inode, connection, tables created, journal version last found valid,
    #  (data_version, state) last read]
    record: list[object] = [os.getpid(), inode, conn, False, None, None]
    _connections.by_path[key] = record
    return conn, record


# (journal, agent folder, cache root, the two cache variables) -> the database path, or None
# when no cache may be used
_locations: dict[tuple[object, ...], Path | None] = {}


def _location(journal: Path, agent: Path, root: Path | None) -> Path | None:
    cache_settings = (
        environment.text(environment.CACHE),
        environment.text(environment.XDG_CACHE_HOME),
    )
    key = (journal, agent, root, *cache_settings)
    if key in _locations:
        return _locations[key]
    configured = os.fspath(root if root is not None else cache_dir())
    base = Path(os.path.realpath(configured))
    real_agent = Path(os.path.realpath(agent))
    db: Path | None = None
    if base != real_agent and real_agent not in base.parents:
        # (a cache inside the agent folder would become part of the memory: never)
        folder = base / "journal-index"
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError:
            return None  # not remembered: the folder may become writable later
        db = _db_path(base, journal)
    _locations[key] = db
    return db


def _db_path(base: Path, journal: Path) -> Path:
    name = hashlib.sha256(os.fsencode(os.path.abspath(journal))).hexdigest()[:32]
    return base / "journal-index" / f"{name}.sqlite"


def index_files(journal: Path, root: Path | None = None) -> list[Path]:
    """Every cache file the index of ``journal`` may have (none is created here).

    For forgetting: deleting them is always safe, the index is rebuilt when next needed.
    """
    base = Path(os.path.realpath(os.fspath(root if root is not None else cache_dir())))
    db = _db_path(base, journal)
    return [Path(f"{db}{suffix}") for suffix in ("", "-wal", "-shm", "-journal")]


def _forget(path: Path) -> None:
    held = _connections.by_path.pop(os.fspath(path), None)
    if held is not None:
        with contextlib.suppress(sqlite3.Error):
            held[2].close()  # type: ignore[attr-defined]


class JournalIndex:
    """The index of one journal file (see the module docstring).

    ``read(pos, size)`` reads the journal; ``st`` is its ``fstat`` taken when the search
    began (the search reads only up to that size). Every method may raise
    :class:`sqlite3.Error` or :class:`OSError`; callers then search without the index.
    """

    def __init__(self, db: Path, read: Callable[[int, int], bytes], st: os.stat_result) -> None:
        self.db = db
        self.read = read
        self.size = st.st_size
        self.mtime = st.st_mtime_ns
        self.identity = f"{st.st_dev}:{st.st_ino}"
        self.conn, self._record = _connect(db)
        self.state: dict[str, object] = {}
        self.full_text = False  # whether searches may use the trigram index

    @classmethod
    def open(
        cls,
        journal: Path,
        agent: Path,
        read: Callable[[int, int], bytes],
        st: os.stat_result,
        *,
        full_text: bool = False,
        root: Path | None = None,
    ) -> JournalIndex | None:
        """The index for ``journal`` (whose agent folder is ``agent``), or None when the
        cache folder cannot be used (missing permissions, inside the agent folder)."""
        db = _location(journal, agent, root)
        if db is None:
            return None
        try:
            try:
                index = cls(db, read, st)
                index._prepare()
            except sqlite3.DatabaseError:
                # Corrupt or not a database: rebuild from nothing.
                _forget(db)
                for suffix in ("", "-wal", "-shm"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(f"{db}{suffix}")
                index = cls(db, read, st)
                index._prepare()
        except (OSError, sqlite3.Error):
            return None
        index.full_text = full_text
        return index

    # -- state -----------------------------------------------------------------------------

    def _prepare(self) -> None:
        conn = self.conn
        if not self._record[3]:
            self._create_tables()
            self._record[3] = True
        # The stored state is read again only when another connection committed meanwhile
        # (``data_version`` changes then; this connection's own commits keep ``state`` in
        # step, and a rolled-back transaction forgets it).
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        cached = self._record[5]
        if isinstance(cached, tuple) and cached[0] == version:
            self.state = cached[1]
        else:
            self.state = dict(conn.execute("SELECT key, value FROM state").fetchall())
            self._record[5] = (version, self.state)
        if not self._still_valid():
            self._reset()

    def _create_tables(self) -> None:
        conn = self.conn
        conn.execute(
            "CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value) WITHOUT ROWID"
        )
        conn.execute(
            "CREATE TABLE IF NOT EXISTS runs (start INTEGER PRIMARY KEY, stop INTEGER, "
            "lo BLOB, hi BLOB, mapped INTEGER)"
        )
        conn.execute("CREATE INDEX IF NOT EXISTS runs_lo ON runs (lo)")
        conn.execute("CREATE INDEX IF NOT EXISTS runs_hi ON runs (hi)")
        conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS texts USING fts5(body, content='', "
            "tokenize='trigram case_sensitive 1')"
        )

    def _fingerprint(self, end: int) -> str:
        head = self.read(0, min(_FINGERPRINT, end))
        tail = self.read(max(0, end - _FINGERPRINT), min(_FINGERPRINT, end))
        return hashlib.sha256(head + b"\0" + tail).hexdigest()

    def _still_valid(self) -> bool:
        state = self.state
        if state.get("schema") != _SCHEMA or state.get("identity") != self.identity:
            return False
        # The fingerprints were checked for this very file version already (same size and
        # modification time, and the same ends indexed): no need to read them again.
        seen = (self.identity, self.size, self.mtime, state.get("map_end"), state.get("fts_end"))
        if self._record[4] == seen:
            return True
        for part in ("map", "fts"):
            end = self._state_int(f"{part}_end", 0)
            if end > self.size:
                return False
            if end and state.get(f"{part}_print") != self._fingerprint(end):
                return False
        self._record[4] = seen
        return True

    def _reset(self) -> None:
        conn = self.conn
        self._record[5] = None
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM runs")
            conn.execute("DELETE FROM texts")
            conn.execute("DELETE FROM state")
            self.state = {
                "schema": _SCHEMA,
                "identity": self.identity,
                "map_end": 0,
                "map_print": "",
                "map_sorted": 1,
                "map_hi": b"",
                "fts_end": 0,
                "fts_print": "",
            }
            conn.executemany("INSERT INTO state VALUES (?, ?)", list(self.state.items()))
            conn.execute("COMMIT")
        except BaseException:
            self._record[5] = None
            conn.execute("ROLLBACK")
            raise

    def _save(self, **values: object) -> None:
        self.state.update(values)
        self.conn.executemany(
            "INSERT OR REPLACE INTO state VALUES (?, ?)", list(values.items())
        )

    def _state_int(self, key: str, default: int | None = None) -> int:
        """An integer of the stored state; another type means the index file is not ours
        (a ``DatabaseError``, so the search goes on without the index)."""
        value = self.state.get(key, default)
        if not isinstance(value, int):
            raise sqlite3.DatabaseError(f"index state {key!r} is not an integer")
        return value

    def _state_bytes(self, key: str) -> bytes:
        """Bytes of the stored state (a ``DatabaseError`` when they are something else)."""
        value = self.state.get(key)
        if not isinstance(value, bytes):
            raise sqlite3.DatabaseError(f"index state {key!r} is not a blob")
        return value

    def _reload_in_transaction(self) -> None:
        """Another process may have updated the index meanwhile: continue from its state."""
        self.state = dict(self.conn.execute("SELECT key, value FROM state").fetchall())
        self._record[5] = None  # set again once this transaction commits
        if not self._still_valid():
            raise sqlite3.DatabaseError("index changed under us")

    def _whole_lines(self, start: int, stop: int) -> Iterator[tuple[int, bytes]]:
        """``(offset, block)`` of ``[start, stop)`` in big reads, each block whole lines only
        (ending in ``\\n``); a final part without a newline is not returned."""
        pos = start
        carry = b""
        while pos < stop:
            data = self.read(pos, min(_READ_BLOCK, stop - pos))
            if not data:
                return
            block = carry + data
            base = pos - len(carry)
            pos += len(data)
            cut = block.rfind(b"\n") + 1
            carry = block[cut:]
            if cut:
                yield base, block[:cut]

    # -- the time map ----------------------------------------------------------------------

    def update_map(self) -> int:
        """Map whole runs up to the end of the journal; returns where the mapped part ends."""
        end = self._state_int("map_end")
        if self.size - end < TAIL_BYTES:
            return end
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._reload_in_transaction()
            end = self._state_int("map_end")
            is_sorted = bool(self.state["map_sorted"])
            highest = self._state_bytes("map_hi")
            rows = []

            def add(start: int, run: bytes) -> None:
                nonlocal is_sorted, highest
                lo, hi, mapped, ordered = _summarise(run)
                if not mapped or not ordered or lo < highest:
                    is_sorted = False
                if mapped:
                    highest = max(highest, hi)
                rows.append((start, start + len(run), lo, hi, int(mapped)))

            pending, pending_base = b"", end
            for base, block in self._whole_lines(end, self.size):
                if pending:  # whole lines left over from the previous block
                    block, base = pending + block, pending_base
                pos = 0
                while len(block) - pos >= CHUNK_BYTES:
                    cut = block.find(b"\n", pos + CHUNK_BYTES - 1) + 1
                    add(base + pos, block[pos:cut])
                    pos = cut
                # The rest waits for the next block, or for more lines to make a whole run.
                pending, pending_base = block[pos:], base + pos
            if len(pending) >= TAIL_BYTES:
                # A shorter last run, so that a search scans at most a few KiB unmapped.
                add(pending_base, pending)
            if rows:
                conn.executemany("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?)", rows)
                end = rows[-1][1]
                self._save(
                    map_end=end,
                    map_print=self._fingerprint(end),
                    map_sorted=int(is_sorted),
                    map_hi=highest,
                )
            conn.execute("COMMIT")
        except BaseException:
            self._record[5] = None
            conn.execute("ROLLBACK")
            raise
        return end

    @property
    def in_order(self) -> bool:
        """Whether every mapped line is in our layout and the mapped part is in time order."""
        return bool(self.state["map_sorted"])

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[None]:
        """A read transaction on the index as it describes *our* journal: another process
        may have rebuilt it for a file that replaced ours since, or extended it past the
        part this search knows about (callers clip to their own end)."""
        conn = self.conn
        conn.execute("BEGIN")
        try:
            row = conn.execute("SELECT value FROM state WHERE key = 'identity'").fetchone()
            if row is None or row[0] != self.identity:
                raise sqlite3.DatabaseError("the index now describes another file")
            yield
        finally:
            conn.execute("COMMIT")

    def window_ranges(
        self, low: bytes | None, high: bytes | None, end: int
    ) -> list[tuple[int, int]]:
        """Byte ranges of the mapped part below ``end`` (where :meth:`update_map` said it
        ends) that may hold entries in ``[low, high]``, newest first; the caller scans the
        unmapped tail itself."""
        low_key = low if low is not None else b""
        high_key = high if high is not None else b"\xff"
        conn = self.conn
        with self._snapshot():
            if self.in_order:
                # Runs in order, every line mapped: the overlapping runs are contiguous.
                first = conn.execute(
                    "SELECT start FROM runs WHERE hi >= ? AND stop <= ? "
                    "ORDER BY hi, start LIMIT 1",
                    (low_key, end),
                ).fetchone()
                last = conn.execute(
                    "SELECT stop FROM runs WHERE lo <= ? AND stop <= ? "
                    "ORDER BY lo DESC, start DESC LIMIT 1",
                    (high_key, end),
                ).fetchone()
                if first is None or last is None or first[0] >= last[0]:
                    return []
                return [(first[0], last[0])]
            rows = conn.execute(
                "SELECT start, stop FROM runs WHERE (mapped = 0 OR (hi >= ? AND lo <= ?)) "
                "AND stop <= ? ORDER BY start DESC",
                (low_key, high_key, end),
            ).fetchall()
        merged: list[tuple[int, int]] = []
        for start, stop in rows:
            if merged and merged[-1][0] == stop:
                merged[-1] = (start, merged[-1][1])
            else:
                merged.append((start, stop))
        return merged

    # -- the full-text index ---------------------------------------------------------------

    def update_texts(self, *, lag: int | None = None) -> int:
        """Index the entries up to the end of the journal when more than ``lag`` bytes
        (default ``FTS_LAG_BYTES``) are not indexed yet; returns where the indexed part ends."""
        end = self._state_int("fts_end")
        if self.size - end <= (FTS_LAG_BYTES if lag is None else lag):
            return end
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._reload_in_transaction()
            end = self._state_int("fts_end")
            new_end = end
            for base, block in self._whole_lines(end, self.size):
                rows = []
                pos = base
                for line in block[:-1].split(b"\n"):
                    entry = decode_line(line)
                    if entry is not None and entry is not CORRUPT:
                        text = entry.get("text")
                        if isinstance(text, str):
                            # SQLite's tokenizer stops at NUL; queries with NUL take the
                            # scan, so any other character in its place loses no match.
                            rows.append((pos, text.lower().replace("\0", "\ufffd")))
                    pos += len(line) + 1
                conn.executemany("INSERT INTO texts (rowid, body) VALUES (?, ?)", rows)
                new_end = base + len(block)
            if new_end != end:
                self._save(fts_end=new_end, fts_print=self._fingerprint(new_end))
            if new_end - end >= OPTIMIZE_BYTES and new_end - end >= end:
                # A (re)build or a big catch-up leaves many segments, and a query reads each
                # of them: merging them into one costs a fifth of the build and makes queries
                # several times faster. Small updates are left to FTS5's own automerge.
                conn.execute("INSERT INTO texts (texts) VALUES ('optimize')")
            conn.execute("COMMIT")
        except BaseException:
            self._record[5] = None
            conn.execute("ROLLBACK")
            raise
        return new_end

    def text_candidates(self, needle: str, end: int) -> Iterator[int]:
        """Offsets below ``end`` (where :meth:`update_texts` said the indexed part ends) of
        the lines whose lowered text may contain ``needle``, newest first (``needle`` is
        lower-cased, at least 3 characters, no NUL)."""
        phrase = '"' + needle.replace('"', '""') + '"'
        with self._snapshot():
            # Lines past ``end`` (indexed by another process meanwhile) are skipped here:
            # a rowid bound in the query would cost FTS5 more than it saves.
            cursor = self.conn.execute(
                "SELECT rowid FROM texts WHERE texts MATCH ? ORDER BY rowid DESC", (phrase,)
            )
            batch = 24  # most searches stop at the limit (20): ask for little at first
            while True:
                rows = cursor.fetchmany(batch)
                if not rows:
                    return
                for (offset,) in rows:
                    if offset < end:
                        yield offset
                batch = min(batch * 4, 4096)


def fts_usable(needle: str) -> bool:
    """Whether the trigram index can narrow a search for ``needle`` (lower-cased)."""
    return len(needle) >= 3 and "\0" not in needle


def _summarise(run: bytes) -> tuple[bytes, bytes, bool, bool]:
    """``(lowest ts, highest ts, every line in our layout, lines in time order)`` of a run of
    whole lines."""
    keys = layout_keys(run, run.count(b"\n"))
    if keys is None:
        return b"", b"", False, False
    return min(keys), max(keys), True, keys == sorted(keys)
