"""Every route of the REST API as plain data (no tornado, no jupyter_server).

Documentation and the product manifest list the API from here; ``tests/test_server_*`` check
that it matches the handlers that are actually registered.
"""

from __future__ import annotations

#: URL prefix (below the server's base URL) of every route.
API_PREFIX = "/agent-memory/api"

#: ``(methods, path pattern, description)`` for every route, in registration order. Path
#: patterns use ``{id}`` for an agent id, ``{sha}`` for a FACT.md version (sha256 or prefix), and
#: ``{sid}`` and ``{other}`` for recorded sessions (id or a prefix of at least 6 hex digits).
ROUTES: list[tuple[tuple[str, ...], str, str]] = [
    (
        ("GET", "POST"),
        f"{API_PREFIX}/agents",
        "List agents and templates; create an agent, optionally provisioned from a template.",
    ),
    (
        ("GET", "PUT"),
        f"{API_PREFIX}/agents/{{id}}/facts",
        "Read FACT.md with its sha256; replace it with compare-and-swap (409 on conflict).",
    ),
    (
        ("GET", "POST"),
        f"{API_PREFIX}/agents/{{id}}/journal",
        "Search the journal (query, tag, limit, since, until), newest first; append an entry.",
    ),
    (
        ("GET",),
        f"{API_PREFIX}/agents/{{id}}/prompt",
        "Build the system prompt the agent would get, with per-section sizes.",
    ),
    (
        ("GET",),
        f"{API_PREFIX}/agents/{{id}}/history",
        "List previous FACT.md versions, newest first.",
    ),
    (
        ("GET",),
        f"{API_PREFIX}/agents/{{id}}/history/{{sha}}",
        "Read one previous FACT.md version by sha256 or unique prefix.",
    ),
    (
        ("GET",),
        f"{API_PREFIX}/agents/{{id}}/sessions",
        "List the receipts of recorded session starts, newest first.",
    ),
    (
        ("GET",),
        f"{API_PREFIX}/agents/{{id}}/sessions/{{sid}}",
        "Read one recorded session: its receipt and the exact prompt it started with.",
    ),
    (
        ("GET",),
        f"{API_PREFIX}/agents/{{id}}/sessions/{{sid}}/diff/{{other}}",
        "Unified diff from one recorded session's prompt to another's.",
    ),
    (
        ("GET",),
        f"{API_PREFIX}/agents/{{id}}/sessions/{{sid}}/why",
        "Trace each line of a recorded prompt holding ?text= to its file, version and line.",
    ),
    (
        ("POST",),
        f"{API_PREFIX}/agents/{{id}}/forget",
        "Forget a text, pattern or every credential everywhere, verify, return the receipt.",
    ),
]
