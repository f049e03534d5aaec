"""Where agents live, and file access that never follows a link inside an agent folder.

Two jobs:

* resolving an agent *target* (an agent id under the agents root, or a folder path) to an
  absolute folder, with the agent id rules of the design;
* :class:`Folder`, an open directory handle. Every read, write, rename and lookup goes through a
  directory file descriptor with ``O_NOFOLLOW``, so a file, ``memory/`` or the agent folder that
  is (or becomes) a symlink is refused instead of followed, even if it is swapped while we work.

Links *above* the agent folder (a symlinked home or temp directory) are resolved once, when the
target is resolved; inside the agent folder nothing is followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from .errors import (
    InvalidAgentIdError,
    InvalidWorkspaceError,
    LockTimeoutError,
    UnsafePathError,
)

ROOT_ENV = "JUPYTER_AGENT_MEMORY_ROOT"
AGENT_ENV = "JUPYTER_AGENT_MEMORY_AGENT"
DEFAULT_AGENT = "default"
RESERVED_AGENT_IDS = frozenset({"system"})
# Most filesystems cap one name at 255 bytes; a longer id could never name a folder.
MAX_AGENT_ID_BYTES = 255

FILE_MODE = 0o600
DIR_MODE = 0o700

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# O_NONBLOCK keeps a FIFO planted under a memory file name from hanging a read.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)

# How long a writer waits for another process's lock before giving up with a clear error.
# A held lock must never stall a server or a notebook indefinitely.
DEFAULT_LOCK_TIMEOUT = 10.0
# errno values by which a filesystem says it cannot fsync a directory at all; any other
# failure means the rename may not be durable and is reported.
_FSYNC_UNSUPPORTED = frozenset(
    {errno.EINVAL, errno.EBADF, getattr(errno, "ENOTSUP", errno.EINVAL), errno.EOPNOTSUPP}
)


def default_root() -> Path:
    """The folder holding one sub-folder per agent.

    ``$JUPYTER_AGENT_MEMORY_ROOT`` when set, else ``<jupyter data dir>/agent-memory``.
    """
    configured = os.environ.get(ROOT_ENV)
    if configured:
        return Path(configured).expanduser()
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "agent-memory"


def default_agent_id() -> str:
    """The agent every surface starts on: ``$JUPYTER_AGENT_MEMORY_AGENT`` or ``default``."""
    return validate_agent_id(os.environ.get(AGENT_ENV) or DEFAULT_AGENT)


def validate_agent_id(agent_id: object) -> str:
    """Return ``agent_id`` when it can name a folder under the root, else raise.

    An id is a non-empty string, not ``.`` or ``..``, without ``/`` or ``\\``, and not the
    reserved name ``system`` in any case.
    """
    if not isinstance(agent_id, str) or not agent_id:
        raise InvalidAgentIdError("Invalid agent id: it must be a non-empty string")
    if agent_id in (".", ".."):
        raise InvalidAgentIdError(f'Invalid agent id "{agent_id}": it cannot be "." or ".."')
    if "/" in agent_id or "\\" in agent_id:
        raise InvalidAgentIdError(f'Invalid agent id "{agent_id}": it cannot contain "/" or "\\"')
    if "\0" in agent_id:
        raise InvalidAgentIdError("Invalid agent id: it cannot contain a NUL character")
    try:
        size = len(agent_id.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidAgentIdError(
            "Invalid agent id: it is not valid Unicode text (a lone surrogate)"
        ) from None
    if size > MAX_AGENT_ID_BYTES:
        raise InvalidAgentIdError(
            f"Invalid agent id: it is {size} bytes long; the limit is "
            f"{MAX_AGENT_ID_BYTES} (a folder name)"
        )
    if agent_id.lower() in RESERVED_AGENT_IDS:
        raise InvalidAgentIdError(f'Invalid agent id "{agent_id}": "system" is reserved')
    return agent_id


def looks_like_path(target: str | os.PathLike[str]) -> bool:
    """True when ``target`` names a folder rather than an agent id.

    A :class:`pathlib.Path`, or a string containing a path separator or starting with ``.``
    or ``~``, is a folder path; any other string is an agent id.
    """
    if isinstance(target, os.PathLike):
        return True
    seps = {os.sep, "/"} | ({os.altsep} if os.altsep else set())
    return target.startswith((".", "~")) or any(sep in target for sep in seps)


def resolve_target(
    target: str | os.PathLike[str] | None, root: str | os.PathLike[str] | None = None
) -> tuple[Path, str | None, Path]:
    """Resolve an agent target to ``(folder, agent_id or None, root)``, all absolute.

    Links above the agent folder are resolved here, once; the folder's own name is kept as is
    so that a symlinked agent folder is detected (and refused) when it is opened.
    """
    if target is None:
        target = default_agent_id()
    if looks_like_path(target):
        given = os.fspath(target)
        if os.path.basename(given.rstrip("/\\")) in (".", "..", "~"):
            # An agent folder gets SOUL.md, USER.md and memory/: never spill them into the
            # current, parent or home folder by accident.
            raise UnsafePathError(
                f'Refusing to use "{given}" as an agent folder: name a dedicated folder '
                "(for example ./demo-agent)"
            )
        raw = Path(os.path.abspath(Path(target).expanduser()))
        if raw.parent == raw or raw == Path.home():
            raise UnsafePathError(
                f"Refusing to use {raw} as an agent folder: it is the filesystem root "
                "or the home folder"
            )
        parent = Path(os.path.realpath(raw.parent))
        return parent / raw.name, None, parent
    folder, base = resolve_agent_id(target, root)
    return folder, target, base


def resolve_agent_id(
    agent_id: str, root: str | os.PathLike[str] | None = None
) -> tuple[Path, Path]:
    """``(folder, root)`` for an agent id under ``root`` (default: :func:`default_root`)."""
    validate_agent_id(agent_id)
    base = Path(root).expanduser() if root is not None else default_root()
    base = Path(os.path.realpath(os.path.abspath(base)))
    folder = base / agent_id
    if folder.parent != base:  # defence in depth; validate_agent_id already rules this out
        raise UnsafePathError(f"Refusing to use {folder}: it resolves outside {base}")
    return folder, base


def require_workspace(workspace: str | os.PathLike[str]) -> Path:
    """The absolute session workspace, refusing one that is not an existing folder.

    The prompt tells the model its working directory is this folder, so a mistyped path must
    be an error on every surface instead of a confident falsehood.
    """
    path = Path(os.path.abspath(Path(workspace).expanduser()))
    if not path.is_dir():
        what = "does not exist" if not os.path.lexists(path) else "is not a folder"
        raise InvalidWorkspaceError(f"Workspace {path} {what}; give an existing folder")
    return path


def list_agents(root: str | os.PathLike[str] | None = None) -> list[str]:
    """Agent ids under ``root`` (real sub-folders with a valid id), sorted."""
    base = Path(root).expanduser() if root is not None else default_root()
    try:
        entries = list(os.scandir(base))
    except FileNotFoundError:
        return []
    ids = []
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        try:
            ids.append(validate_agent_id(entry.name))
        except InvalidAgentIdError:
            continue
    return sorted(ids)


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
                _full_fsync(fd)
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
            _full_fsync(self.fd)
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


def _full_fsync(fd: int) -> None:
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
) -> OSError:
    """Turn an open() failure caused by a link or wrong type into UnsafePathError."""
    if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK, errno.ENXIO, errno.EISDIR):
        return exc
    try:
        st = lstat()
    except OSError:
        return UnsafePathError(f"Refusing to use {path}: it is not {wanted}")
    return UnsafePathError(f"Refusing to use {path}: it is {describe(st)}, not {wanted}")
