"""An ipywidgets panel over one agent's memory.

``MemoryPanel(mem)`` (or ``%agent_memory`` with no argument) shows four tabs:

* **Facts**: an editor for FACT.md whose Save is a compare-and-swap write (if the agent changed
  the file meanwhile, nothing is written and a conflict message with a Reload button appears),
  the rendered Markdown (sanitised: raw HTML in FACT.md shows as text), and the version history
  with diff and restore.
* **Journal**: search by text, tag (picked from the tags already used), limit and time window;
  the results table; a form to append an entry.
* **Prompt**: the exact system prompt, its per-section sizes and any budget warning.
* **Persona**: editors for SOUL.md and USER.md, also saved with compare-and-swap.

Every action is a plain method (``save_facts``, ``search_journal``, ``append_entry``, ...) that
the buttons call, so the panel can be driven and tested without a browser. Messages shown are
the engine's own. Panels refresh on their Refresh button and, when the IPython extension is
loaded, after any cell that changed the agent's files.

This is the only module of the package that imports ipywidgets.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from ..engine import sessions
from ..engine.prompt import DEFAULT_TOOL_NAME
from ..engine.store import AgentMemory, check_edit_body
from ..engine.tool import DEFAULT_LIMIT, NO_JOURNAL
from ..errors import AgentNotFoundError, MemoryConflictError, MemoryToolError
from ..render import NO_MATH_CLASS, escape_html
from .display import (
    TEXT_WRAP,
    VIEW_LIMIT,
    DiffView,
    FactsView,
    HistoryView,
    JournalResult,
    PromptView,
    SessionsView,
    WhyView,
    format_size,
    format_when,
    short_sha,
    status_style,
)

__all__ = ["MemoryPanel", "is_live", "memory_fingerprint", "refresh_live_panels"]

log = logging.getLogger(__name__)

# Panels that are open; the IPython post_run_cell hook refreshes them. Closed panels leave.
_LIVE_PANELS: weakref.WeakSet[MemoryPanel] = weakref.WeakSet()


def refresh_live_panels() -> None:
    """Refresh every open panel whose agent files changed on disk (called after each cell)."""
    for panel in list(_LIVE_PANELS):
        try:
            panel.refresh_if_changed()
        except Exception:  # a hook must never break the user's cell; log and go on
            log.exception("Refreshing the agent-memory panel failed")


def is_live(panel: MemoryPanel) -> bool:
    """True while ``panel`` is open (it refreshes after cells)."""
    return panel in _LIVE_PANELS


def memory_fingerprint(mem: AgentMemory) -> tuple[Any, ...]:
    """A cheap value that changes whenever any file of the agent changes.

    Names plus (mtime, ctime, size, inode) of the entries in the agent folder and in
    ``memory/``, read with lstat only (no link is followed, no file is read).
    """
    from ..folder import file_key

    try:
        stats = mem.file_stats()
    except MemoryToolError as exc:
        return ("unavailable", exc.message)
    return tuple(sorted((name, file_key(st)) for name, st in stats.items()))


def _journal_bytes(mem: AgentMemory) -> int:
    """Size of the agent's journal in bytes (0 when there is none), from one lstat."""
    from ..engine.store import JOURNAL, MEMORY_DIR
    from ..folder import match_name

    stats = mem.file_stats()
    name = match_name(list(stats), f"{MEMORY_DIR}/{JOURNAL}")
    return stats[name].st_size if name is not None else 0


def _message(text: str, kind: str = "info") -> str:
    """Status line HTML in the theme's colour for ``kind``; ``text`` is escaped (it may quote
    untrusted content)."""
    return (f'<span class="{NO_MATH_CLASS}" style="{status_style(kind)};'
            f'{TEXT_WRAP}">{escape_html(text)}</span>')


def _textarea(placeholder: str, height: str = "220px") -> widgets.Textarea:
    return widgets.Textarea(placeholder=placeholder,
                            layout=widgets.Layout(width="100%", height=height))


def _show(widget: widgets.Widget, visible: bool) -> None:
    widget.layout.display = None if visible else "none"


def split_tags(text: str) -> list[str]:
    """Tags from a comma-separated field: trimmed, empty items dropped, order kept."""
    return [tag.strip() for tag in text.split(",") if tag.strip()]


