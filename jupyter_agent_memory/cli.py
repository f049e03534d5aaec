"""``jupyter-agent-memory``: the command line (also ``jupyter agent-memory``).

Every sub-command takes ``--agent TARGET`` (an agent id or a folder path) and is a thin call
into the engine, printing exactly what the ``memory`` tool would tell a model. Errors go to
stderr with exit code 1 (2 for command-line usage errors).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import environment
from .engine.catalog import COMMANDS, PROG
from .errors import INTERNAL_ERROR, MemoryToolError
from .notebook.display import inert_line as _shown

if TYPE_CHECKING:
    from .engine.store import AgentMemory

DEMO_FACT = "- The user tried jupyter-agent-memory with its built-in demo."
DEMO_AGENT = "demo"
DEMO_ENTRY = "Ran the jupyter-agent-memory demo."
#: The first tutorial, where a checkout has it.
QUICKSTART = "notebooks/01-quickstart.ipynb"
#: Characters of a client's name and version shown in the sessions list (``--json`` has all).
CLIENT_COLUMN = 60

EPILOG = """\
examples:
  {prog} demo                              try the learning loop on its own 'demo' agent
  {prog} init --agent research --template assistant
  {prog} fact --agent research             print FACT.md
  {prog} fact --set notes.md               replace FACT.md (keeps the old version)
  {prog} journal append "Met Ana" -t meeting
  {prog} journal search ana -n 5           newest first; --json for scripts
  {prog} prompt --budget 2000              the next session's system prompt
  {prog} mcp --agent research              serve one agent to an MCP client
  {prog} index build                       build the journal's search index (status, drop)
  {prog} sessions                          recorded session starts; show, diff or why
  {prog} forget "old address" --dry-run    what forgetting a text would change
  {prog} lint                              credentials already stored, if any

templates: {templates}
agents root: {root}
  set by $JUPYTER_AGENT_MEMORY_ROOT (else <jupyter data dir>/agent-memory)
