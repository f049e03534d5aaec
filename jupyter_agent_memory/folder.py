"""File access that never follows a link inside an agent folder: :class:`Folder` does every
read, write, rename and lookup through a directory descriptor with ``O_NOFOLLOW``, so a link
(even one swapped in meanwhile) or a hard-linked file is refused. POSIX only."""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from .errors import LockTimeoutError, UnsafePathError

if os.name != "posix":  # pragma: no cover - checked on the platforms we run on
    raise ImportError(
        "jupyter-agent-memory needs a POSIX system (Linux, macOS, BSD): its file safety "
        "relies on dir_fd, O_NOFOLLOW and flock, which this platform does not offer"
    )

FILE_MODE = 0o600
DIR_MODE = 0o700

_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

# How long a writer waits for another process's lock: a held lock never stalls us for ever.
DEFAULT_LOCK_TIMEOUT = 10.0
# How a filesystem says it cannot fsync a directory at all; any other failure is reported.
_FSYNC_UNSUPPORTED = frozenset({errno.EINVAL, errno.EBADF, errno.ENOTSUP, errno.EOPNOTSUPP})

T = TypeVar("T")


def retry_eintr(call: Callable[..., T], *args: object, **kwargs: object) -> T:
    """``call(*args, **kwargs)``, repeated while it fails with ``EINTR`` (for the calls Python
    does not retry itself: listing, ``lstat`` by name, rename, unlink, ``mkdir``, ``rmdir``)."""
    while True:
        try:
            return call(*args, **kwargs)
        except InterruptedError:
            continue


def close_fd(fd: int) -> None:
    """Close ``fd``, ignoring any error: every descriptor closed here was only read, already
    fsynced or written with no durability promise, so the operation is complete."""
    with contextlib.suppress(OSError):
        os.close(fd)


