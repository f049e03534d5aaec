"""The model's tools: ``memory`` (FACT.md and the journal) and the opt-in ``profile`` tool
(SOUL.md or USER.md rewritten whole). Their schemas, argument rules and result texts live
here, and every surface calls them, so a model sees the same texts and errors anywhere."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..errors import INVALID_PARAMS, MemoryToolError
from .arguments import DEFAULT_LIMIT, coerce_time, normalize_limit

if TYPE_CHECKING:
    from .store import AgentMemory

MEMORY_TOOL: dict[str, Any] = {
    "name": "memory",
    "description": (
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
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "enum": ["update", "append", "search"],
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
                "description": f"search: most entries to return (default {DEFAULT_LIMIT}).",
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

UPDATED = "Memory updated."
NO_JOURNAL = "No journal entries found."
NO_MATCHES = "No matching journal entries found."


def call_tool(memory: AgentMemory, args: dict[str, Any]) -> str:
    """Run one ``memory`` tool call; returns the result text. Raises ``MemoryToolError``:
    -32602 for bad arguments (checked before any file is touched), -32603 for the rest."""
    if not isinstance(args, dict):
        raise MemoryToolError("Tool arguments must be a JSON object")
    action = args.get("action")
    if action == "update":
        content = _required_string(args, "content", "update action")
        memory.check_folder()
        memory.update_facts(content)
        return UPDATED
    if action == "append":
        text = _required_string(args, "text", "append action")
        tags = args.get("tags")
        memory.check_folder()
        entry = memory.append(text, tags if isinstance(tags, list) else [])
        return f"Journal entry added at {entry['ts']}."
    if action == "search":
        query, tag = (_optional_string(args, key) for key in ("query", "tag"))
        since, until = (coerce_time(args.get(key), key) for key in ("since", "until"))
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


#: The opt-in tool for SOUL.md and USER.md, in the same neutral shape as ``MEMORY_TOOL``.
PROFILE_TOOL: dict[str, Any] = {
    "name": "profile",
    "description": (
        "Rewrite SOUL.md (who you are: name, personality, tone, communication style) or "
        "USER.md (who the user is: name, preferences, timezone, context) as a whole. Send the "
        "complete new file, keeping what is still true. Durable knowledge about projects and "
        "decisions belongs in FACT.md (the memory tool), one-off events in the journal."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "file": {
                "type": "string",
                "enum": ["soul", "user"],
                "description": "soul: SOUL.md, your persona; user: USER.md, the user's profile.",
            },
            "content": {
                "type": "string",
                "description": "The complete new file (replaces the whole file).",
            },
            "expected_sha256": {
                "type": "string",
                "description": (
                    "Optional: the sha256 of the version you are replacing (from this tool's "
                    "previous result); the write is refused if the file changed since."
                ),
            },
        },
        "required": ["file", "content"],
    },
}

#: ``profile``'s ``file`` values and the file each names.
PROFILE_FILES = {"soul": "SOUL.md", "user": "USER.md"}


def call_profile_tool(memory: AgentMemory, args: dict[str, Any]) -> str:
    """Run one ``profile`` tool call; returns ``<FILE> updated (sha256 <hex>).`` The same rules
    as a ``memory`` update; ``expected_sha256`` makes the write compare-and-swap."""
    if not isinstance(args, dict):
        raise MemoryToolError("Tool arguments must be a JSON object")
    which = args.get("file")
    if which not in PROFILE_FILES:
        shown = which if isinstance(which, str) else json.dumps(which, default=str)
        raise MemoryToolError(f'Unknown file "{shown}", expected soul/user')
    content = _required_string(args, "content", "the profile tool")
    expected = _optional_string(args, "expected_sha256")
    memory.check_folder()
    write = memory.write_soul if which == "soul" else memory.write_user
    written = write(content, expected_sha256=expected or None)
    return f"{PROFILE_FILES[which]} updated (sha256 {written.sha256})."


def _required_string(args: dict[str, Any], field: str, use: str) -> str:
    value = args.get(field)
    if not isinstance(value, str) or not value:
        raise MemoryToolError(f"'{field}' is required for {use}")
    return value


def _optional_string(args: dict[str, Any], field: str) -> str:
    value = args.get(field)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MemoryToolError(f"'{field}' must be a string")
    return value
