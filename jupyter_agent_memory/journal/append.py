"""Appending journal lines: one ``write`` under the lock, the ``fsync`` after it (so writers
in several processes flush together); the folders and journal stay open, checked by ``stat``.

A failed append leaves no entry behind: a failed ``write`` is truncated away under the lock; a
failed ``fsync`` takes the lock again and truncates the line (or blanks it with spaces when no
longer last). So a retry never stores it twice.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from ..errors import UnsafePathError
from ..folder import Folder, acquire_lock, close_fd, full_fsync, lock_wait_deadline, write_all
from .reader import KeptJournal, identity


class JournalAppender(KeptJournal):
    """Appends complete lines to the journal (see the module docstring); ``lock`` is the
    canonical name of the lock file in ``memory/``."""

    def __init__(
        self, path: Path, *, memory_dir: str, journal: str, lock: str,
        lock_timeout: float | None, fsync: bool = True
    ) -> None:
        super().__init__(path, memory_dir=memory_dir, journal=journal)
        self.lock = lock
        self.lock_timeout = lock_timeout
        self.fsync = fsync
        self._lock_fd = -1
        self._lock_path = path
        # Per journal descriptor, the writes good and failed flushes covered (_flush_written).
        self._flush_mutex = threading.Lock()
        self._opened = 0
        self._written = (0, 0)
        self._durable = (0, 0)
        self._failed: dict[int, int] = {}

    def _drop(self) -> None:
        super()._drop()
        self._lock_fd = -1

    def _still_valid(self) -> bool:
        """Whether every kept handle is still what its path names."""
        mem = self._mem
        if mem is None or self._lock_fd < 0:
            return False
        if self._fd < 0:  # no journal yet: valid while there still is none
            return mem.lookup(self.journal) is None
        try:
            if not self._folders_unchanged():
                return False
            for name, held in ((self.lock, self._ids[2]), (self._name, self._ids[3])):
                if identity(os.stat(name, dir_fd=mem.fd, follow_symlinks=False)) != held:
                    return False
        except OSError:
            return False
        return self._exact_name_held(mem)

    def _open(self) -> None:
        self._drop()
        try:
            agent = Folder.open(self.path)
            self._handles.append(agent)
            mem = agent.subfolder(agent.lookup(self.memory_dir) or self.memory_dir, create=True)
            self._handles.append(mem)
            lock_fd = mem.open_file(self.lock, os.O_RDWR | os.O_CREAT)
            self._handles.append(lock_fd)
            self._mem, self._lock_fd = mem, lock_fd
            self._keep(agent, mem, lock_fd)
            self._lock_path = mem.display(self.lock)
            name = mem.lookup(self.journal)
            if name is not None:  # a missing journal is created under the lock, by append
                self._use_journal(name, mem.open_file(name, os.O_RDWR | os.O_APPEND))
        except BaseException:
            self._drop()
            raise

    def _use_journal(self, name: str, fd: int) -> None:
        self._handles.append(fd)
        self._name, self._fd = name, fd
        self._opened += 1
        self._ids = (*self._ids[:3], identity(os.fstat(fd)))

    def _create_journal(self) -> None:
        """Create the journal (under the lock), durably: its folder entry is flushed too."""
        mem = self._mem
        assert mem is not None
        name = mem.lookup(self.journal) or self.journal
        self._use_journal(name, mem.open_file(name, os.O_RDWR | os.O_APPEND | os.O_CREAT))
        mem.fsync()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The store's lock (``memory/.lock``) on the descriptor kept for it; a lock file that
        lost its name meanwhile is let go and the lock taken again, every handle reopened."""
        deadline = lock_wait_deadline(self.lock_timeout)
        while True:
            acquire_lock(self._lock_fd, deadline, self._lock_path, self.lock_timeout)
            if self._lock_named():
                break
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            self._open()
        try:
            yield
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _lock_named(self) -> bool:
        mem = self._mem
        assert mem is not None
        try:
            named = os.stat(self.lock, dir_fd=mem.fd, follow_symlinks=False)
        except OSError:
            return False
        return identity(named) == self._ids[2]

    def _follow_replacement(self) -> None:
        """Under the lock: when the journal was replaced since the check (forgetting rewrites
        it under this lock), use the file its name names now, never the replaced one."""
        mem = self._mem
        if mem is None or self._fd < 0:
            return
        named = mem.lstat(self._name)
        if named is not None and identity(named) == self._ids[3]:
            return
        self._release_journal()
        name = mem.lookup(self.journal)
        if name is not None:
            self._use_journal(name, mem.open_file(name, os.O_RDWR | os.O_APPEND))

    def append(self, line: bytes) -> None:
        """Append ``line`` (one complete line ending in ``\\n``); return once it is durable."""
        with self._mutex:
            if not self._still_valid():  # reopen everything when anything was swapped
                self._open()
            with self._locked():
                self._follow_replacement()
                created = self._fd < 0
                if created:
                    self._create_journal()
                fd, mem = self._fd, self._mem
                assert mem is not None
                st = os.fstat(fd)
                if st.st_nlink > 1:
                    raise UnsafePathError.hard_links(mem.display(self._name), st.st_nlink)
                start = st.st_size
                data = line
                if start and os.pread(fd, 1, start - 1) != b"\n":
                    data = b"\n" + line  # a torn line: never glue the entry to it
                try:
                    write_all(fd, data)
                except BaseException:
                    with contextlib.suppress(OSError):  # cut back to the old size
                        if os.fstat(fd).st_size > start:
                            os.ftruncate(fd, start)
                            os.fsync(fd)
                    if created:  # remove it: it was empty before the write
                        with contextlib.suppress(OSError):
                            os.unlink(self._name, dir_fd=mem.fd)
                            mem.fsync()
                        self._release_journal()
                    raise
                written = self._written = (self._opened, self._written[1] + 1)
            if not self.fsync:
                return
            # A descriptor of our own: another thread may reopen the shared one meanwhile.
            sync_fd = os.dup(fd)
        try:
            try:
                self._flush_written(sync_fd, written)
            except BaseException:
                self._undo(sync_fd, start, start + len(data), len(line))
                raise
        finally:
            close_fd(sync_fd)  # a dup of a description still open: its close reports nothing

    def _flush_written(self, fd: int, written: tuple[int, int]) -> None:
        """Make the write ``written`` (journal descriptor, write number) durable.

        Linux reports a failed writeback of a shared file description to one ``fsync`` only:
        so flushes run one at a time, and a write covered by a failed flush fails too, one
        covered by a good flush that started after it returns at once."""
        opened, number = written
        with self._flush_mutex:
            if self._failed.get(opened, 0) >= number:
                raise OSError(
                    errno.EIO,
                    "Input/output error: flushing the journal failed after this entry was "
                    "written, so it may not be on disk",
                )
            if self._durable[0] == opened and self._durable[1] >= number:
                return
            # A good flush covers the writes before it started; a failed one, before it ended.
            covered = self._written_on(opened, number)
            try:
                full_fsync(fd)
            except BaseException:
                lost = self._written_on(opened, number)
                self._failed[opened] = max(self._failed.get(opened, 0), lost)
                raise
            self._durable = (opened, covered)

    def _written_on(self, opened: int, number: int) -> int:
        """The last write number on the journal descriptor ``opened`` (at least ``number``)."""
        last = self._written
        return max(number, last[1]) if last[0] == opened else number

    def _release_journal(self) -> None:
        """Close the journal's descriptor (the folders and the lock stay open)."""
        fd, self._fd = self._fd, -1
        with contextlib.suppress(ValueError):
            self._handles.remove(fd)
        close_fd(fd)

    def _undo(self, fd: int, start: int, end: int, line_size: int) -> None:
        """Remove a line whose flush failed: truncate it away, or blank it when not last."""
        # Best effort: the flush error is what the caller must see, not a second one.
        with contextlib.suppress(Exception), self._mutex:
            if not self._still_valid():
                self._open()
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