class _FileEditor:
    """An editor for one memory file whose Save is compare-and-swap.

    ``read`` returns ``(text, sha256)`` from one read; ``write(text, expected_sha256=...)``
    is the engine's CAS write. The sha256 of the version loaded into the editor is what Save
    expects on disk, so a change made meanwhile (by an agent, a magic, another editor) is
    reported as a conflict instead of being overwritten: the conflict shows both versions'
    12-digit hashes, a diff from the file as it is now to your text, and three choices.
    *Overwrite anyway* is still a compare-and-swap, against the version the diff showed.

    ``guard`` checks the text before any write (FACT.md uses the engine's
    :func:`~jupyter_agent_memory.engine.store.check_edit_body`); ``check`` raises the engine's error
    when the agent folder is gone, so a save never recreates it. A file larger than ``limit``
    characters is not put into the editor (that would send all of it to the browser) until
    *Edit here anyway* is pressed.
    """

    def __init__(
        self,
        label: str,
        read: Callable[[], tuple[str, str]],
        write: Callable[..., str],
        placeholder: str,
        height: str = "220px",
        *,
        guard: Callable[[str], str] | None = None,
        check: Callable[[], None] | None = None,
        limit: int | None = VIEW_LIMIT,
    ) -> None:
        self.label = label
        self._read = read
        self._write = write
        self._guard = guard
        self._check = check
        self.limit = limit
        self.editor = _textarea(placeholder, height)
        self.save_button = widgets.Button(description=f"Save {label}", icon="save")
        self.reload_button = widgets.Button(description="Reload", icon="refresh")
        self.status = widgets.HTML()
        self.large_button = widgets.Button(description="Edit here anyway", icon="pencil")
        self.large_button.on_click(lambda _b: self.load_large())
        _show(self.large_button, False)
        self.conflict_view = widgets.HTML()
        self.conflict_reload_button = widgets.Button(description="Reload", icon="refresh",
                                                     tooltip="Discard your text, load the file")
        self.keep_editing_button = widgets.Button(description="Keep editing", icon="pencil")
        self.overwrite_button = widgets.Button(
            description="Overwrite anyway", icon="exclamation-triangle", button_style="danger",
            tooltip="Replace the version shown above with your text (if it has not changed again)")
        self.conflict_reload_button.on_click(lambda _b: self.load(force=True))
        self.keep_editing_button.on_click(lambda _b: self.keep_editing())
        self.overwrite_button.on_click(lambda _b: self.overwrite())
        self.conflict_box = widgets.VBox([
            self.conflict_view,
            widgets.HBox([self.conflict_reload_button, self.keep_editing_button,
                          self.overwrite_button]),
        ])
        _show(self.conflict_box, False)
        self.loaded_text = ""
        self.base_sha = ""
        self.conflict = False
        self.conflict_sha = ""
        self.held_back = False
        self._allow_large = False
        self.box = widgets.VBox([
            self.editor,
            widgets.HBox([self.save_button, self.reload_button, self.large_button]),
            self.status, self.conflict_box,
        ])

    @property
    def dirty(self) -> bool:
        """True when the editor holds edits that are not saved."""
        return not self.held_back and self.editor.value != self.loaded_text

    def _fill(self, text: str, sha: str) -> None:
        self.held_back = (not self._allow_large and self.limit is not None
                          and len(text) > self.limit)
        self.loaded_text = "" if self.held_back else text
        self.editor.value = self.loaded_text
        self.editor.disabled = self.held_back
        self.save_button.disabled = self.held_back
        _show(self.large_button, self.held_back)
        self.base_sha = sha
        self.conflict = False
        self.conflict_sha = ""
        _show(self.conflict_box, False)
        self.reload_button.button_style = ""
        if self.held_back:
            self.large_button.description = (
                f"Edit here anyway ({format_size(len(text.encode('utf-8', 'replace')))})")
            self.status.value = _message(
                f"{self.label} is {len(text):,} characters: it is not put into this editor, "
                "which would send all of it to the browser. Edit it in a text editor, or press "
                "Edit here anyway.", "warning")

    def load(self, force: bool = False) -> str:
        """Load the file unless there are unsaved edits (``force`` discards them).

        Returns the text on disk, whether or not it went into the editor.
        """
        text, sha = self._read()
        if sha == self.base_sha and not force:
            return text
        if self.dirty and not force:
            self.status.value = _message(
                f"{self.label} changed on disk while you were editing; Save will show what "
                "changed and let you choose.", "warning")
            return text
        self._fill(text, sha)
        if force and not self.held_back:
            self.status.value = _message(f"Loaded {self.label} (sha256 {short_sha(sha)}).")
        return text

    def load_large(self) -> None:
        """Put a file larger than the view limit into the editor after all."""
        self._allow_large = True
        self.load(force=True)

    def keep_editing(self) -> None:
        """Close the conflict choices and go on editing (Save will ask again)."""
        _show(self.conflict_box, False)
        self.status.value = _message(
            f"Still editing. {self.label} on disk is {short_sha(self.conflict_sha)}; your text "
            "is not saved.", "warning")

    def save(self) -> bool:
        """Write the editor through compare-and-swap; on conflict show it and write nothing."""
        return self._save(self.base_sha)

    def overwrite(self) -> bool:
        """Write the editor over the version the conflict showed (still compare-and-swap)."""
        if not self.conflict_sha:
            self.status.value = _message("There is no conflict to resolve.", "warning")
            return False
        return self._save(self.conflict_sha)

    def _save(self, expected: str) -> bool:
        text = self.editor.value
        if self.held_back:
            self.status.value = _message(
                f"Not saved: {self.label} is not in the editor (press Edit here anyway).",
                "error")
            return False
        try:
            if self._check is not None:
                self._check()
            if self._guard is not None:
                self._guard(text)
            sha = self._write(text, expected_sha256=expected)
        except MemoryConflictError as exc:
            self._show_conflict(text, exc)
            return False
        except MemoryToolError as exc:
            self.status.value = _message(f"Not saved: {exc.message}", "error")
            return False
        self.loaded_text = text
        self.base_sha = sha
        self.conflict = False
        self.conflict_sha = ""
        _show(self.conflict_box, False)
        self.reload_button.button_style = ""
        self.status.value = _message(f"Saved {self.label} (sha256 {short_sha(sha)}).", "ok")
        return True

    def _show_conflict(self, text: str, exc: MemoryConflictError) -> None:
        self.conflict = True
        self.reload_button.button_style = "warning"
        try:
            current, current_sha = self._read()
        except MemoryToolError as error:
            self.status.value = _message(f"Not saved: {error.message}", "error")
            return
        self.conflict_sha = current_sha
        self.status.value = _message(
            f"Not saved: {self.label} changed on disk since you loaded it (you started from "
            f"{short_sha(exc.expected)}, it is now {short_sha(current_sha)}); nothing was "
            "written. Your text is still in the editor.", "error")
        diff = DiffView(current, text, f"{self.label} now ({short_sha(current_sha)})",
                        "your text")
        self.conflict_view.value = (
            _message("What your text changes in the file as it is now:") + diff._repr_html_())
        _show(self.conflict_box, True)


