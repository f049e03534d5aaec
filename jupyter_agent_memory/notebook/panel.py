"""An ipywidgets panel over one agent's memory (``MemoryPanel(mem)``, or ``%agent_memory``).

Every action is a plain method the buttons call, so the panel can be driven without a browser;
messages are the engine's own. The only module importing ipywidgets.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from ..engine.arguments import DEFAULT_LIMIT, check_count
from ..engine.prompt import DEFAULT_TOOL_NAME, PromptBuilder
from ..engine.store import JOURNAL, MEMORY_DIR, AgentMemory, check_edit_body
from ..errors import AgentNotFoundError, MemoryConflictError, MemoryToolError
from ..folder import file_key, match_name
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
#: Layouts shared by several widgets (see :class:`_Kit`): never shown or hidden one by one.
_SHARED_LAYOUTS: weakref.WeakSet[widgets.Layout] = weakref.WeakSet()
#: Tags are counted on refresh up to this journal size, beyond only on Count tags.
TAG_COUNT_AUTO_BYTES = 1024 * 1024


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
    """A cheap value that changes whenever a file of the agent changes (lstat only)."""
    try:
        stats = mem.file_stats()
    except MemoryToolError as exc:
        return ("unavailable", exc.message)
    return tuple(sorted((name, file_key(st)) for name, st in stats.items()))


def _message(text: str, kind: str = "info") -> str:
    """Status line HTML in the theme's colour for ``kind``; ``text`` is escaped."""
    return (f'<span class="{NO_MATH_CLASS}" style="{status_style(kind)};'
            f'{TEXT_WRAP}">{escape_html(text)}</span>')


class _Kit:
    """Makes one panel's widgets with one shared Layout per set of properties and one style per
    class (each model costs the browser time); ``hideable`` widgets get their own layout."""

    def __init__(self) -> None:
        self._layouts: dict[tuple[tuple[str, str], ...], widgets.Layout] = {}
        self._styles: dict[type, widgets.Widget] = {}

    def layout(self, **props: str) -> widgets.Layout:
        """The shared Layout with these properties."""
        key = tuple(sorted(props.items()))
        if key not in self._layouts:
            self._layouts[key] = widgets.Layout(**props)
            _SHARED_LAYOUTS.add(self._layouts[key])
        return self._layouts[key]

    def __call__(self, cls: type[widgets.Widget], *, hideable: bool = False,
                 layout: dict[str, str] | None = None, **kwargs: Any) -> Any:
        """``cls(**kwargs)`` with a shared (or, ``hideable``, its own) layout and style."""
        props = layout or {}
        kwargs["layout"] = widgets.Layout(**props) if hideable else self.layout(**props)
        style = cls.class_traits().get("style")
        if style is not None and "style" not in kwargs:
            kind = style.klass
            if kind not in self._styles:
                self._styles[kind] = kind()
            kwargs["style"] = self._styles[kind]
        return cls(**kwargs)

    def button(self, description: str, icon: str, click: Callable[[], Any] | None = None,
               **kwargs: Any) -> widgets.Button:
        """A button as wide as its text that runs ``click()`` when pressed."""
        button = self(widgets.Button, description=description, icon=icon,
                      layout={"width": "auto"}, **kwargs)
        if click is not None:
            button.on_click(lambda _b: click())
        return button

    def models(self) -> list[widgets.Widget]:
        """The shared layout and style models, to close with the panel."""
        return [*self._layouts.values(), *self._styles.values()]


def _show(widget: widgets.Widget, visible: bool) -> None:
    if widget.layout in _SHARED_LAYOUTS:  # would show or hide every widget sharing it
        raise ValueError(f"{widget!r} shares its layout; make it with hideable=True")
    widget.layout.display = None if visible else "none"


def _on_conflict(name: str, doc: str) -> Any:
    """A :class:`_FileEditor` property: its conflict widget ``name`` (made on first use)."""
    return property(lambda editor: getattr(editor._conflict_widgets(), name), doc=doc)


