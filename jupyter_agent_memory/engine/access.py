"""How the engine reaches an agent folder: :func:`folders` and :func:`read_memory` read with
no lock; :func:`locked` holds ``memory/.lock`` (the innermost lock), its :meth:`Locked.recheck`
runs before every rename; :func:`commit` replaces a file atomically.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from ..errors import MemoryConflictError, MemoryIOError, UnsafePathError
from ..folder import Folder, HeldLock, NotDurableError, sha256_hex

if TYPE_CHECKING:
    from pathlib import Path

    from .store import AgentMemory

T = TypeVar("T")

MEMORY_DIR = "memory"
LOCK = ".lock"
#: Replaced (atomically, under the lock) by every forget with a fresh random token: whatever
#: was derived from the agent's files before it (an index, a cache, a held view) is stale.
GENERATION = ".generation"


@dataclass
class Locked:
    """The agent folder and ``memory/`` open, with the agent's lock held (see :func:`locked`)."""

    mem: AgentMemory
    agent: Folder
    memory: Folder
    lock: HeldLock

    def recheck(self) -> None:
        """Raise :class:`UnsafePathError` unless both folders are still the ones their paths
        name and the lock is still the one ``memory/.lock`` names (run before every rename)."""
        for folder, path in ((self.agent, self.mem.path), (self.memory, self.memory.path)):
            if not folder.same_as(path):
                raise UnsafePathError(f"Refusing to write: {path} was replaced while writing")
        self.lock.check()


@contextlib.contextmanager
def folders(
    mem: AgentMemory, create_memory: bool = False
) -> Iterator[tuple[Folder, Folder | None]]:
    """Open the agent folder and ``memory/`` (None when missing), no lock: for reads."""
    with Folder.open(mem.path) as agent:
        name = agent.lookup(MEMORY_DIR)
        if name is None and not create_memory:
            yield agent, None
            return
        with agent.subfolder(name or MEMORY_DIR, create=create_memory) as memory:
            yield agent, memory


@contextlib.contextmanager
def locked(mem: AgentMemory) -> Iterator[Locked]:
    """Open the agent folder and ``memory/`` (made when missing) and hold the agent's lock."""
    with folders(mem, create_memory=True) as (agent, memory):
        assert memory is not None
        with memory.locked(LOCK, mem.lock_timeout) as lock:
            yield Locked(mem, agent, memory, lock)


def read_memory(
    mem: AgentMemory, read: Callable[[Folder], T], default: T, subfolder: str | None = None
) -> T:
    """``read(folder)`` on ``memory/`` (or its ``subfolder``), no lock: for reads; ``default``
    when the agent folder, ``memory/`` or the subfolder is missing."""
    try:
        with folders(mem) as (_agent, memory):
            if memory is None or (subfolder is not None and memory.lookup(subfolder) is None):
                return default
            if subfolder is None:
                return read(memory)
            with memory.subfolder(subfolder) as folder:
                return read(folder)
    except FileNotFoundError:
        return default


def read_agent_bytes(mem: AgentMemory, canonical: str) -> bytes:
    """The bytes of a file of the agent folder (``b""`` when it or the folder is missing)."""
    try:
        with Folder.open(mem.path) as agent:
            return agent.read_bytes(agent.lookup(canonical)) or b""
    except FileNotFoundError:
        return b""


def replace_agent_file(
    mem: AgentMemory, canonical: str, data: bytes, expected: str | None
) -> tuple[str, Path]:
    """Replace a file of the agent folder under the lock, compare-and-swap against ``expected``
    (even when ``data`` is already there: two writers of one next version must not both
    succeed); returns the replaced bytes' sha256 and the path."""
    with locked(mem) as txn:
        agent = txn.agent
        name = agent.lookup(canonical) or canonical
        agent.require_replaceable(name)
        current = agent.read_bytes(name) or b""
        check_expected(agent.display(name), expected, current)
        if current != data:
            commit(agent, name, data, txn.recheck)
        else:
            agent.fsync()
        return sha256_hex(current), agent.display(name)


def check_expected(path: Path, expected: str | None, current: bytes) -> None:
    """Raise :class:`MemoryConflictError` unless ``current`` has the sha256 ``expected``."""
    if expected is None:
        return
    actual = sha256_hex(current)
    if not isinstance(expected, str) or expected.lower() != actual:
        raise MemoryConflictError(path, str(expected), actual)


def generation_of(mem: AgentMemory) -> str:
    """The agent's generation: ``memory/.generation``'s token, ``""`` when there is none."""
    return read_generation(read_memory(mem, lambda m: m.read_bytes(m.lookup(GENERATION)), None))


def read_generation(raw: bytes | None) -> str:
    """The token in a generation file's bytes (32 hex digits), ``""`` when missing."""
    token = (raw or b"").strip().decode("ascii", "replace")
    return token.lower() if re.fullmatch(r"[0-9a-fA-F]{32}", token) else ""


def commit(
    folder: Folder, name: str, data: bytes, recheck: Callable[[], None], scrub: bool = False
) -> None:
    """``Folder.write_atomic``; a failure after the rename is a :class:`MemoryIOError` saying
    the new content is in place but may not be durable."""
    try:
        folder.write_atomic(name, data, recheck, scrub=scrub)
    except NotDurableError as exc:
        raise MemoryIOError(
            OSError(
                exc.errno,
                f"{name} now holds the new content (sha256 {sha256_hex(data)}), but flushing "
                f"its folder to disk failed ({exc.strerror}): it reads back as written but "
                "may not survive a power loss; writing the same content again (with "
                f"expected_sha256 {sha256_hex(data)}, or with none) makes it durable",
                exc.filename,
            )
        ) from exc
