"""IPython magics for agent memory (``%load_ext jupyter_agent_memory``): thin adapters over
the engine that return what they show. Options are traitlets on :class:`AgentMemoryMagics`
(``%config AgentMemoryMagics.budget_tokens = 2000``).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.process import arg_split
from traitlets import CaselessStrEnum, Int, Unicode

from ..engine import forgetting
from ..engine.arguments import DEFAULT_LIMIT, check_count
from ..engine.paths import require_workspace, resolve_target
from ..engine.prompt import DEFAULT_TOOL_NAME, PromptBuilder
from ..engine.store import AgentMemory, check_edit_body
from ..engine.templates import provision
from ..errors import MemoryToolError
from .display import (
    AgentSummary,
    DiffView,
    FactsView,
    ForgetReceipt,
    HistoryView,
    JournalResult,
    PromptView,
    RawText,
    SessionsView,
    WhyView,
)

__all__ = ["AgentMemoryMagics", "load_ipython_extension", "unload_ipython_extension"]

APPEND_USAGE = "Usage: %journal append TEXT [-t TAG]..."


def _clean_doc(func: Callable[..., Any]) -> Callable[..., Any]:
    """Dedent a magic's docstring so argparse (which uses it as the description) keeps layout."""
    func.__doc__ = inspect.cleandoc(func.__doc__ or "")
    return func


def _unquote(token: str) -> str:
    """Strip one pair of matching outer quotes; IPython's argument splitter keeps them."""
    quoted = len(token) >= 2 and token[0] == token[-1] and token[0] in ("'", '"')
    return token[1:-1] if quoted else token


def _parse(magic: Callable[..., Any], line: str) -> Any:
    """Parse a magic's arguments (options may sit between words); one pair of outer quotes is
    removed from option values and single arguments, text of several words is kept as typed."""
    try:
        argv = arg_split(line, strict=True)
    except ValueError as exc:
        raise UsageError(f"Could not split the arguments: {exc}") from None
    args = magic.parser.parse_intermixed_args(argv)  # type: ignore[attr-defined]
    for key, value in vars(args).items():
        if isinstance(value, str):
            setattr(args, key, _unquote(value))
        elif isinstance(value, list) and key != "words":
            setattr(args, key, [_unquote(v) if isinstance(v, str) else v for v in value])
    if len(getattr(args, "words", ())) == 1:
        args.words = [_unquote(args.words[0])]
    return args


@contextlib.contextmanager
def _engine_errors() -> Iterator[None]:
    """Turn engine errors (I/O failures included) into one-line ``UsageError``s."""
    try:
        yield
    except MemoryToolError as exc:
        raise UsageError(exc.message) from None


def _only_one(**flags: object) -> None:
    """Refuse options that cannot be combined (argparse groups cannot express ``--diff [SHA]``)."""
    given = [name for name, value in flags.items() if value not in (None, False)]
    if len(given) > 1:
        names = ", ".join("--" + n.replace("_", "-") for n in given)
        raise UsageError(f"Choose one of {names}")


