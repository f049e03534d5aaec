"""What the MCP server offers, in plain Python over the engine (no ``mcp`` import): the prompt
builder's session context as instructions, five resources, and the tools ``memory``,
``product_info`` (with a product manifest) and an opt-in read tool."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..__about__ import __version__
from ..engine import functions
from ..engine.prompt import Prompt, PromptBuilder
from ..engine.store import FACT, JOURNAL, MEMORY_DIR, SOUL, USER, normalize_limit
from ..engine.templates import manifest_path_for, product_info
from ..engine.tool import MEMORY_TOOL
from ..errors import MemoryToolError
from ..folder import file_key, match_name

if TYPE_CHECKING:
    from ..engine.store import AgentMemory

__all__ = [
    "JOURNAL_URI", "PROMPT_NAME", "PROMPT_URI", "READ_TOOL_NAME", "RESOURCE_NOT_FOUND",
    "SERVER_INFO", "SERVER_NAME", "Changes", "MemoryService", "ResourceSpec",
]

log = logging.getLogger(__name__)

RESOURCE_NOT_FOUND = -32002  # MCP's code for a resource URI the server does not know

URI_BASE = "agent-memory://agent/"
SOUL_URI = URI_BASE + SOUL
USER_URI = URI_BASE + USER
FACT_URI = f"{URI_BASE}{MEMORY_DIR}/{FACT}"
JOURNAL_URI = URI_BASE + "journal/latest"
PROMPT_URI = URI_BASE + "prompt"
_FILE_URIS = (SOUL_URI, USER_URI, FACT_URI, JOURNAL_URI)

SERVER_NAME = "agent-memory"
#: The server's ``serverInfo``.
SERVER_INFO = {"name": SERVER_NAME, "title": "Agent memory", "version": __version__}
PROMPT_NAME = "new-session"
READ_TOOL_NAME = "memory_read"
DEFAULT_LATEST = 20
# The template record: provisioning writes it, and it decides whether product_info exists.
_TEMPLATE_RECORD = ".template.json"


@dataclass(frozen=True)
class ResourceSpec:
    """One resource the server lists."""

    uri: str
    name: str
    title: str
    description: str
    mime_type: str = "text/markdown"


@dataclass(frozen=True)
class Changes:
    """What differs between two snapshots: resource URIs, and whether the tool list moved."""

    resources: tuple[str, ...] = ()
    tools: bool = False

    def __bool__(self) -> bool:
        return bool(self.resources) or self.tools


@dataclass(frozen=True)
class ResourceText:
    """A resource as read: its text, MIME type and metadata (hashes, sizes)."""

    uri: str
    text: str
    mime_type: str
    meta: dict[str, Any]


READ_TOOL = {
    "name": READ_TOOL_NAME,
    "description": (
        "Read this agent's long-term memory: the whole of memory/FACT.md with its sha256, and "
        "the latest journal entries (newest first). Call it at the start of a conversation "
        "when the memory is not already in your instructions, and before a memory update, so "
        "that the new FACT.md keeps everything that is still true."
    ),
    "input_schema": {"type": "object", "properties": {"limit": {
        "type": "integer",
        "description": f"how many of the latest journal entries (default {DEFAULT_LATEST})",
    }}},
    "output_schema": {
        "type": "object",
        "properties": {
            "path": {"type": "string"}, "facts": {"type": "string"}, "sha256": {"type": "string"},
            "entries": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["path", "facts", "sha256", "entries"],
    },
}


#: How MCP hosts (Claude Code, Cherry Studio) name our memory tool: ``mcp__<server>__<tool>``.
HOST_TOOL_NAME = "mcp__agent-memory__memory"


def host_tools(tool_name: str | None = None) -> functions.Toolset:
    """What a model behind an MCP host is offered (the instructions describe it): our ``memory``
    tool under the host's name for it, and the host's file tools for SOUL.md and USER.md."""
    return functions.Toolset(memory=tool_name or HOST_TOOL_NAME, file_edits=True)


class MemoryService:
    """The MCP server's content for one agent: ``builder`` makes the session prompt (default:
    for :func:`host_tools`), ``workspace`` holds its ``system.md`` (default: the current
    directory), ``read_tool`` adds the read tool. Thread-safe; methods do file I/O."""

    def __init__(
        self, memory: AgentMemory, builder: PromptBuilder | None = None, *,
        workspace: str | os.PathLike[str] | None = None, read_tool: bool = False,
    ) -> None:
        self.memory = memory
        self.builder = builder if builder is not None else PromptBuilder(tools=host_tools())
        self.workspace = Path(os.path.abspath(workspace if workspace is not None else os.getcwd()))
        self.read_tool = read_tool
        # Once product_info was offered it stays offered, so a manifest that disappears
        # mid-session gives the tool's own "unavailable" answer instead of "Unknown tool".
        self._product_info_offered = False

    def prompt(self) -> Prompt:
        """The system prompt of a new session (``PromptBuilder.build_session``)."""
        return self.builder.build_session(self.memory, self.workspace)

    def instructions(self) -> str:
        """The server instructions: the session context of :meth:`prompt`, or the engine's
        refusal of the agent folder, so the model and the user learn why memory is missing."""
        try:
            prompt = self.prompt()
        except MemoryToolError as exc:
            return f"Agent memory is unavailable: {exc.message}"
        return self._context(prompt)

    def start_session(self, client: Mapping[str, Any] | None = None) -> str:
        """The instructions of a session that starts now, put on record in the sessions log
        with ``client`` (its ``{"name", "version"}``); unrecorded when the folder refuses."""
        info = {k: client[k] for k in ("name", "version") if k in client} if client else None
        try:
            start = self.builder.start_session(self.memory, self.workspace, client=info)
        except MemoryToolError as exc:
            log.warning("session start not recorded: %s", exc.message)
            return self.instructions()
        return self._context(start.prompt)

    def _context(self, prompt: Prompt) -> str:
        problem = self.problem()
        if problem is None:
            return prompt.context
        # The builder leaves out what it may not read: say why, not let the model think it forgot.
        return (
            f"{prompt.context}\n\nThe memory folder cannot be used right now: {problem} "
            "Every memory tool call reports this until the folder is fixed."
        )

    def problem(self) -> str | None:
        """The engine's refusal of the agent folder (a symlinked ``memory/``...), or None."""
        try:
            self.memory.file_stats()
        except MemoryToolError as exc:
            return exc.message
        return None

    def tool_names(self) -> list[str]:
        """Names of the tools offered now: ``memory``, ``product_info``, the read tool."""
        if not self._product_info_offered:
            with contextlib.suppress(MemoryToolError):
                self._product_info_offered = manifest_path_for(self.memory) is not None
        names = [functions.MEMORY_TOOL_NAME]
        if self._product_info_offered:
            names.append(functions.PRODUCT_INFO_TOOL_NAME)
        if self.read_tool:
            names.append(READ_TOOL_NAME)
        return names

    def tools(self) -> list[dict[str, Any]]:
        """The offered tools as neutral specs with ``title``, ``annotations`` and, where the
        result is always a JSON object, ``output_schema``."""
        specs = {
            functions.MEMORY_TOOL_NAME: (MEMORY_TOOL, "Agent memory"),
            functions.PRODUCT_INFO_TOOL_NAME: (functions.PRODUCT_INFO_TOOL, "Product information"),
            READ_TOOL_NAME: (READ_TOOL, "Read agent memory"),
        }
        offered = []
        for name in self.tool_names():
            spec, title = specs[name]
            # memory's update replaces the whole of FACT.md (destructive) and append is not
            # idempotent; no tool reaches outside the agent folder.
            read_only = name != functions.MEMORY_TOOL_NAME
            annotations = {
                "title": title, "readOnlyHint": read_only, "destructiveHint": not read_only,
                "idempotentHint": read_only, "openWorldHint": False,
            }
            offered.append({**spec, "title": title, "annotations": annotations})
        return offered

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> tuple[str, bool, Any]:
        """Run one tool call, never raising: ``(text, is_error, structured)``; ``structured``
        is the text parsed when it is a JSON object."""
        args = dict(arguments) if arguments is not None else {}
        try:
            offered = self.tool_names()
            if name not in offered:
                raise functions.unknown_tool_error(name, offered)
            if name == functions.MEMORY_TOOL_NAME:
                text = self.memory.call_tool(args)
            elif name == functions.PRODUCT_INFO_TOOL_NAME:
                text = product_info(self.memory, args)
            else:
                snapshot = self.read_snapshot(args.get("limit"))
                text = json.dumps(snapshot, indent=2, ensure_ascii=False)
        except MemoryToolError as exc:  # the engine's one error family, I/O failures included
            return functions.error_text(exc), True, None
        except Exception as exc:  # a bug, not an engine error: logged; the session goes on
            log.warning("tool %r failed unexpectedly", name, exc_info=True)
            return functions.error_text(exc), True, None
        structured = None
        if text.startswith("{"):
            with contextlib.suppress(ValueError):
                structured = json.loads(text)
        return text, False, structured if isinstance(structured, dict) else None

    def read_snapshot(self, limit: object = None) -> dict[str, Any]:
        """The read tool's result: FACT.md, its sha256 and the latest journal entries."""
        count = DEFAULT_LATEST if limit is None else normalize_limit(limit)
        facts, sha = self.memory.read_facts()
        path = str(self.memory.file_path(FACT))  # as named on disk (an existing fact.md)
        entries = list(self.memory.search(limit=count))
        return {"path": path, "facts": facts, "sha256": sha, "entries": entries}

    def resources(self) -> list[ResourceSpec]:
        """The resources the server lists (always the same five)."""
        path = self.memory.path
        return [
            ResourceSpec(SOUL_URI, SOUL, "Agent persona (SOUL.md)",
                         f"Who the agent is: name, personality, tone. File: {path / SOUL}"),
            ResourceSpec(USER_URI, USER, "User profile (USER.md)",
                         f"Who the user is: name, preferences, timezone. File: {path / USER}"),
            ResourceSpec(FACT_URI, FACT, "Durable knowledge (FACT.md)",
                         "What will still matter in six months; its sha256 is in the contents' "
                         f"_meta. File: {path / MEMORY_DIR / FACT}"),
            ResourceSpec(JOURNAL_URI, "journal", "Latest journal entries",
                         f"The {DEFAULT_LATEST} newest entries of {path / MEMORY_DIR / JOURNAL}, "
                         "newest first, as a JSON array.", "application/json"),
            ResourceSpec(PROMPT_URI, "prompt", "Session system prompt",
                         "The system prompt a new session starts with: the workspace's system.md "
                         "(when there is one) and the memory context."),
        ]

    def read(self, uri: str) -> ResourceText:
        """Read one resource now; raises ``MemoryToolError`` (``-32002`` for an unknown URI)."""
        mem = self.memory
        files = {SOUL_URI: (mem.read_soul, SOUL), USER_URI: (mem.read_user, USER),
                 FACT_URI: (mem.read_facts, FACT)}
        if uri in files:
            reader, canonical = files[uri]
            text, sha = reader()
            # The engine names the file as it is on disk (an existing fact.md keeps its case).
            meta: dict[str, Any] = {"path": str(mem.file_path(canonical)), "sha256": sha}
            return ResourceText(uri, text, "text/markdown", meta)
        if uri == JOURNAL_URI:
            entries = list(mem.search(limit=DEFAULT_LATEST))
            text = json.dumps(entries, indent=2, ensure_ascii=False)
            return ResourceText(uri, text, "application/json", {"count": len(entries)})
        if uri == PROMPT_URI:
            prompt = self.prompt()
            sections = [
                {"name": s.name, "source": str(s.source) if s.source else None, "tokens": s.tokens}
                for s in prompt.sections
            ]
            meta = {
                "tokens": prompt.tokens, "bootstrap": prompt.bootstrap,
                "budget_tokens": prompt.budget_tokens, "warnings": list(prompt.warnings),
                "sections": sections,
            }
            return ResourceText(uri, prompt.text, "text/markdown", meta)
        raise MemoryToolError(f"Resource not found: {uri}", RESOURCE_NOT_FOUND)

    def snapshot(self) -> dict[str, Any]:
        """The stat keys (nothing read) of what the resources and the tool list depend on; a
        refused folder gives its error text, so its recovery is noticed too."""
        try:
            stats = self.memory.file_stats()
        except MemoryToolError as exc:
            return {"error": exc.message}
        top = [name for name in stats if "/" not in name]
        memory_name = match_name(top, MEMORY_DIR)
        prefix = f"{memory_name}/"
        inside = [name[len(prefix) :] for name in stats if memory_name and name.startswith(prefix)]

        def key(names: list[str], canonical: str, prefix: str = "") -> Any:
            found = match_name(names, canonical)
            return file_key(stats[prefix + found]) if found is not None else None

        # The workspace folder's key (system.md created, removed or renamed) and system.md's
        # (edited); a case variant edited in place is seen at the next rename.
        workspace: list[tuple[int, int, int, int] | None] = []
        for path in (self.workspace, self.workspace / "system.md"):
            try:
                workspace.append(file_key(os.lstat(path)))
            except OSError:
                workspace.append(None)
        return {
            SOUL_URI: key(top, SOUL),
            USER_URI: key(top, USER),
            FACT_URI: key(inside, FACT, prefix),
            JOURNAL_URI: key(inside, JOURNAL, prefix),
            "template": key(top, _TEMPLATE_RECORD),
            "workspace": tuple(workspace),
        }

    def changes(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> Changes:
        """Which resource URIs changed between two snapshots, and whether the tool list may
        have (it is recomputed only when the template record moved)."""
        if "error" in before or "error" in after:
            if before == after:
                return Changes()
            return Changes((*_FILE_URIS, PROMPT_URI), tools=True)
        changed = [uri for uri in _FILE_URIS if before.get(uri) != after.get(uri)]
        prompt_inputs = (SOUL_URI, USER_URI, FACT_URI, "template", "workspace")
        if any(before.get(name) != after.get(name) for name in prompt_inputs):
            changed.append(PROMPT_URI)
        return Changes(tuple(changed), tools=before.get("template") != after.get("template"))
