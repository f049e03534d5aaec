"""The recall side of the learning loop: SOUL, USER and FACT back into the system prompt.

:class:`PromptBuilder` reads an agent folder (it never writes) and assembles the context a
model gets at the start of a session: an optional bootstrap block for a brand-new agent, then
the ``## Memories`` section that explains the memory files and carries their contents.

Builds are cached: file contents are keyed by ``(mtime_ns, ctime_ns, size, inode)`` and the
assembled prompt by the keys of everything it used, so an unchanged build costs a few
``lstat`` calls and a rewritten file is never missed, even when its size stays the same.
"""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import INTERNAL_ERROR, MemoryToolError, UnsafePathError
from .paths import Folder, describe, file_key, match_name
from .store import FACT, JOURNAL, MEMORY_DIR, SOUL, USER, AgentMemory
from .watch import Plan, Watch

DEFAULT_TOOL_NAME = "mcp__agent-memory__memory"
SYSTEM_FILE = "system.md"
BOOTSTRAP_TAG = "bootstrap"
# A SOUL.md with at most this many characters of real text (headings and quotes removed)
# is still a stub, so the agent has not been set up yet.
SOUL_STUB_CHARS = 50
_MISSING = (None,)
# Cached prompts kept per builder (each holds a few open handles).
_MAX_WATCHES = 16


class PromptBudgetWarning(UserWarning):
    """The memory loaded into the prompt is larger than the configured token budget."""


def approx_tokens(text: str) -> int:
    """A rough token count (4 characters a token), for display and budgets."""
    return (len(text) + 3) // 4


@dataclass(frozen=True)
class Section:
    """One part of a built prompt, for display and budgets."""

    name: str
    source: Path | None
    chars: int
    tokens: int


@dataclass(frozen=True)
class Prompt:
    """A built system prompt.

    ``base`` is the workspace's ``system.md`` (None: the client keeps its own base prompt),
    ``context`` the memory part, ``text`` both joined by a blank line.
    """

    base: str | None
    context: str
    sections: tuple[Section, ...]
    bootstrap: bool
    budget_tokens: int | None = None
    warnings: tuple[str, ...] = field(default=())

    @property
    def text(self) -> str:
        """The whole system prompt: base (when any), a blank line, then the context."""
        return self.context if self.base is None else f"{self.base}\n\n{self.context}"

    @property
    def tokens(self) -> int:
        """Approximate tokens of :attr:`text`."""
        return approx_tokens(self.text)

    @property
    def memory_tokens(self) -> int:
        """Approximate tokens of the memory part (:attr:`context`)."""
        return approx_tokens(self.context)

    @property
    def over_budget(self) -> bool:
        """True when a budget is set and the memory part exceeds it."""
        return self.budget_tokens is not None and self.memory_tokens > self.budget_tokens

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class _Loaded:
    """A file as read for a build: its path, cache key and trimmed text (None: omitted)."""

    path: Path
    key: tuple[Any, ...]
    text: str | None
    raw: str = ""
    regular: bool = False