class _FileEditor:
    """An editor for one memory file whose Save is compare-and-swap (a change made meanwhile
    shows as a conflict); a file over ``limit`` characters waits for *Edit here anyway*."""

    def __init__(self, kit: _Kit, label: str, read: Callable[[], tuple[str, str]],
                 write: Callable[..., str], placeholder: str, height: str = "220px", *,
                 check: Callable[[], None], guard: Callable[[str], str] | None = None) -> None:
        self.label = label
        self._read = read
        self._write = write
        self._guard = guard
        self._check = check
        self.limit: int | None = VIEW_LIMIT
        self._kit = kit
        # The description is the textarea's label (screen readers announce it).
        self.editor = kit(widgets.Textarea, description=label, placeholder=placeholder,
                          layout={"width": "auto", "height": height})
        self.save_button = kit.button(f"Save {label}", "save")
        # Hidden while a conflict shows its own choices, so there is one Reload at a time.
        self.reload_button = kit.button("Reload", "refresh", hideable=True,
                                        tooltip=f"Load {label} as it is on disk")
        self.status = kit(widgets.HTML)
        self.loaded_text = ""
        self.base_sha = ""
        self.conflict = False
        self.conflict_sha = ""
        self.held_back = False
        self.writable = True
        self._allow_large = False
        # Made on first need: most editors never need them, and each is a model to build.
        self._choices: _Choices | None = None
        self._large: widgets.Button | None = None
        self._buttons = kit(widgets.HBox, children=[self.save_button, self.reload_button])
        self.box = kit(widgets.VBox, children=[self.editor, self._buttons, self.status])

    def _conflict_widgets(self) -> _Choices:
        if self._choices is None:
            self._choices = _Choices(self._kit, self)
            self._choices.overwrite_button.disabled = not self.writable
            self.box.children = (*self.box.children, self._choices.box)
        return self._choices

    conflict_box = _on_conflict("box", "The diff and the three choices (hidden otherwise).")
    conflict_view = _on_conflict("view", "The conflict's message and diff to the editor's text.")
    conflict_reload_button = _on_conflict("reload_button", "Discard the text, load the file.")
    keep_editing_button = _on_conflict("keep_editing_button", "Close the choices, keep the text.")
    overwrite_button = _on_conflict("overwrite_button", "Write the text over the version shown.")

    @property
    def large_button(self) -> widgets.Button:
        """*Edit here anyway*, for a file larger than the view limit."""
        if self._large is None:
            self._large = self._kit.button("Edit here anyway", "pencil", self.load_large,
                                           hideable=True)
            _show(self._large, False)
            self._buttons.children = (*self._buttons.children, self._large)
        return self._large

    def set_writable(self, enabled: bool) -> None:
        """Turn saving on or off (off while the agent folder is gone)."""
        self.writable = enabled
        self.save_button.disabled = not enabled or self.held_back
        if self._choices is not None:
            self._choices.overwrite_button.disabled = not enabled

    def _show_choices(self, visible: bool) -> None:
        """Show or hide the conflict's choices; they bring their own Reload."""
        if visible or self._choices is not None:
            _show(self.conflict_box, visible)
        _show(self.reload_button, not visible)

    @property
    def dirty(self) -> bool:
        """True when the editor holds edits that are not saved."""
        return not self.held_back and self.editor.value != self.loaded_text

    def _settle(self, sha: str) -> None:
        """The editor now matches version ``sha``: no conflict, its choices closed."""
        self.base_sha = sha
        self.conflict = False
        self.conflict_sha = ""
        self._show_choices(False)
        self.reload_button.button_style = ""

    def _fill(self, text: str, sha: str) -> None:
        self.held_back = (not self._allow_large and self.limit is not None
                          and len(text) > self.limit)
        self.loaded_text = "" if self.held_back else text
        self.editor.value = self.loaded_text
        self.editor.disabled = self.held_back
        self.save_button.disabled = self.held_back or not self.writable
        if self.held_back or self._large is not None:
            _show(self.large_button, self.held_back)
        self._settle(sha)
        if self.held_back:
            self.large_button.description = (
                f"Edit here anyway ({format_size(len(text.encode('utf-8', 'replace')))})")
            self.status.value = _message(
                f"{self.label} is {len(text):,} characters: it is not put into this editor, "
                "which would send all of it to the browser. Edit it in a text editor, or press "
                "Edit here anyway.", "warning")

    def load(self, force: bool = False) -> str:
        """Load the file unless there are unsaved edits (``force`` discards them); return it."""
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
        self._show_choices(False)
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
        self._settle(sha)
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
        diff = DiffView(current, text, f"{self.label} now ({short_sha(current_sha)})", "your text")
        self.conflict_view.value = (
            _message("What your text changes in the file as it is now:") + diff._repr_html_())
        self._show_choices(True)


