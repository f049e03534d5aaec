"""The engine: one agent's memory files, the ``memory`` tool and the prompt builder. It
imports no IPython, widgets, HTTP or MCP; every surface calls these names, so all see the same
texts and errors (docs/architecture.md)."""

from __future__ import annotations

from .forgetting import forget, lint
from .functions import Toolset
from .paths import default_agent_id, default_root, list_agents, validate_agent_id
from .prompt import Prompt, PromptBuilder, PromptWarning
from .store import AgentMemory, CorruptJournalWarning, WriteResult
from .templates import list_templates, product_info, provision
from .tool import MEMORY_TOOL, call_tool

__all__ = [
    "MEMORY_TOOL", "AgentMemory", "CorruptJournalWarning", "Prompt", "PromptWarning",
    "PromptBuilder", "Toolset", "WriteResult", "call_tool", "default_agent_id", "default_root",
    "forget", "lint", "list_agents", "list_templates", "product_info", "provision",
    "validate_agent_id",
]
