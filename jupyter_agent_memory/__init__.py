"""Long-term memory for LLM agents, kept as plain files you can read and edit.

An agent's memory is a folder: ``SOUL.md`` (who the agent is), ``USER.md`` (who the user is),
``memory/FACT.md`` (durable knowledge, rewritten whole by the ``memory`` tool) and
``memory/JOURNAL.jsonl`` (an append-only event log the tool searches). A
:class:`PromptBuilder` loads SOUL, USER and FACT back into the next session's system prompt::

    from jupyter_agent_memory import AgentMemory, PromptBuilder
    mem = AgentMemory.open("./demo-agent")
    mem.call_tool({"action": "update", "content": "- The user prefers metric units.\\n"})
    print(PromptBuilder().build(mem).text)

In IPython or Jupyter: ``%load_ext jupyter_agent_memory`` (public names load on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .__about__ import __version__

if TYPE_CHECKING:
    # What type checkers and IDEs see; at run time the same names load on first use.
    from .engine import (
        MEMORY_TOOL,
        AgentMemory,
        CorruptJournalWarning,
        Prompt,
        PromptBuilder,
        PromptWarning,
        Toolset,
        WriteResult,
        call_tool,
        default_agent_id,
        default_root,
        forget,
        lint,
        list_agents,
        list_templates,
        product_info,
        provision,
        validate_agent_id,
    )
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
    from .notebook.panel import MemoryPanel

_ENGINE = (
    "AgentMemory", "CorruptJournalWarning", "WriteResult", "PromptBuilder", "Prompt",
    "PromptWarning", "Toolset", "MEMORY_TOOL", "call_tool", "provision", "product_info",
    "list_templates", "list_agents", "validate_agent_id", "default_root", "default_agent_id",
    "forget", "lint",
)
_ERRORS = (
    "MemoryToolError", "MemoryConflictError", "UnsafePathError", "InvalidAgentIdError",
    "AgentNotFoundError", "ContentTooLargeError", "LockTimeoutError", "MemoryIOError",
    "VersionNotFoundError", "SessionNotFoundError", "TemplateError",
)
#: public name -> the module it is loaded from (relative to this package)
_EXPORTS = {
    **dict.fromkeys(_ENGINE, ".engine"),
    **dict.fromkeys(_ERRORS, ".errors"),
    "MemoryPanel": ".notebook.panel",
}

__all__ = [
    "__version__", "AgentMemory", "CorruptJournalWarning", "WriteResult", "PromptBuilder",
    "Prompt", "PromptWarning", "Toolset", "MEMORY_TOOL", "call_tool", "provision",
    "product_info", "list_templates", "list_agents", "validate_agent_id", "default_root",
    "default_agent_id", "forget", "lint", "MemoryToolError", "MemoryConflictError",
    "UnsafePathError", "InvalidAgentIdError", "AgentNotFoundError", "ContentTooLargeError",
    "LockTimeoutError", "MemoryIOError", "VersionNotFoundError", "SessionNotFoundError",
    "TemplateError", "MemoryPanel",
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
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the agent-memory magics and the panel's refresh hook (``%unload_ext``)."""
    from .notebook.magics import unload_ipython_extension as unload

    unload(ipython)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Tell jupyter_server where the REST API extension lives (loaded lazily)."""
    return [{"module": "jupyter_agent_memory.server"}]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Tell JupyterLab where the prebuilt sidebar is installed."""
    return [{"src": "labextension", "dest": "jupyter-agent-memory"}]