def read_all(fd: int) -> bytes:
    """Everything from the descriptor's position to the end."""
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` at the descriptor's position (a short write continues)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class NotDurableError(OSError):
    """A rename took effect, but flushing its folder failed: the new file is in place and
    read back, yet a power loss may undo the rename. ``filename`` is the file renamed."""


# A deadline (time.monotonic) bounding every lock wait of this context (a request's time).
_LOCK_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "jupyter_agent_memory_lock_deadline", default=None
)


@contextlib.contextmanager
def lock_deadline(deadline: float | None) -> Iterator[None]:
    """Bound every lock wait in this context to end by ``deadline`` (``time.monotonic``)."""
    token = _LOCK_DEADLINE.set(deadline)
    try:
        yield
    finally:
        _LOCK_DEADLINE.reset(token)


def match_name(names: list[str], canonical: str) -> str | None:
    """The name in ``names`` matching ``canonical`` ignoring case; the exact name wins."""
    if canonical in names:
        return canonical
    folded = canonical.casefold()
    return min((n for n in names if n.casefold() == folded), default=None)


_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


def describe(st: os.stat_result) -> str:
    """A short phrase for what kind of filesystem object ``st`` is."""
    return next((phrase for test, phrase in _KINDS if test(st.st_mode)), "a special file")


def file_key(st: os.stat_result) -> tuple[int, int, int, int]:
    """Change-detection key of a file: (mtime_ns, ctime_ns, size, inode)."""
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def sha256_hex(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    import hashlib

    return hashlib.sha256(data).hexdigest()


class Folder:
    """An open directory (a context manager); every operation is relative to it and never
    follows a symlink. ``path`` serves messages and re-checks; the descriptor does the work."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    @classmethod
    def open(cls, path: Path) -> Folder:
        """Open ``path`` as a real directory (its last component must not be a link)."""
        return cls._open_dir(path, lambda: os.open(path, _OPEN_DIR), lambda: os.lstat(path))

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the directory descriptor."""
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            close_fd(fd)  # after a commit, a close error must not call it a failure

    @classmethod
    def _open_dir(
        cls, path: Path, opener: Callable[[], int], lstat: Callable[[], os.stat_result]
    ) -> Folder:
        """The folder ``opener()`` opens (``lstat`` names what is there when it fails)."""
        try:
            fd = opener()
        except OSError as exc:
            raise _unsafe_or_raise(exc, path, lstat, "a directory") from None
        folder = cls(fd, path)
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            folder.close()
            raise UnsafePathError(f"Refusing to use {path}: it is not a directory")
        return folder

    def names(self) -> list[str]:
        """Entry names in this folder."""
        return retry_eintr(os.listdir, self.fd)

    def lookup(self, canonical: str, names: list[str] | None = None) -> str | None:
        """The existing name matching ``canonical`` ignoring case (exact name wins), or None."""
        return match_name(self.names() if names is None else names, canonical)

    def lstat(self, name: str) -> os.stat_result | None:
        """``lstat`` of an entry, or None when it does not exist."""
        try:
            return self._lstat_or_raise(name)
        except FileNotFoundError:
            return None

    def _lstat_or_raise(self, name: str) -> os.stat_result:
        return retry_eintr(os.stat, name, dir_fd=self.fd, follow_symlinks=False)

    def unlink(self, name: str) -> bool:
        """Remove the entry ``name``; False when it was already gone."""
        try:
            retry_eintr(os.unlink, name, dir_fd=self.fd)
        except FileNotFoundError:
            return False
        return True

    def display(self, name: str) -> Path:
        """The absolute path of an entry, for messages."""
        return self.path / name

    def subfolder(self, name: str, create: bool = False) -> Folder:
        """Open the real sub-directory ``name``; with ``create``, make it (0700) first."""
        made = False
        if create:
            with contextlib.suppress(FileExistsError):
                retry_eintr(os.mkdir, name, DIR_MODE, dir_fd=self.fd)
                made = True
        folder = Folder._open_dir(
            self.display(name),
            lambda: os.open(name, _OPEN_DIR, dir_fd=self.fd),
            lambda: self._lstat_or_raise(name),
        )
        if made:
            # The new folder's own entry must be on disk before anything inside it counts.
            self.fsync()
        return folder

    def open_file(self, name: str, flags: int, mode: int = FILE_MODE) -> int:
        """Open a regular file without following links; returns the descriptor."""
        path = self.display(name)
        # O_NONBLOCK: a FIFO planted under a memory file name never hangs the open.
        flags |= os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(name, flags, mode, dir_fd=self.fd)
        except OSError as exc:
            raise _unsafe_or_raise(
                exc, path, lambda: self._lstat_or_raise(name), "a regular file"
            ) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UnsafePathError(
                    f"Refusing to use {path}: it is {describe(st)}, not a regular file"
                )
            if st.st_nlink > 1:
                raise UnsafePathError.hard_links(path, st.st_nlink)
        except BaseException:
            close_fd(fd)
            raise
        # Regular files ignore O_NONBLOCK for I/O; cleared so behaviour is plain.
        with contextlib.suppress(OSError, AttributeError):
            os.set_blocking(fd, True)
        return fd

    def read_bytes(self, name: str | None) -> bytes | None:
        """Content of a regular file, or None when ``name`` is None or missing."""
        if name is None:
            return None
        try:
            fd = self.open_file(name, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            return read_all(fd)
        finally:
            close_fd(fd)

    def create_empty(self, name: str) -> bool:
        """Create an empty 0600 file unless it exists; True when this call created it."""
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(name, flags, FILE_MODE, dir_fd=self.fd)
        except FileExistsError:
            return False
        close_fd(fd)
        return True

    def write_atomic(
        self, name: str, data: bytes, recheck: Callable[[], None], scrub: bool = False
    ) -> None:
        """Replace ``name`` with ``data``: temp file, fsync, ``recheck()``, rename, fsync folder.

        An error before the rename changes nothing; after it only the folder flush can fail
        (:class:`NotDurableError`). With ``scrub``, the replaced inode is truncated once the
        rename is durable, so a descriptor still open on it reads nothing.
        """
        temp = f".{name}.{secrets.token_hex(8)}.tmp"
        fd = self.open_file(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        old = -1
        try:
            try:
                write_all(fd, data)
                full_fsync(fd)
            finally:
                close_fd(fd)
            if scrub:
                with contextlib.suppress(FileNotFoundError):
                    old = self.open_file(name, os.O_WRONLY)  # the file ``name`` names now
            recheck()
            self.require_replaceable(name)
            retry_eintr(os.replace, temp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                retry_eintr(os.unlink, temp, dir_fd=self.fd)
            if old >= 0:
                close_fd(old)
            raise
        try:
            self.fsync()
        except OSError as exc:
            raise NotDurableError(
                exc.errno, exc.strerror or str(exc), str(self.display(name))
            ) from exc
        else:
            if old >= 0:
                os.ftruncate(old, 0)
        finally:
            if old >= 0:
                close_fd(old)

    def require_replaceable(self, name: str) -> None:
        """Raise unless ``name`` is missing or a regular file (a dangling link is refused)."""
        st = self.lstat(name)
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise UnsafePathError(f"Refusing to write {self.display(name)}: it is {describe(st)}")

    def fsync(self) -> None:
        """Flush the directory's entries to disk (makes a rename durable); raises any failure
        but a filesystem's inability to fsync directories at all."""
        try:
            full_fsync(self.fd)
        except OSError as exc:
            if exc.errno not in _FSYNC_UNSUPPORTED:
                raise

    def append_line(self, name: str, line: bytes, durable: bool = True) -> None:
        """Append one complete line to ``name`` (created 0600), under the writers' lock, after
        a torn last line on a line of its own; with ``durable`` flushed. On any failure the
        file is cut back (or removed when this call created it)."""
        created = self.lstat(name) is None
        fd = self.open_file(name, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            start = os.fstat(fd).st_size
            data = line
            if start and os.pread(fd, 1, start - 1) != b"\n":
                data = b"\n" + line
            try:
                write_all(fd, data)
                if durable:
                    full_fsync(fd)
                    if created:
                        self.fsync()
            except BaseException:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)
                    if created and start == 0:
                        retry_eintr(os.unlink, name, dir_fd=self.fd)
                    else:
                        os.fsync(fd)
                raise
        finally:
            close_fd(fd)

    def same_as(self, path: Path) -> bool:
        """True when ``path`` (not followed) is still this very directory."""
        try:
            st = os.lstat(path)
        except OSError:
            return False
        mine = os.fstat(self.fd)
        return stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)

    @contextlib.contextmanager
    def locked(self, name: str, timeout: float | None = DEFAULT_LOCK_TIMEOUT) -> Iterator[HeldLock]:
        """Hold an exclusive lock on the file ``name`` (created if needed), waiting at most
        ``timeout`` seconds (None: for ever) before ``LockTimeoutError``. A lock on a file that
        lost its name meanwhile is taken again on the file the name holds now, so two writers
        never both hold "the" lock (:meth:`HeldLock.check` repeats that test)."""
        deadline = lock_wait_deadline(timeout)
        while True:
            fd = self.open_file(name, os.O_RDWR | os.O_CREAT)
            try:
                acquire_lock(fd, deadline, self.display(name), timeout)
                held = HeldLock(self, name, fd)
                if held.named():
                    yield held
                    return
            finally:
                close_fd(fd)  # closing releases the lock


class HeldLock:
    """A lock held on a file of a folder (see :meth:`Folder.locked`)."""

    def __init__(self, folder: Folder, name: str, fd: int) -> None:
        self.folder = folder
        self.name = name
        self.fd = fd

    def named(self) -> bool:
        """Whether the lock file's name still names the file this lock is held on."""
        try:
            named = retry_eintr(os.stat, self.name, dir_fd=self.folder.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        mine = os.fstat(self.fd)
        return (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino)

    def check(self) -> None:
        """Raise unless the lock is still the one its name names (call before a commit)."""
        if not self.named():
            raise UnsafePathError(
                f"Refusing to write: the lock file {self.folder.display(self.name)} was "
                "removed or replaced while this write held it; nothing more was written"
            )


def lock_wait_deadline(timeout: float | None) -> float | None:
    """When a lock wait of ``timeout`` seconds (None: no limit) must end, honouring the
    context's :func:`lock_deadline`."""
    ours = None if timeout is None else time.monotonic() + max(0.0, timeout)
    return min((d for d in (ours, _LOCK_DEADLINE.get()) if d is not None), default=None)


# A waiter first yields the processor a few times (an append holds the lock for one write),
# then polls from 50 microseconds, doubling up to 2 ms: fast hand-overs, cheap long waits.
_YIELDS = 8
_FIRST_PAUSE = 50e-6
_MAX_PAUSE = 0.002


def acquire_lock(fd: int, deadline: float | None, path: Path, timeout: float | None = None) -> None:
    """Take the exclusive ``flock`` on ``fd`` by ``deadline`` (``time.monotonic``; None: wait
    for ever), else raise ``LockTimeoutError`` naming ``path`` and ``timeout``."""
    import fcntl

    started = time.monotonic()
    for _ in range(_YIELDS + 1):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            os.sched_yield()
    if deadline is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    pause = _FIRST_PAUSE
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            waited = timeout if timeout is not None else time.monotonic() - started
            raise LockTimeoutError(path, waited)
        time.sleep(min(pause, remaining))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pause = min(pause * 2, _MAX_PAUSE)


def fsync_dir_path(path: Path) -> None:
    """:meth:`Folder.fsync` for the folder ``path`` above an agent folder (where links were
    resolved once and may be followed)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        Folder(fd, path).fsync()
    finally:
        close_fd(fd)


def full_fsync(fd: int) -> None:
    """fsync, or F_FULLFSYNC where the OS offers it (macOS: fsync alone may stay in cache)."""
    import fcntl

    full = getattr(fcntl, "F_FULLFSYNC", None)
    if full is not None:
        try:
            fcntl.fcntl(fd, full)
            return
        except OSError:
            pass  # not every filesystem supports it; plain fsync is the fallback
    os.fsync(fd)


def _unsafe_or_raise(
    exc: OSError, path: Path, lstat: Callable[[], os.stat_result], wanted: str
) -> OSError | UnsafePathError:
    """Turn an open() failure caused by a link or wrong type into UnsafePathError."""
    if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK, errno.ENXIO, errno.EISDIR):
        return exc
    try:
        st = lstat()
    except OSError:
        return UnsafePathError(f"Refusing to use {path}: it is not {wanted}")
    return UnsafePathError(f"Refusing to use {path}: it is {describe(st)}, not {wanted}")