class _Choices:
    """The widgets of an editor's conflict: the diff and Discard / Keep editing / Overwrite."""

    def __init__(self, kit: _Kit, editor: _FileEditor) -> None:
        self.view = kit(widgets.HTML)
        self.reload_button = kit.button(
            "Discard mine, reload", "refresh", lambda: editor.load(force=True),
            tooltip=f"Drop your text and load {editor.label} as it is now")
        self.keep_editing_button = kit.button("Keep editing", "pencil", editor.keep_editing)
        self.overwrite_button = kit.button(
            "Overwrite anyway", "exclamation-triangle", editor.overwrite, button_style="danger",
            tooltip="Replace the version shown above with your text (if it has not changed again)")
        self.box = kit(widgets.VBox, hideable=True, children=[
            self.view,
            kit(widgets.HBox, children=[self.reload_button, self.keep_editing_button,
                                        self.overwrite_button]),
        ])


class MemoryPanel(widgets.VBox):
    """A widget panel over one agent; ``workspace`` holds the prompt's base ``system.md``."""

    def __init__(self, mem: AgentMemory, *, workspace: str | Path | None = None,
                 tool_name: str = DEFAULT_TOOL_NAME, budget_tokens: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_class("jp-AgentMemory-panel")
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

        self._kit = kit = _Kit()
        label = mem.agent_id if mem.agent_id is not None else mem.path.name
        self.title = kit(widgets.HTML, value=(
            f"<b>Agent memory: {escape_html(label)}</b> "
            f"<small><code>{escape_html(mem.path)}</code></small>"))
        self.banner = kit(widgets.HTML)
        self.refresh_button = kit.button("Refresh", "refresh", self.refresh,
                                         tooltip="Reload everything from disk")

        self.tabs = kit(widgets.Tab, titles=("Facts", "Journal", "Prompt", "Persona", "Sessions"),
                        children=[self._build_facts_tab(), self._build_journal_tab(),
                                  self._build_prompt_tab(), self._build_persona_tab(),
                                  self._build_sessions_tab()])
        self.children = [kit(widgets.HBox, children=[self.title, self.refresh_button]),
                         self.banner, self.tabs]
        self.refresh()
        _LIVE_PANELS.add(self)

    def __repr__(self) -> str:
        # Stable text (no widget ids): it is what a notebook stores as the panel's text/plain.
        label = self.mem.agent_id if self.mem.agent_id is not None else self.mem.path.name
        return f"MemoryPanel({label!r})"

    def close(self) -> None:
        """Close the panel and its widgets and stop refreshing it."""
        _LIVE_PANELS.discard(self)
        stack = list(self.children)
        while stack:
            widget = stack.pop()
            stack.extend(getattr(widget, "children", ()))
            if widget.layout not in _SHARED_LAYOUTS:
                widget.layout.close()
            widget.close()
        for model in self._kit.models():
            model.close()
        self.layout.close()
        super().close()

    def _check_folder(self) -> None:
        """Raise the engine's error when the agent folder is gone (nothing recreates it)."""
        if not self.mem.exists():
            raise AgentNotFoundError(self.mem.path, self.mem.agent_id)

    def _build_facts_tab(self) -> widgets.Widget:
        kit = self._kit
        self.facts = _FileEditor(kit, "FACT.md", self.mem.read_facts, self.mem.update_facts,
                                 "FACT.md is empty. Write durable facts here and Save.",
                                 guard=check_edit_body, check=self._check_folder)
        self.facts_editor = self.facts.editor
        self.facts_save_button = self.facts.save_button
        self.facts_save_button.button_style = "primary"
        self.facts_reload_button = self.facts.reload_button
        self.facts_status = self.facts.status
        self.facts_save_button.on_click(lambda _b: self.save_facts())
        self.facts_reload_button.on_click(lambda _b: self.reload_facts())
        self.facts_rendered = kit(widgets.Output)
        self.facts_show_all = kit(
            widgets.ToggleButton, value=False, description="Show all", icon="expand",
            layout={"width": "auto"},
            tooltip="Render all of FACT.md, however long (sends it all to the browser)")
        self.facts_show_all.observe(lambda _c: self._guard(
            self.facts_status, lambda: self._render_facts(self.mem.facts)), names="value")

        self.history_select = kit(widgets.Select, options=[], rows=6, description="Version",
                                  layout={"width": "auto"})
        self.history_diff_button = kit.button("Diff with current", "columns",
                                              self.show_history_diff)
        self.history_restore_button = kit.button("Restore", "undo", self.restore_version)
        self.history_output = kit(widgets.HTML)
        history = kit(widgets.VBox, children=[
            self.history_select,
            kit(widgets.HBox, children=[self.history_diff_button, self.history_restore_button]),
            self.history_output])
        rendered = kit(widgets.VBox, children=[self.facts_rendered, self.facts_show_all])
        self.facts_tabs = kit(widgets.Tab, children=[self.facts.box, rendered, history],
                              titles=("Edit", "Rendered", "History"))
        return self.facts_tabs

    def _build_journal_tab(self) -> widgets.Widget:
        kit = self._kit
        # Fields grow with the panel and never shrink below their placeholders' width.
        grow = {"flex": "1 1 0%", "min_width": "22em", "width": "auto"}
        # A value changes on Enter or on leaving the field, and each change searches again.
        field: dict[str, Any] = {"continuous_update": False, "layout": grow}
        self.journal_query = kit(widgets.Text, placeholder="text contains…", description="Query",
                                 **field)
        self.journal_tag = kit(widgets.Combobox, placeholder="any tag", description="Tag",
                               options=[], ensure_option=False, **field)
        # A plain integer field: a count below 1 is refused with the rule, not clamped.
        self.journal_limit = kit(widgets.IntText, value=DEFAULT_LIMIT, description="Limit",
                                 continuous_update=False,
                                 layout={"width": "12em", "flex": "0 0 auto"})
        self.journal_since = kit(widgets.Text, placeholder="e.g. 2026-11-01T09:00Z",
                                 description="Since", **field)
        self.journal_until = kit(widgets.Text, placeholder="ISO-8601, inclusive",
                                 description="Until", **field)
        self.journal_search_button = kit.button("Search", "search", self.search_journal,
                                                button_style="primary")
        self.journal_count_button = kit.button(
            "Count tags", "tags", self.count_tags,
            tooltip="Read the whole journal once and list every tag with its count")
        self.journal_tags_info = kit(widgets.HTML)
        self.journal_results = kit(widgets.HTML)
        self.journal_status = kit(widgets.HTML)
        for control in (self.journal_query, self.journal_tag, self.journal_limit,
                        self.journal_since, self.journal_until):
            control.observe(lambda _change: self.search_journal(), names="value")

        self.append_text = kit(widgets.Textarea, description="Entry",
                               placeholder="What happened? (one journal entry)",
                               layout={"width": "auto", "height": "80px"})
        self.append_tags = kit(widgets.Text, placeholder="comma-separated, e.g. meeting, q3",
                               description="Tags", layout=grow)
        self.append_button = kit.button("Append", "plus", self.append_entry)
        self.append_status = kit(widgets.HTML)

        wrap = {"flex_flow": "row wrap", "width": "100%"}
        search = kit(widgets.VBox, children=[
            kit(widgets.HBox, layout=wrap, children=[self.journal_query, self.journal_tag,
                                                     self.journal_limit]),
            kit(widgets.HBox, layout=wrap, children=[
                self.journal_since, self.journal_until, self.journal_search_button,
                self.journal_count_button]),
            self.journal_tags_info, self.journal_status, self.journal_results,
        ])
        append = kit(widgets.VBox, children=[
            kit(widgets.HTML, value="<b>New entry</b>"), self.append_text,
            kit(widgets.HBox, layout=wrap, children=[self.append_tags, self.append_button]),
            self.append_status])
        return kit(widgets.VBox, children=[search, append])

    def _build_prompt_tab(self) -> widgets.Widget:
        kit = self._kit
        self.prompt_workspace = kit(widgets.Text, value=str(self._workspace),
                                    description="Workspace",
                                    layout={"flex": "1 1 0%", "width": "auto"})
        self.prompt_build_button = kit.button("Build", "cogs", self.build_prompt)
        self.prompt_show_all = kit(
            widgets.ToggleButton, value=False, description="Show all", icon="expand",
            layout={"width": "auto"},
            tooltip="Show the whole prompt, however long (sends it all to the browser)")
        self.prompt_copy_button = kit(
            widgets.ToggleButton, value=False, description="Copy", icon="copy",
            layout={"width": "auto"},
            tooltip="Show the exact text in a box to select and copy (Ctrl+A, Ctrl+C)")
        self.prompt_copy_text = kit(widgets.Textarea, description="Exact text", hideable=True,
                                    layout={"width": "auto", "height": "160px"})
        _show(self.prompt_copy_text, False)
        self.prompt_status = kit(widgets.HTML)
        self.prompt_view = kit(widgets.HTML)
        self.prompt_show_all.observe(lambda _c: self._show_prompt(), names="value")
        self.prompt_copy_button.observe(lambda _c: self._show_prompt(), names="value")
        return kit(widgets.VBox, children=[
            kit(widgets.HBox, layout={"width": "100%"},
                children=[self.prompt_workspace, self.prompt_build_button]),
            kit(widgets.HBox, children=[self.prompt_show_all, self.prompt_copy_button]),
            self.prompt_copy_text, self.prompt_status, self.prompt_view,
        ])

    def _build_persona_tab(self) -> widgets.Widget:
        mem, kit = self.mem, self._kit
        self.soul, self.user = (
            _FileEditor(kit, name, read, write, f"{name} is empty. Write it here and press Save.",
                        "180px", check=self._check_folder)
            for name, read, write in (("SOUL.md", mem.read_soul, mem.write_soul),
                                      ("USER.md", mem.read_user, mem.write_user)))
        for part in (self.soul, self.user):
            part.save_button.on_click(lambda _b, p=part: self.save_persona(p))
            part.reload_button.on_click(lambda _b, p=part: self._guard(p.status,
                                                                       lambda: p.load(True)))
        return kit(widgets.VBox, children=[self.soul.box, self.user.box])

    def _build_sessions_tab(self) -> widgets.Widget:
        kit = self._kit
        self.sessions_timeline = kit(widgets.HTML)
        pick = {"flex": "1 1 0%", "width": "auto"}
        self.session_pick = kit(widgets.Dropdown, options=[], description="Session", layout=pick)
        self.session_other = kit(widgets.Dropdown, options=[("(pick one to diff with)", "")],
                                 description="Diff with", layout=pick)
        self.session_show_button = kit.button("Show prompt", "file-text", self.show_session)
        self.session_diff_button = kit.button("Diff", "columns", self.diff_sessions)
        self.session_why_text = kit(widgets.Text, placeholder="a line or part of one",
                                    description="Why", continuous_update=False, layout=pick)
        self.session_why_button = kit.button("Trace", "search", self.why)
        self.session_output = kit(widgets.HTML)
        self.session_output.add_class("jp-AgentMemory-panelSessionOutput")
        self.session_why_text.observe(lambda _c: self.session_why_text.value and self.why(),
                                      names="value")
        rows = [kit(widgets.HBox, layout={"width": "100%"}, children=pair) for pair in (
            [self.session_pick, self.session_show_button],
            [self.session_other, self.session_diff_button],
            [self.session_why_text, self.session_why_button])]
        return kit(widgets.VBox, children=[self.sessions_timeline, *rows, self.session_output])

    def _guard(self, status: widgets.HTML, action: Callable[[], Any]) -> Any:
        """Run ``action``; show an engine error in ``status`` instead of raising from a click."""
        try:
            return action()
        except MemoryToolError as exc:
            status.value = _message(exc.message, "error")
            return None

    def _present(self, output: widgets.HTML, make: Callable[[], Any],
                 status: widgets.HTML | None = None) -> Any:
        """Show and return the view ``make()`` returns (None on an engine error, shown)."""
        view = self._guard(status or output, make)
        if view is not None:
            output.value = view._repr_html_()
        return view

    def _writable(self, enabled: bool) -> None:
        for part in (self.facts, self.soul, self.user):
            part.set_writable(enabled)
        for button in (self.append_button, self.history_restore_button):
            button.disabled = not enabled

    def refresh(self) -> None:
        """Reload everything from disk (unsaved edits stay); with the folder gone, writes stop."""
        self._fingerprint = memory_fingerprint(self.mem)
        if not self.mem.exists():
            self.gone = True
            message = AgentNotFoundError(self.mem.path, self.mem.agent_id).message
            self.banner.value = _message(
                f"The agent folder is gone (deleted or moved): {message}. What the editors hold "
                "is kept; saving is off until the folder is back.", "error")
            self._writable(False)
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

    def refresh_if_changed(self) -> bool:
        """Refresh when the agent's files changed since the last refresh; True if it did."""
        if memory_fingerprint(self.mem) == self._fingerprint:
            return False
        self.refresh()
        return True

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
        # Sanitised text/html, never text/markdown; an unchanged FACT.md is not converted again.
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
        self.history_select.options = [(f"{format_when(v['ts'])}  {short_sha(v['sha256'])}  "
                                         f"{format_size(int(v['size']))}", v["sha256"])
                                        for v in versions]
        if not versions:
            self.history_output.value = versions._repr_html_()
        for control in (self.history_select, self.history_diff_button,
                        self.history_restore_button):
            control.disabled = not versions

    def save_facts(self) -> bool:
        """Save the editor as FACT.md (compare-and-swap); True when written."""
        return self._after(self.facts.save())

    def overwrite_facts(self) -> bool:
        """After a conflict: write the editor over the version the conflict showed (CAS)."""
        return self._after(self.facts.overwrite())

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
        return self._present(self.history_output, lambda: DiffView(
            self.mem.history_text(sha), self.mem.facts, f"FACT.md@{short_sha(sha)}",
            "FACT.md (current)"))

    def restore_version(self, sha: str | None = None) -> bool:
        """Make a stored version (default: the selected one) current; True when done."""
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
        self.refresh()
        self.history_output.value = _message(
            f"Restored version {short_sha(sha)}; FACT.md is now {short_sha(new_sha)}.", "ok")
        return True

    def _load_tags(self) -> None:
        stats = self.mem.file_stats()  # the journal's size from one lstat
        journal = match_name(list(stats), f"{MEMORY_DIR}/{JOURNAL}")
        if journal is None or stats[journal].st_size <= TAG_COUNT_AUTO_BYTES:
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

    def search_journal(self) -> JournalResult | None:
        """Run the search in the form; show and return the results (None on a bad argument)."""
        query = self.journal_query.value

        def search() -> JournalResult:
            return JournalResult.from_search(self.mem.search_journal(
                query=query, tag=self.journal_tag.value.strip(),
                limit=check_count(self.journal_limit.value, "Limit"),
                since=self.journal_since.value.strip() or None,
                until=self.journal_until.value.strip() or None), highlight=query)
        self.journal_status.value = ""
        results = self._present(self.journal_results, search, self.journal_status)
        if results is not None:
            self.last_results = results
        return results

    def append_entry(self) -> bool:
        """Append the form's text and comma-separated tags; True when written."""
        args = {"action": "append", "text": self.append_text.value,
                "tags": [tag.strip() for tag in self.append_tags.value.split(",") if tag.strip()]}

        def append() -> str:
            self._check_folder()
            return self.mem.call_tool(args)
        result = self._guard(self.append_status, append)
        if result is None:
            return False
        self.append_status.value = _message(result, "ok")
        self.append_text.value = ""
        self.append_tags.value = ""
        self.refresh()
        return True

    def build_prompt(self) -> PromptView | None:
        """Build and show the prompt for the form's workspace (a preview: no session recorded)."""
        workspace = Path(self.prompt_workspace.value or ".").expanduser()
        if not workspace.is_dir():
            self.prompt_status.value = _message(
                f"Workspace {str(workspace)!r} is not a directory", "error")
            return None

        def build() -> PromptView:
            # As a session would be, like %memprompt; the view shows the budget warning.
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
        self.prompt_copy_text.value = view.text[:view.limit] if copying else ""

    def save_persona(self, part: _FileEditor) -> bool:
        """Save SOUL.md or USER.md (``panel.soul`` / ``panel.user``) with compare-and-swap."""
        return self._after(part.save())

    def save_soul(self) -> bool:
        """Save the SOUL.md editor (compare-and-swap)."""
        return self.save_persona(self.soul)

    def save_user(self) -> bool:
        """Save the USER.md editor (compare-and-swap)."""
        return self.save_persona(self.user)

    def _load_sessions(self) -> None:
        receipts = SessionsView(self.mem.sessions())
        self.last_sessions = receipts
        self.sessions_timeline.value = receipts._repr_html_()
        options = [(f"{format_when(r.get('ts'))}  {r['session_id']}  "
                    f"{(r.get('client') or {}).get('name', '')}", r["session_id"])
                   for r in receipts]
        for dropdown, first in ((self.session_pick, []),
                                (self.session_other, [("(pick one to diff with)", "")])):
            current = dropdown.value
            dropdown.options = first + options
            ids = [value for _label, value in dropdown.options]
            # Keep the pick; otherwise the newest session (or "none" for the second one).
            dropdown.value = current if current in ids else (ids[0] if ids else None)
        # Controls that need sessions are off until there are some (two, to diff).
        for control in (self.session_pick, self.session_show_button, self.session_why_text,
                        self.session_why_button):
            control.disabled = not receipts
        for control in (self.session_other, self.session_diff_button):
            control.disabled = len(receipts) < 2

    def show_session(self, session_id: str | None = None) -> PromptView | None:
        """Show the exact prompt a recorded session started with (default: the one picked)."""
        session_id = session_id or self.session_pick.value
        if not session_id:
            self.session_output.value = _message(SessionsView.empty_message, "warning")
            return None
        return self._present(self.session_output,
                             lambda: PromptView.from_session(self.mem, session_id))

    def diff_sessions(self, first: str | None = None, second: str | None = None) -> DiffView | None:
        """Diff two recorded sessions' prompts (default: the two picked)."""
        first = first or self.session_pick.value
        second = second or self.session_other.value
        if not first or not second:
            self.session_output.value = _message("Pick two sessions to diff.", "warning")
            return None
        return self._present(self.session_output,
                             lambda: DiffView.between_sessions(self.mem, first, second))

    def why(self, text: str | None = None, session_id: str | None = None) -> WhyView | None:
        """Where each line holding ``text`` in a recorded prompt came from (default: the form)."""
        text = text if text is not None else self.session_why_text.value
        session_id = session_id or self.session_pick.value
        if not session_id:
            self.session_output.value = _message(SessionsView.empty_message, "warning")
            return None
        return self._present(self.session_output, lambda: WhyView(
            self.mem.why(session_id, text), session_id=session_id, needle=text))

    def _after(self, saved: bool) -> bool:
        """Our own write changed the files: refresh the views (editors keep their state)."""
        if saved:
            self.refresh()
        return saved
