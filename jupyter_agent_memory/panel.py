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
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from .display import (
    DiffView,
    FactsView,
    HistoryView,
    JournalResult,
    PromptView,
    format_size,
    short_sha,
)
from .errors import MemoryConflictError, MemoryToolError
from .render import NO_MATH_CLASS, escape_html
from .store import AgentMemory

__all__ = ["MemoryPanel", "is_live", "memory_fingerprint", "refresh_live_panels"]

log = logging.getLogger(__name__)

DEFAULT_TOOL_NAME = "mcp__agent-memory__memory"

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
    from .paths import file_key

    try:
        stats = mem.file_stats()
    except (OSError, MemoryToolError) as exc:
        return ("unavailable", str(exc))
    return tuple(sorted((name, file_key(st)) for name, st in stats.items()))


def _message(text: str, kind: str = "info") -> str:
    """Status line HTML; ``text`` is escaped (it may quote untrusted content)."""
    colours = {"info": "inherit", "ok": "#1a7f37", "error": "#cf222e", "warning": "#9a6700"}
    return (f'<span class="{NO_MATH_CLASS}" style="color:{colours[kind]}">'
            f"{escape_html(text)}</span>")


def _textarea(placeholder: str, height: str = "220px") -> widgets.Textarea:
    return widgets.Textarea(placeholder=placeholder,
                            layout=widgets.Layout(width="100%", height=height))


class _FileEditor:
    """An editor for one memory file whose Save is compare-and-swap.

    ``read`` returns ``(text, sha256)`` from one read; ``write(text, expected_sha256=...)``
    is the engine's CAS write. The sha256 of the version loaded into the editor is what Save
    expects on disk, so a change made meanwhile (by an agent, a magic, another editor) is
    reported as a conflict instead of being overwritten.
    """

    def __init__(
        self,
        label: str,
        read: Callable[[], tuple[str, str]],
        write: Callable[..., str],
        placeholder: str,
        height: str = "220px",
    ) -> None:
        self.label = label
        self._read = read
        self._write = write
        self.editor = _textarea(placeholder, height)
        self.save_button = widgets.Button(description=f"Save {label}", icon="save")
        self.reload_button = widgets.Button(description="Reload", icon="refresh")
        self.status = widgets.HTML()
        self.loaded_text = ""
        self.base_sha = ""
        self.conflict = False
        self.box = widgets.VBox(
            [self.editor, widgets.HBox([self.save_button, self.reload_button]), self.status]
        )

    @property
    def dirty(self) -> bool:
        """True when the editor holds edits that are not saved."""
        return self.editor.value != self.loaded_text

    def load(self, force: bool = False) -> str:
        """Load the file unless there are unsaved edits (``force`` discards them).

        Returns the text on disk, whether or not it went into the editor.
        """
        text, sha = self._read()
        if sha == self.base_sha and not force:
            return text
        if self.dirty and not force:
            self.status.value = _message(
                f"{self.label} changed on disk while you were editing; Save will report a "
                "conflict. Reload to take the new version (your edits are discarded).",
                "warning",
            )
            return text
        self.editor.value = text
        self.loaded_text = text
        self.base_sha = sha
        self.conflict = False
        self.reload_button.button_style = ""
        if force:
            self.status.value = _message(f"Loaded {self.label} (sha256 {short_sha(sha)}).")
        return text

    def save(self) -> bool:
        """Write the editor through compare-and-swap; on conflict show it and write nothing."""
        text = self.editor.value
        try:
            sha = self._write(text, expected_sha256=self.base_sha)
        except MemoryConflictError as exc:
            self.conflict = True
            self.reload_button.button_style = "warning"
            self.status.value = _message(
                f"Not saved: {exc.message}. Your text is still in the editor; Reload shows the "
                "current version.",
                "error",
            )
            return False
        except (MemoryToolError, ValueError, OSError) as exc:
            self.status.value = _message(f"Not saved: {exc}", "error")
            return False
        self.loaded_text = text
        self.base_sha = sha
        self.conflict = False
        self.reload_button.button_style = ""
        self.status.value = _message(f"Saved {self.label} (sha256 {short_sha(sha)}).", "ok")
        return True


