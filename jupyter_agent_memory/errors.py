"""Errors raised by the engine; every surface reports their messages unchanged. Codes follow
JSON-RPC, which the tool-calling protocols reaching the ``memory`` tool speak."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class MemoryToolError(Exception):
    """A ``memory`` tool call (or any engine operation) that could not be carried out.
    ``code``: -32602 for invalid arguments, -32603 for internal problems (unsafe paths, I/O
    failures, conflicts); ``str(error)`` is the message alone."""

    def __init__(self, message: str, code: int = INVALID_PARAMS) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return self.message


class MemoryConflictError(MemoryToolError):
    """A compare-and-swap write found a different version on disk; nothing was written."""

    def __init__(self, path: object, expected: str, actual: str) -> None:
        super().__init__(
            f"{path} changed since it was read: expected sha256 {expected}, "
            f"found {actual}; nothing was written",
            INTERNAL_ERROR,
        )
        self.expected = expected
        self.actual = actual


class UnsafePathError(MemoryToolError):
    """A file or folder is a symlink, not a regular file/folder, or escapes its root."""

    def __init__(self, message: str) -> None:
        super().__init__(message, INTERNAL_ERROR)

    @classmethod
    def hard_links(cls, path: object, links: int) -> UnsafePathError:
        """Refusing a file with ``links`` hard links (its data may live outside the folder)."""
        return cls(
            f"Refusing to use {path}: it has {links} hard links; memory files must not share "
            "their data with another file"
        )


class VersionNotFoundError(MemoryToolError):
    """A well-formed FACT.md version id (sha256 or prefix) that matches no stored version."""


class SessionNotFoundError(MemoryToolError):
    """A well-formed session id (or prefix) that matches no recorded session."""


class InvalidAgentIdError(MemoryToolError, ValueError):
    """An agent id that cannot name a folder under the agents root."""


class TemplateError(MemoryToolError, ValueError):
    """A template folder or its ``agent.json`` is invalid; nothing was provisioned."""


class AgentNotFoundError(MemoryToolError):
    """A read-only command named an agent whose folder (``path``) does not exist; nothing was
    created (only explicit commands create agents, so a typo never leaves a folder behind)."""

    def __init__(self, path: object, label: str | None = None) -> None:
        name = label if label is not None else str(path)
        super().__init__(
            f"Agent {name!r} does not exist (no folder at {path}); create it with "
            f"`jupyter-agent-memory init --agent {name}` or `%agent_memory {name}`"
        )
        self.path = path


class LockTimeoutError(MemoryToolError):
    """Another process held an agent's lock longer than the configured wait; nothing was
    written (a stuck writer never stalls a server, a notebook or an MCP session)."""

    def __init__(self, path: object, timeout: float) -> None:
        super().__init__(
            f"Timed out after {timeout:g} s waiting for the lock {path}: another process is "
            "writing this agent's memory; nothing was written, try again",
            INTERNAL_ERROR,
        )
        self.path = path


class ContentTooLargeError(MemoryToolError):
    """Text over the agent's size limit (``AgentMemory.max_bytes``); nothing was written."""

    def __init__(self, field: str, size: int, limit: int) -> None:
        super().__init__(f"'{field}' is too large: {size} bytes, the limit is {limit} bytes")
        self.size = size
        self.limit = limit


class InvalidWorkspaceError(MemoryToolError, ValueError):
    """A session workspace that is not an existing folder."""


class EmptyEditError(MemoryToolError, ValueError):
    """A person saved an empty (or whitespace-only) FACT.md from an editing surface."""

    def __init__(self) -> None:
        super().__init__(
            "Nothing to save: the new FACT.md is empty or only whitespace (FACT.md is never "
            "cleared by accident; write at least one line)"
        )


class MemoryIOError(MemoryToolError, OSError):
    """The filesystem failed an engine operation (disk full, permission denied, ...); also an
    :class:`OSError` with the original ``errno`` and ``filename``, so ``except OSError`` keeps
    working. Code -32603."""

    def __init__(self, error: OSError) -> None:
        where = f" ({error.filename})" if error.filename else ""
        super().__init__(f"{error.strerror or error}{where}", INTERNAL_ERROR)
        self.errno = error.errno
        self.strerror = error.strerror
        self.filename = error.filename


P = ParamSpec("P")
R = TypeVar("R")


def engine_boundary(function: Callable[P, R]) -> Callable[P, R]:
    """Let only the :class:`MemoryToolError` family out of a public engine function: an
    ``OSError`` becomes :class:`MemoryIOError`, so every surface catches one family."""

    @functools.wraps(function)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except MemoryToolError:
            raise
        except OSError as exc:
            raise MemoryIOError(exc) from exc

    return guarded
