"""What the package offers its users, as data: magics, commands and REST routes. The manifest
and the REST server read these tables (no IPython, argparse or tornado needed); tests check
them against the real magics, parser and handlers."""

from __future__ import annotations

from typing import Literal, NamedTuple

__all__ = ["API_PREFIX", "COMMANDS", "MAGICS", "PROG", "ROUTES", "Command", "Magic", "Route"]


class Magic(NamedTuple):
    """An IPython magic: name (without ``%``), kind, its docstring's first paragraph."""

    name: str
    kind: Literal["line", "cell", "line/cell"]
    summary: str

    @property
    def spelled(self) -> str:
        """The name as typed: ``%%name`` for a cell magic, else ``%name``."""
        return f"%%{self.name}" if self.kind == "cell" else f"%{self.name}"


class Command(NamedTuple):
    """A sub-command of the command line and its one-line help."""

    name: str
    summary: str


class Route(NamedTuple):
    """A REST route: its methods, path pattern (``{id}`` an agent id, ``{sha}`` a FACT.md
    version, ``{sid}``/``{other}`` session ids) and what it does."""

    methods: tuple[str, ...]
    path: str
    summary: str


#: Every magic of ``AgentMemoryMagics``, by name.
MAGICS: tuple[Magic, ...] = (
    Magic("agent_memory", "line", "Select or create the active agent, or show the memory panel."),
    Magic("fact", "line", "Show FACT.md, the agent's durable knowledge, rendered from Markdown."),
    Magic("forget", "line",
          "Remove a text (or every match of a pattern, or every stored credential) from the "
          "agent's memory everywhere, and verify that no copy is left."),
    Magic("fact_update", "cell",
          "Replace FACT.md with the cell body, exactly as the memory tool's update does."),
    Magic("journal", "line", "List, add and search journal entries (the append-only event log)."),
    Magic("memprompt", "line",
          "Show the exact system prompt the agent gets, with section sizes and budget warnings; "
          "or look back at the prompts recorded sessions really started with."),
)

#: The command line's program name.
PROG = "jupyter-agent-memory"

#: Every sub-command of the command line, in the order ``--help`` lists them.
COMMANDS: tuple[Command, ...] = (
    Command("init", "create an agent folder (optionally from a template)"),
    Command("fact", "show or replace FACT.md"),
    Command("journal", "append to or search the journal"),
    Command("prompt", "print the system prompt the next session gets (sizes on stderr)"),
    Command("mcp", "serve the memory over MCP (stdio, or Streamable HTTP)"),
    Command("index", "build, drop or show the journal's search index"),
    Command("agents", "list the agents under the root"),
    Command("demo", "show the learning loop on the guide template, in its own 'demo' agent"),
    Command("sessions", "list recorded session starts; show, diff or trace their exact prompts"),
    Command("forget",
            "remove a text from facts, journal, history, session prompts and caches; verify"),
    Command("lint", "report credentials already stored, with the forget command that removes them"),
)

#: URL prefix (below the server's base URL) of every route.
API_PREFIX = "/agent-memory/api"

#: Every route of the REST API, in registration order.
ROUTES: list[Route] = [
    Route(methods, API_PREFIX + path, summary)
    for methods, path, summary in (
        (("GET", "POST"), "/agents",
         "List agents and templates; create an agent, optionally provisioned from a template."),
        (("GET", "PUT"), "/agents/{id}/facts",
         "Read FACT.md with its sha256; replace it with compare-and-swap (409 on conflict)."),
        (("GET", "POST"), "/agents/{id}/journal",
         "Search the journal (query, tag, limit, since, until), newest first; append an entry."),
        (("GET",), "/agents/{id}/prompt",
         "Build the system prompt the agent would get, with per-section sizes."),
        (("GET",), "/agents/{id}/history", "List previous FACT.md versions, newest first."),
        (("GET",), "/agents/{id}/history/{sha}",
         "Read one previous FACT.md version by sha256 or unique prefix."),
        (("GET",), "/agents/{id}/sessions",
         "List the receipts of recorded session starts, newest first."),
        (("GET",), "/agents/{id}/sessions/{sid}",
         "Read one recorded session: its receipt and the exact prompt it started with."),
        (("GET",), "/agents/{id}/sessions/{sid}/diff/{other}",
         "Unified diff from one recorded session's prompt to another's."),
        (("GET",), "/agents/{id}/sessions/{sid}/why",
         "Trace each line of a recorded prompt holding ?text= to its file, version and line."),
        (("POST",), "/agents/{id}/forget",
         "Forget a text, pattern or every credential everywhere, verify, return the receipt."),
        (("GET", "PUT"), "/agents/{id}/soul",
         "Read SOUL.md with its sha256; replace it with compare-and-swap (409 on conflict)."),
        (("GET", "PUT"), "/agents/{id}/user",
         "Read USER.md with its sha256; replace it with compare-and-swap (409 on conflict)."),
        (("POST",), "/handover",
         "Ask a running kernel where its notebook's agent is; a folder outside both roots "
         "becomes reachable by a handle."),
    )
]
