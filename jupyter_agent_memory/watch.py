"""Change detection for cached prompts: is everything a prompt was built from unchanged?

A :class:`Plan` names what one build depended on, in two kinds:

* ``paths`` are checked with ``lstat`` by path (the agent folder and the workspace). A path
  lookup notices a folder that was renamed, replaced or swapped for a link, and a folder's key
  changes whenever an entry in it is added, removed or renamed.
* ``handles`` are files and folders held open and checked with ``fstat``, which skips the path
  lookup and costs about half as much. Editing a file changes its key; replacing or deleting it
  drops its link count to zero; a held folder's key changes with its entries.

Keys are taken *before* a build reads anything, so a change that lands during a build shows up
as a difference on the next one and is never hidden behind a stale prompt. Where an open file
would stop others from replacing it (not POSIX), handles are checked by path instead.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, NamedTuple

HOLD_HANDLES = os.name == "posix"
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NONBLOCK", 0)
)


class Plan(NamedTuple):
    """What a build depended on: folders checked by path, and files or folders held open."""

    paths: tuple[str, ...]
    handles: tuple[str, ...]


class Watch:
    """The keys of a :class:`Plan` taken at one moment, and the prompt built after them."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.prompt: Any = None
        self._fds: list[int] = []
        self._keys: tuple[Any, ...] | None = None

    def arm(self) -> bool:
        """Open the handles and take every key now; False when a handle could not be opened."""
        keys = [_path_key_or_none(path) for path in self.plan.paths]
        complete = None not in keys  # a missing folder is not worth watching
        for path in self.plan.handles:
            if not HOLD_HANDLES:
                keys.append(_path_key_or_none(path))
                continue
            try:
                fd = os.open(path, _OPEN_FLAGS)
            except OSError:
                complete = False
                continue
            self._fds.append(fd)
            keys.append(_handle_key(os.fstat(fd)))
        self._keys = tuple(keys)
        return complete

    def unchanged(self) -> bool:
        """True when armed and no key changed (the hot path of a cached build)."""
        keys = self._keys
        if keys is None or self.prompt is None:
            return False
        try:
            current = [_path_key(os.lstat(path)) for path in self.plan.paths]
        except OSError:
            return False
        if HOLD_HANDLES:
            current += [_handle_key(os.fstat(fd)) for fd in self._fds]
        else:
            current += [_path_key_or_none(path) for path in self.plan.handles]
        return tuple(current) == keys

    def close(self) -> None:
        """Release the handles."""
        fds, self._fds, self._keys = self._fds, [], None
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        self.close()


# Keys hold only what can move: ctime changes with every write, chmod, rename and link-count
# change (and cannot be set back the way mtime can), size catches two writes within one clock
# tick, inode catches a replaced folder, and the link count of a held file drops to zero when
# the file is replaced or deleted.


def _path_key(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ctime_ns, st.st_size, st.st_ino)


def _path_key_or_none(path: str) -> tuple[int, int, int] | None:
    try:
        return _path_key(os.lstat(path))
    except OSError:
        return None


def _handle_key(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ctime_ns, st.st_size, st.st_nlink)
