"""``AgentMemory``: the files of one agent, and the only code that writes them.

Layout::

    <agent>/SOUL.md  USER.md  .template.json  .state.json
    <agent>/memory/FACT.md  JOURNAL.jsonl  .lock  .history/  .generation
    <agent>/memory/SESSIONS.jsonl  .sessions/  FORGET.jsonl  .forget-key

Every write holds the advisory lock ``memory/.lock`` (the innermost lock) once for all it
changes; files are replaced atomically and journal lines appended in one ``write``; nothing in
the agent folder is reached through a symlink. Other modules use :mod:`.access` and :func:`sweep`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import stat
import warnings
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from .. import environment, journal
from ..errors import (
    INTERNAL_ERROR,
    AgentNotFoundError,
    ContentTooLargeError,
    EmptyEditError,
    MemoryIOError,
    MemoryToolError,
    UnsafePathError,
    engine_boundary,
)
from ..folder import DEFAULT_LOCK_TIMEOUT, Folder, fsync_dir_path, retry_eintr, sha256_hex
from ..journal.append import JournalAppender
from ..journal.reader import DescriptorFile, JournalReader
from . import access, history, secrets, sessions
from .access import GENERATION, LOCK, MEMORY_DIR, Locked
from .arguments import coerce_time, normalize_limit
from .bootstrap import STATE_FILE
from .bootstrap import note_append as note_bootstrap_append
from .history import DEFAULT_HISTORY_LIMIT, HISTORY_DIR
from .paths import resolve_agent_id, resolve_target
from .sessions import DEFAULT_KEEP_BYTES, DEFAULT_KEEP_SESSIONS, Origin

SOUL = "SOUL.md"
USER = "USER.md"
FACT = "FACT.md"
JOURNAL = "JOURNAL.jsonl"
TEMPLATE_RECORD = ".template.json"
FORGET_RECEIPTS = "FORGET.jsonl"
#: The per-agent secret that keys the hash in forget receipts (0600, never leaves the folder).
FORGET_KEY = ".forget-key"

# One limit for FACT.md, SOUL.md, USER.md and each journal entry, whatever surface sends it:
# memory goes into every prompt, so a runaway write must fail loudly.
DEFAULT_MAX_BYTES = 1024 * 1024
_T = TypeVar("_T")
# Temp files are named by Folder.write_atomic: "." + target name + "." + 16 hex + ".tmp".
_TEMP_NAME = re.compile(r"^\.(?P<target>.+)\.[0-9a-f]{16}\.tmp$")


class WriteResult(str):
    """What a write stored: its sha256 (the ``str`` itself), plus ``previous_sha256`` (of the
    bytes it replaced, read under the same lock) and ``path`` (the file as named on disk)."""

    previous_sha256: str
    path: Path

    def __new__(cls, sha256: str, previous_sha256: str, path: Path) -> WriteResult:
        result = super().__new__(cls, sha256)
        result.previous_sha256 = previous_sha256
        result.path = path
        return result

    @property
    def sha256(self) -> str:
        """The new content's sha256 (the same as ``str(self)``)."""
        return str(self)


class CorruptJournalWarning(UserWarning):
    """Some journal lines could not be parsed and were skipped."""