@magics_class
class AgentMemoryMagics(Magics):
    """The agent-memory magics; the active agent is opened on first use (loading creates none)."""

    default_agent = Unicode(
        "", help="Agent id or folder path used until %agent_memory selects another. Empty "
        "means the engine's default (env JUPYTER_AGENT_MEMORY_AGENT, else 'default').",
    ).tag(config=True)
    root = Unicode(
        "", help="Folder holding agents addressed by id. Empty means the engine's default "
        "(env JUPYTER_AGENT_MEMORY_ROOT, else <jupyter data dir>/agent-memory).",
    ).tag(config=True)
    budget_tokens = Int(
        None, allow_none=True, help="Approximate token budget for the memory part of the "
        "prompt; %memprompt warns when it is exceeded (it never truncates).",
    ).tag(config=True)
    tool_name = Unicode(
        DEFAULT_TOOL_NAME,
        help="Name of the memory tool as the model sees it, used in the prompt's wording.",
    ).tag(config=True)
    journal_limit = Int(
        DEFAULT_LIMIT, help="How many entries %journal (with no command) lists by default."
    ).tag(config=True)
    panel = CaselessStrEnum(
        ("auto", "always", "never"), default_value="auto",
        help="What %agent_memory with no argument shows: 'auto' shows the widget panel in a "
        "Jupyter kernel and a text summary in a terminal; 'always'/'never' force one.",
    ).tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self._memory: AgentMemory | None = None
        self._builders: dict[tuple[str, int | None], Any] = {}
        # Last text built per (agent folder, workspace, kind), for %memprompt --diff.
        self._last_prompts: dict[tuple[str, str, str], str] = {}
        # Panels shown by %agent_memory, per agent folder, so re-running it reuses them.
        self._panels: dict[str, Any] = {}

    def _open(self, target: str | None, create: bool = False) -> AgentMemory:
        # Only %agent_memory creates, so a typo in --agent never leaves a folder behind.
        with _engine_errors():
            return AgentMemory.open(target or None, root=self.root or None, create=create)

    @property
    def memory(self) -> AgentMemory:
        """The active agent, opened on first use (refused when it does not exist)."""
        if self._memory is None:
            self._memory = self._open(self.default_agent)
        return self._memory

    @memory.setter
    def memory(self, mem: AgentMemory) -> None:
        self._memory = mem

    def memory_for(self, target: str | None) -> AgentMemory:
        """The agent named by ``--agent`` for one call, else the active agent."""
        return self._open(target) if target else self.memory

    @staticmethod
    def describe(mem: AgentMemory) -> str:
        """How an agent is named in messages: ``'id' (folder)`` or the folder."""
        return str(mem.path) if mem.agent_id is None else f"{mem.agent_id!r} ({mem.path})"

    def _builder(self, budget: int | None) -> Any:
        # One builder per (tool name, budget), kept for the session so its file cache pays off.
        key = (self.tool_name, budget)
        if key not in self._builders:
            self._builders[key] = PromptBuilder(tool_name=self.tool_name, budget_tokens=budget)
        return self._builders[key]

    @line_magic
    @magic_arguments()
    @argument("target", nargs="?", default=None, help="agent id or folder path to make active")
    @argument("--agent", default=None, help="same as TARGET")
    @argument("--template", default=None, metavar="T",
              help="provision the agent from a built-in template name or a template folder "
              "(never overwrites existing content)")
    @_clean_doc
    def agent_memory(self, line: str = "") -> Any:
        """Select or create the active agent, or show the memory panel.

        Examples::

            %agent_memory ./demo-agent              # a folder next to the notebook
            %agent_memory research                  # an agent id under the agents root
            %agent_memory ./guide-demo --template guide
            %agent_memory                           # the panel (a summary in a terminal)

        The active agent is what %fact, %journal and %memprompt use unless given --agent.
        """
        args = _parse(self.agent_memory, line)
        if args.target and args.agent and args.target != args.agent:
            raise UsageError("Give the agent either as TARGET or as --agent, not both")
        target = args.target or args.agent
        if target:
            self.memory = self._open(target, create=True)
            print(f"Active agent: {self.describe(self.memory)}")
        elif self._memory is None:
            # Asking for the panel is explicit: the default agent is created here (only here).
            self._memory = self._open(self.default_agent, create=True)
        mem = self.memory
        if args.template:
            with _engine_errors():
                definition = provision(args.template, mem)
            print(f"Provisioned from template {definition.name!r}.")
        if target or args.template:
            return None
        in_kernel = getattr(self.shell, "kernel", None) is not None
        if self.panel == "always" or (self.panel == "auto" and in_kernel):
            return self._panel_for(mem)
        return self.summary(mem)

    def _panel_for(self, mem: AgentMemory) -> Any:
        """The open panel for this agent (refreshed), or a new one, so panels do not pile up."""
        from .panel import MemoryPanel, is_live

        panel = self._panels.get(str(mem.path))
        if panel is not None and is_live(panel):
            builder = panel.builder
            if (builder.tool_name, builder.budget_tokens) == (self.tool_name, self.budget_tokens):
                panel.refresh()
                return panel
            panel.close()  # settings changed: replace it
        panel = MemoryPanel(mem, tool_name=self.tool_name, budget_tokens=self.budget_tokens)
        self._panels[str(mem.path)] = panel
        return panel

    def summary(self, mem: AgentMemory) -> AgentSummary:
        """A size summary of an agent folder (what ``%agent_memory`` shows in a terminal)."""
        with _engine_errors():
            sizes = {name: max(0, size) if name != "JOURNAL.jsonl" else size
                     for name, size in mem.file_sizes().items()}
            info = mem.template_info() or {}
            history = mem.history()
        template = info.get("name") or info.get("template") or info.get("folder")
        return AgentSummary(agent_id=mem.agent_id, path=mem.path, sizes=sizes,
                            facts_sha256=mem.facts_sha256, history_versions=len(history),
                            template=str(template) if template else None)

    @line_magic
    @magic_arguments()
    @argument("--raw", action="store_true", help="print FACT.md exactly as stored")
    @argument("--history", action="store_true", help="list earlier versions, newest first")
    @argument("--diff", nargs="?", const="", default=None, metavar="SHA",
              help="diff an earlier version (default: the latest one) against the current FACT.md")
    @argument("--restore", default=None, metavar="SHA",
              help="make an earlier version current again (a normal update, so history stays "
              "linear)")
    @argument("--agent", default=None, help="agent id or folder for this call only")
    @_clean_doc
    def fact(self, line: str = "") -> Any:
        """Show FACT.md, the agent's durable knowledge, rendered from Markdown.

        Raw HTML in FACT.md is shown as text and unsafe links are dropped: the file is written
        by a model, and a notebook runs the HTML of its outputs.

        Examples::

            %fact                       # rendered as safe HTML (plain text in a terminal)
            facts = %fact --raw         # the exact text, as a str (shown as it is)
            %fact --history             # earlier versions: time, sha256, size
            %fact --diff                # what the last update changed
            %fact --diff 3f2a9c1        # an earlier version (sha256 or 7+ digit prefix) vs now
            %fact --restore 3f2a9c1     # bring that version back
            versions = %fact --history  # a list of {"ts", "sha256", "size"} dicts

        Change FACT.md with %%fact_update.
        """
        args = _parse(self.fact, line)
        _only_one(raw=args.raw, history=args.history, diff=args.diff, restore=args.restore)
        mem = self.memory_for(args.agent)
        with _engine_errors():
            if args.raw:
                return RawText(mem.facts)
            if args.history:
                return HistoryView(mem.history())
            if args.diff is not None:
                sha = args.diff or next((v["sha256"] for v in mem.history()), None)
                if sha is None:
                    print(HistoryView.empty_message)
                    return None
                return DiffView(mem.history_text(sha), mem.facts, f"FACT.md@{sha[:12]}",
                                "FACT.md (current)")
            if args.restore is not None:
                before = mem.facts
                new_sha = mem.restore(args.restore)
                print(f"Restored FACT.md to version {new_sha[:12]}; the version it replaced "
                      "is kept in the history.")
                return DiffView(before, mem.facts, "FACT.md (before)", "FACT.md (restored)", 1)
            text, sha = mem.read_facts()
            return FactsView(text, path=mem.path, sha256=sha)

    @cell_magic
    # The name only sets the usage line, so help reads "%%fact_update" as typed.
    @magic_arguments(name="%fact_update")
    @argument("--agent", default=None, help="agent id or folder for this call only")
    @_clean_doc
    def fact_update(self, line: str = "", cell: str = "") -> DiffView:
        """Replace FACT.md with the cell body, exactly as the memory tool's update does.

        Example::

            %%fact_update
            # Facts
            - The user prefers metric units.
            - Reports go out on Mondays.

        Prints the tool's result (``Memory updated.``) and shows a short diff (returned, as a
        DiffView). The previous version is kept (see %fact --history). An empty body is
        refused and nothing changes.
        """
        args = _parse(self.fact_update, line)
        mem = self.memory_for(args.agent)
        with _engine_errors():
            content = check_edit_body(cell)
            before = mem.facts
            result = mem.call_tool({"action": "update", "content": content})
            after = mem.facts
        print(result)
        return DiffView(before, after, "FACT.md (before)", "FACT.md (after)", 1)

    @line_magic
    @magic_arguments()
    @argument("command", nargs="?", default="",
              help="'append' or 'search'; omit to list the latest entries")
    @argument("words", nargs="*", help="append: the entry text; search: the text to look for")
    @argument("-t", "--tag", dest="tags", action="append", default=[], metavar="TAG",
              help="append: a tag (repeat for more); search: only entries with this tag")
    @argument("-n", "--limit", type=int, default=None, metavar="N",
              help="search: at most N entries (newest first)")
    @argument("--since", default=None, metavar="ISO",
              help="search: entries at or after this time (ISO-8601; no zone means UTC)")
    @argument("--until", default=None, metavar="ISO",
              help="search: entries at or before this time (ISO-8601; no zone means UTC)")
    @argument("--agent", default=None, help="agent id or folder for this call only")
    @_clean_doc
    def journal(self, line: str = "") -> Any:
        """List, add and search journal entries (the append-only event log).

        Examples::

            %journal                                    # the latest entries
            %journal append Met Ana about the Q3 report -t meeting -t q3
            %journal search report                      # text contains 'report' (any case)
            %journal search -t meeting -n 5             # the 5 newest 'meeting' entries
            %journal search --since 2026-11-01 --until 2026-11-30T23:59:59Z
            hits = %journal search report               # a list of {"ts", "tags", "text"}

        Search matches are highlighted in a notebook; ``append`` returns the tool's text.

        Quote text that starts with '-' or holds several spaces in a row:
        %journal append "-5 degrees  outside".
        """
        args = _parse(self.journal, line)
        # Every argument is checked before the agent is looked up.
        command = args.command.lower()
        if command == "append":
            for name in ("limit", "since", "until"):
                if getattr(args, name) is not None:
                    raise UsageError(f"--{name} applies to search, not append")
            text = " ".join(args.words)
            if not text.strip():
                raise UsageError(f"The entry text is missing. {APPEND_USAGE}")
            with _engine_errors():
                return RawText(self.memory_for(args.agent).call_tool(
                    {"action": "append", "text": text, "tags": args.tags}))
        if command not in ("", "search"):
            raise UsageError(f"Unknown journal command {args.command!r}, expected append or search")
        if len(args.tags) > 1:
            raise UsageError("search filters on one tag at a time (-t given more than once)")
        # Plain %journal lists the configured number of entries; search uses the tool's default.
        limit = args.limit
        if limit is None:
            limit = self.journal_limit if not command else DEFAULT_LIMIT
        else:
            with _engine_errors():
                check_count(limit, "-n/--limit")
        mem = self.memory_for(args.agent)
        with _engine_errors():
            result = mem.search_journal(query=" ".join(args.words),
                                        tag=args.tags[0] if args.tags else "", limit=limit,
                                        since=args.since, until=args.until)
        return JournalResult.from_search(result, highlight=" ".join(args.words))

    @line_magic
    @magic_arguments()
    @argument("--workspace", default=None, metavar="DIR",
              help="session workspace holding system.md (default: the current directory)")
    @argument("--facts", action="store_true", help="only the '## Agent Knowledge' facts section")
    @argument("--raw", action="store_true", help="the exact text, nothing else (returned as a str)")
    @argument("--diff", nargs="*", default=None, metavar="ID",
              help="no ID: diff against the previous build of this prompt in this session; "
              "two recorded session ids: diff their prompts")
    @argument("--budget", type=int, default=None, metavar="TOKENS",
              help="token budget for this build (default: AgentMemoryMagics.budget_tokens)")
    @argument("--sessions", action="store_true",
              help="list the recorded session starts: time, id, client, tokens, prompt sha256")
    @argument("--session", default=None, metavar="ID",
              help="the exact prompt a recorded session started with (id or 6+ digit prefix); "
              "with --why, the session to trace")
    @argument("--why", default=None, metavar="TEXT",
              help="where each line of a recorded prompt holding TEXT came from (default: "
              "the newest session)")
    @argument("--agent", default=None, help="agent id or folder for this call only")
    @_clean_doc
    def memprompt(self, line: str = "") -> Any:
        """Show the exact system prompt the agent gets, with section sizes and budget warnings;
        or look back at the prompts recorded sessions really started with.

        Examples::

            %memprompt                       # prompt, per-section sizes, any budget warning
            text = %memprompt --raw          # exactly the text, as a str
            %memprompt --workspace ./project # use ./project/system.md as the base prompt
            %memprompt --facts               # only the facts section
            %memprompt --diff                # what changed since the last %memprompt here
            %memprompt --budget 500          # warn when memory exceeds ~500 tokens

            %memprompt --sessions            # recorded sessions, newest first
            %memprompt --session 3f2a9c      # the exact prompt that session started with
            %memprompt --diff 3f2a9c 8b01d4  # how two sessions' prompts differ
            %memprompt --why "metric units"  # the file, version and line it came from
            %memprompt --why Mnemo --session 3f2a9c

        Building a prompt here is a preview: nothing is written and no session is recorded.
        """
        args = _parse(self.memprompt, line)
        if args.diff is not None and len(args.diff) not in (0, 2):
            raise UsageError("--diff takes no session id (the previous build here) or two ids, "
                             f"not {len(args.diff)}")
        if args.sessions or args.why is not None or args.session is not None or args.diff:
            if args.workspace or args.facts or args.budget is not None:
                raise UsageError("--workspace, --facts and --budget apply to building a prompt, "
                                 "not to recorded sessions")
            _only_one(sessions=args.sessions, why=args.why, diff=args.diff or None)
            _only_one(sessions=args.sessions, session=args.session)
            if args.diff and args.session is not None:
                raise UsageError("--diff ID ID names both sessions; drop --session")
            if args.raw and (args.sessions or args.why is not None):
                raise UsageError("--raw applies to one session's prompt (--session ID)")
            return self._recorded(self.memory_for(args.agent), args)
        _only_one(raw=args.raw, diff=args.diff is not None)
        mem = self.memory_for(args.agent)
        with _engine_errors():
            workspace = require_workspace(args.workspace) if args.workspace else Path.cwd()
            builder = self._builder(args.budget if args.budget is not None else self.budget_tokens)
            if args.facts:
                text = builder.build_facts_section(mem)
                view = PromptView(text or "", title="Agent Knowledge section")
            else:
                # The view shows the budget warning; stderr would repeat it.
                prompt = builder.build_session(mem, workspace, warn=False)
                text = prompt.text
                view = PromptView.from_prompt(prompt)
        if text is None:
            print("No Agent Knowledge section: FACT.md is empty.")
            return None
        key = (str(mem.path), str(workspace.resolve()), "facts" if args.facts else "prompt")
        previous = self._last_prompts.get(key)
        self._last_prompts[key] = text
        if args.raw:
            # Warnings go to stderr so the text (returned, and displayed as it is) stays exact.
            for warning in view.warnings:
                print(f"WARNING: {warning}", file=sys.stderr)
            return RawText(text)
        if args.diff is not None:
            if previous is None:
                print("No earlier build of this prompt in this session; run %memprompt --diff "
                      "again after memory changes.")
                return None
            return DiffView(previous, text, "previous build", "this build")
        return view

    @staticmethod
    def _recorded(mem: AgentMemory, args: Any) -> Any:
        """``%memprompt --sessions / --session / --diff ID ID / --why``: sessions on record."""
        with _engine_errors():
            if args.sessions:
                return SessionsView(mem.sessions())
            if args.diff:
                return DiffView.between_sessions(mem, *args.diff)
            if args.why is not None:
                session_id = args.session or next(
                    (str(r["session_id"]) for r in mem.sessions()), None)
                if session_id is None:
                    raise UsageError(SessionsView.empty_message)
                return WhyView(mem.why(session_id, args.why),
                               session_id=session_id, needle=args.why)
            view = PromptView.from_session(mem, args.session)
            return RawText(view.text) if args.raw else view

    @line_magic
    @magic_arguments()
    @argument("words", nargs="*", help="the text to forget")
    @argument("--pattern", default=None, metavar="REGEX", help="forget every match of REGEX")
    @argument("--secrets", action="store_true", help="forget every stored credential")
    @argument("--dry-run", action="store_true", help="only list what would change")
    @argument("--reason", default="", metavar="R",
              help="why, kept in the journal's tombstones and the receipt")
    @argument("--agent", default=None, help="agent id or folder for this call only")
    @_clean_doc
    def forget(self, line: str = "") -> ForgetReceipt:
        """Remove a text (or every match of a pattern, or every stored credential) from the
        agent's memory everywhere, and verify that no copy is left.

        FACT.md, the journal (entries become tombstones that keep the time and the reason,
        never the content), FACT.md's history and recorded session prompts are rewritten; then
        every byte of the agent folder is checked for the text. The receipt lists the kinds of
        places changed and how many, and a hash of what was forgotten, never the text.

        Examples::

            %forget --dry-run old address         # what forgetting would change
            %forget 221B Baker Street --reason "moved"
            %forget --pattern "sk-[A-Za-z0-9]{20,}"
            %forget --secrets                     # every stored credential
            receipt = %forget --dry-run Ana       # a dict

        The text typed here stays in this notebook's input history; clear that cell after.
        """
        args = _parse(self.forget, line)
        text = " ".join(args.words) or None
        given = [name for name, value in (("TEXT", text), ("--pattern", args.pattern),
                                          ("--secrets", args.secrets)) if value]
        if len(given) != 1:
            raise UsageError("Give exactly one of TEXT, --pattern REGEX, --secrets"
                             + (f" (got {', '.join(given)})" if given else ""))
        mem = self.memory_for(args.agent)
        with _engine_errors():
            receipt = forgetting.forget(mem, text, pattern=args.pattern, secrets=args.secrets,
                                        dry_run=args.dry_run, reason=args.reason)
        return ForgetReceipt(receipt)

    def post_run_cell(self, result: Any = None) -> None:
        """After each cell, refresh open panels whose memory changed (none if never imported)."""
        panel_module = sys.modules.get(f"{__package__}.panel")
        if panel_module is not None:
            panel_module.refresh_live_panels()