class PromptBuilder:
    """Builds the system prompt of a session from an agent folder.

    ``tool_name`` is how the model sees the ``memory`` tool (an MCP client such as Claude
    Code names it ``mcp__agent-memory__memory``; plain function calling uses ``memory``).
    ``budget_tokens`` makes every build warn when the memory part is larger; nothing is
    ever cut.
    """

    def __init__(self, tool_name: str = DEFAULT_TOOL_NAME, budget_tokens: int | None = None):
        self.tool_name = tool_name
        self.budget_tokens = budget_tokens
        self._files: dict[Path, tuple[tuple[Any, ...], str]] = {}
        self._listings: dict[Path, tuple[tuple[Any, ...], list[str]]] = {}
        self._prompts: dict[tuple[Any, ...], Prompt] = {}
        self._workspaces: dict[Any, str] = {}
        self._watched: dict[tuple[Any, ...], Watch] = {}

    # -- public API ------------------------------------------------------------------------

    def build(
        self,
        agent: AgentMemory | str | os.PathLike[str],
        workspace: str | os.PathLike[str] | None = None,
        config: Mapping[str, Any] | None = None,
        has_user_instructions: bool = False,
    ) -> Prompt:
        """Build the prompt for ``agent`` (an :class:`AgentMemory` or a folder path).

        ``workspace`` is the session's working directory (default: the current one); its
        ``system.md``, when present, becomes :attr:`Prompt.base`. ``config`` may hold
        ``bootstrap_completed`` (bool) and ``budget_tokens`` (int).
        """
        if config:
            completed = config.get("bootstrap_completed")
            budget = config.get("budget_tokens", self.budget_tokens)
        else:
            config, completed, budget = {}, None, self.budget_tokens
        folder = agent.path if isinstance(agent, AgentMemory) else _agent_folder(agent)
        space = self._workspaces.get(workspace) if workspace else os.getcwd()
        if space is None:
            space = os.path.abspath(os.path.expanduser(os.fspath(workspace)))
            if os.path.isabs(os.path.expanduser(os.fspath(workspace))):
                # Only absolute spellings are memoised: a relative one depends on the cwd.
                self._workspaces[workspace] = space
        watch_key = (str(folder), space, completed, bool(has_user_instructions), budget)
        # Fast path: one stat call per file and folder the last build depended on; when none
        # changed, the previous prompt is still exact.
        watch = self._watched.get(watch_key)
        if watch is not None and watch.unchanged():
            prompt = watch.prompt
        else:
            plan = watch.plan if watch is not None else _expected_plan(folder, space)
            armed = Watch(plan)
            complete = armed.arm()  # keys first: see watch.py
            prompt, needed = self._build(
                Path(folder), Path(space), config, has_user_instructions, budget
            )
            if watch is not None:
                watch.close()
            if complete and needed == plan:
                armed.prompt = prompt
            else:
                # Other names than expected (case variants, missing files): the next build
                # arms this plan before it trusts anything.
                armed.close()
                armed = Watch(needed)
            if len(self._watched) >= _MAX_WATCHES:
                self._close_watches()
            self._watched[watch_key] = armed
        for message in prompt.warnings:
            warnings.warn(message, PromptBudgetWarning, stacklevel=2)
        return prompt

    def _build(
        self,
        folder: Path,
        space: Path,
        config: Mapping[str, Any],
        has_user_instructions: bool,
        budget: int | None,
    ) -> tuple[Prompt, Plan]:
        """Build through the content caches; also returns every path the build depends on."""
        soul, user, facts = self._load_agent_files(folder)
        system = self._load_system(space)
        key = (
            folder,
            space,
            soul.key,
            user.key,
            facts.key,
            system.key if system else None,
            config.get("bootstrap_completed"),
            bool(has_user_instructions),
            budget,
            self.tool_name,
        )
        prompt = self._prompts.get(key)
        if prompt is None:
            prompt = self._assemble(
                folder, space, soul, user, facts, system, config, has_user_instructions, budget
            )
            if len(self._prompts) > 64:
                self._prompts.clear()
            self._prompts[key] = prompt
        return prompt, _dependencies(folder, space, soul, user, facts, system)

    def build_session(
        self, agent: AgentMemory, workspace: str | os.PathLike[str] | None = None
    ) -> Prompt:
        """Build ``agent``'s prompt as a session would, with its template's settings.

        The template the agent was provisioned from supplies ``config`` (its
        ``configuration``) and whether role instructions exist; an agent without a template
        gets the defaults. Every surface (CLI, magics, panel, REST) builds prompts this way.
        """
        from .templates import template_for

        definition = template_for(agent)
        return self.build(
            agent,
            workspace=workspace,
            config=definition.configuration if definition else None,
            has_user_instructions=bool(definition and definition.instructions),
        )

    def build_facts_section(self, agent: AgentMemory | str | os.PathLike[str]) -> str | None:
        """``## Agent Knowledge`` with FACT.md, or None when FACT.md is missing or empty."""
        _soul, _user, facts = self._load_agent_files(_agent_folder(agent))
        if not facts.text:
            return None
        return (
            "## Agent Knowledge\n\n"
            "Trust the facts below unless you have direct evidence that one of them is wrong; "
            f"when you do, correct FACT.md with the `{self.tool_name}` tool (action `update`).\n\n"
            f"<facts>\n{facts.text}\n</facts>"
        )

    @staticmethod
    def needs_bootstrap(
        soul: str, config: Mapping[str, Any] | None = None, has_user_instructions: bool = False
    ) -> bool:
        """Whether the bootstrap block is needed (see the design, section 5)."""
        completed = (config or {}).get("bootstrap_completed")
        if completed is True:
            return False
        if completed is False:
            return True
        if has_user_instructions:
            return False
        meaningful = "\n".join(
            line for line in soul.splitlines() if not line.startswith(("#", ">"))
        ).strip()
        return len(meaningful) <= SOUL_STUB_CHARS

    def clear_cache(self) -> None:
        """Forget every cached file and prompt."""
        self._files.clear()
        self._listings.clear()
        self._prompts.clear()
        self._close_watches()
        self._workspaces.clear()

    def _close_watches(self) -> None:
        for watch in self._watched.values():
            watch.close()
        self._watched.clear()

    # -- loading ---------------------------------------------------------------------------

    def _listing(self, folder: Path) -> tuple[tuple[Any, ...], list[str]] | None:
        """Names in a real (non-link) directory, cached on the directory's own key."""
        try:
            st = os.lstat(folder)
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return None
        key = file_key(st)
        cached = self._listings.get(folder)
        if cached is not None and cached[0] == key:
            return cached
        try:
            names = os.listdir(folder)
        except OSError:
            return None
        self._listings[folder] = (key, names)
        return key, names

    def _load(self, folder: Path, listing: tuple[Any, list[str]] | None, canonical: str) -> _Loaded:
        missing = _Loaded(folder / canonical, _MISSING, None)
        if listing is None:
            return missing
        name = match_name(listing[1], canonical)
        if name is None:
            return missing
        path = folder / name
        try:
            st = os.lstat(path)
        except OSError:
            return missing
        if not stat.S_ISREG(st.st_mode):
            return _Loaded(path, ("not-regular", st.st_mode), None)
        key = file_key(st)
        cached = self._files.get(path)
        if cached is None or cached[0] != key:
            try:
                with Folder.open(folder) as handle:
                    fd = handle.open_file(name, os.O_RDONLY)
                    key = file_key(os.fstat(fd))
                    with os.fdopen(fd, "rb") as stream:
                        text = stream.read().decode("utf-8", errors="replace")
            except (OSError, UnsafePathError):
                return _Loaded(path, ("unreadable", key), None)
            cached = (key, text)
            self._files[path] = cached
        return _Loaded(path, key, cached[1].strip() or None, cached[1], regular=True)

    def _load_agent_files(self, folder: Path) -> tuple[_Loaded, _Loaded, _Loaded]:
        listing = self._listing(folder)
        soul = self._load(folder, listing, SOUL)
        user = self._load(folder, listing, USER)
        memory_name = match_name(listing[1], MEMORY_DIR) if listing else None
        memory = folder / (memory_name or MEMORY_DIR)
        facts = self._load(memory, self._listing(memory) if memory_name else None, FACT)
        # The folder keys belong in the cache key too: a file appearing changes a listing.
        return replace(soul, key=(soul.key, listing[0] if listing else None)), user, facts

    def _load_system(self, workspace: Path) -> _Loaded | None:
        listing = self._listing(workspace)
        loaded = self._load(workspace, listing, SYSTEM_FILE)
        if loaded.key == _MISSING:
            return None
        if loaded.key[0] == "unreadable":
            raise MemoryToolError(f"Cannot read {loaded.path}", INTERNAL_ERROR)
        if not loaded.regular:
            try:
                kind = describe(os.lstat(loaded.path))
            except OSError:
                kind = "gone"
            raise UnsafePathError(
                f"Refusing to read {loaded.path}: it is {kind}, not a regular file"
            )
        # An empty system.md still replaces the client's base prompt, with ''.
        return replace(loaded, key=(loaded.key, listing[0]), text=loaded.text or "")

    # -- assembling ------------------------------------------------------------------------

    def _assemble(
        self,
        folder: Path,
        workspace: Path,
        soul: _Loaded,
        user: _Loaded,
        facts: _Loaded,
        system: _Loaded | None,
        config: Mapping[str, Any],
        has_user_instructions: bool,
        budget: int | None,
    ) -> Prompt:
        sections: list[Section] = []
        parts: list[str] = []
        bootstrap = self.needs_bootstrap(soul.raw, config, has_user_instructions)
        if system is not None:
            sections.append(_section("system", system.path, system.text or ""))
        if bootstrap:
            block = self._bootstrap_block(folder, has_user_instructions)
            parts.append(block)
            sections.append(_section("bootstrap", None, block))
        intro = self._memories_intro(folder, workspace)
        memory_parts = [intro]
        sections.append(_section("memories", None, intro))
        for name, loaded in (("soul", soul), ("user", user), ("facts", facts)):
            if loaded.text:
                block = f"<{name}>\n{loaded.text}\n</{name}>"
                memory_parts.append(block)
                sections.append(_section(name, loaded.path, block))
        parts.append("\n\n".join(memory_parts))
        context = "\n\n".join(parts)
        notes: tuple[str, ...] = ()
        if budget is not None and approx_tokens(context) > budget:
            sizes = ", ".join(f"{s.name} {s.tokens}" for s in sections if s.name != "system")
            notes = (
                f"Agent memory uses about {approx_tokens(context)} tokens, over the budget of "
                f"{budget} (by section: {sizes}). Nothing was cut; trim FACT.md, SOUL.md or "
                "USER.md.",
            )
        return Prompt(
            base=system.text if system is not None else None,
            context=context,
            sections=tuple(sections),
            bootstrap=bootstrap,
            budget_tokens=budget,
            warnings=notes,
        )

    def _memories_intro(self, folder: Path, workspace: Path) -> str:
        tool = self.tool_name
        memory = folder / MEMORY_DIR
        return (
            "## Memories\n\n"
            f"Your long-term memory is the folder `{folder}`. It outlasts this conversation: "
            "it is how you remember people and work from one session to the next. Each file "
            "has an exclusive scope, so a piece of information lives in exactly one of them:\n\n"
            "| File | Purpose | How it changes |\n"
            "|---|---|---|\n"
            f"| `{folder / SOUL}` | WHO you are: name, personality, tone, communication style "
            "| edit the file directly |\n"
            f"| `{folder / USER}` | WHO the user is: name, preferences, timezone, context "
            "| edit the file directly |\n"
            f"| `{memory / FACT}` | WHAT you know that will still matter in 6 months "
            f"| only through `{tool}` with action `update`, sending the whole new file |\n"
            f"| `{memory / JOURNAL}` | WHEN things happened: one-off events, decisions, "
            f"session notes | only through `{tool}` with actions `append` and `search`; it is "
            "never loaded into this prompt, so search it when the past matters |\n\n"
            "- Before writing to FACT.md, ask: will this still matter in 6 months? "
            "If not, append it to the journal instead.\n"
            f"- Your working directory is the session workspace (`{workspace}`), not the "
            "memory folder: always use the absolute paths above.\n"
            "- File names are matched case-insensitively (`fact.md` is FACT.md).\n\n"
            "What you remember so far follows; files that are missing or empty are left out."
        )

    def _bootstrap_block(self, folder: Path, has_user_instructions: bool) -> str:
        tool = self.tool_name
        soul, user = folder / SOUL, folder / USER
        log = (
            f"When both files are written, record it with `{tool}`: action `append`, tags "
            f'`["{BOOTSTRAP_TAG}"]`, and a one-line summary of what you set up.'
        )
        if has_user_instructions:
            return (
                "## Bootstrap Mode\n\n"
                "Your instructions already define your role, but this memory is new: "
                "SOUL.md does not describe you yet. Set it up as you help, without "
                "interrupting what the user asked for:\n\n"
                f"1. Write the name, purpose and tone your instructions give you to `{soul}`. "
                "Take them from the instructions; do not invent a different persona.\n"
                "2. Learn who the user is as the conversation allows (name, what they work "
                f"on, preferences, timezone) and keep it in `{user}`.\n"
                f"3. {log}"
            )
        return (
            "## Bootstrap Mode\n\n"
            "This agent is brand new: SOUL.md says almost nothing yet, so this is your first "
            "conversation with this user. Before diving into tasks, set yourself up:\n\n"
            "1. Introduce yourself briefly and say that you are new and keen to learn how "
            "to help.\n"
            "2. Settle with the user on a name, personality and tone for you, and get to know "
            "them: their name, what they work on, their preferences and timezone. Ask a "
            "couple of questions at a time, not a questionnaire.\n"
            f"3. Write who you are to `{soul}` and who the user is to `{user}`, each file "
            "keeping to its own scope.\n"
            f"4. {log}"
        )


