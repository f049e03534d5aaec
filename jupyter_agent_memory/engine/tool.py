"""The ``memory`` tool: what a model calls to write and search its long-term memory.

This module owns the tool's schema, its argument rules and its result texts. Every surface
(Python, magics, REST, MCP, function calling) goes through :func:`call_tool`, so a model sees
the same texts and errors wherever it runs.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .. import journal
from ..errors import INVALID_PARAMS, MemoryToolError

if TYPE_CHECKING:
    from .store import AgentMemory

ACTIONS = ("update", "append", "search")

MEMORY_TOOL_DESCRIPTION = (
    "Long-term memory that survives across sessions.\n"
    "- update: rewrite memory/FACT.md as a whole with `content` (durable knowledge: stable "
    "facts about the user, the project and how to work together). Send the complete new "
    "file, keeping what is still true.\n"
    "- append: add a timestamped entry to memory/JOURNAL.jsonl with `text` and optional "
    "`tags` (one-off events, decisions, session notes).\n"
    "- search: find journal entries, newest first, by `query` (case-insensitive substring), "
    "`tag`, `limit` (default 20) and an optional `since`/`until` time window (ISO-8601).\n"
    "Before writing to FACT.md, ask: will this still matter in 6 months? "
    "If not, use append instead."
)

MEMORY_TOOL: dict[str, Any] = {
    "name": "memory",
    "description": MEMORY_TOOL_DESCRIPTION,
    "input_schema": {
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "enum": list(ACTIONS),
                "description": "update FACT.md, append to the journal, or search the journal.",
            },
            "content": {
                "type": "string",
                "description": "update: the complete new FACT.md (replaces the whole file).",
            },
            "text": {"type": "string", "description": "append: the journal entry text."},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "description": "append: optional tags for the entry.",
            },
            "query": {
                "type": "string",
                "description": "search: case-insensitive substring of the entry text.",
            },
            "tag": {"type": "string", "description": "search: only entries with this tag."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "search: most entries to return (default 20).",
            },
            "since": {
                "type": "string",
                "description": "search: entries at or after this ISO-8601 time (UTC if no zone).",
            },
            "until": {
                "type": "string",
                "description": "search: entries at or before this ISO-8601 time (UTC if no zone).",
            },
        },
        "required": ["action"],
    },
}

#: What ``limit`` means when it is missing or not an integer.
DEFAULT_LIMIT = 20

UPDATED = "Memory updated."
NO_JOURNAL = "No journal entries found."
NO_MATCHES = "No matching journal entries found."


def call_tool(memory: AgentMemory, args: dict[str, Any]) -> str:
    """Run one ``memory`` tool call against ``memory``; returns the result text.

    Raises :class:`~jupyter_agent_memory.errors.MemoryToolError` (code -32602 for bad
    arguments, -32603 for unsafe paths, conflicts and I/O problems). Arguments are checked
    before any file is touched.
    """
    if not isinstance(args, dict):
        raise MemoryToolError("Tool arguments must be a JSON object", INVALID_PARAMS)
    action = args.get("action")
    if action == "update":
        content = args.get("content")
        if not isinstance(content, str) or not content:
            raise MemoryToolError("'content' is required for update action", INVALID_PARAMS)
        memory.check_folder()
        memory.update_facts(content)
        return UPDATED
    if action == "append":
        text = args.get("text")
        if not isinstance(text, str) or not text:
            raise MemoryToolError("'text' is required for append action", INVALID_PARAMS)
        tags = args.get("tags")
        memory.check_folder()
        entry = memory.append(text, tags if isinstance(tags, list) else [])
        return f"Journal entry added at {entry['ts']}."
    if action == "search":
        query = _optional_string(args, "query")
        tag = _optional_string(args, "tag")
        since = coerce_time(args.get("since"), "since")
        until = coerce_time(args.get("until"), "until")
        limit = normalize_limit(args.get("limit"))
        memory.check_folder()
        result = memory.search_journal(query, tag, limit, since, until)
        if result is None:
            return NO_JOURNAL
        if not result:
            return NO_MATCHES
        return json.dumps(list(result), indent=2, ensure_ascii=False)
    shown = action if isinstance(action, str) else ("" if action is None else json.dumps(action))
    raise MemoryToolError(
        f'Unknown action "{shown}", expected update/append/search', INVALID_PARAMS
    )


def _optional_string(args: dict[str, Any], field: str) -> str:
    value = args.get(field)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MemoryToolError(f"'{field}' must be a string", INVALID_PARAMS)
    return value


def normalize_limit(value: object) -> int:
    """The tool's lenient ``limit`` rule: ints, integral floats and int strings, at least 1.

    Anything else means ``DEFAULT_LIMIT``. ``3.0`` is an integer in JSON Schema, so it means 3.
    """
    if isinstance(value, bool):
        return DEFAULT_LIMIT
    if isinstance(value, int):
        return max(1, value)
    if isinstance(value, float):
        return max(1, int(value)) if value.is_integer() else DEFAULT_LIMIT
    if isinstance(value, str):
        try:
            return max(1, int(value.strip()))
        except ValueError:
            return DEFAULT_LIMIT
    return DEFAULT_LIMIT


def check_count(value: int, name: str) -> int:
    """A count a person typed (``-n``, ``--limit``, the panel's Limit): returned when it is a
    positive integer, else -32602 naming ``name`` and the rule.

    People asking for ``-n 0`` or ``-n -3`` made a mistake worth telling them about; the tool
    keeps its lenient rule (:func:`normalize_limit`) because a model cannot read a usage text.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MemoryToolError(
            f"{name} must be a positive integer (1 or more), got {value!r}", INVALID_PARAMS
        )
    return value


def coerce_time(value: datetime | str | None, field: str) -> datetime | None:
    """Parse a time-window bound (datetime or ISO-8601 text; no zone means UTC)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, str):
        try:
            return journal.parse_time(value)
        except ValueError:
            pass
    raise MemoryToolError(
        f"Invalid '{field}': expected an ISO-8601 date or time, "
        f"got {json.dumps(value, default=str)}",
        INVALID_PARAMS,
    )
