"""The prompt builder's cache: one bounded LRU store, and change detection for prompts.

A :class:`Plan` names what a build depended on: ``paths`` (folders) are checked with ``lstat``;
``handles`` (files, ``memory/``) are held open and checked with ``fstat`` (a replaced file's
link count drops to 0), or by path (``hold=False``, for NFS). Keys are taken *before* a build
reads anything, so a change during it shows up next time."""

from __future__ import annotations

import enum
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..folder import close_fd

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK

#: Defaults of :class:`PromptCache`: an agent in one workspace takes about a dozen entries;
#: 64 descriptors hold 16 prompts of four held files.
DEFAULT_MAX_ENTRIES = 512
DEFAULT_MAX_CHARS = 32 * 1024 * 1024
DEFAULT_MAX_DESCRIPTORS = 64


class Plan(NamedTuple):
    """What a build depended on: folders checked by path, and files or folders held open."""

    paths: tuple[str, ...]
    handles: tuple[str, ...]


class Watch:
    """The keys of a :class:`Plan` taken at one moment, and the prompt built after them."""

    def __init__(self, plan: Plan, hold: bool = True) -> None:
        self.plan = plan
        self.hold = hold
        self.prompt: Any = None
        self._fds: list[int] = []
        self._keys: tuple[Any, ...] | None = None

    @property
    def descriptors(self) -> int:
        """How many descriptors this watch holds open."""
        return len(self._fds)

    def arm(self) -> bool:
        """Take every key now (opening the handles when holding); False when one is missing."""
        keys = [path_key(path) for path in self.plan.paths]
        if not self.hold:
            keys += [path_key(path) for path in self.plan.handles]
        else:
            for path in self.plan.handles:
                try:
                    fd = os.open(path, _OPEN_FLAGS)
                except OSError:
                    keys.append(None)
                    continue
                self._fds.append(fd)
                keys.append(_handle_key(os.fstat(fd)))
        self._keys = tuple(keys)
        return None not in keys  # a missing file or folder is not worth watching

    def unchanged(self) -> bool:
        """True when armed and no key changed (the hot path of a cached build)."""
        keys = self._keys
        if keys is None or self.prompt is None:
            return False
        try:
            current = [_path_key(os.lstat(path)) for path in self.plan.paths]
            if self.hold:
                current += [_handle_key(os.fstat(fd)) for fd in self._fds]
            else:
                current += [_path_key(os.lstat(path)) for path in self.plan.handles]
        except OSError:
            return False
        return tuple(current) == keys

    def close(self) -> None:
        """Release the handles; the watch then never reports unchanged."""
        fds, self._fds, self._keys = self._fds, [], None
        for fd in fds:
            close_fd(fd)

    def __del__(self) -> None:
        self.close()


class Kind(enum.Enum):
    """What a cache entry holds (entries of different kinds never share a key)."""

    FILE = "file text by path, with its key"
    LISTING = "folder entry names by path, with the folder's key"
    PROMPT = "assembled prompt by the keys of everything it used"
    WATCH = "watch of the last build by build arguments"
    TEMPLATE = "template definition by agent folder, with its files' keys"
    WORKSPACE = "resolved workspace folder by its absolute spelling"


@dataclass(frozen=True)
class CacheInfo:
    """A snapshot of a :class:`PromptCache`: what it holds against its bounds."""

    entries: int
    chars: int
    descriptors: int
    max_entries: int
    max_chars: int
    max_descriptors: int


@dataclass
class _Entry:
    value: Any
    chars: int
    descriptors: int


