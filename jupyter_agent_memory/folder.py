"""File access that never follows a link inside an agent folder.

:class:`Folder` is an open directory handle. Every read, write, rename and lookup goes through
a directory file descriptor with ``O_NOFOLLOW``, so a file, ``memory/`` or the agent folder that
is (or becomes) a symlink is refused instead of followed, even if it is swapped while we work.
Hard-linked files are refused for the same reason: their data may live outside the folder.

POSIX only: the guarantees rest on ``dir_fd``, ``O_NOFOLLOW`` and ``flock``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from .errors import LockTimeoutError, UnsafePathError

if os.name != "posix":  # pragma: no cover - checked on the platforms we run on
    raise ImportError(
        "jupyter-agent-memory needs a POSIX system (Linux, macOS, BSD): its file safety "
        "relies on dir_fd, O_NOFOLLOW and flock, which this platform does not offer"
    )

FILE_MODE = 0o600
DIR_MODE = 0o700

_NOFOLLOW = os.O_NOFOLLOW
_DIRECTORY = os.O_DIRECTORY
_CLOEXEC = os.O_CLOEXEC
# O_NONBLOCK keeps a FIFO planted under a memory file name from hanging a read.
_NONBLOCK = os.O_NONBLOCK

# How long a writer waits for another process's lock before giving up with a clear error.
# A held lock must never stall a server or a notebook indefinitely.
DEFAULT_LOCK_TIMEOUT = 10.0
# errno values by which a filesystem says it cannot fsync a directory at all; any other
# failure means the rename may not be durable and is reported.
_FSYNC_UNSUPPORTED = frozenset(
    {errno.EINVAL, errno.EBADF, errno.ENOTSUP, errno.EOPNOTSUPP}
)


def match_name(names: list[str], canonical: str) -> str | None:
    """The name in ``names`` matching ``canonical`` ignoring case; the exact name wins."""
    if canonical in names:
        return canonical
    folded = canonical.casefold()
    variants = sorted(n for n in names if n.casefold() == folded)
    return variants[0] if variants else None


def describe(st: os.stat_result) -> str:
    """A short phrase for what kind of filesystem object ``st`` is."""
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if stat.S_ISDIR(st.st_mode):
        return "a directory"
    if stat.S_ISREG(st.st_mode):
        return "a regular file"
    if stat.S_ISFIFO(st.st_mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(st.st_mode):
        return "a socket"
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return "a device"
    return "a special file"


def file_key(st: os.stat_result) -> tuple[int, int, int, int]:
    """Change-detection key of a file: (mtime_ns, ctime_ns, size, inode)."""
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def sha256_hex(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    import hashlib

    return hashlib.sha256(data).hexdigest()


class Folder:
    """An open directory; every operation is relative to it and never follows a symlink.

    Use as a context manager, or call :meth:`close`. ``path`` is only used in messages and for
    the re-check before a rename; the descriptor is what is actually used.
    """

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    @classmethod
    def open(cls, path: Path) -> Folder:
        """Open ``path`` as a real directory (its last component must not be a link)."""
        try:
            fd = os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
        except OSError as exc:
            raise _unsafe_or_raise(exc, path, lambda: os.lstat(path), "a directory") from None
        folder = cls(fd, path)
        folder._require_dir()
        return folder

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the directory descriptor."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _require_dir(self) -> None:
        st = os.fstat(self.fd)
        if not stat.S_ISDIR(st.st_mode):
            self.close()
            raise UnsafePathError(f"Refusing to use {self.path}: it is not a directory")

    # -- names -----------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Entry names in this folder."""
        return os.listdir(self.fd)

    def lookup(self, canonical: str, names: list[str] | None = None) -> str | None:
        """The existing name matching ``canonical`` ignoring case (exact name wins), or None."""
        return match_name(self.names() if names is None else names, canonical)

    def lstat(self, name: str) -> os.stat_result | None:
        """``lstat`` of an entry, or None when it does not exist."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def display(self, name: str) -> Path:
        """The absolute path of an entry, for messages."""
        return self.path / name

    # -- sub-folders -----------------------------------------------------------------------

    def subfolder(self, name: str, create: bool = False) -> Folder:
        """Open the real sub-directory ``name``; with ``create``, make it (0700) first."""
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, DIR_MODE, dir_fd=self.fd)
        path = self.display(name)
        try:
            fd = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=self.fd)
        except OSError as exc:
            raise _unsafe_or_raise(
                exc, path, lambda: self._lstat_or_raise(name), "a directory"
            ) from None
        folder = Folder(fd, path)
        folder._require_dir()
        return folder

    def _lstat_or_raise(self, name: str) -> os.stat_result:
        return os.stat(name, dir_fd=self.fd, follow_symlinks=False)

    # -- files -----------------------------------------------------------------------------

    def open_file(self, name: str, flags: int, mode: int = FILE_MODE) -> int:
        """Open a regular file without following links; returns the descriptor."""
        path = self.display(name)
        try:
            fd = os.open(name, flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK, mode, dir_fd=self.fd)
        except OSError as exc:
            raise _unsafe_or_raise(
                exc, path, lambda: self._lstat_or_raise(name), "a regular file"
            ) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise UnsafePathError(
                f"Refusing to use {path}: it is {describe(st)}, not a regular file"
            )
        if st.st_nlink > 1:
            # A hard link is a second name for a file that may live outside the agent folder:
            # writing or reading through it would escape the folder as a symlink would.
            os.close(fd)
            raise UnsafePathError(
                f"Refusing to use {path}: it has {st.st_nlink} hard links; memory files "
                "must not share their data with another file"
            )
        # Regular files ignore O_NONBLOCK for I/O, but clear it so behaviour is plain.
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
        with os.fdopen(fd, "rb") as handle:
            return handle.read()

    def create_empty(self, name: str) -> bool:
        """Create an empty 0600 file unless it exists; True when this call created it."""
        try:
            fd = os.open(
                name,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC,
                FILE_MODE,
                dir_fd=self.fd,
            )
        except FileExistsError:
            return False
        os.close(fd)
        return True

    def write_atomic(self, name: str, data: bytes, recheck: Callable[[], None]) -> None:
        """Replace ``name`` with ``data``: temp file, fsync, re-check, rename, fsync folder.

        ``recheck`` runs right before the rename and raises when the folder chain is no longer
        what it was; the temp file is removed on any error.
        """
        temp = f".{name}.{secrets.token_hex(8)}.tmp"
        fd = self.open_file(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                full_fsync(fd)
            finally:
                os.close(fd)
            recheck()
            self.require_replaceable(name)
            os.replace(temp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=self.fd)
            raise
        self.fsync()

    def require_replaceable(self, name: str) -> None:
        """Raise unless ``name`` is missing or a regular file (a dangling link is refused)."""
        st = self.lstat(name)
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise UnsafePathError(f"Refusing to write {self.display(name)}: it is {describe(st)}")

    def fsync(self) -> None:
        """Flush the directory entry table to disk (makes a rename durable).

        Only a filesystem that cannot fsync directories at all is tolerated; any other
        failure is raised, because the rename may then be lost in a crash.
        """
        try:
            full_fsync(self.fd)
        except OSError as exc:
            if exc.errno not in _FSYNC_UNSUPPORTED:
                raise

    def same_as(self, path: Path) -> bool:
        """True when ``path`` (not followed) is still this very directory."""
        try:
            st = os.lstat(path)
        except OSError:
            return False
        mine = os.fstat(self.fd)
        return stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)

    @contextlib.contextmanager
    def locked(self, name: str, timeout: float | None = DEFAULT_LOCK_TIMEOUT) -> Iterator[None]:
        """Hold an exclusive advisory lock on the file ``name`` (created if needed).

        Waits at most ``timeout`` seconds (``None``: for ever) for another holder, then
        raises :class:`~jupyter_agent_memory.errors.LockTimeoutError` naming the lock file.
        """
        fd = self.open_file(name, os.O_RDWR | os.O_CREAT)
        try:
            _lock(fd, timeout, self.display(name))
            yield
        finally:
            os.close(fd)  # closing releases the lock


def _lock(fd: int, timeout: float | None, path: Path) -> None:
    import fcntl

    if timeout is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    import time

    deadline = time.monotonic() + max(0.0, timeout)
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LockTimeoutError(path, timeout) from None
            # Short first waits keep uncontended hand-overs fast; the cap keeps polling cheap.
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, 0.05)


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