def _agent_folder(agent: AgentMemory | str | os.PathLike[str]) -> Path:
    if isinstance(agent, AgentMemory):
        return agent.path
    raw = Path(os.path.abspath(Path(agent).expanduser()))
    return Path(os.path.realpath(raw.parent)) / raw.name


def _expected_plan(folder: str | os.PathLike[str], space: str) -> Plan:
    """What a build usually depends on: the three files by exact name, no system.md."""
    agent = os.fspath(folder)
    memory = os.path.join(agent, MEMORY_DIR)
    return Plan(
        paths=(agent, space),
        handles=(
            memory,
            os.path.join(agent, SOUL),
            os.path.join(agent, USER),
            os.path.join(memory, FACT),
        ),
    )


def _dependencies(
    folder: Path, space: Path, soul: _Loaded, user: _Loaded, facts: _Loaded, system: _Loaded | None
) -> Plan:
    """Everything whose change could change the prompt (see :mod:`.watch`).

    The agent folder and the workspace are checked by path: they see entries (a new
    ``system.md``, a case variant of a missing file, ``memory/`` replaced) and the folders
    themselves being replaced. ``memory/`` and every file that was read are held open: edits,
    replacements and deletions all change their keys. A link or a missing file is never held;
    the folder around it covers it.
    """
    memory = facts.path.parent
    handles = [memory] if memory.parent == folder and _is_real_dir(memory) else []
    handles += [part.path for part in (soul, user, facts, system) if part and part.regular]
    return Plan(paths=(str(folder), str(space)), handles=tuple(map(str, handles)))


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _section(name: str, source: Path | None, text: str) -> Section:
    return Section(name=name, source=source, chars=len(text), tokens=approx_tokens(text))
