"""Appending journal lines: one ``write`` under the lock, the disk flush after it.

:class:`JournalAppender` serves every append of one ``AgentMemory``. It keeps the agent folder,
``memory/`` and the journal open between appends and checks on each append, with a few
``stat`` calls, that they are still the very objects their paths name (nothing swapped in,
no symlink, no second hard link), reopening them when not. The lock is held only while the
line is written; the ``fsync`` that makes it durable runs after the lock is released, so
writers in several processes share disk flushes instead of queueing behind each other's.
``append`` returns only once the line is durable.

Failures leave the journal as it was: when the ``write`` fails part-way (a full disk, a file
size limit), the file is truncated back to its old size before the lock is released; when the
``fsync`` fails, the lock is taken again and the line is removed (truncated away when it is
still the last one; when other lines were appended after it, its bytes are overwritten with
spaces, which readers ignore as a blank line). So an error never leaves an entry behind, and a
retry never stores it twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

from .errors import UnsafePathError
from .paths import Folder, _full_fsync, _lock


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` (a regular file normally takes it in one ``write``)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _close_handles(handles: list[object]) -> None:
    for handle in reversed(handles):
        with contextlib.suppress(OSError):
            if isinstance(handle, Folder):
                handle.close()
            else:
                os.close(handle)  # type: ignore[arg-type]
    handles.clear()


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class JournalAppender:
    """Appends complete lines to ``<agent>/memory/<journal>`` (see the module docstring).

    ``memory_dir``, ``journal`` and ``lock`` are the canonical names (existing case variants
    are used, the exact name winning, as everywhere in the store).
    """

    def __init__(
        self,
        path: Path,
        *,
        memory_dir: str,
        journal: str,
        lock: str,
        lock_timeout: float | None,
        fsync: bool = True,
    ) -> None:
        self.path = path
        self.memory_dir = memory_dir
        self.journal = journal
        self.lock = lock
        self.lock_timeout = lock_timeout
        self.fsync = fsync
        self._mutex = threading.Lock()
        self._agent: Folder | None = None
        self._mem: Folder | None = None
        self._name = ""
        self._fd = -1
        self._lock_fd = -1
        self._paths: tuple[str, str] = ("", "")
        # Everything open, for the finalizer: descriptors must not outlive the AgentMemory.
        self._handles: list[object] = []
        self._finalizer = weakref.finalize(self, _close_handles, self._handles)

    def close(self) -> None:
        """Close the folders and the journal kept open between appends."""
        with self._mutex:
            self._drop()

    def _drop(self) -> None:
        _close_handles(self._handles)
        self._agent = self._mem = None
        self._fd = self._lock_fd = -1

    # -- handles ---------------------------------------------------------------------------

    def _still_valid(self) -> bool:
        """Whether every kept handle is still what its path names (8 stat calls)."""
        agent, mem, fd = self._agent, self._mem, self._fd
        if agent is None or mem is None or fd < 0:
            return False
        for path, held in zip(self._paths, (agent.fd, mem.fd), strict=True):
            try:
                named = os.lstat(path)
            except OSError:
                return False
            if not _same(named, os.fstat(held)):
                return False
        for name, held in ((self._name, fd), (self.lock, self._lock_fd)):
            named = mem.lstat(name)
            if named is None or not _same(named, os.fstat(held)):
                return False
        # A file with the exact name now wins over the case variant we hold.
        return self._name == self.journal or mem.lstat(self.journal) is None

    def _open(self) -> None:
        self._drop()
        try:
            self._open_all()
        except BaseException:
            self._drop()
            raise

    def _open_all(self) -> None:
        agent = Folder.open(self.path)
        self._handles.append(agent)
        memory_name = agent.lookup(self.memory_dir) or self.memory_dir
        mem = agent.subfolder(memory_name, create=True)
        self._handles.append(mem)
        name = mem.lookup(self.journal)
        created = name is None
        name = name or self.journal
        fd = mem.open_file(name, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        self._handles.append(fd)
        if created:
            mem.fsync()  # the new directory entry must be as durable as the line
        lock_fd = mem.open_file(self.lock, os.O_RDWR | os.O_CREAT)
        self._handles.append(lock_fd)
        self._agent, self._mem, self._name, self._fd = agent, mem, name, fd
        self._lock_fd = lock_fd
        self._paths = (os.fspath(self.path), os.fspath(mem.path))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The store's lock (``memory/.lock``), on the descriptor kept open for it."""
        assert self._mem is not None
        _lock(self._lock_fd, self.lock_timeout, self._mem.display(self.lock))
        try:
            yield
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _checked_fd(self) -> int:
        """The journal's descriptor, everything reopened when anything was swapped."""
        if not self._still_valid():
            self._open()
        return self._fd

    def _refuse_links(self, st: os.stat_result) -> None:
        if st.st_nlink > 1:
            assert self._mem is not None
            path = self._mem.display(self._name)
            raise UnsafePathError(
                f"Refusing to use {path}: it has {st.st_nlink} hard links; memory files "
                "must not share their data with another file"
            )

    # -- appending -------------------------------------------------------------------------

    def append(self, line: bytes) -> None:
        """Append ``line`` (one complete line ending in ``\\n``); return once it is durable."""
        with self._mutex:
            fd = self._checked_fd()
            with self._locked():
                st = os.fstat(fd)
                self._refuse_links(st)
                start = st.st_size
                data = line
                if start and os.pread(fd, 1, start - 1) != b"\n":
                    data = b"\n" + line  # a torn line: never glue the entry to it
                try:
                    _write_all(fd, data)
                except BaseException:
                    self._truncate(fd, start)
                    raise
            if not self.fsync:
                return
            # A descriptor of our own: another thread may reopen the shared one meanwhile.
            sync_fd = os.dup(fd)
        try:
            try:
                _full_fsync(sync_fd)
            except BaseException:
                self._undo(sync_fd, start, start + len(data), len(line))
                raise
        finally:
            os.close(sync_fd)

    @staticmethod
    def _truncate(fd: int, size: int) -> None:
        """Cut the journal back to ``size`` after a failed write (under the lock)."""
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_size > size:
                os.ftruncate(fd, size)
                os.fsync(fd)

    def _undo(self, fd: int, start: int, end: int, line_size: int) -> None:
        """Remove a line whose flush failed: truncate it away, or blank it when not last."""
        # Best effort: the flush error is what the caller must see, not a second one.
        with contextlib.suppress(Exception), self._mutex:
            self._checked_fd()
            mem = self._mem
            assert mem is not None
            with self._locked():
                size = os.fstat(fd).st_size
                if size == end:
                    os.ftruncate(fd, start)
                elif size > end:
                    # pwrite on an O_APPEND descriptor would append: use a plain one.
                    plain = mem.open_file(self._name, os.O_WRONLY)
                    try:
                        if os.fstat(plain).st_ino == os.fstat(fd).st_ino:
                            os.pwrite(plain, b" " * (line_size - 1), end - line_size)
                    finally:
                        os.close(plain)
                os.fsync(fd)