class _JsonValue(dict):
    """A dict displayed as its JSON, for a front end's ``user_expressions``."""

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """Plain-text form: the JSON text."""
        p.text(json.dumps(self))


def active_agent_location(ipython: Any) -> dict[str, Any]:
    """Where this kernel's active agent is, opening nothing (for the sidebar): ``{"loaded":
    False}`` without the extension, else ``loaded``, ``path``, ``agent_id`` and ``exists``."""
    magics = ipython.magics_manager.registry.get(AgentMemoryMagics.__name__)
    if magics is None:
        return _JsonValue(loaded=False)
    mem = magics._memory
    if mem is not None:
        path, agent_id = mem.path, mem.agent_id
    else:
        try:
            path, agent_id, _root = resolve_target(magics.default_agent or None,
                                                   magics.root or None)
        except (MemoryToolError, ValueError, OSError) as exc:
            return _JsonValue(loaded=True, error=str(exc))
    return _JsonValue(loaded=True, path=str(path), agent_id=agent_id, exists=os.path.lexists(path))


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics and the panel-refresh hook (``%load_ext jupyter_agent_memory``)."""
    magics = AgentMemoryMagics(shell=ipython)
    ipython.register_magics(magics)
    ipython.events.register("post_run_cell", magics.post_run_cell)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove what :func:`load_ipython_extension` added (``%unload_ext``)."""
    manager = ipython.magics_manager
    # dict.get skips the registry's lazy-loading __missing__.
    magics = manager.registry.get(AgentMemoryMagics.__name__)
    if magics is None:
        return
    for kind, table in magics.magics.items():
        for name, func in table.items():
            if manager.magics[kind].get(name) == func:
                del manager.magics[kind][name]
    del manager.registry[AgentMemoryMagics.__name__]
    with contextlib.suppress(ValueError):
        ipython.events.unregister("post_run_cell", magics.post_run_cell)
    with contextlib.suppress(ValueError):
        ipython.configurables.remove(magics)

