"""Server-side settings of the agent-memory REST API (traitlets only; no tornado import).

Set them like any Jupyter option: ``c.AgentMemoryServer.root = "~/agents"`` in
``jupyter_server_config.py``, or ``jupyter lab --AgentMemoryServer.root=~/agents``.
"""

from __future__ import annotations

from pathlib import Path

from traitlets import Float, Int, TraitError, Unicode, validate
from traitlets.config import Configurable

from ..engine.prompt import DEFAULT_TOOL_NAME


class AgentMemoryServer(Configurable):
    """Settings for the ``/agent-memory/api/`` routes."""

    root = Unicode(
        "",
        help="Folder holding one sub-folder per agent. Empty: the engine default "
        "($JUPYTER_AGENT_MEMORY_ROOT, else <jupyter data dir>/agent-memory).",
    ).tag(config=True)

    default_agent = Unicode(
        "",
        help="Agent the sidebar starts on. Empty: the engine default "
        "($JUPYTER_AGENT_MEMORY_AGENT, else 'default').",
    ).tag(config=True)

    max_body_bytes = Int(
        8 * 1024 * 1024,
        help="Largest request body accepted by a write, in bytes; larger bodies get 413. "
        "The size of the text itself is the engine's limit (1 MiB by default), reported "
        "with the same message on every surface; this only bounds the JSON envelope, "
        "which escapes can make several times larger than the text.",
    ).tag(config=True)

    lock_timeout = Float(
        10.0,
        help="Seconds a write waits for an agent's lock held by another process before it "
        "fails with 503 (nothing written); reads never take the lock.",
    ).tag(config=True)

    worker_threads = Int(
        8,
        help="Threads running engine work for the API; each agent may use a quarter of them, "
        "so one agent waiting on a lock never delays another.",
    ).tag(config=True)

    tool_name = Unicode(
        DEFAULT_TOOL_NAME,
        help="Name of the memory tool as the model sees it, used in the prompt preview "
        f"(default {DEFAULT_TOOL_NAME}, the name function calling offers; MCP hosts show "
        "it under their own prefix).",
    ).tag(config=True)

    prompt_budget_tokens = Int(
        0,
        help="Token budget for the prompt preview; a larger memory is reported as over budget "
        "(never truncated). It wins over an agent's template budget; 0 sets none here, "
        "so the template's (if any) applies.",
    ).tag(config=True)

    @validate("max_body_bytes", "worker_threads", "prompt_budget_tokens")
    def _check_minimum(self, proposal: dict) -> int:
        name, value = proposal["trait"].name, int(proposal["value"])
        if name == "prompt_budget_tokens" and value < 0:
            raise TraitError(f"prompt_budget_tokens cannot be negative, got {value}")
        if name != "prompt_budget_tokens" and value < 1:
            raise TraitError(f"{name} must be at least 1, got {value}")
        return value

    def resolved_root(self) -> Path:
        """The agents root as an absolute path with links resolved (the engine's rule)."""
        from ..engine.paths import resolve_root

        return resolve_root(self.root or None)

    def resolved_default_agent(self) -> str:
        """The validated id of the agent the sidebar starts on."""
        from .. import default_agent_id, validate_agent_id

        return validate_agent_id(self.default_agent) if self.default_agent else default_agent_id()
