"""Long-term memory for LLM agents, kept as plain files you can read and edit.

An agent's memory is a folder: ``SOUL.md`` (who the agent is), ``USER.md`` (who the user is),
``memory/FACT.md`` (durable knowledge, rewritten whole by the ``memory`` tool) and
``memory/JOURNAL.jsonl`` (an append-only event log the tool searches). A
:class:`PromptBuilder` loads SOUL, USER and FACT back into the system prompt of the next
session.

Quick start::

    from jupyter_agent_memory import AgentMemory, PromptBuilder
    mem = AgentMemory.open("./demo-agent")
    mem.call_tool({"action": "update", "content": "- The user prefers metric units.\\n"})
    print(PromptBuilder().build(mem).text)

In IPython or Jupyter: ``%load_ext jupyter_agent_memory``. Public names are loaded on first
use, so loading the extension stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .__about__ import __version__

if TYPE_CHECKING:
    # What type checkers and IDEs see; at run time the same names load on first use
    # (``__getattr__`` below). tests/test_public_api.py keeps the two lists identical.
    from .errors import (
        AgentNotFoundError,
        ContentTooLargeError,
        InvalidAgentIdError,
        LockTimeoutError,
        MemoryConflictError,
        MemoryIOError,
        MemoryToolError,
        SessionNotFoundError,
        TemplateError,
        UnsafePathError,
        VersionNotFoundError,
    )
    from .forgetting import forget, lint
    from .panel import MemoryPanel
    from .paths import default_agent_id, default_root, list_agents, validate_agent_id
    from .prompt import Prompt, PromptBudgetWarning, PromptBuilder
    from .store import AgentMemory, CorruptJournalWarning, WriteResult
    from .templates import list_templates, product_info, provision
    from .tool import MEMORY_TOOL, call_tool

_EXPORTS = {
    "AgentMemory": ".store",
    "CorruptJournalWarning": ".store",
    "WriteResult": ".store",
    "PromptBuilder": ".prompt",
    "Prompt": ".prompt",
    "PromptBudgetWarning": ".prompt",
    "MemoryToolError": ".errors",
    "MemoryConflictError": ".errors",
    "UnsafePathError": ".errors",
    "InvalidAgentIdError": ".errors",
    "AgentNotFoundError": ".errors",
    "ContentTooLargeError": ".errors",
    "LockTimeoutError": ".errors",
    "MemoryIOError": ".errors",
    "VersionNotFoundError": ".errors",
    "SessionNotFoundError": ".errors",
    "TemplateError": ".errors",
    "MEMORY_TOOL": ".tool",
    "call_tool": ".tool",
    "provision": ".templates",
    "product_info": ".templates",
    "list_templates": ".templates",
    "list_agents": ".paths",
    "validate_agent_id": ".paths",
    "default_root": ".paths",
    "default_agent_id": ".paths",
    "MemoryPanel": ".panel",
    "forget": ".forgetting",
    "lint": ".forgetting",
}

__all__ = [
    "__version__",
    "AgentMemory",
    "CorruptJournalWarning",
    "WriteResult",
    "PromptBuilder",
    "Prompt",
    "PromptBudgetWarning",
    "MemoryToolError",
    "MemoryConflictError",
    "UnsafePathError",
    "InvalidAgentIdError",
    "AgentNotFoundError",
    "ContentTooLargeError",
    "LockTimeoutError",
    "MemoryIOError",
    "VersionNotFoundError",
    "SessionNotFoundError",
    "TemplateError",
    "MEMORY_TOOL",
    "call_tool",
    "provision",
    "product_info",
    "list_templates",
    "list_agents",
    "validate_agent_id",
    "default_root",
    "default_agent_id",
    "MemoryPanel",
    "forget",
    "lint",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def load_ipython_extension(ipython: Any) -> None:
    """Register the agent-memory magics (``%load_ext jupyter_agent_memory``)."""
    from .magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the agent-memory magics and the panel's refresh hook (``%unload_ext``)."""
    from .magics import unload_ipython_extension as unload

    unload(ipython)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Tell jupyter_server where the REST API extension lives (loaded lazily)."""
    return [{"module": "jupyter_agent_memory.server"}]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Tell JupyterLab where the prebuilt sidebar is installed."""
    return [{"src": "labextension", "dest": "jupyter-agent-memory"}]