default agent: $JUPYTER_AGENT_MEMORY_AGENT, else 'default'
Options such as --agent and --json go before or after the sub-command.
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the command line."""
    from .__about__ import __version__
    from .engine.paths import default_root
    from .engine.templates import list_templates
    from .engine.tool import DEFAULT_LIMIT
    from .mcp_server.limits import HttpLimits

    try:
        root = str(default_root())
    except Exception as exc:  # --help must work even where the root cannot be resolved
        root = f"(cannot be resolved: {exc})"
    templates = ", ".join(str(name) for name in list_templates()) or "none"

    agent_help = "agent id under the agents root, or a folder path (default: the default agent)"
    json_help = "print JSON for scripts instead of text for people"
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS lets options given before the sub-command survive the sub-parser's defaults.
    common.add_argument("--agent", metavar="TARGET", default=argparse.SUPPRESS, help=agent_help)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=json_help)
    parser = argparse.ArgumentParser(
        prog=PROG, description="Long-term memory for LLM agents, as plain files you can see.",
        epilog=EPILOG.format(prog=PROG, templates=templates, root=root),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--agent", metavar="TARGET", default=None, help=agent_help)
    parser.add_argument("--json", action="store_true", default=False, help=json_help)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    summaries = dict(COMMANDS)  # a sub-command's help is its line in the catalog

    def command(name: str, within: Any = commands, text: str = "") -> argparse.ArgumentParser:
        return within.add_parser(name, parents=[common], help=text or summaries[name])

    init = command("init")
    init.add_argument("--template", metavar="NAME", help="built-in template name or folder")
    group = command("fact").add_mutually_exclusive_group()
    group.add_argument("--set", metavar="FILE",
                       help="replace FACT.md with FILE ('-' reads standard input)")
    group.add_argument("--history", action="store_true", help="list previous FACT.md versions")
    group.add_argument("--restore", metavar="SHA", help="restore a previous FACT.md version")

    verbs = command("journal").add_subparsers(dest="verb", metavar="VERB", required=True)
    append = command("append", verbs, "add a journal entry")
    append.add_argument("text", help="the entry text")
    append.add_argument("-t", "--tag", action="append", default=[], metavar="TAG",
                        help="a tag (repeatable)")
    search = command("search", verbs, "search the journal, newest first")
    search.add_argument("query", nargs="?", default="", help="case-insensitive substring")
    search.add_argument("-t", "--tag", default="", metavar="TAG", help="only entries with TAG")
    search.add_argument("-n", "--limit", type=int, default=DEFAULT_LIMIT, metavar="N",
                        help="most entries (%(default)s)")
    search.add_argument("--since", default=None, help="ISO-8601 start of the time window")
    search.add_argument("--until", default=None, help="ISO-8601 end of the time window")

    prompt = command("prompt")
    prompt.add_argument("--workspace", metavar="DIR", help="session workspace (default: cwd)")
    prompt.add_argument("--tool-name", default=None, help="how the model sees the memory tool")
    prompt.add_argument("--budget", type=int, default=None, metavar="TOKENS",
                        help="warn when the memory exceeds TOKENS (overrides the template's "
                        "budget)")

    mcp = command("mcp")
    mcp.description = (
        "Serve an existing agent over the Model Context Protocol: the memory tool, "
        "resources for SOUL.md, USER.md, FACT.md, the journal and the session prompt, and "
        "instructions that carry the session context. One line on stderr names the folder."
    )
    mcp.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio",
                     help="stdio (default) or streamable-http")
    mcp.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (127.0.0.1)")
    mcp.add_argument("--port", type=int, default=8765, help="HTTP: port (8765; 0 picks one)")
    mcp.add_argument("--token", default=None, help="HTTP: require 'Authorization: Bearer "
                     f"TOKEN' (or set ${environment.MCP_TOKEN})")
    mcp.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                     help="HTTP: also accept this Origin, e.g. http://example.test:3000 "
                     "(repeatable)")
    mcp.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                     help="HTTP: also accept this Host header, e.g. mybox:8765 or mybox:* "
                     "(repeatable)")
    limits = HttpLimits()
    count = _positive(int, "a whole number of at least 1")
    seconds = _positive(float, "a positive number of seconds")
    # Each flag sets the HttpLimits field of the same name.
    for flag, parse, metavar, text in (
        ("--max-sessions", count, "N", "open sessions in all ({}; 503 past that)"),
        ("--max-sessions-per-client", count, "N",
         "open sessions from one client address ({}; 429 past that)"),
        ("--session-idle-timeout", seconds, "SECONDS",
         "close a session with no request in flight for this long ({})"),
        ("--request-timeout", seconds, "SECONDS",
         "a request's headers, then its body, must each arrive within this ({}; 408 otherwise)"),
        ("--max-connections", count, "N", "open sockets at once ({}; 503 past that)"),
    ):
        default = getattr(limits, flag[2:].replace("-", "_"))
        mcp.add_argument(flag, type=parse, default=default, metavar=metavar,
                         help="HTTP: " + text.format(f"{default:g}"))
    mcp.add_argument("--read-tool", action="store_true",
                     help="also offer memory_read (FACT.md and the latest journal entries), for "
                     "clients that neither show instructions nor attach resources")
    mcp.add_argument("--workspace", metavar="DIR",
                     help="session workspace for system.md (default: cwd)")
    mcp.add_argument("--tool-name", default=None, metavar="NAME",
                     help="how the model sees the memory tool in the prompt (default: as MCP "
                     "hosts name it)")
    mcp.add_argument("--budget-tokens", type=int, metavar="N",
                     help="warn when the memory exceeds N tokens")
    actions = command("index").add_subparsers(dest="action", metavar="ACTION", required=True)
    command("build", actions, "build the index, or bring it up to date, now")
    command("drop", actions, "delete every index of this agent on this machine")
    command("status", actions, "show what the index covers")
    command("agents")
    command("demo")

    views = command("sessions").add_subparsers(dest="view", metavar="VIEW")
    session_help = "a session id, or a prefix of at least 6 hex digits"
    show = command("show", views, "print a session's exact prompt, byte for byte")
    show.add_argument("session", metavar="ID", help=session_help)
    diff = command("diff", views, "unified diff of two sessions' prompts")
    diff.add_argument("first", metavar="ID", help=session_help)
    diff.add_argument("second", metavar="ID", help=session_help)
    why = command("why", views, "where each line of a session's prompt holding TEXT came from")
    why.add_argument("session", metavar="ID", help=session_help)
    why.add_argument("text", metavar="TEXT", help="a line of the prompt, or part of one")

    forget = command("forget")
    what = forget.add_mutually_exclusive_group(required=True)
    what.add_argument("text", nargs="?", metavar="TEXT",
                      help="the text to forget ('-' reads it from standard input, out of the "
                      "shell history)")
    what.add_argument("--pattern", metavar="REGEX", help="forget every match of REGEX")
    what.add_argument("--secrets", action="store_true", help="forget every stored credential")
    forget.add_argument("--dry-run", action="store_true", help="only list what would change")
    forget.add_argument("--reason", default="", metavar="TEXT",
                        help="why, kept in the journal's tombstones")
    command("lint")
    return parser


def _positive(convert: Callable[[str], float], expected: str) -> Callable[[str], Any]:
    """An argparse type: ``convert(text)`` when it is above 0 and finite."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            value = 0
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away; stay quiet like other command-line tools.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except MemoryToolError as exc:  # the engine's one error family (I/O failures included)
        print(f"{PROG}: error: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _open(args: argparse.Namespace, create: bool = False) -> AgentMemory:
    """The agent named by ``--agent``; only ``init`` and ``demo`` may create it."""
    from .engine.store import AgentMemory

    return AgentMemory.open(args.agent, create=create)


def _json(args: argparse.Namespace, value: object) -> bool:
    """Print ``value`` as JSON when ``--json`` was given; whether it was."""
    if args.json:
        print(json.dumps(value, indent=2, ensure_ascii=False))
    return bool(args.json)


def _init(args: argparse.Namespace) -> int:
    if not args.template:
        print(f"Agent ready at {_open(args, create=True).path}")
        return 0
    from .engine.templates import load_template, provision

    load_template(args.template)  # a bad template must not leave an empty agent behind
    memory = _open(args, create=True)
    definition = provision(args.template, memory)
    print(f"Agent {definition.name!r} ready at {memory.path}")
    return 0


def _fact(args: argparse.Namespace) -> int:
    memory = _open(args)
    if args.set is not None:
        from .engine.store import check_edit_body

        content = check_edit_body(_read_text(args.set))
        print(memory.call_tool({"action": "update", "content": content}))
    elif args.history:
        versions = memory.history()
        if _json(args, versions):
            return 0
        if not versions:
            print("No previous FACT.md versions.")
        for version in versions:
            print(f"{version['ts']}  {version['sha256'][:12]}  {version['size']} bytes")
    elif args.restore:
        print(f"Restored FACT.md version {memory.restore(args.restore)[:12]}.")
    else:
        text, sha = memory.read_facts()
        path = memory.file_path("FACT.md")
        if args.json:
            _json(args, {"path": str(path), "content": text, "sha256": sha})
        elif text:
            sys.stdout.write(_terminal(text))
        else:
            # stderr, so `fact > backup.md` still writes exactly the file's (empty) content
            print(f"FACT.md is empty ({path}).", file=sys.stderr)
    return 0


def _read_text(source: str) -> str:
    """Text of a file, or of standard input for ``-``, with a clear error for non-UTF-8."""
    if source == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:  # already text (an embedding program replaced stdin)
            return sys.stdin.read()
        data = stream.read()
    else:
        try:
            data = Path(source).read_bytes()
        except OSError as exc:  # the command's own input, not the engine's files
            raise MemoryToolError(f"Cannot read {source}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = "standard input" if source == "-" else source
        raise MemoryToolError(f"Cannot read {where}: not UTF-8 text "
                              f"({exc.reason} at byte {exc.start})") from None


def _journal(args: argparse.Namespace) -> int:
    from .engine.arguments import check_count

    if args.verb == "search":  # refused before the agent is even looked up
        check_count(args.limit, "-n/--limit")
    memory = _open(args)
    if args.verb == "append":
        print(memory.call_tool({"action": "append", "text": args.text, "tags": args.tag}))
        return 0
    if args.json:  # JSON for scripts is the tool's own text
        call = {"action": "search", "query": args.query, "tag": args.tag, "limit": args.limit}
        call.update({k: getattr(args, k) for k in ("since", "until") if getattr(args, k)})
        print(memory.call_tool(call))
        return 0
    from .engine.tool import NO_JOURNAL, NO_MATCHES

    memory.check_folder()
    result = memory.search_journal(args.query, args.tag, args.limit, args.since, args.until)
    if not result:
        print(NO_JOURNAL if result is None else NO_MATCHES)  # the tool's texts
        return 0
    for entry in result:  # time, tags, text (indented lines); what a model wrote is inert
        tags = entry.get("tags")
        tags = tags if isinstance(tags, list) else []
        shown = " ".join(f"#{_shown(t)}" for t in tags if isinstance(t, str))
        lines = str(entry.get("text", "")).split("\n")
        body = ("\n" + " " * 27).join(_shown(line) for line in lines)
        print(f"{_shown(entry.get('ts', '?')):<25}  {shown + '  ' if shown else ''}{body}")
    if result.indexed:
        print("(the journal's index narrowed this search)", file=sys.stderr)
    return 0


def _terminal(text: str) -> str:
    """``text`` as it may reach a terminal: exact when stdout is a file or a pipe (so
    ``fact > backup.md`` copies the file), inert line by line on a terminal."""
    if not sys.stdout.isatty():
        return text
    return "\n".join("\t".join(_shown(part) for part in line.split("\t"))
                     for line in text.split("\n"))


def _prompt(args: argparse.Namespace) -> int:
    memory = _open(args)
    from .engine.paths import require_workspace
    from .engine.prompt import PromptBuilder

    workspace = require_workspace(args.workspace) if args.workspace else None
    # An empty --tool-name means the default, as no --tool-name does.
    builder = PromptBuilder(tool_name=args.tool_name or None, budget_tokens=args.budget)
    # The warning is reported below as one plain line, not as a Python warning.
    prompt = builder.build_session(memory, workspace, warn=False)
    if _json(args, {
        "text": prompt.text, "tokens": prompt.tokens, "memory_tokens": prompt.memory_tokens,
        "budget_tokens": prompt.budget_tokens, "warnings": list(prompt.warnings),
        "sections": prompt.section_dicts(),
    }):
        return 0
    print(_terminal(prompt.text))
    # Sizes go to stderr so the prompt on stdout stays exactly what a session gets.
    by_section = ", ".join(f"{s.name} {s.tokens}" for s in prompt.sections)
    budget = f"; budget {prompt.budget_tokens}" if prompt.budget_tokens else ""
    print(f"About {prompt.tokens} tokens ({by_section}){budget}.", file=sys.stderr)
    for warning in prompt.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _mcp(args: argparse.Namespace) -> int:
    # Refuse a missing agent (naming the resolved folder) before the slow MCP import.
    memory = _open(args)
    if args.transport == "streamable-http" and not 0 <= args.port <= 65535:
        raise MemoryToolError(f"--port must be between 0 and 65535, got {args.port}")
    if args.workspace is not None and not os.path.isdir(args.workspace):
        raise MemoryToolError(f"--workspace {args.workspace}: no such folder")
    problem = None
    try:
        memory.ensure_layout()  # sweeps crash leftovers; never creates the agent folder itself
    except MemoryToolError as exc:
        # A refused folder (memory/ a symlink, say) is still served: the model sees the refusal.
        problem = str(exc)
    try:
        from .mcp_server import MemoryService, require_mcp, serve_http, serve_stdio
        from .mcp_server.limits import HttpLimits

        require_mcp()
    except ImportError as exc:  # the [mcp] extra is missing
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    from .engine.prompt import PromptBuilder
    from .mcp_server.service import host_tools

    builder = PromptBuilder(tools=host_tools(args.tool_name), budget_tokens=args.budget_tokens)
    service = MemoryService(memory, builder, workspace=args.workspace, read_tool=args.read_tool)
    if args.transport == "stdio":
        serve_stdio(service, problem)
        return 0
    limits = HttpLimits(**{field.name: getattr(args, field.name) for field in fields(HttpLimits)})
    try:
        serve_http(service, host=args.host, port=args.port,
                   token=args.token or environment.text(environment.MCP_TOKEN),
                   allowed_hosts=tuple(args.allow_host), allowed_origins=tuple(args.allow_origin),
                   problem=problem, limits=limits)
    except OSError as exc:  # the server's own socket (a port in use), not the engine
        raise MemoryToolError(f"Cannot serve on {args.host}:{args.port}: {exc.strerror or exc}",
                              INTERNAL_ERROR) from None
    return 0


def _index(args: argparse.Namespace) -> int:
    memory = _open(args)
    if args.action == "drop":
        dropped = memory.drop_index()
        if _json(args, dropped):
            return 0
        files = dropped["dropped"]
        print(f"Dropped {len(files)} index file{'' if len(files) == 1 else 's'}.")
        for path in files:
            print(f"  {_shown(path)}")
        return 0
    status = memory.build_index() if args.action == "build" else memory.index_status()
    if _json(args, status):
        return 0
    print(f"state: {status['state']}" + (" (building)" if status["building"] else ""))
    print(f"indexed: {status['indexed_bytes']:,} of {status['journal_bytes']:,} journal bytes")
    print(f"size on disk: {status['size_bytes']:,} bytes")
    print(f"path: {_shown(status['path'] or '(no usable cache folder)')}")
    print(f"kept up to date after appends: {'yes' if status['keep'] else 'no'}")
    if status["error"]:
        print(f"last background build failed: {_shown(status['error'])}")
    return 0


def _agents(args: argparse.Namespace) -> int:
    from .engine.paths import default_root, list_agents

    root = default_root()
    agents = list_agents(root)
    if _json(args, {"root": str(root), "agents": agents}):
        return 0
    print(f"Agents under {root}:" if agents else f"No agents under {root} yet.")
    for agent_id in agents:
        print(f"  {_shown(agent_id)}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    """The learning loop once, on its own agent: never the default agent or any other."""
    from .engine.prompt import PromptBuilder
    from .engine.templates import provision

    if args.agent is None:
        args.agent = DEMO_AGENT
    memory = _open(args, create=True)
    definition = provision("guide", memory)
    facts = memory.facts
    if DEMO_FACT in facts:
        update = "(FACT.md already holds the demo fact)"
    else:
        content = facts.rstrip("\n") + ("\n\n" if facts.strip() else "") + DEMO_FACT + "\n"
        update = memory.call_tool({"action": "update", "content": content})
    # Idempotent: a second run finds its entry instead of logging the same event again.
    if memory.search(query=DEMO_ENTRY, tag="demo", limit=1):
        append = "(the journal already records the demo)"
    else:
        append = memory.call_tool({"action": "append", "text": DEMO_ENTRY, "tags": ["demo"]})
    written = [("update", update), ("append", append)]
    prompt = PromptBuilder().build_session(memory)
    steps = _next_steps(memory)
    if _json(args, {
        "agent": memory.agent_id, "path": str(memory.path), "template": definition.template_id,
        "session_1": [{"action": action, "result": text} for action, text in written],
        "prompt": prompt.text,
        "sections": [{"name": s.name, "tokens": s.tokens} for s in prompt.sections],
        "next": [{"what": what, "commands": commands} for what, commands in steps],
    }):
        return 0
    rule = "-" * 72
    print(f"Agent {definition.name!r} at {memory.path}\n")
    print("Session 1: the agent learns something and writes it down with the memory tool.")
    for action, text in written:
        print(f'  memory(action="{action}")  -> {text}')
    print("\nSession 2 starts with this system prompt (the agent remembers):")
    print(rule, _terminal(prompt.text), rule, sep="\n")
    sizes = ", ".join(f"{s.name} {s.tokens}" for s in prompt.sections)
    print(f"About {prompt.tokens} tokens (by section: {sizes}).\n")
    print("Next:")
    for number, (what, commands) in enumerate(steps, 1):
        print(f"  {number}. {what}")
        for command in commands:
            print(f"       {command}")
    return 0


def _next_steps(memory: Any) -> list[tuple[str, list[str]]]:
    """What to try after the demo, as commands that work pasted into this shell."""
    import importlib.util
    import shutil

    target = memory.agent_id or str(memory.path)
    lab = [_beside_python("jupyter"), "lab"]
    if memory.agent_id is not None:
        # The server's setting makes the sidebar open on this agent instead of the default.
        lab.append(f"--AgentMemoryServer.default_agent={memory.agent_id}")
    if os.path.isfile(QUICKSTART):
        lab.append(QUICKSTART)
    # The command's absolute path, as GUI apps (which have no PATH) need it.
    script = os.path.join(os.path.dirname(sys.executable), PROG)
    script = script if os.path.exists(script) else shutil.which(PROG) or PROG
    mcp = [f'{{"command": "{script}", "args": ["mcp", "--agent", "{target}"]}}']
    if importlib.util.find_spec("mcp") is None:
        mcp.insert(0, f'{_beside_python("pip")} install "jupyter-agent-memory[mcp]"')
    return [
        (f"JupyterLab, with the Agent Memory sidebar (left) on '{target}':", [" ".join(lab)]),
        ("In a notebook cell:", ["%load_ext jupyter_agent_memory", f"%agent_memory {target}"]),
        ("An MCP client (Claude Desktop, VS Code, Cursor, Cherry Studio) starts:", mcp),
    ]


def _beside_python(name: str) -> str:
    """``name`` as it can be typed here: the script installed beside this Python (relative
    to the working folder when it is below it, as ``.venv/bin/jupyter``), else ``name``."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    if not os.path.exists(beside):
        return name
    relative = os.path.relpath(beside)
    return relative if not relative.startswith("..") else beside


def _sessions(args: argparse.Namespace) -> int:
    from .engine.sessions import find as find_session

    memory = _open(args)
    if args.view == "show":
        receipt = find_session(memory, args.session)
        text = memory.session_prompt(args.session)
        if not _json(args, {"receipt": receipt, "text": text}):
            _write_exact(text)
        return 0
    if args.view == "diff":
        diff = memory.diff_sessions(args.first, args.second)
        if args.json:
            first = find_session(memory, args.first)["session_id"]
            second = find_session(memory, args.second)["session_id"]
            _json(args, {"first": first, "second": second, "diff": diff})
        elif diff:
            # A prompt rarely ends with a newline, nor then does its diff: end the output.
            _write_exact(diff if diff.endswith("\n") else diff + "\n")
        else:
            print("The two sessions started with the same prompt.", file=sys.stderr)
        return 0
    if args.view == "why":
        origins = memory.why(args.session, args.text)
        if args.json:
            _json(args, [asdict(origin) for origin in origins])
        elif origins:
            print(*origins, sep="\n")
        else:
            print(f"No line of that session's prompt contains {args.text!r}.", file=sys.stderr)
        return 0 if origins else 1
    receipts = memory.sessions()
    if _json(args, receipts):
        return 0
    if not receipts:
        print(f"No sessions recorded for {memory.agent_id or memory.path} yet.")
        return 0
    print(f"{'TIME':<24}  {'SESSION':<16}  {'TOKENS':>6}  {'PROMPT':<12}  CLIENT")
    for receipt in receipts:
        client = receipt.get("client")
        client = client if isinstance(client, dict) else {}
        # The client names itself, so its name is a stranger's text, of any length: it must
        # not move the cursor, colour the terminal, start a new row or fill the screen.
        named = " ".join(str(client[k]) for k in ("name", "version") if client.get(k))
        named = _shown(named or "-")
        if len(named) > CLIENT_COLUMN:
            named = named[: CLIENT_COLUMN - 1] + "…"
        if receipt.get("forgotten"):
            named += "  (text forgotten since)"
        print(f"{_shown(receipt.get('ts', '?')):<24}  {_shown(receipt['session_id']):<16}  "
              f"{_shown(receipt.get('tokens', '?')):>6}  "
              f"{_shown(receipt.get('prompt_sha256', ''))[:12]:<12}  {named}")
    return 0


def _write_exact(text: str) -> None:
    """``text`` on stdout as its exact UTF-8 bytes (surrogates kept); inert on a terminal."""
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None or sys.stdout.isatty():
        sys.stdout.write(_terminal(text))
        return
    sys.stdout.flush()
    stream.write(text.encode("utf-8", "surrogatepass"))
    stream.flush()


def _forget(args: argparse.Namespace) -> int:
    from .engine.forgetting import forget
    from .notebook.display import forget_report

    memory = _open(args)
    text = args.text
    if text == "-":
        text = _read_text("-")
        # The line's own ending ("\r\n" from Windows too) is not part of the text.
        ending = next((end for end in ("\r\n", "\n", "\r") if text.endswith(end)), "")
        text = text.removesuffix(ending)
    receipt = forget(memory, text, pattern=args.pattern, secrets=args.secrets,
                     dry_run=args.dry_run, reason=args.reason)
    if not _json(args, receipt):
        for status, line in forget_report(receipt):
            print(line, file=sys.stderr if status == "error" else sys.stdout)
    return 1 if not receipt.get("dry_run") and not receipt.get("verified") else 0


def _lint(args: argparse.Namespace) -> int:
    import shlex

    from .engine.forgetting import lint

    memory = _open(args)
    findings = lint(memory)
    command = f"{PROG} forget --secrets"
    if args.agent is not None:
        command += f" --agent {shlex.quote(str(args.agent))}"
    if _json(args, {"secrets": findings, "forget": command if findings else None}):
        return 1 if findings else 0
    if not findings:
        print(f"No credentials stored in {memory.agent_id or memory.path}.")
        return 0
    for finding in findings:
        print(f"{finding['file']}:{finding['line']}: {finding['kind']}")
    count = len(findings)
    plural = "s" if count != 1 else ""
    print(f"{count} stored credential{plural}. Remove with (--dry-run shows what would change):")
    print(f"  {command}")
    return 1


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "init": _init, "fact": _fact, "journal": _journal, "prompt": _prompt, "mcp": _mcp,
    "index": _index, "agents": _agents, "demo": _demo, "sessions": _sessions,
    "forget": _forget, "lint": _lint,
}


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
