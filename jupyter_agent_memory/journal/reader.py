"""Reading the journal: the file kept open between searches of one ``AgentMemory`` (opening it
safely costs more than a fast search), checked by ``stat`` on each use and reopened when a
path names something else; each use gets its own ``dup``. At most :data:`MAX_HELD_READERS`
readers of the process hold files at once (the least recently used closes them).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from ..folder import Folder, close_fd, read_all

#: The registry of an agent's journal indexes, a file beside the journal in ``memory/``.
INDEX_REGISTRY = ".indexes.json"


def identity(st: os.stat_result) -> tuple[int, int, bool]:
    """What identifies a file: device, inode, and whether it is a symlink (never ours)."""
    return (st.st_dev, st.st_ino, stat.S_ISLNK(st.st_mode))


def close_handles(handles: list[Folder | int]) -> None:
    """Close kept folders and descriptors, newest first, ignoring errors."""
    for handle in reversed(handles):
        if isinstance(handle, Folder):
            handle.close()
        else:
            close_fd(handle)
    handles.clear()


#: How many readers of this process may hold their files open at once (three each).
MAX_HELD_READERS = 32

# Readers holding files, least recently used first: serial number -> weak reference.
_held: OrderedDict[int, weakref.ref[JournalReader]] = OrderedDict()
_held_lock = threading.Lock()
_serials = itertools.count()


def _note_use(reader: JournalReader) -> None:
    """Mark ``reader`` as the most recently used holder; close the ones past the bound."""
    serial = reader._serial
    evicted = []
    with _held_lock:
        if serial in _held:
            _held.move_to_end(serial)
            return
        _held[serial] = weakref.ref(reader)
        # (A dead reader keeps its place until it is the oldest: the bound holds all the same.)
        while len(_held) > MAX_HELD_READERS:
            _old, ref = _held.popitem(last=False)
            if (old := ref()) is not None:
                evicted.append(old)
    for old in evicted:  # outside the lock: closing waits for that reader's own mutex
        old.close()


class KeptJournal:
    """``<agent>/<memory_dir>/<journal>`` with its folders, kept open between uses (canonical
    names; existing case variants are used, the exact name winning, as everywhere)."""

    def __init__(self, path: Path, *, memory_dir: str, journal: str) -> None:
        self.path = path
        self.memory_dir = memory_dir
        self.journal = journal
        self._mutex = threading.Lock()
        self._mem: Folder | None = None
        self._name = ""
        self._fd = -1
        self._paths: tuple[str, str] = ("", "")
        self._ids: tuple[tuple[int, int, bool], ...] = ()
        # Everything open, for the finalizer: descriptors must not outlive the AgentMemory.
        self._handles: list[Folder | int] = []
        self._finalizer = weakref.finalize(self, close_handles, self._handles)

    def close(self) -> None:
        """Close the folders and the journal kept open (reopened by the next use)."""
        with self._mutex:
            self._drop()

    def _drop(self) -> None:
        close_handles(self._handles)
        self._mem = None
        self._fd = -1

    def _keep(self, agent: Folder, mem: Folder, *fds: int) -> None:
        """Take the paths and identities of the open folders and ``fds``, to check them by."""
        self._paths = (os.fspath(self.path), os.fspath(mem.path))
        self._ids = tuple(identity(os.fstat(held)) for held in (agent.fd, mem.fd, *fds))

    def _folders_unchanged(self) -> bool:
        """Whether the agent folder and ``memory/`` paths still name the folders held."""
        agent_path, mem_path = self._paths
        return identity(os.lstat(agent_path)) == self._ids[0] and (
            identity(os.lstat(mem_path)) == self._ids[1]
        )

    def _exact_name_held(self, mem: Folder) -> bool:
        """False when a file with the exact name now exists beside the case variant held."""
        return self._name == self.journal or mem.lstat(self.journal) is None


class JournalReader(KeptJournal):
    """Read access to the journal (see the module docstring)."""

    def __init__(self, path: Path, *, memory_dir: str, journal: str) -> None:
        super().__init__(path, memory_dir=memory_dir, journal=journal)
        self._companion: tuple[object, bytes | None] = (None, None)
        self._serial = next(_serials)

    def close(self) -> None:
        """:meth:`KeptJournal.close`, and leave the readers holding files."""
        super().close()
        with _held_lock:
            _held.pop(self._serial, None)

    def _still_valid(self) -> bool:
        mem = self._mem
        if mem is None or self._fd < 0:
            return False
        try:
            if not self._folders_unchanged():
                return False
            named = os.stat(self._name, dir_fd=mem.fd, follow_symlinks=False)
        except OSError:
            return False
        if identity(named) != self._ids[2] or named.st_nlink != 1:
            return False  # reopening raises the store's refusal for a second hard link
        return self._exact_name_held(mem)

    def _open(self) -> None:
        """Open everything afresh; ``_fd`` stays -1 when there is no journal."""
        self._drop()
        try:
            agent = Folder.open(self.path)
            self._handles.append(agent)
            memory_name = agent.lookup(self.memory_dir)
            if memory_name is None:
                return
            mem = agent.subfolder(memory_name)
            self._handles.append(mem)
            name = mem.lookup(self.journal)
            if name is None:
                return
            try:
                fd = mem.open_file(name, os.O_RDONLY)
            except FileNotFoundError:
                return
            self._handles.append(fd)
            self._keep(agent, mem, fd)
            self._mem, self._name, self._fd = mem, name, fd
        finally:
            if self._fd < 0:  # a failure, or nothing worth keeping: checked afresh next time
                self._drop()

    @contextlib.contextmanager
    def opened(self) -> Iterator[int | None]:
        """A descriptor of the journal for this caller alone (closed afterwards), or None
        when there is no journal. Raises the store's errors for unsafe paths."""
        with self._mutex:
            if not self._still_valid():
                # The agent folder or memory/ vanishing meanwhile means no journal.
                with contextlib.suppress(FileNotFoundError):
                    self._open()
            fd = os.dup(self._fd) if self._fd >= 0 else -1
        if fd < 0:
            yield None
            return
        _note_use(self)
        try:
            yield fd
        finally:
            os.close(fd)

    def read_companion(self, name: str) -> bytes | None:
        """The content of the small file ``name`` (exact name, links refused) beside the
        journal; None when it, or the journal, is missing."""
        with self._mutex:
            if self._mem is None:
                with contextlib.suppress(FileNotFoundError):
                    self._open()
            if self._mem is None:
                return None
            # The file read last time (same inode, size and time) is not read again.
            try:
                st = os.stat(name, dir_fd=self._mem.fd, follow_symlinks=False)
            except FileNotFoundError:
                return None
            key = (name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_nlink)
            if not stat.S_ISREG(st.st_mode) or self._companion[0] != key:
                self._companion = (key, self._mem.read_bytes(name))  # refuses links
            return self._companion[1]


class DescriptorFile:
    """The binary-file methods the journal functions use (``fileno``, ``seek``, ``read``) over
    a descriptor its caller owns; cheaper than an ``io`` object for microsecond searches."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        """The descriptor."""
        return self._fd

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Move the file position; returns the new one."""
        return os.lseek(self._fd, offset, whence)

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes from the position (everything left when ``size`` < 0)."""
        return os.read(self._fd, size) if size >= 0 else read_all(self._fd)


def file_reader(f: BinaryIO) -> tuple[Callable[[int, int], bytes], os.stat_result | None]:
    """A ``read(pos, size)`` for ``f`` (``os.pread`` when it has a descriptor, else seek+read),
    and the descriptor's ``fstat`` (None without one)."""
    try:
        fd = f.fileno()
        st: os.stat_result | None = os.fstat(fd)
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        fd, st = -1, None

    def read(pos: int, size: int) -> bytes:
        parts = []
        while size > 0:
            if fd >= 0:
                part = os.pread(fd, size, pos)
            else:
                f.seek(pos)
                part = f.read(size)
            if not part:
                break
            parts.append(part)
            pos += len(part)
            size -= len(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    return read, st
