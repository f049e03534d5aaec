"""Where agents live: resolving an agent *target* (an id under the agents root, or a folder
path) to its folder. Links above the agent folder are resolved once, here; inside it nothing is
followed (see :mod:`jupyter_agent_memory.folder`).
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from .. import environment
from ..errors import InvalidAgentIdError, InvalidWorkspaceError, UnsafePathError, engine_boundary

DEFAULT_AGENT = "default"
RESERVED_AGENT_IDS = frozenset({"system"})
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Most filesystems cap one name at 255 bytes; a longer id could never name a folder.
MAX_AGENT_ID_BYTES = 255


def default_root() -> Path:
    """The folder holding one sub-folder per agent: ``$JUPYTER_AGENT_MEMORY_ROOT`` when set,
    else ``<jupyter data dir>/agent-memory``."""
    configured = environment.text(environment.ROOT)
    if configured:
        return Path(configured).expanduser()
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "agent-memory"


def default_agent_id() -> str:
    """The agent every surface starts on: ``$JUPYTER_AGENT_MEMORY_AGENT`` or ``default``."""
    return validate_agent_id(environment.text(environment.AGENT) or DEFAULT_AGENT)


def validate_agent_id(agent_id: object) -> str:
    """Return ``agent_id`` when it can name a folder under the root, else raise: a non-empty
    string of at most 255 UTF-8 bytes, not ``.``, ``..`` or ``system`` (any case), without
    ``/``, ``\\``, control characters or a leading ``@``."""
    if not isinstance(agent_id, str) or not agent_id:
        raise InvalidAgentIdError("Invalid agent id: it must be a non-empty string")
    if agent_id in (".", ".."):
        raise InvalidAgentIdError(f'Invalid agent id "{agent_id}": it cannot be "." or ".."')
    if "/" in agent_id or "\\" in agent_id:
        raise InvalidAgentIdError(f'Invalid agent id "{agent_id}": it cannot contain "/" or "\\"')
    if _CONTROL.search(agent_id):
        # An id is shown in terminals, tables and the sidebar: nothing may move the cursor.
        raise InvalidAgentIdError("Invalid agent id: it cannot contain control characters")
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
    if agent_id.startswith("@"):
        # The REST API reads a leading "@" as a folder path ("@relative/path").
        raise InvalidAgentIdError(f'Invalid agent id "{agent_id}": it cannot start with "@"')
    if agent_id.lower() in RESERVED_AGENT_IDS:
        raise InvalidAgentIdError(f'Invalid agent id "{agent_id}": "system" is reserved')
    return agent_id


def resolve_target(
    target: str | os.PathLike[str] | None, root: str | os.PathLike[str] | None = None
) -> tuple[Path, str | None, Path]:
    """``(folder, agent_id or None, root)``, absolute, for an id or a folder path (a ``Path``,
    or text with ``/`` or starting with ``.`` or ``~``; links above it are resolved)."""
    if target is None:
        target = default_agent_id()
    if isinstance(target, os.PathLike) or target.startswith((".", "~")) or "/" in target:
        given = os.fspath(target)
        if os.path.basename(given.rstrip("/\\")) in (".", "..", "~"):
            # Never spill SOUL.md, USER.md and memory/ into the current, parent or home folder.
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


def resolve_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The agents root as an absolute path with links resolved (``None``: the default)."""
    base = Path(root).expanduser() if root is not None else default_root()
    return Path(os.path.realpath(os.path.abspath(base)))


def resolve_agent_id(
    agent_id: str, root: str | os.PathLike[str] | None = None
) -> tuple[Path, Path]:
    """``(folder, root)`` for an agent id under ``root`` (default: :func:`default_root`)."""
    validate_agent_id(agent_id)
    base = resolve_root(root)
    folder = base / agent_id
    if folder.parent != base:  # defence in depth; validate_agent_id already rules this out
        raise UnsafePathError(f"Refusing to use {folder}: it resolves outside {base}")
    return folder, base


def require_workspace(workspace: str | os.PathLike[str]) -> Path:
    """The absolute session workspace; one that is not an existing folder is refused."""
    path = Path(os.path.abspath(Path(workspace).expanduser()))
    if not path.is_dir():
        what = "does not exist" if not os.path.lexists(path) else "is not a folder"
        raise InvalidWorkspaceError(f"Workspace {path} {what}; give an existing folder")
    return path


@engine_boundary
def list_agents(root: str | os.PathLike[str] | None = None) -> list[str]:
    """Agent ids under ``root`` (real sub-folders with a valid id), sorted."""
    base = Path(root).expanduser() if root is not None else default_root()
    try:
        entries = list(os.scandir(base))
    except FileNotFoundError:
        return []
    ids = []
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            with contextlib.suppress(InvalidAgentIdError):
                ids.append(validate_agent_id(entry.name))
    return sorted(ids)