def _guard_public(cls: type[_T]) -> type[_T]:
    """Put the public methods and properties of ``cls`` but ``_UNGUARDED`` behind the boundary."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_") or name in _UNGUARDED:
            continue
        if isinstance(member, property) and member.fget is not None:
            setattr(cls, name, member.getter(engine_boundary(member.fget)))
        elif isinstance(member, classmethod):
            setattr(cls, name, classmethod(engine_boundary(member.__func__)))
        elif callable(member):
            setattr(cls, name, engine_boundary(member))
    return cls


_UNGUARDED = frozenset({"now", "exists", "close", "entries"})


@_guard_public
class AgentMemory:
    """The long-term memory of one agent: a folder of plain files. Create with :meth:`open`;
    a missing file reads as ``''``; every write is atomic and locked.

    >>> mem = AgentMemory.open("./demo-agent")          # doctest: +SKIP
    >>> mem.update_facts("- The user prefers metric units.\\n")  # doctest: +SKIP
    """

    def __init__(
        self, path: str | os.PathLike[str], *, agent_id: str | None = None,
        root: str | os.PathLike[str] | None = None, fsync_appends: bool = True,
        history_limit: int = DEFAULT_HISTORY_LIMIT, clock: Callable[[], datetime] | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES, lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT,
        journal_index: bool | None = None, keep_sessions: int = DEFAULT_KEEP_SESSIONS,
        keep_session_bytes: int = DEFAULT_KEEP_BYTES, secret_guard: bool = True,
    ) -> None:
        self.path = Path(path)
        self.agent_id = agent_id
        self.root = Path(root) if root is not None else self.path.parent
        self.fsync_appends = fsync_appends
        self.history_limit = max(1, int(history_limit))
        self.clock = clock  # injectable, so simulations can run on their own timeline
        self.max_bytes = max(1, int(max_bytes))
        self.lock_timeout = lock_timeout
        self.keep_sessions = max(1, int(keep_sessions))  # session retention (sessions.py)
        self.keep_bytes = max(1, int(keep_session_bytes))
        self.secret_guard = secret_guard  # refuse writes holding credentials (secrets.py)
        self.journal_index = journal_index  # index: True kept up to date, False unused, None: env
        self._journal_path = self.path / MEMORY_DIR / JOURNAL  # kept: searches can cost less

    def now(self) -> datetime:
        """The current time as this agent sees it (UTC): ``clock()`` when one was given."""
        if self.clock is None:
            return datetime.now(timezone.utc)
        moment = self.clock()
        return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)

    def exists(self) -> bool:
        """Whether the agent folder exists (as anything: a link or file is refused later)."""
        return os.path.lexists(self.path)

    @classmethod
    def open(
        cls, target: str | os.PathLike[str] | None = None,
        root: str | os.PathLike[str] | None = None, *, create: bool = True, **options: Any,
    ) -> AgentMemory:
        """Open an agent by id (under ``root``) or folder path (:func:`.paths.resolve_target`),
        creating its layout; with ``create=False``, a missing folder is AgentNotFoundError."""
        path, agent_id, base = resolve_target(target, root)
        return cls(path, agent_id=agent_id, root=base, **options)._checked(create)

    @classmethod
    def open_id(
        cls, agent_id: str, root: str | os.PathLike[str] | None = None, *, create: bool = True,
        **options: Any,
    ) -> AgentMemory:
        """Open the agent ``agent_id`` under ``root``, even an id that looks like a path."""
        path, base = resolve_agent_id(agent_id, root)
        return cls(path, agent_id=agent_id, root=base, **options)._checked(create)

    def _checked(self, create: bool) -> AgentMemory:
        if create:
            self.ensure_layout()
        elif not self.exists():
            raise AgentNotFoundError(self.path, self.agent_id)
        self.check_folder()  # a tampered folder is refused at once, not at its first write
        return self

    def __repr__(self) -> str:
        label = self.agent_id if self.agent_id is not None else str(self.path)
        return f"<AgentMemory {label!r} at {self.path}>"

    def ensure_layout(self) -> None:
        """Create the folder, ``memory/`` and empty SOUL.md/USER.md (unless a case variant of
        the name exists); sweep crash leftovers. Idempotent and safe in several processes."""
        _make_durable_dir(self.root)
        with contextlib.suppress(FileExistsError):
            retry_eintr(os.mkdir, self.path, 0o700)
            # The agent's entry in the root must be on disk before its first write counts.
            fsync_dir_path(self.path.parent)
        with Folder.open(self.path) as agent:
            names = agent.names()
            new = [agent.create_empty(n) for n in (SOUL, USER) if agent.lookup(n, names) is None]
            if any(new):
                agent.fsync()
            memory_name = agent.lookup(MEMORY_DIR, names) or MEMORY_DIR
            with (
                agent.subfolder(memory_name, create=True) as mem,
                mem.locked(LOCK, self.lock_timeout),
            ):
                sweep(agent, mem)

    def check_folder(self) -> None:
        """Raise unless SOUL.md and USER.md are regular files or missing (Cherry Studio's rule):
        a prompt-injected model cannot keep working in a tampered folder."""
        with contextlib.suppress(FileNotFoundError), Folder.open(self.path) as agent:
            names = agent.names()
            for name in filter(None, (agent.lookup(c, names) for c in (SOUL, USER))):
                st = agent.lstat(name)
                if st is not None and not stat.S_ISREG(st.st_mode):
                    raise UnsafePathError(
                        f"Agent data file must be a real file: {agent.display(name)}"
                    )

    def file_path(self, canonical: str) -> Path:
        """Where SOUL.md, USER.md, FACT.md or JOURNAL.jsonl is on disk (matched ignoring case;
        a missing file gets its canonical name). Nothing is created."""
        if canonical not in (SOUL, USER, FACT, JOURNAL):
            raise MemoryToolError(f"Not a memory file: {canonical!r}")
        inside_memory = canonical in (FACT, JOURNAL)
        with contextlib.suppress(FileNotFoundError), access.folders(self) as (agent, mem):
            if not inside_memory:
                return agent.display(agent.lookup(canonical) or canonical)
            if mem is not None:
                return mem.display(mem.lookup(canonical) or canonical)
        return self.path / (f"{MEMORY_DIR}/{canonical}" if inside_memory else canonical)

    def _read_fact_bytes(self) -> bytes:
        return access.read_memory(self, lambda mem: mem.read_bytes(mem.lookup(FACT)), None) or b""

    @property
    def facts(self) -> str:
        """Current FACT.md text (``''`` when missing)."""
        return _decode(self._read_fact_bytes())

    @property
    def soul(self) -> str:
        """Current SOUL.md text (``''`` when missing)."""
        return _decode(access.read_agent_bytes(self, SOUL))

    @property
    def user(self) -> str:
        """Current USER.md text (``''`` when missing)."""
        return _decode(access.read_agent_bytes(self, USER))

    def read_facts(self) -> tuple[str, str]:
        """FACT.md text and the sha256 of those very bytes (an editor's ``expected_sha256``)."""
        return _with_hash(self._read_fact_bytes())

    def read_soul(self) -> tuple[str, str]:
        """SOUL.md text and the sha256 of those very bytes, from one read."""
        return _with_hash(access.read_agent_bytes(self, SOUL))

    def read_user(self) -> tuple[str, str]:
        """USER.md text and the sha256 of those very bytes, from one read."""
        return _with_hash(access.read_agent_bytes(self, USER))

    @property
    def facts_sha256(self) -> str:
        """sha256 of FACT.md as on disk (of ``b''`` when missing): the CAS token for editors."""
        return sha256_hex(self._read_fact_bytes())

    @property
    def soul_sha256(self) -> str:
        """sha256 of SOUL.md as on disk (of ``b''`` when missing)."""
        return sha256_hex(access.read_agent_bytes(self, SOUL))

    @property
    def user_sha256(self) -> str:
        """sha256 of USER.md as on disk (of ``b''`` when missing)."""
        return sha256_hex(access.read_agent_bytes(self, USER))

    def file_sizes(self) -> dict[str, int]:
        """``lstat`` sizes of SOUL.md, USER.md, FACT.md and JOURNAL.jsonl (-1 when missing)."""
        sizes = {}
        for canonical in (SOUL, USER, FACT, JOURNAL):
            try:
                sizes[canonical] = os.lstat(self.file_path(canonical)).st_size
            except FileNotFoundError:
                sizes[canonical] = -1
        return sizes

    def file_stats(self) -> dict[str, os.stat_result]:
        """``lstat`` of every entry of the agent folder and ``memory/`` but the lock (keys as
        on disk: ``"memory/FACT.md"``); no link followed, ``{}`` when the folder is missing."""
        stats: dict[str, os.stat_result] = {}
        try:
            with Folder.open(self.path) as agent:
                names = agent.names()
                stats.update((n, st) for n in names if (st := agent.lstat(n)) is not None)
                memory_name = agent.lookup(MEMORY_DIR, names)
                if memory_name is not None:
                    with agent.subfolder(memory_name) as mem:
                        found = ((n, mem.lstat(n)) for n in mem.names() if n != LOCK)
                        stats.update((f"{memory_name}/{n}", st) for n, st in found if st)
        except FileNotFoundError:
            return {}
        return stats

    def update_facts(self, text: str, expected_sha256: str | None = None) -> WriteResult:
        """Atomically replace FACT.md (compare-and-swap with ``expected_sha256``), keeping the
        previous non-empty content in ``memory/.history/``; returns its :class:`WriteResult`."""
        data = encode_text(text, "content", self.max_bytes, self.secret_guard)
        with access.locked(self) as txn:
            return self._replace_facts(txn, data, expected_sha256)

    def _replace_facts(self, txn: Locked, data: bytes, expected: str | None) -> WriteResult:
        """Replace FACT.md with ``data`` under the held lock (see :meth:`update_facts`)."""
        mem = txn.memory
        name = mem.lookup(FACT) or FACT
        mem.require_replaceable(name)
        current = mem.read_bytes(name) or b""
        result = WriteResult(sha256_hex(data), sha256_hex(current), mem.display(name))
        # Compared even when the text is already there (see access.replace_agent_file).
        access.check_expected(mem.display(name), expected, current)
        if current == data:  # flushed again, so the content is durable when this returns
            mem.fsync()
            return result
        if not current:
            access.commit(mem, name, data, txn.recheck)
            return result
        # The old version is kept before FACT.md is replaced, and dropped if that fails.
        new_folder = mem.lookup(HISTORY_DIR) is None
        try:
            with mem.subfolder(HISTORY_DIR, create=True) as versions:
                kept = history.keep(versions, current, self.now(), txn.recheck)
                try:
                    access.commit(mem, name, data, txn.recheck)
                except MemoryIOError:
                    raise  # FACT.md was replaced: the version kept is the one it replaced
                except BaseException:
                    history.discard(versions, kept)
                    raise
                # The update took effect: an extra old version is harmless, an error is not.
                with contextlib.suppress(OSError):
                    history.prune(versions, self.history_limit)
        except MemoryIOError:
            raise
        except BaseException:
            if new_folder:
                with contextlib.suppress(OSError):
                    retry_eintr(os.rmdir, HISTORY_DIR, dir_fd=mem.fd)
            raise
        return result

    def _versions(self) -> list[history.Version]:
        """Stored FACT.md versions, newest first."""
        return access.read_memory(self, history.versions, [], HISTORY_DIR)

    def history(self) -> list[dict[str, Any]]:
        """Previous FACT.md versions, newest first: ``{"ts", "sha256", "size"}`` each."""
        return [
            {"ts": v.ts, "sha256": sha256_hex(v.content), "size": len(v.content)}
            for v in self._versions()
        ]

    def history_version(self, sha: str) -> tuple[str, str]:
        """``(full sha256, text)`` of the FACT.md version ``sha`` names (:func:`.history.find`)."""
        digest, content = history.find(self._versions(), sha)
        return digest, _decode(content)

    def history_text(self, sha: str) -> str:
        """Text of the stored FACT.md version named by a full sha256 or unique prefix (>= 7)."""
        return self.history_version(sha)[1]

    def restore(self, sha: str) -> WriteResult:
        """Make a stored FACT.md version current again, found and written under one hold of
        the lock (a version a forget scrubbed meanwhile is never written back)."""
        with access.locked(self) as txn:
            stored: list[history.Version] = []
            if txn.memory.lookup(HISTORY_DIR) is not None:
                with txn.memory.subfolder(HISTORY_DIR) as folder:
                    stored = history.versions(folder)
            _digest, content = history.find(stored, sha)
            data = encode_text(_decode(content), "content", self.max_bytes, self.secret_guard)
            return self._replace_facts(txn, data, None)

    def write_soul(self, text: str, expected_sha256: str | None = None) -> WriteResult:
        """Atomically replace SOUL.md (optionally compare-and-swap); returns its sha256."""
        return self._write_agent_file(SOUL, text, expected_sha256)

    def write_user(self, text: str, expected_sha256: str | None = None) -> WriteResult:
        """Atomically replace USER.md (optionally compare-and-swap); returns its sha256."""
        return self._write_agent_file(USER, text, expected_sha256)

    def _write_agent_file(self, canonical: str, text: str, expected: str | None) -> WriteResult:
        data = encode_text(text, "content", self.max_bytes, self.secret_guard)
        previous, path = access.replace_agent_file(self, canonical, data, expected)
        return WriteResult(sha256_hex(data), previous, path)

    def replace_if_stock(self, canonical: str, data: bytes, stock_sha256: Iterable[str]) -> bool:
        """Write SOUL.md/USER.md when missing, empty or a known stock file; True when written."""
        stock = {s.lower() for s in stock_sha256}
        with access.locked(self) as txn:
            agent = txn.agent
            name = agent.lookup(canonical) or canonical
            agent.require_replaceable(name)
            current = agent.read_bytes(name)
            if (current and sha256_hex(current) not in stock) or current == data:
                return False
            access.commit(agent, name, data, txn.recheck)
            return True

    def write_template_record(self, record: dict[str, Any]) -> None:
        """Write ``.template.json`` (which template this agent came from)."""
        data = (json.dumps(record, indent=2, ensure_ascii=False) + "\n").encode()
        with access.locked(self) as txn:
            access.commit(txn.agent, TEMPLATE_RECORD, data, txn.recheck)

    def template_info(self) -> dict[str, Any] | None:
        """Contents of ``.template.json``, or None when the agent has no template record."""
        raw = access.read_agent_bytes(self, TEMPLATE_RECORD)
        try:
            record = json.loads(raw) if raw else None
        except ValueError:
            return None
        return record if isinstance(record, dict) else None

    def append(self, text: str, tags: Iterable[str] = ()) -> dict[str, Any]:
        """Add one journal entry in one locked ``write``; returns ``{"ts", "tags", "text"}``.
        Durable unless ``fsync_appends`` is off; on failure the journal is left as it was."""
        if not isinstance(text, str) or not text:
            raise MemoryToolError("'text' is required for append action")
        encode_text(text, "text", self.max_bytes, self.secret_guard)
        kept = [tags] if isinstance(tags, str) else [t for t in tags if isinstance(t, str)]
        tags_size = sum(len(encode_text(tag, "tags", None, self.secret_guard)) for tag in kept)
        if tags_size > self.max_bytes:
            raise ContentTooLargeError("tags", tags_size, self.max_bytes)
        entry = {"ts": journal.format_timestamp(self.now()), "tags": kept, "text": text}
        line = journal.encode_line(entry)
        keep_index = self._keeps_index()  # before writing: a bad setting must write nothing
        appender = self._journal_appender()
        appender.fsync = self.fsync_appends
        appender.lock_timeout = self.lock_timeout
        before = access.generation_of(self)
        try:
            appender.append(line)
        except OSError:
            if not self._carried_by_forget(before, line):
                raise
        note_bootstrap_append(self, entry)  # a `bootstrap`-tagged entry completes bootstrap
        if keep_index:
            self._index_in_background()
        return entry

    def _carried_by_forget(self, before: str, line: bytes) -> bool:
        """After a failed append: whether a forget carried the line into the journal it flushed."""
        if access.generation_of(self) == before:
            return False
        with access.locked(self) as txn:
            data = txn.memory.read_bytes(txn.memory.lookup(JOURNAL))
            return data is not None and (data.startswith(line) or b"\n" + line in data)

    def _journal_appender(self) -> JournalAppender:
        """The appender of this agent (kept, with its open folders, between appends)."""
        return self._kept("_appender", lambda: JournalAppender(
            self.path, memory_dir=MEMORY_DIR, journal=JOURNAL, lock=LOCK,
            lock_timeout=self.lock_timeout, fsync=self.fsync_appends,
        ))

    def _kept(self, key: str, make: Callable[[], _T]) -> _T:
        """The handle kept under ``key`` (made on first use; :meth:`close` releases it)."""
        held: _T | None = self.__dict__.get(key)
        return held if held is not None else self.__dict__.setdefault(key, make())

    def close(self) -> None:
        """Release the descriptors kept open between appends and searches (reopened on use)."""
        for held in ("_appender", "_reader"):
            handle = self.__dict__.get(held)
            if handle is not None:
                handle.close()

    def _journal_reader(self) -> JournalReader:
        """The reader of this agent's journal (kept, with its open folders, between reads)."""
        return self._kept(
            "_reader", lambda: JournalReader(self.path, memory_dir=MEMORY_DIR, journal=JOURNAL)
        )

    @contextlib.contextmanager
    def _journal_file(self) -> Iterator[Any]:
        """The journal opened for binary reading, or None when it does not exist."""
        with self._journal_reader().opened() as fd:
            yield None if fd is None else DescriptorFile(fd)

    def search_journal(
        self, query: str = "", tag: str = "", limit: int = 20,
        since: datetime | str | None = None, until: datetime | str | None = None,
    ) -> journal.SearchResult | None:
        """Like :meth:`search`, but None when the journal file does not exist."""
        since_time, until_time = coerce_time(since, "since"), coerce_time(until, "until")
        for value, field in ((query, "query"), (tag, "tag")):
            if value:
                encode_text(value, field)  # no index or file could hold a lone surrogate
        with self._journal_file() as handle:
            if handle is None:
                return None
            result = journal.search(
                handle, query=query or "", tag=tag or "", limit=normalize_limit(limit),
                since=since_time, until=until_time, index=self._open_index,
            )
        if result.skipped:
            warnings.warn(
                f"Skipped {result.skipped} corrupted line(s) of {result.scanned} read in "
                f"{self._journal_path}", CorruptJournalWarning, stacklevel=3,
            )
        return result

    def generation(self) -> str:
        """The token in ``memory/.generation`` each forget replaces (else ``""``)."""
        return access.generation_of(self)

    def build_index(self, *, background: bool = False) -> dict[str, Any]:
        """Build or update the journal's index in the cache folder (a thread with ``background``),
        registered in ``memory/.indexes.json``; returns :meth:`index_status`."""
        index = _index_module()
        db = self._index_db()
        if db is None:
            raise MemoryToolError(
                f"Cannot index the journal: the cache folder {index.cache_dir()} is inside the "
                f"agent folder {self.path} (set ${environment.CACHE} to another folder)",
                INTERNAL_ERROR,
            )
        if background:
            index.in_background(os.fspath(db), self._build_index_now)
        else:
            try:
                self._build_index_now()
            except index.INDEX_ERRORS as exc:
                raise MemoryToolError(
                    f"Cannot build the journal index {db}: {exc}", INTERNAL_ERROR
                ) from exc
        return self.index_status()

    def _build_index_now(self) -> None:
        index = _index_module()
        db = self._index_db()
        if db is None:
            return
        with contextlib.ExitStack() as stack:
            _agent, mem = stack.enter_context(access.folders(self))
            if mem is None:
                return
            # Under the lock: the generation goes with the journal, registered before built.
            with access.locked(self) as held:
                generation = access.read_generation(held.memory.read_bytes(GENERATION))
                index.register(held.memory, db, held.recheck)
                handle = stack.enter_context(self._journal_file())
            if handle is not None:
                index.build(db, handle, generation, generation_now=self.generation)

    def drop_index(self) -> dict[str, Any]:
        """Delete this agent's journal indexes; returns ``{"dropped": [paths]}``."""
        index = _index_module()
        return {"dropped": [str(p) for p in index.drop_registered(*self._index_places())]}

    def index_files(self) -> list[Path]:
        """Every existing file of this agent's journal indexes (registered and this process's)."""
        index = _index_module(required=False)
        return [] if index is None else index.registered_index_files(*self._index_places())

    def index_status(self) -> dict[str, Any]:
        """The journal index as this process sees it: ``{"path", "state", "indexed_bytes",
        "journal_bytes", "size_bytes", "building", "keep", "registered", "error"}`` (``state``:
        ``"missing"``, ``"stale"``, ``"behind"`` or ``"ready"``). Creates nothing."""
        index = _index_module()
        db = self._index_db()
        with self._journal_file() as handle:
            status = index.describe(db, handle, self.generation())
        key = os.fspath(db) if db is not None else ""
        status.update(
            building=index.building(key), keep=self._keeps_index(),
            registered=[str(p) for p in index.registered_index_files(self._index_places()[0])],
            error=index.last_error(key),
        )
        return status

    def _index_db(self, index: Any = None) -> Path | None:
        """The index database in this process's cache folder (None when unusable)."""
        return (index or _index_module()).index_path(self._journal_path, self.path)

    def _index_places(self) -> tuple[Path, Path | None]:
        """``memory/`` as named on disk (its registry of indexes), and :meth:`_index_db`."""
        return self.file_path(JOURNAL).parent, self._index_db()

    def _keeps_index(self) -> bool:
        """Whether the keep-up-to-date setting is on (-32602 for a bad environment value)."""
        if self.journal_index is not None:
            return bool(self.journal_index)
        index = _index_module(required=False)
        return index is not None and index.keep_setting(None) is True

    def _index_in_background(self) -> None:
        db = self._index_db()
        if db is not None:
            _index_module().in_background(os.fspath(db), self._build_index_now)

    def _open_index(self, read: Callable[[int, int], bytes], st: os.stat_result) -> Any:
        """The journal's index for a search, or None (with the keep setting on, a missing or
        lagging one is updated in the background): a ``journal.IndexOpener``."""
        index = _index_module(required=False)
        keep = index.keep_setting(self.journal_index) if index is not None else False
        db = self._index_db(index) if keep is not False else None
        if db is None:
            return None
        view = index.open_view(db, read, st, self._held_generation)
        if keep and (view is None or view.end < st.st_size):
            self._index_in_background()
        return view

    def _held_generation(self) -> str:
        """:meth:`generation`, read through the folder the journal's reader holds."""
        return access.read_generation(self._journal_reader().read_companion(GENERATION))

    def search(
        self, query: str = "", tag: str = "", limit: int = 20,
        since: datetime | str | None = None, until: datetime | str | None = None,
    ) -> journal.SearchResult:
        """Journal entries matching all filters, newest first (at most ``limit``): ``query`` a
        case-insensitive substring, ``tag`` a tag ignoring case, ``since``/``until`` inclusive
        (ISO-8601 or datetimes, UTC by default). Bad lines warn and are skipped."""
        result = self.search_journal(query, tag, limit, since, until)
        return result if result is not None else journal.SearchResult()

    def entries(self) -> Iterator[dict[str, Any]]:
        """Every journal entry, oldest first (corrupted lines skipped)."""
        try:
            with self._journal_file() as handle:
                if handle is not None:
                    yield from journal.iter_entries(handle)
        except MemoryToolError:
            raise
        except OSError as exc:  # the engine boundary, for a generator
            raise MemoryIOError(exc) from exc

    def tag_counts(self) -> dict[str, int]:
        """Every journal tag (spelled as first seen) → count, grouped as a tag search compares."""
        counts: dict[str, int] = {}
        spelling: dict[str, str] = {}
        for entry in self.entries():
            tags = entry.get("tags")
            for tag in tags if isinstance(tags, list) else ():
                if isinstance(tag, str):
                    key = spelling.setdefault(tag.lower(), tag)
                    counts[key] = counts.get(key, 0) + 1
        return counts

    def sessions(self) -> list[dict[str, Any]]:
        """Receipts of recorded session starts, newest first."""
        return sessions.receipts(self)

    def session_prompt(self, session_id: str) -> str:
        """The exact system prompt a recorded session started with (id or 6+ digit prefix)."""
        return sessions.prompt_text(self, session_id)

    def diff_sessions(self, first: str, second: str) -> str:
        """A unified diff between two recorded sessions' prompts ("" when identical)."""
        return sessions.diff(self, first, second)

    def why(self, session_id: str, text: str) -> list[Origin]:
        """Where each line of a recorded prompt containing ``text`` came from."""
        return sessions.why(self, session_id, text)

    def call_tool(self, args: dict[str, Any]) -> str:
        """Run the ``memory`` tool with ``args``; returns its exact result text."""
        from .tool import call_tool

        return call_tool(self, args)


def check_edit_body(text: str) -> str:
    """The guard of the human editing surfaces: a FACT.md empty after trimming is refused (an
    empty editor buffer is almost always an accident; the ``memory`` tool refuses only ``""``)."""
    if not isinstance(text, str) or not text.strip():
        raise EmptyEditError()
    return text


def encode_text(
    text: str, field: str, max_bytes: int | None = None, refuse_secrets: bool = False
) -> bytes:
    """``text`` as UTF-8 (every written text goes through here); -32602 for a lone surrogate,
    more than ``max_bytes``, or with ``refuse_secrets`` a credential (:mod:`.secrets`)."""
    if not isinstance(text, str):
        raise MemoryToolError(f"'{field}' must be a string")
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MemoryToolError(
            f"'{field}' is not valid Unicode text: lone surrogate "
            f"U+{ord(text[exc.start]):04X} at position {exc.start}"
        ) from None
    if max_bytes is not None and len(data) > max_bytes:
        raise ContentTooLargeError(field, len(data), max_bytes)
    if refuse_secrets:
        secrets.refuse(text, field)
    return data


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _with_hash(data: bytes) -> tuple[str, str]:
    return _decode(data), sha256_hex(data)


def _index_module(required: bool = True) -> Any:
    """The journal index module (-32603 without ``sqlite3``, or None when not ``required``).
    Always imported: only ``import`` waits for a module another thread is still executing."""
    try:
        from ..journal import index
    except ImportError as exc:
        if not required:
            return None
        raise MemoryToolError(
            f"The journal index needs Python's sqlite3 module: {exc}", INTERNAL_ERROR
        ) from None
    return index


def _one_of(names: Iterable[str]) -> Callable[[str], bool]:
    """Whether a name is one of ``names``, compared ignoring case (as lookups are)."""
    folded = frozenset(name.casefold() for name in names)
    return lambda name: name.casefold() in folded


# The files each folder's atomic writes target.
_AGENT_FILES = _one_of((SOUL, USER, TEMPLATE_RECORD, STATE_FILE))
_MEMORY_FILES = _one_of((FACT, JOURNAL, sessions.SESSIONS_LOG, FORGET_RECEIPTS, GENERATION,
                         FORGET_KEY, journal.INDEX_REGISTRY))


def _sweep_temp_files(folder: Folder, ours: Callable[[str], object]) -> None:
    """Remove regular temp files crashed :meth:`Folder.write_atomic` calls left for ``ours``."""
    for name in folder.names():
        match = _TEMP_NAME.match(name)
        st = folder.lstat(name) if match and ours(match.group("target")) else None
        if st is not None and stat.S_ISREG(st.st_mode):
            folder.unlink(name)


def sweep_leftovers(folder: Folder, names: Iterable[str]) -> None:
    """Remove temp files crashed atomic writes of ``names`` left (provisioning's files)."""
    _sweep_temp_files(folder, _one_of(names))


def sweep(agent: Folder, memory: Folder) -> None:
    """Remove what crashed writes of ours left in the agent folder (under the lock)."""
    _sweep_temp_files(agent, _AGENT_FILES)
    _sweep_temp_files(memory, _MEMORY_FILES)
    if memory.lookup(HISTORY_DIR) is not None:
        with memory.subfolder(HISTORY_DIR) as versions:
            _sweep_temp_files(versions, history.VERSION_NAME.match)
    if memory.lookup(sessions.BLOBS_DIR) is not None:
        with memory.subfolder(sessions.BLOBS_DIR) as blobs:
            _sweep_temp_files(blobs, sessions.BLOB_NAME.match)


def _make_durable_dir(path: Path) -> None:
    """``mkdir -p`` (0700) whose new entries are each flushed into their parent folder."""
    missing = list(itertools.takewhile(lambda p: not os.path.lexists(p), (path, *path.parents)))
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    for made in reversed(missing):
        fsync_dir_path(made.parent)
