"""The engine: one agent's memory files, the ``memory`` tool and the prompt builder.

Nothing here imports IPython, widgets, HTTP or MCP; every surface calls these names, so a
model, a notebook user and a REST client see the same texts and errors. Modules:

- :mod:`.paths`: agent ids, the agents root, resolving a target to a folder;
- :mod:`.store`: :class:`AgentMemory`, the only writer of an agent folder;
- :mod:`.history`: previous FACT.md versions; :mod:`.secrets`: the credential guard;
- :mod:`.tool`: the ``memory`` tool's schema, argument rules and result texts;
- :mod:`.functions`: the tools a surface offers, as function-calling specs, and one dispatcher;
- :mod:`.prompt` (with :mod:`.prompt_cache` and :mod:`.bootstrap`): the system prompt;
- :mod:`.sessions`: session receipts and stored prompts; :mod:`.forgetting`: verified forgetting;
- :mod:`.templates`, :mod:`.manifest`, :mod:`.catalog`: provisioning and product knowledge;
- :mod:`.jstext`: the few JavaScript string rules that results shared with Cherry Studio
  depend on.
"""

from __future__ import annotations

from .forgetting import forget, lint
from .functions import Toolset
from .paths import default_agent_id, default_root, list_agents, validate_agent_id
from .prompt import Prompt, PromptBuilder, PromptWarning
from .store import AgentMemory, CorruptJournalWarning, WriteResult
from .templates import list_templates, product_info, provision
from .tool import MEMORY_TOOL, call_tool

__all__ = [
    "MEMORY_TOOL",
    "AgentMemory",
    "CorruptJournalWarning",
    "Prompt",
    "PromptWarning",
    "PromptBuilder",
    "Toolset",
    "WriteResult",
    "call_tool",
    "default_agent_id",
    "default_root",
    "forget",
    "lint",
    "list_agents",
    "list_templates",
    "product_info",
    "provision",
    "validate_agent_id",
]