class PromptCache:
    """Everything one prompt builder caches, least recently used out first; thread-safe. The
    bounds always hold (an entry too large alone is not kept); a dropped :class:`Watch` closes."""

    def __init__(
        self, max_entries: int = DEFAULT_MAX_ENTRIES, max_chars: int = DEFAULT_MAX_CHARS,
        max_descriptors: int = DEFAULT_MAX_DESCRIPTORS,
    ) -> None:
        bounds = (max_entries, max_chars, max_descriptors)
        names = ("max_entries", "max_chars", "max_descriptors")
        for name, value in zip(names, bounds, strict=True):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        self.max_entries, self.max_chars, self.max_descriptors = bounds
        self._entries: OrderedDict[tuple[Kind, Any], _Entry] = OrderedDict()
        self._chars = self._descriptors = 0
        self._lock = threading.Lock()

    def get(self, kind: Kind, key: Any) -> Any:
        """The value cached under ``(kind, key)``, or None."""
        with self._lock:
            entry = self._entries.get((kind, key))
            if entry is None:
                return None
            self._entries.move_to_end((kind, key))
            return entry.value

    def put(self, kind: Kind, key: Any, value: Any, chars: int = 0) -> None:
        """Cache ``value`` of ``chars`` characters under ``(kind, key)``; dropped watches close."""
        descriptors = value.descriptors if isinstance(value, Watch) else 0
        with self._lock:
            self._drop((kind, key), keep=value)
            if chars > self.max_chars or descriptors > self.max_descriptors:
                _close(value)  # too large to keep even alone: evicting others would not help
                return
            self._entries[(kind, key)] = _Entry(value, chars, descriptors)
            self._chars += chars
            self._descriptors += descriptors
            self._evict()

    def pop(self, kind: Kind, key: Any) -> None:
        """Forget ``(kind, key)`` (closing a watch)."""
        with self._lock:
            self._drop((kind, key))

    def current_prompt(self, key: Any) -> tuple[Any, Plan | None]:
        """``(prompt, plan)`` of the watch under ``key``; the prompt is None when something it
        watches changed (the next build starts from that plan); ``(None, None)``: no watch."""
        with self._lock:
            entry = self._entries.get((Kind.WATCH, key))
            if entry is None:
                return None, None
            self._entries.move_to_end((Kind.WATCH, key))
            watch: Watch = entry.value
            return (watch.prompt if watch.unchanged() else None), watch.plan

    def clear(self) -> None:
        """Forget everything and close every watch."""
        with self._lock:
            entries, self._entries = self._entries, OrderedDict()
            self._chars = self._descriptors = 0
            for entry in entries.values():
                _close(entry.value)

    def info(self) -> CacheInfo:
        """What the cache holds now, against its bounds."""
        with self._lock:
            held = (len(self._entries), self._chars, self._descriptors)
            return CacheInfo(*held, self.max_entries, self.max_chars, self.max_descriptors)

    def _drop(self, full_key: tuple[Kind, Any], keep: Any = None) -> None:  # the lock is held
        entry = self._entries.pop(full_key, None)
        if entry is None:
            return
        self._chars -= entry.chars
        self._descriptors -= entry.descriptors
        if entry.value is not keep:
            _close(entry.value)

    def _evict(self) -> None:  # the lock is held
        while len(self._entries) > self.max_entries or self._chars > self.max_chars:
            self._drop(next(iter(self._entries)))
        if self._descriptors > self.max_descriptors:
            # Only entries that hold descriptors help here: leave the others cached.
            holders = [k for k, e in self._entries.items() if e.descriptors]
            while self._descriptors > self.max_descriptors:
                self._drop(holders.pop(0))


def _close(value: Any) -> None:
    if isinstance(value, Watch):
        value.close()


# Keys hold only what can move: ctime (every write, chmod, rename and link-count change; it
# cannot be set back as mtime can), size (two writes in one clock tick), inode (a replaced
# file or folder), and a held file's link count (zero once it is replaced or deleted).
def _path_key(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ctime_ns, st.st_size, st.st_ino)


def path_key(path: str) -> tuple[int, int, int] | None:
    """The change key of ``path`` itself (a link is not followed), or None when it is missing."""
    try:
        return _path_key(os.lstat(path))
    except OSError:
        return None


def _handle_key(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ctime_ns, st.st_size, st.st_nlink)
