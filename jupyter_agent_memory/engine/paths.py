"""Where agents live: resolving an agent *target* to its folder.

A target is an agent id under the agents root, or a folder path; the agent id rules of the
design are checked here. Links *above* the agent folder (a symlinked home or temp directory)
are resolved once, when the target is resolved; inside the agent folder nothing is followed
(see :mod:`jupyter_agent_memory.folder`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .. import environment
from ..errors import (
    InvalidAgentIdError,
    InvalidWorkspaceError,
    UnsafePathError,
    engine_boundary,
)

DEFAULT_AGENT = "default"
RESERVED_AGENT_IDS = frozenset({"system"})
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Most filesystems cap one name at 255 bytes; a longer id could never name a folder.
MAX_AGENT_ID_BYTES = 255


def default_root() -> Path:
    """The folder holding one sub-folder per agent.

    ``$JUPYTER_AGENT_MEMORY_ROOT`` when set, else ``<jupyter data dir>/agent-memory``.
    """
    configured = environment.text(environment.ROOT)
    if configured:
        return Path(configured).expanduser()
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "agent-memory"


def default_agent_id() -> str:
    """The agent every surface starts on: ``$JUPYTER_AGENT_MEMORY_AGENT`` or ``default``."""
    return validate_agent_id(environment.text(environment.AGENT) or DEFAULT_AGENT)


def validate_agent_id(agent_id: object) -> str:
    """Return ``agent_id`` when it can name a folder under the root, else raise.

    An id is a non-empty string, not ``.`` or ``..``, without ``/`` or ``\\``, not starting
    with ``@``, without control characters, at most 255 bytes of UTF-8, and not the reserved
    name ``system`` in any case.
    """
    if not isinstance(agent_id, str) or not agent_id:
        raise InvalidAgentIdError("Invalid agent id: it must be a non-empty string")
    if agent_id in (".", ".."):
        raise InvalidAgentIdError(f'Invalid agent id "{agent_id}": it cannot be "." or ".."')
    if "/" in agent_id or "\\" in agent_id:
        raise InvalidAgentIdError(f'Invalid agent id "{agent_id}": it cannot contain "/" or "\\"')
    if _CONTROL.search(agent_id):
        # A folder name is shown in terminals, tables and the sidebar: no character in it
        # may move the cursor, colour the screen or start a new row.
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
        # Surfaces that take ids and folders in one field (the REST API's "@relative/path")
        # read a leading "@" as a folder path: such an id could never be opened by id there.
        raise InvalidAgentIdError(f'Invalid agent id "{agent_id}": it cannot start with "@"')
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
    return target.startswith((".", "~")) or "/" in target


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
    agent_id = os.fspath(target)  # looks_like_path ruled out a PathLike
    folder, base = resolve_agent_id(agent_id, root)
    return folder, agent_id, base


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
    """The absolute session workspace, refusing one that is not an existing folder.

    The prompt tells the model its working directory is this folder, so a mistyped path must
    be an error on every surface instead of a confident falsehood.
    """
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
        if not entry.is_dir(follow_symlinks=False):
            continue
        try:
            ids.append(validate_agent_id(entry.name))
        except InvalidAgentIdError:
            continue
    return sorted(ids)