#: Tags are counted on every refresh while the journal is at most this big (a few
#: milliseconds); a bigger journal is counted only when asked (Count tags), so refreshing after
#: a cell costs the same on a thousand entries or a million.
TAG_COUNT_AUTO_BYTES = 1024 * 1024


class MemoryPanel(widgets.VBox):
    """A widget panel over one agent: Facts, Journal, Prompt, Persona and Sessions tabs.

    ``mem`` is an :class:`~jupyter_agent_memory.AgentMemory`; ``workspace`` is the folder whose
    ``system.md`` (if any) is the prompt's base (default: the current directory);
    ``tool_name`` and ``budget_tokens`` are passed to the prompt builder.
    """

    def __init__(
        self,
        mem: AgentMemory,
        *,
        workspace: str | Path | None = None,
        tool_name: str = DEFAULT_TOOL_NAME,
        budget_tokens: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        from ..engine.prompt import PromptBuilder

        self.mem = mem
        self.builder = PromptBuilder(tool_name=tool_name, budget_tokens=budget_tokens)
        self._workspace = Path(workspace) if workspace is not None else Path.cwd()
        self._fingerprint: tuple[Any, ...] | None = None
        self.last_results: JournalResult = JournalResult()
        self.last_prompt: PromptView | None = None
        self.last_sessions: SessionsView = SessionsView()
        self.tag_counts: dict[str, int] | None = None
        self.tags_stale = False
        self.gone = False
        self._rendered_facts: tuple[str, bool] | None = None
        self._searching = False

        label = mem.agent_id if mem.agent_id is not None else mem.path.name
        self.title = widgets.HTML(
            f"<b>Agent memory: {escape_html(label)}</b> "
            f"<small><code>{escape_html(mem.path)}</code></small>"
        )
        self.banner = widgets.HTML()
        self.refresh_button = widgets.Button(description="Refresh", icon="refresh",
                                             tooltip="Reload everything from disk")
        self.refresh_button.on_click(lambda _b: self.refresh())

        self.tabs = widgets.Tab(
            children=[self._build_facts_tab(), self._build_journal_tab(),
                      self._build_prompt_tab(), self._build_persona_tab(),
                      self._build_sessions_tab()],
            titles=("Facts", "Journal", "Prompt", "Persona", "Sessions"),
        )
        self.children = [widgets.HBox([self.title, self.refresh_button]), self.banner,
                         self.tabs]
        self.refresh()
        _LIVE_PANELS.add(self)

    def __repr__(self) -> str:
        # Stable text (no widget ids): it is what a notebook stores as the panel's text/plain.
        label = self.mem.agent_id if self.mem.agent_id is not None else self.mem.path.name
        return f"MemoryPanel({label!r})"

    def close(self) -> None:
        """Close the panel and its widgets and stop refreshing it."""
        _LIVE_PANELS.discard(self)
        for widget in self._own_widgets():
            widget.close()
        super().close()

    def _own_widgets(self) -> list[widgets.Widget]:
        found: list[widgets.Widget] = []
        stack = list(self.children)
        while stack:
            widget = stack.pop()
            found.append(widget)
            stack.extend(getattr(widget, "children", ()))
        return found

    def _check_folder(self) -> None:
        """Raise the engine's error when the agent folder is gone (nothing recreates it)."""
        if not self.mem.exists():
            raise AgentNotFoundError(self.mem.path, self.mem.agent_id)

    # -- building the tabs -----------------------------------------------------------------

    def _build_facts_tab(self) -> widgets.Widget:
        self.facts = _FileEditor(
            "FACT.md",
            self.mem.read_facts,
            self.mem.update_facts,
            "FACT.md is empty. Write durable facts here and Save.",
            guard=check_edit_body,
            check=self._check_folder,
        )
        self.facts_editor = self.facts.editor
        self.facts_save_button = self.facts.save_button
        self.facts_save_button.button_style = "primary"
        self.facts_reload_button = self.facts.reload_button
        self.facts_status = self.facts.status
        self.facts_save_button.on_click(lambda _b: self.save_facts())
        self.facts_reload_button.on_click(lambda _b: self.reload_facts())
        self.facts_rendered = widgets.Output()
        self.facts_show_all = widgets.ToggleButton(
            value=False, description="Show all", icon="expand",
            tooltip="Render all of FACT.md, however long (sends it all to the browser)")
        self.facts_show_all.observe(lambda _c: self._guard(
            self.facts_status, lambda: self._render_facts(self.mem.facts)), names="value")

        self.history_select = widgets.Select(options=[], rows=6,
                                             layout=widgets.Layout(width="100%"))
        self.history_diff_button = widgets.Button(description="Diff with current", icon="columns")
        self.history_restore_button = widgets.Button(description="Restore", icon="undo")
        self.history_output = widgets.HTML()
        self.history_diff_button.on_click(lambda _b: self.show_history_diff())
        self.history_restore_button.on_click(lambda _b: self.restore_version())

        editor = self.facts.box
        history = widgets.VBox([self.history_select,
                                widgets.HBox([self.history_diff_button,
                                              self.history_restore_button]),
                                self.history_output])
        rendered = widgets.VBox([self.facts_rendered, self.facts_show_all])
        self.facts_tabs = widgets.Tab(children=[editor, rendered, history],
                                      titles=("Edit", "Rendered", "History"))
        return self.facts_tabs

    def _build_journal_tab(self) -> widgets.Widget:
        # Without continuous updates a value changes on Enter or on leaving the field; each
        # change searches again, so the results always match the filters shown.
        self.journal_query = widgets.Text(placeholder="text contains…", description="Query",
                                          continuous_update=False)
        self.journal_tag = widgets.Combobox(placeholder="any tag", description="Tag",
                                            options=[], ensure_option=False,
                                            continuous_update=False)
        self.journal_limit = widgets.BoundedIntText(value=DEFAULT_LIMIT, min=1, max=1_000_000,
                                                    description="Limit",
                                                    continuous_update=False)
        self.journal_since = widgets.Text(placeholder="2026-11-01 or 2026-11-01T09:00Z",
                                          description="Since", continuous_update=False)
        self.journal_until = widgets.Text(placeholder="ISO-8601, inclusive",
                                          description="Until", continuous_update=False)
        self.journal_search_button = widgets.Button(description="Search", icon="search",
                                                    button_style="primary")
        self.journal_count_button = widgets.Button(
            description="Count tags", icon="tags",
            tooltip="Read the whole journal once and list every tag with its count")
        self.journal_tags_info = widgets.HTML()
        self.journal_results = widgets.HTML()
        self.journal_status = widgets.HTML()
        self.journal_search_button.on_click(lambda _b: self.search_journal())
        self.journal_count_button.on_click(lambda _b: self.count_tags())
        for control in (self.journal_query, self.journal_tag, self.journal_limit,
                        self.journal_since, self.journal_until):
            control.observe(lambda _change: self._search_on_change(), names="value")

        self.append_text = _textarea("What happened? (one journal entry)", "80px")
        self.append_tags = widgets.Text(placeholder="comma-separated, e.g. meeting, q3",
                                        description="Tags")
        self.append_button = widgets.Button(description="Append", icon="plus")
        self.append_status = widgets.HTML()
        self.append_button.on_click(lambda _b: self.append_entry())

        search = widgets.VBox([
            widgets.HBox([self.journal_query, self.journal_tag, self.journal_limit]),
            widgets.HBox([self.journal_since, self.journal_until, self.journal_search_button,
                          self.journal_count_button]),
            self.journal_tags_info, self.journal_status, self.journal_results,
        ])
        append = widgets.VBox([widgets.HTML("<b>New entry</b>"), self.append_text,
                               widgets.HBox([self.append_tags, self.append_button]),
                               self.append_status])
        return widgets.VBox([search, append])

    def _build_prompt_tab(self) -> widgets.Widget:
        self.prompt_workspace = widgets.Text(value=str(self._workspace),
                                             description="Workspace",
                                             layout=widgets.Layout(width="70%"))
        self.prompt_build_button = widgets.Button(description="Build", icon="cogs")
        self.prompt_show_all = widgets.ToggleButton(
            value=False, description="Show all", icon="expand",
            tooltip="Show the whole prompt, however long (sends it all to the browser)")
        self.prompt_copy_button = widgets.ToggleButton(
            value=False, description="Copy", icon="copy",
            tooltip="Show the exact text in a box to select and copy (Ctrl+A, Ctrl+C)")
        self.prompt_copy_text = widgets.Textarea(layout=widgets.Layout(width="100%",
                                                                       height="160px"))
        _show(self.prompt_copy_text, False)
        self.prompt_status = widgets.HTML()
        self.prompt_view = widgets.HTML()
        self.prompt_build_button.on_click(lambda _b: self.build_prompt())
        self.prompt_show_all.observe(lambda _c: self._show_prompt(), names="value")
        self.prompt_copy_button.observe(lambda _c: self._show_prompt(), names="value")
        return widgets.VBox([
            widgets.HBox([self.prompt_workspace, self.prompt_build_button]),
            widgets.HBox([self.prompt_show_all, self.prompt_copy_button]),
            self.prompt_copy_text, self.prompt_status, self.prompt_view,
        ])

    def _build_persona_tab(self) -> widgets.Widget:
        mem = self.mem
        self.soul = _FileEditor("SOUL.md", mem.read_soul, mem.write_soul,
                                "SOUL.md is empty. Write it here and press Save.", "180px",
                                check=self._check_folder)
        self.user = _FileEditor("USER.md", mem.read_user, mem.write_user,
                                "USER.md is empty. Write it here and press Save.", "180px",
                                check=self._check_folder)
        for part in (self.soul, self.user):
            part.save_button.on_click(lambda _b, p=part: self.save_persona(p))
            part.reload_button.on_click(lambda _b, p=part: self._guard(p.status,
                                                                       lambda: p.load(True)))
        return widgets.VBox(
            [
                widgets.VBox([widgets.HTML(f"<b>{escape_html(part.label)}</b>"), part.box])
                for part in (self.soul, self.user)
            ]
        )

    def _build_sessions_tab(self) -> widgets.Widget:
        self.sessions_timeline = widgets.HTML()
        self.session_pick = widgets.Dropdown(options=[], description="Session",
                                             layout=widgets.Layout(width="60%"))
        self.session_other = widgets.Dropdown(options=[("(pick one to diff with)", "")],
                                              description="Diff with",
                                              layout=widgets.Layout(width="60%"))
        self.session_show_button = widgets.Button(description="Show prompt", icon="file-text")
        self.session_diff_button = widgets.Button(description="Diff", icon="columns")
        self.session_why_text = widgets.Text(placeholder="a line or part of one",
                                             description="Why",
                                             continuous_update=False)
        self.session_why_button = widgets.Button(description="Trace", icon="search")
        self.session_output = widgets.HTML()
        self.session_output.add_class("jp-AgentMemory-panelSessionOutput")
        self.session_show_button.on_click(lambda _b: self.show_session())
        self.session_diff_button.on_click(lambda _b: self.diff_sessions())
        self.session_why_button.on_click(lambda _b: self.why())
        self.session_why_text.observe(lambda _c: self.session_why_text.value and self.why(),
                                      names="value")
        return widgets.VBox([
            self.sessions_timeline,
            widgets.HBox([self.session_pick, self.session_show_button]),
            widgets.HBox([self.session_other, self.session_diff_button]),
            widgets.HBox([self.session_why_text, self.session_why_button]),
            self.session_output,
        ])

    # -- refreshing ------------------------------------------------------------------------

    def _guard(self, status: widgets.HTML, action: Callable[[], Any]) -> Any:
        """Run ``action``; show an engine error in ``status`` instead of raising from a click."""
        try:
            return action()
        except MemoryToolError as exc:
            status.value = _message(exc.message, "error")
            return None

    def _writable(self, enabled: bool) -> None:
        for button in (self.facts.save_button, self.soul.save_button, self.user.save_button,
                       self.append_button, self.history_restore_button,
                       self.facts.overwrite_button):
            button.disabled = not enabled
        if enabled:
            for part in (self.facts, self.soul, self.user):
                part.save_button.disabled = part.held_back

    def refresh(self) -> None:
        """Reload everything from disk. Editors with unsaved edits keep them (and say so).

        When the agent folder is gone, the panel says so, keeps what the editors hold, and
        turns off every write: nothing recreates the folder.
        """
        self._fingerprint = memory_fingerprint(self.mem)
        if not self.mem.exists():
            self._show_gone()
            return
        if self.gone:
            self.gone = False
            self.banner.value = ""
            self._writable(True)
        self._guard(self.facts_status, lambda: self._load_facts(force=False))
        self._guard(self.facts_status, self._load_history)
        self._guard(self.journal_status, self._load_tags)
        self.search_journal()
        self.build_prompt()
        for part in (self.soul, self.user):
            self._guard(part.status, part.load)
        self._guard(self.session_output, self._load_sessions)

    def _show_gone(self) -> None:
        self.gone = True
        message = AgentNotFoundError(self.mem.path, self.mem.agent_id).message
        self.banner.value = _message(
            f"The agent folder is gone (deleted or moved): {message}. What the editors hold "
            "is kept; saving is off until the folder is back.", "error")
        self._writable(False)

    def refresh_if_changed(self) -> bool:
        """Refresh when the agent's files changed since the last refresh; True if it did."""
        if memory_fingerprint(self.mem) == self._fingerprint:
            return False
        self.refresh()
        return True

    # -- Facts -----------------------------------------------------------------------------

    @property
    def facts_dirty(self) -> bool:
        """True when the FACT.md editor holds edits that are not saved."""
        return self.facts.dirty

    @property
    def facts_conflict(self) -> bool:
        """True after a Save that found FACT.md changed on disk (until Reload or a save)."""
        return self.facts.conflict

    def _load_facts(self, force: bool) -> None:
        self._render_facts(self.facts.load(force))

    def _render_facts(self, text: str) -> None:
        # Sanitised text/html plus the text/plain; never text/markdown (see render.py). A
        # refresh runs after every cell that touched memory; a large FACT.md that did not
        # change is not converted again, and only about VIEW_LIMIT of it is sent unless asked.
        show_all = self.facts_show_all.value
        if (text, show_all) == self._rendered_facts:
            return
        self._rendered_facts = (text, show_all)
        self.facts_rendered.outputs = ()
        self.facts_rendered.append_display_data(
            FactsView(text, path=self.mem.path, limit=None if show_all else VIEW_LIMIT))

    def _load_history(self) -> None:
        versions = HistoryView(self.mem.history())
        self.history = versions
        self.history_select.options = [
            (f"{format_when(v['ts'])}  {short_sha(v['sha256'])}  "
             f"{format_size(int(v['size']))}", v["sha256"])
            for v in versions
        ]
        if not versions:
            self.history_output.value = versions._repr_html_()

    def save_facts(self) -> bool:
        """Save the editor as FACT.md with compare-and-swap against the version loaded.

        Returns True when written. On a conflict nothing is written, the editor keeps the
        text, and the conflict shows what changed with Reload, Keep editing and Overwrite
        anyway. An editor that is empty after trimming is refused (the engine's guard for
        human edits).
        """
        return self._save(self.facts)

    def overwrite_facts(self) -> bool:
        """After a conflict: write the editor over the version the conflict showed (CAS)."""
        saved = self.facts.overwrite()
        if saved:
            self._after_write()
        return saved

    def reload_facts(self) -> None:
        """Discard editor changes and load FACT.md as it is on disk now."""
        self._guard(self.facts_status, lambda: self._load_facts(force=True))

    def _selected_sha(self, sha: str | None) -> str | None:
        sha = sha or self.history_select.value
        if not sha:
            self.history_output.value = _message("Pick a version first.", "warning")
        return sha

    def show_history_diff(self, sha: str | None = None) -> DiffView | None:
        """Show the diff from a stored version (default: the selected one) to FACT.md now."""
        sha = self._selected_sha(sha)
        if not sha:
            return None

        def diff() -> DiffView:
            view = DiffView(self.mem.history_text(sha), self.mem.facts,
                            f"FACT.md@{short_sha(sha)}", "FACT.md (current)")
            self.history_output.value = view._repr_html_()
            return view
        return self._guard(self.history_output, diff)

    def restore_version(self, sha: str | None = None) -> bool:
        """Make a stored version (default: the selected one) current; True when done.

        Refuses while the editor holds unsaved edits, so they are not silently lost.
        """
        sha = self._selected_sha(sha)
        if not sha:
            return False
        if self.facts_dirty:
            self.history_output.value = _message(
                "The editor has unsaved edits: save or reload them before restoring.", "warning")
            return False

        def restore() -> str:
            self._check_folder()
            return self.mem.restore(sha)
        new_sha = self._guard(self.history_output, restore)
        if new_sha is None:
            return False
        self._after_write()
        self.history_output.value = _message(
            f"Restored version {short_sha(sha)}; FACT.md is now {short_sha(new_sha)}.", "ok")
        return True

    # -- Journal ---------------------------------------------------------------------------

    def _load_tags(self) -> None:
        if _journal_bytes(self.mem) <= TAG_COUNT_AUTO_BYTES:
            self.count_tags()
        elif self.tag_counts is not None:
            self.tags_stale = True
            self._show_tags()
        else:
            self.journal_tags_info.value = _message(
                "The journal is large: type a tag, or press Count tags to list them all "
                "(reads the whole journal once).")

    def count_tags(self) -> dict[str, int] | None:
        """Count every tag in the journal now and offer them in the Tag field."""
        counts = self._guard(self.journal_status, self.mem.tag_counts)
        if counts is None:
            return None
        self.tag_counts = counts
        self.tags_stale = False
        self._show_tags()
        return counts

    def _show_tags(self) -> None:
        counts = self.tag_counts or {}
        ordered = sorted(counts.items(), key=lambda kv: kv[0].lower())
        self.journal_tag.options = [tag for tag, _n in ordered]
        if not counts:
            self.journal_tags_info.value = ""
            return
        listed = " · ".join(f"{tag} ({n})" for tag, n in ordered[:200])
        more = f" · … {len(ordered) - 200} more" if len(ordered) > 200 else ""
        stale = " (counted before the latest changes: Count tags again)" if self.tags_stale \
            else ""
        self.journal_tags_info.value = _message(f"Tags: {listed}{more}{stale}")

    def _search_on_change(self) -> None:
        if not self._searching:
            self.search_journal()

    def search_journal(self) -> JournalResult | None:
        """Run the search in the form; show and return the results (None on a bad argument)."""
        query = self.journal_query.value

        def search() -> JournalResult:
            result = self.mem.search_journal(
                query=query,
                tag=self.journal_tag.value.strip(),
                limit=self.journal_limit.value,
                since=self.journal_since.value.strip() or None,
                until=self.journal_until.value.strip() or None,
            )
            if result is None:
                return JournalResult(empty_message=NO_JOURNAL)
            return JournalResult.from_search(result, highlight=query)
        self.journal_status.value = ""
        results = self._guard(self.journal_status, search)
        if results is not None:
            self.last_results = results
            self.journal_results.value = results._repr_html_()
        return results

    def append_entry(self) -> bool:
        """Append the form's text and comma-separated tags through the memory tool; True when
        written."""
        args = {"action": "append", "text": self.append_text.value,
                "tags": split_tags(self.append_tags.value)}

        def append() -> str:
            self._check_folder()
            return self.mem.call_tool(args)
        result = self._guard(self.append_status, append)
        if result is None:
            return False
        self.append_status.value = _message(result, "ok")
        self.append_text.value = ""
        self.append_tags.value = ""
        self._after_write()
        return True

    # -- Prompt ----------------------------------------------------------------------------

    def build_prompt(self) -> PromptView | None:
        """Build the prompt for the workspace in the form; show sizes and budget warnings.

        A preview: no session is recorded.
        """
        workspace = Path(self.prompt_workspace.value or ".").expanduser()
        if not workspace.is_dir():
            self.prompt_status.value = _message(
                f"Workspace {str(workspace)!r} is not a directory", "error")
            return None

        def build() -> PromptView:
            # Built as a session would be, like %memprompt; the budget warning is shown in
            # the view, so it is not also sent to stderr.
            return PromptView.from_prompt(
                self.builder.build_session(self.mem, workspace, warn=False))
        self.prompt_status.value = ""
        view = self._guard(self.prompt_status, build)
        if view is not None:
            self.last_prompt = view
            self._show_prompt()
        return view

    def _show_prompt(self) -> None:
        view = self.last_prompt
        if view is None:
            return
        view.limit = None if self.prompt_show_all.value else VIEW_LIMIT
        self.prompt_view.value = view._repr_html_()
        copying = self.prompt_copy_button.value
        _show(self.prompt_copy_text, copying)
        if copying:
            text = view.text if view.limit is None else view.text[:view.limit]
            self.prompt_copy_text.value = text
        else:
            self.prompt_copy_text.value = ""

    # -- Persona ---------------------------------------------------------------------------

    def _save(self, part: _FileEditor) -> bool:
        saved = part.save()
        if saved:
            self._after_write()
        return saved

    def save_persona(self, part: _FileEditor) -> bool:
        """Save SOUL.md or USER.md (``panel.soul`` / ``panel.user``) with compare-and-swap."""
        return self._save(part)

    def save_soul(self) -> bool:
        """Save the SOUL.md editor (compare-and-swap)."""
        return self.save_persona(self.soul)

    def save_user(self) -> bool:
        """Save the USER.md editor (compare-and-swap)."""
        return self.save_persona(self.user)

    # -- Sessions --------------------------------------------------------------------------

    def _load_sessions(self) -> None:
        receipts = SessionsView(self.mem.sessions())
        self.last_sessions = receipts
        self.sessions_timeline.value = receipts._repr_html_()
        options = [
            (f"{format_when(r.get('ts'))}  {r['session_id']}  "
             f"{(r.get('client') or {}).get('name', '')}", r["session_id"])
            for r in receipts
        ]
        for dropdown, first in ((self.session_pick, []),
                                (self.session_other, [("(pick one to diff with)", "")])):
            current = dropdown.value
            dropdown.options = first + options
            ids = [value for _label, value in dropdown.options]
            # Keep the pick; otherwise the newest session (or "none" for the second one).
            dropdown.value = current if current in ids else (ids[0] if ids else None)

    def show_session(self, session_id: str | None = None) -> PromptView | None:
        """Show the exact prompt a recorded session started with (default: the one picked)."""
        session_id = session_id or self.session_pick.value
        if not session_id:
            self.session_output.value = _message(SessionsView.empty_message, "warning")
            return None

        def show() -> PromptView:
            receipt = sessions.find(self.mem, session_id)
            view = PromptView.from_receipt(receipt,
                                           self.mem.session_prompt(receipt["session_id"]))
            self.session_output.value = view._repr_html_()
            return view
        return self._guard(self.session_output, show)

    def diff_sessions(self, first: str | None = None,
                      second: str | None = None) -> DiffView | None:
        """Diff two recorded sessions' prompts (default: the two picked)."""
        first = first or self.session_pick.value
        second = second or self.session_other.value
        if not first or not second:
            self.session_output.value = _message("Pick two sessions to diff.", "warning")
            return None

        def diff() -> DiffView:
            a, b = sessions.find(self.mem, first), sessions.find(self.mem, second)
            view = DiffView(self.mem.session_prompt(a["session_id"]),
                            self.mem.session_prompt(b["session_id"]),
                            f"session {a['session_id']} ({a.get('ts', '?')})",
                            f"session {b['session_id']} ({b.get('ts', '?')})")
            self.session_output.value = view._repr_html_()
            return view
        return self._guard(self.session_output, diff)

    def why(self, text: str | None = None, session_id: str | None = None) -> WhyView | None:
        """Where each line holding ``text`` (default: the Why field) in a recorded prompt (default:
        the session picked) came from."""
        text = text if text is not None else self.session_why_text.value
        session_id = session_id or self.session_pick.value
        if not session_id:
            self.session_output.value = _message(SessionsView.empty_message, "warning")
            return None

        def trace() -> WhyView:
            view = WhyView(self.mem.why(session_id, text), session_id=session_id, needle=text)
            self.session_output.value = view._repr_html_()
            return view
        return self._guard(self.session_output, trace)

    # -- after our own writes --------------------------------------------------------------

    def _after_write(self) -> None:
        """Our own write changed the files: refresh the views (editors keep their state)."""
        self.refresh()