class MemoryPanel(widgets.VBox):
    """A widget panel over one agent: Facts, Journal, Prompt and Persona tabs.

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
        from .prompt import PromptBuilder

        self.mem = mem
        self.builder = PromptBuilder(tool_name=tool_name, budget_tokens=budget_tokens)
        self._fingerprint: tuple[Any, ...] | None = None
        self.last_results: JournalResult = JournalResult()
        self.last_prompt: PromptView | None = None
        self._rendered_facts: str | None = None

        label = mem.agent_id if mem.agent_id is not None else mem.path.name
        self.title = widgets.HTML(
            f"<b>Agent memory: {escape_html(label)}</b> "
            f"<small><code>{escape_html(mem.path)}</code></small>"
        )
        self.refresh_button = widgets.Button(description="Refresh", icon="refresh",
                                             tooltip="Reload everything from disk")
        self.refresh_button.on_click(lambda _b: self.refresh())

        self.tabs = widgets.Tab(
            children=[self._build_facts_tab(), self._build_journal_tab(),
                      self._build_prompt_tab(), self._build_persona_tab()],
            titles=("Facts", "Journal", "Prompt", "Persona"),
        )
        self.children = [widgets.HBox([self.title, self.refresh_button]), self.tabs]
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

    # -- building the tabs -----------------------------------------------------------------

    def _build_facts_tab(self) -> widgets.Widget:
        self.facts = _FileEditor(
            "FACT.md",
            self.mem.read_facts,
            self.mem.update_facts,
            "FACT.md is empty. Write durable facts here and Save.",
        )
        self.facts_editor = self.facts.editor
        self.facts_save_button = self.facts.save_button
        self.facts_save_button.button_style = "primary"
        self.facts_reload_button = self.facts.reload_button
        self.facts_status = self.facts.status
        self.facts_save_button.on_click(lambda _b: self.save_facts())
        self.facts_reload_button.on_click(lambda _b: self.reload_facts())
        self.facts_rendered = widgets.Output()

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
        self.facts_tabs = widgets.Tab(children=[editor, self.facts_rendered, history],
                                      titles=("Edit", "Rendered", "History"))
        return self.facts_tabs

    def _build_journal_tab(self) -> widgets.Widget:
        # Without continuous updates the value changes on Enter (or leaving the field).
        self.journal_query = widgets.Text(placeholder="text contains…", description="Query",
                                          continuous_update=False)
        self.journal_tag = widgets.Dropdown(options=[("any tag", "")], value="",
                                            description="Tag")
        self.journal_limit = widgets.BoundedIntText(value=20, min=1, max=1_000_000,
                                                    description="Limit")
        self.journal_since = widgets.Text(placeholder="2026-11-01 or 2026-11-01T09:00Z",
                                          description="Since")
        self.journal_until = widgets.Text(placeholder="ISO-8601, inclusive",
                                          description="Until")
        self.journal_search_button = widgets.Button(description="Search", icon="search",
                                                    button_style="primary")
        self.journal_results = widgets.HTML()
        self.journal_status = widgets.HTML()
        self.journal_search_button.on_click(lambda _b: self.search_journal())
        self.journal_query.observe(lambda _change: self.search_journal(), names="value")

        self.append_text = _textarea("What happened? (one journal entry)", "80px")
        self.append_tags = widgets.TagsInput(value=[], allow_duplicates=False)
        self.append_button = widgets.Button(description="Append", icon="plus")
        self.append_status = widgets.HTML()
        self.append_button.on_click(lambda _b: self.append_entry())

        search = widgets.VBox([
            widgets.HBox([self.journal_query, self.journal_tag, self.journal_limit]),
            widgets.HBox([self.journal_since, self.journal_until, self.journal_search_button]),
            self.journal_status, self.journal_results,
        ])
        append = widgets.VBox([widgets.HTML("<b>New entry</b>"), self.append_text,
                               widgets.HBox([widgets.Label("Tags"), self.append_tags,
                                             self.append_button]),
                               self.append_status])
        return widgets.VBox([search, append])

    def _build_prompt_tab(self) -> widgets.Widget:
        self.prompt_workspace = widgets.Text(value=str(Path.cwd()), description="Workspace",
                                             layout=widgets.Layout(width="70%"))
        self.prompt_build_button = widgets.Button(description="Build", icon="cogs")
        self.prompt_status = widgets.HTML()
        self.prompt_view = widgets.HTML()
        self.prompt_build_button.on_click(lambda _b: self.build_prompt())
        return widgets.VBox([widgets.HBox([self.prompt_workspace, self.prompt_build_button]),
                             self.prompt_status, self.prompt_view])

    def _build_persona_tab(self) -> widgets.Widget:
        mem = self.mem
        self.soul = _FileEditor("SOUL.md", mem.read_soul, mem.write_soul,
                                "SOUL.md is empty. Write it here and press Save.", "180px")
        self.user = _FileEditor("USER.md", mem.read_user, mem.write_user,
                                "USER.md is empty. Write it here and press Save.", "180px")
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

    # -- refreshing ------------------------------------------------------------------------

    def _guard(self, status: widgets.HTML, action: Callable[[], Any]) -> Any:
        """Run ``action``; show an engine error in ``status`` instead of raising from a click."""
        try:
            return action()
        except (MemoryToolError, ValueError, OSError) as exc:
            status.value = _message(str(exc), "error")
            return None

    def refresh(self) -> None:
        """Reload everything from disk. Editors with unsaved edits keep them (and say so)."""
        self._fingerprint = memory_fingerprint(self.mem)
        self._guard(self.facts_status, lambda: self._load_facts(force=False))
        self._guard(self.facts_status, self._load_history)
        self._guard(self.journal_status, self._load_tags)
        self.search_journal()
        self.build_prompt()
        for part in (self.soul, self.user):
            self._guard(part.status, part.load)

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
        # Sanitised text/html plus the raw text/plain; never text/markdown (see render.py).
        # A refresh runs after every cell that touched memory; a large FACT.md that did not
        # change is not converted again.
        if text == self._rendered_facts:
            return
        self._rendered_facts = text
        self.facts_rendered.outputs = ()
        self.facts_rendered.append_display_data(FactsView(text, path=self.mem.path))

    def _load_history(self) -> None:
        versions = HistoryView(self.mem.history())
        self.history = versions
        self.history_select.options = [
            (f"{v['ts']}  {short_sha(v['sha256'])}  {format_size(int(v['size']))}", v["sha256"])
            for v in versions
        ]
        if not versions:
            self.history_output.value = versions._repr_html_()

    def save_facts(self) -> bool:
        """Save the editor as FACT.md with compare-and-swap against the version loaded.

        Returns True when written. On a conflict nothing is written, the editor keeps the
        text, and the status shows the engine's message and points at Reload.
        """
        return self._save(self.facts)

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
        counts = self.mem.tag_counts()
        current = self.journal_tag.value
        options = [("any tag", "")] + [
            (f"{tag} ({n})", tag) for tag, n in sorted(counts.items(), key=lambda kv: kv[0].lower())
        ]
        self.journal_tag.options = options
        self.journal_tag.value = current if current in counts else ""

    def search_journal(self) -> JournalResult | None:
        """Run the search in the form; show and return the results (None on a bad argument)."""
        def search() -> JournalResult:
            result = self.mem.search_journal(
                query=self.journal_query.value,
                tag=self.journal_tag.value,
                limit=self.journal_limit.value,
                since=self.journal_since.value.strip() or None,
                until=self.journal_until.value.strip() or None,
            )
            if result is None:
                return JournalResult(empty_message="No journal entries found.")
            return JournalResult.from_search(result)
        self.journal_status.value = ""
        results = self._guard(self.journal_status, search)
        if results is not None:
            self.last_results = results
            self.journal_results.value = results._repr_html_()
        return results

    def append_entry(self) -> bool:
        """Append the form's text and tags through the memory tool; True when written."""
        args = {"action": "append", "text": self.append_text.value,
                "tags": list(self.append_tags.value)}
        result = self._guard(self.append_status, lambda: self.mem.call_tool(args))
        if result is None:
            return False
        self.append_status.value = _message(result, "ok")
        self.append_text.value = ""
        self.append_tags.value = []
        self._after_write()
        return True

    # -- Prompt ----------------------------------------------------------------------------

    def build_prompt(self) -> PromptView | None:
        """Build the prompt for the workspace in the form; show sizes and budget warnings."""
        workspace = Path(self.prompt_workspace.value or ".").expanduser()
        if not workspace.is_dir():
            self.prompt_status.value = _message(
                f"Workspace {str(workspace)!r} is not a directory", "error")
            return None

        def build() -> PromptView:
            from .prompt import PromptBudgetWarning

            # Built as a session would be (the engine's build_session), like %memprompt; the
            # budget warning is shown in the view, so it is not also sent to stderr.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PromptBudgetWarning)
                prompt = self.builder.build_session(self.mem, workspace)
            return PromptView.from_prompt(prompt)
        self.prompt_status.value = ""
        view = self._guard(self.prompt_status, build)
        if view is not None:
            self.last_prompt = view
            self.prompt_view.value = view._repr_html_()
        return view

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

    # -- after our own writes --------------------------------------------------------------

    def _after_write(self) -> None:
        """Our own write changed the files: refresh the views (editors keep their state)."""
        self.refresh()
