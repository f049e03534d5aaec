"""The environment variables the package reads (all in :data:`VARIABLES`; nothing else reads
``os.environ``), and the one rule for switches (:func:`switch`)."""

from __future__ import annotations

import os

from .errors import INVALID_PARAMS, MemoryToolError

ROOT = "JUPYTER_AGENT_MEMORY_ROOT"
AGENT = "JUPYTER_AGENT_MEMORY_AGENT"
CACHE = "JUPYTER_AGENT_MEMORY_CACHE"
INDEX = "JUPYTER_AGENT_MEMORY_INDEX"
MCP_TOKEN = "JUPYTER_AGENT_MEMORY_MCP_TOKEN"
HOLD_FILES = "JUPYTER_AGENT_MEMORY_HOLD_FILES"
XDG_CACHE_HOME = "XDG_CACHE_HOME"

#: Every variable the package reads, and what it does.
VARIABLES: dict[str, str] = {
    ROOT: "the folder holding one sub-folder per agent (default: <jupyter data dir>/agent-memory)",
    AGENT: "the agent every surface starts on (default: default)",
    CACHE: "where derived caches such as the journal index live (default: the XDG cache)",
    INDEX: "a switch: keep the journal's optional index (see the journal's documentation)",
    MCP_TOKEN: "the bearer token the Streamable HTTP MCP server requires",
    HOLD_FILES: "a switch: prompt builders keep the memory files open between builds",
    XDG_CACHE_HOME: "the user's cache folder, read when JUPYTER_AGENT_MEMORY_CACHE is unset",
}

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def text(name: str) -> str | None:
    """The variable's value with surrounding spaces removed; None when unset or empty."""
    _known(name)
    value = os.environ.get(name, "").strip()
    return value or None


def switch(name: str, default: bool | None = None) -> bool | None:
    """The variable as a switch: ``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off``
    in any case, ``default`` when unset or empty; anything else raises -32602."""
    _known(name)
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if not value:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise MemoryToolError(
        f"${name} must be 1 or 0 (also true/false, yes/no, on/off), got {raw!r}", INVALID_PARAMS
    )


def _known(name: str) -> None:
    if name not in VARIABLES:  # a programming error: every variable is documented above
        raise KeyError(f"{name} is not one of the package's documented variables")
