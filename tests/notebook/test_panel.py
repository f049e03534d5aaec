"""The ipywidgets memory panel, driven through its widgets and methods (no browser)."""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path
from typing import Any

import pytest
from hostile import HOSTILE_FACTS, PAYLOADS, assert_inert
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.notebook.display import JournalResult
from jupyter_agent_memory.notebook.panel import _LIVE_PANELS, MemoryPanel, memory_fingerprint


@pytest.fixture
def mem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ip: InteractiveShell) -> AgentMemory:
    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_ROOT", str(tmp_path / "agents"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return AgentMemory.open(work / "demo")


@pytest.fixture
def panel(mem: AgentMemory) -> Any:
    widget = MemoryPanel(mem)
    yield widget
    widget.close()


def rendered_of(panel: MemoryPanel) -> str:
    """The Rendered tab's FACT.md as the front end receives it; checks the mime types too."""
    (output,) = panel.facts_rendered.outputs
    assert set(output["data"]) == {"text/plain", "text/html"}  # never text/markdown
    return output["data"]["text/plain"]


# -- structure -----------------------------------------------------------------------------


def test_tabs_and_state(panel: MemoryPanel, mem: AgentMemory) -> None:
    assert panel.tabs.titles == ("Facts", "Journal", "Prompt", "Persona", "Sessions")
    assert panel.facts_tabs.titles == ("Edit", "Rendered", "History")
    assert repr(panel) == "MemoryPanel('demo')"
    assert str(mem.path) in panel.title.value
    # Widget state serialises without a kernel (what a front end would receive).
    assert panel.get_state()["children"]
    assert panel in _LIVE_PANELS
    panel.close()
    assert panel not in _LIVE_PANELS


def _models(root: Any) -> dict[str, Any]:
    """Every widget model the front end needs to show ``root``, by id: its children, their
    layouts and styles, all the way down."""
    import ipywidgets

    seen: dict[str, Any] = {}
    stack = [root]
    while stack:
        widget = stack.pop()
        if widget.model_id in seen:
            continue
        seen[widget.model_id] = widget
        for name in widget.keys:
            value = getattr(widget, name)
            values = value if isinstance(value, (list, tuple)) else [value]
            stack.extend(v for v in values if isinstance(v, ipywidgets.Widget))
    return seen


def test_the_panel_is_few_widget_models(panel: MemoryPanel) -> None:
    # Each model is a message and a model the browser builds before the panel appears:
    # layouts and styles are shared, conflict and large-file controls come on first need.
    assert len(_models(panel)) <= 100
    before = _models(panel)
    panel.facts_editor.value = "- mine\n"
    panel.mem.update_facts("- theirs\n")
    assert panel.save_facts() is False
    assert panel.facts.conflict_box.layout.display is None
    assert 0 < len(_models(panel).keys() - before.keys()) <= 8  # the conflict's, once


def test_shared_layouts_are_never_shown_or_hidden_one_by_one(panel: MemoryPanel) -> None:
    from jupyter_agent_memory.notebook import panel as panel_module

    # Two widgets that share a layout: hiding one would hide the other.
    assert panel.facts_save_button.layout is panel.journal_count_button.layout
    with pytest.raises(ValueError, match="shares its layout"):
        panel_module._show(panel.facts_save_button, False)
    assert panel.journal_count_button.layout.display is None


def test_closing_the_panel_closes_every_model(mem: AgentMemory) -> None:
    panel = MemoryPanel(mem)
    panel.facts_editor.value = "- mine\n"
    mem.update_facts("- theirs\n")
    panel.save_facts()  # the conflict's widgets exist too
    models = list(_models(panel).values())
    assert len(models) > 50
    panel.close()
    assert all(w.comm is None for w in models)


def test_sessions_controls_follow_the_sessions_on_record(panel: MemoryPanel,
                                                        mem: AgentMemory) -> None:
    from jupyter_agent_memory import PromptBuilder

    def enabled() -> dict[str, bool]:
        return {name: not getattr(panel, name).disabled for name in (
            "session_pick", "session_show_button", "session_why_text", "session_why_button",
            "session_other", "session_diff_button")}

    assert set(enabled().values()) == {False}
    PromptBuilder().start_session(mem)
    panel.refresh()
    assert enabled() == {"session_pick": True, "session_show_button": True,
                         "session_why_text": True, "session_why_button": True,
                         "session_other": False, "session_diff_button": False}
    mem.update_facts("- changed\n")
    PromptBuilder().start_session(mem)
    panel.refresh()
    assert set(enabled().values()) == {True}


def test_history_controls_follow_the_versions(panel: MemoryPanel, mem: AgentMemory) -> None:
    controls = (panel.history_select, panel.history_diff_button, panel.history_restore_button)
    assert all(c.disabled for c in controls)
    mem.update_facts("- one\n")
    mem.update_facts("- two\n")
    panel.refresh()
    assert not any(c.disabled for c in controls)


def test_the_limit_field_refuses_a_count_below_one(panel: MemoryPanel, mem: AgentMemory) -> None:
    for n in range(3):
        mem.append(f"entry {n}", [])
    panel.journal_limit.value = 2
    assert [e["text"] for e in panel.last_results] == ["entry 2", "entry 1"]
    for bad in (0, -3):
        panel.journal_limit.value = bad
        assert panel.search_journal() is None
        assert f"Limit must be a positive integer (1 or more), got {bad}" in (
            panel.journal_status.value)
        assert [e["text"] for e in panel.last_results] == ["entry 2", "entry 1"]  # kept


def test_every_text_field_has_a_label(panel: MemoryPanel) -> None:
    import ipywidgets

    fields = [w for w in _models(panel).values()
              if isinstance(w, (ipywidgets.Text, ipywidgets.Textarea, ipywidgets.IntText,
                                ipywidgets.Select, ipywidgets.Dropdown))]
    assert len(fields) >= 12
    assert [f for f in fields if not f.description] == []


def test_initial_contents(mem: AgentMemory) -> None:
    mem.update_facts("# Facts\n- metric units\n")
    mem.write_soul("I am Ada.\n")
    mem.append("kickoff", ["meeting"])
    mem.append("draft", ["Writing"])
    mem.append("review", ["MEETING"])
    panel = MemoryPanel(mem)
    try:
        assert panel.facts_editor.value == "# Facts\n- metric units\n"
        assert rendered_of(panel) == "# Facts\n- metric units\n"
        assert panel.soul.editor.value == "I am Ada.\n"
        assert panel.user.editor.value == ""
        # A small journal's tags are offered (spelled as first seen), with their counts.
        assert panel.journal_tag.options == ("meeting", "Writing")
        assert panel.tag_counts == {"meeting": 2, "Writing": 1}
        assert "Tags: meeting (2) · Writing (1)" in panel.journal_tags_info.value
        assert [e["text"] for e in panel.last_results] == ["review", "draft", "kickoff"]
        assert "## Memories" in panel.prompt_view.value
    finally:
        panel.close()


# -- Facts ---------------------------------------------------------------------------------


def test_edit_and_save_facts(panel: MemoryPanel, mem: AgentMemory) -> None:
    assert rendered_of(panel) == "(FACT.md is empty)"
    panel.facts_editor.value = "# Facts\n- The user prefers metric units.\n"
    assert panel.facts_dirty
    panel.facts_save_button.click()
    assert mem.facts == "# Facts\n- The user prefers metric units.\n"
    assert not panel.facts_dirty
    assert f"Saved FACT.md (sha256 {mem.facts_sha256[:12]})." in panel.facts_status.value
    assert rendered_of(panel) == "# Facts\n- The user prefers metric units.\n"
    # A second save builds on the version just written (no false conflict).
    panel.facts_editor.value = "# Facts\n- metric\n"
    assert panel.save_facts() is True
    assert mem.facts == "# Facts\n- metric\n"
    assert len(mem.history()) == 1


def test_save_conflict_then_reload(panel: MemoryPanel, mem: AgentMemory) -> None:
    base = mem.facts_sha256
    agent_sha = mem.update_facts("- written by the agent\n")  # behind the panel's back
    panel.facts_editor.value = "- my edit\n"
    panel.facts_save_button.click()
    assert mem.facts == "- written by the agent\n"  # nothing was clobbered
    assert panel.facts_conflict
    status = panel.facts_status.value
    # 12-digit hashes, not two 64-digit ones.
    assert "Not saved:" in status and base[:12] in status and agent_sha[:12] in status
    assert base not in status and agent_sha not in status
    assert panel.facts_reload_button.button_style == "warning"
    assert panel.facts_editor.value == "- my edit\n"  # the user's text is kept
    # What changed: from the file as it is now to the user's text, and three choices.
    assert panel.facts.conflict_box.layout.display is None
    diff = panel.facts.conflict_view.value
    assert f"--- FACT.md now ({agent_sha[:12]})" in diff and "+++ your text" in diff
    assert "-- written by the agent" in diff and "+- my edit" in diff
    assert [b.description for b in panel.facts.conflict_box.children[1].children] == [
        "Discard mine, reload", "Keep editing", "Overwrite anyway"]
    # The choices carry their own Reload: the editor's is hidden meanwhile (one at a time).
    assert panel.facts_reload_button.layout.display == "none"

    panel.facts.conflict_reload_button.click()
    assert panel.facts_editor.value == "- written by the agent\n"
    assert not panel.facts_conflict
    assert panel.facts_reload_button.button_style == ""
    assert panel.facts_reload_button.layout.display is None
    assert panel.facts.conflict_box.layout.display == "none"
    panel.facts_editor.value = "- written by the agent\n- my edit\n"
    assert panel.save_facts() is True
    assert mem.facts == "- written by the agent\n- my edit\n"


def test_refresh_keeps_unsaved_edits(panel: MemoryPanel, mem: AgentMemory) -> None:
    mem.update_facts("- v1\n")
    assert panel.refresh_if_changed() is True
    assert panel.facts_editor.value == "- v1\n"
    assert panel.refresh_if_changed() is False  # nothing changed since

    panel.facts_editor.value = "- my unsaved edit\n"
    mem.update_facts("- v2\n")
    panel.refresh_button.click()
    assert panel.facts_editor.value == "- my unsaved edit\n"
    assert "changed on disk while you were editing" in panel.facts_status.value
    assert rendered_of(panel) == "- v2\n"  # the rendered view shows what is on disk
    assert panel.save_facts() is False  # and Save still detects the conflict
    assert mem.facts == "- v2\n"


def test_history_diff_and_restore(panel: MemoryPanel, mem: AgentMemory) -> None:
    first = mem.update_facts("- a <b>\n")
    mem.update_facts("- c\n")
    mem.update_facts("- d\n")
    panel.refresh()
    assert [sha for _label, sha in panel.history_select.options] == [
        v["sha256"] for v in mem.history()]
    assert panel.history_select.options[-1][1] == first

    assert panel.show_history_diff() is None  # nothing selected yet
    assert "Pick a version first." in panel.history_output.value

    panel.history_select.value = first
    panel.history_diff_button.click()
    page = panel.history_output.value
    assert "-- a &lt;b&gt;" in page and "+- d" in page and "<b>" not in page

    panel.facts_editor.value = "unsaved"
    assert panel.restore_version() is False
    assert "unsaved edits" in panel.history_output.value
    panel.reload_facts()

    panel.history_select.value = first
    panel.history_restore_button.click()
    assert mem.facts == "- a <b>\n"
    assert panel.facts_editor.value == "- a <b>\n"
    assert f"Restored version {first[:12]}" in panel.history_output.value
    assert len(panel.history_select.options) == 3


def test_history_errors_are_shown(panel: MemoryPanel) -> None:
    assert panel.show_history_diff("0000000") is None
    assert panel.history_output.value  # the engine's message, not an exception
    assert panel.restore_version("0000000") is False


# -- Journal -------------------------------------------------------------------------------


def test_search_journal(panel: MemoryPanel, mem: AgentMemory) -> None:
    assert panel.last_results == []
    assert "No journal entries found." in panel.journal_results.value
    mem.append("Kickoff with <Ana>", ["meeting"])
    mem.append("Report draft", ["writing"])
    mem.append("Report review", ["meeting", "review"])
    panel.refresh()

    panel.journal_tag.value = "meeting"
    panel.journal_search_button.click()
    assert [e["text"] for e in panel.last_results] == ["Report review", "Kickoff with <Ana>"]
    assert "Kickoff with &lt;Ana&gt;" in panel.journal_results.value
    assert "<Ana>" not in panel.journal_results.value

    panel.journal_tag.value = ""
    panel.journal_limit.value = 1
    panel.journal_query.value = "report"  # Enter in the field searches
    assert [e["text"] for e in panel.last_results] == ["Report review"]

    panel.journal_query.value = "nothing like this"
    assert "No matching journal entries found." in panel.journal_results.value
    assert isinstance(panel.last_results, JournalResult)


def test_search_time_window_and_bad_date(panel: MemoryPanel, mem: AgentMemory) -> None:
    path = mem.path / "memory" / "JOURNAL.jsonl"
    path.write_text("".join(
        json.dumps({"ts": ts, "tags": [], "text": ts[:7]}, separators=(",", ":")) + "\n"
        for ts in ("2026-01-05T00:00:00.000Z", "2026-02-05T00:00:00.000Z",
                   "2026-03-05T00:00:00.000Z")))
    panel.journal_since.value = "2026-02-01"
    panel.journal_until.value = "2026-02-28T23:59:59Z"
    assert [e["text"] for e in panel.search_journal()] == ["2026-02"]

    panel.journal_since.value = "last week"
    assert panel.search_journal() is None
    assert "since" in panel.journal_status.value and "last week" in panel.journal_status.value
    assert [e["text"] for e in panel.last_results] == ["2026-02"]  # previous results stay


def test_append_entry(panel: MemoryPanel, mem: AgentMemory) -> None:
    panel.append_text.value = "Met Ana about the Q3 report"
    # A plain comma-separated field: what is typed is what is stored, and the first click
    # appends.
    panel.append_tags.value = "meeting, q3,, "
    panel.append_button.click()
    (entry,) = list(mem.entries())
    assert (entry["text"], entry["tags"]) == ("Met Ana about the Q3 report", ["meeting", "q3"])
    assert f"Journal entry added at {entry['ts']}." in panel.append_status.value
    assert panel.append_text.value == "" and panel.append_tags.value == ""
    # The new entry shows up, and its tags join the picker.
    assert panel.last_results[0]["text"] == "Met Ana about the Q3 report"
    assert "q3" in panel.journal_tag.options and panel.tag_counts == {"meeting": 1, "q3": 1}


def test_append_empty_text_is_refused(panel: MemoryPanel, mem: AgentMemory) -> None:
    panel.append_text.value = ""
    panel.append_tags.value = "x"
    assert panel.append_entry() is False
    assert "&#x27;text&#x27; is required for append action" in panel.append_status.value
    assert list(mem.entries()) == []
    assert panel.append_tags.value == "x"  # the form is left as it was


# -- Prompt --------------------------------------------------------------------------------


def test_prompt_tab_and_budget_warning(mem: AgentMemory, tmp_path: Path) -> None:
    mem.update_facts("- fact\n" * 100)
    panel = MemoryPanel(mem, budget_tokens=10)
    try:
        view = panel.last_prompt
        assert view is not None and view.over_budget and view.warnings
        assert "jp-AgentMemory-warning" in panel.prompt_view.value
        assert "<table" in panel.prompt_view.value  # per-section sizes
        project = tmp_path / "project"
        project.mkdir()
        (project / "system.md").write_text("Be brief & kind.\n")
        panel.prompt_workspace.value = str(project)
        panel.prompt_build_button.click()
        assert panel.last_prompt.text.startswith("Be brief & kind.\n\n")
        assert "Be brief &amp; kind." in panel.prompt_view.value
        panel.prompt_workspace.value = str(tmp_path / "missing")
        assert panel.build_prompt() is None
        assert "is not a directory" in panel.prompt_status.value
    finally:
        panel.close()


# -- Persona -------------------------------------------------------------------------------


def test_persona_save_and_conflict(panel: MemoryPanel, mem: AgentMemory) -> None:
    panel.soul.editor.value = "I am Ada, a patient tutor.\n"
    panel.soul.save_button.click()
    assert mem.soul == "I am Ada, a patient tutor.\n"
    assert "Saved SOUL.md" in panel.soul.status.value

    panel.user.editor.value = "Name: Sam\n"
    assert panel.save_user() is True
    assert mem.user == "Name: Sam\n"

    mem.write_user("Name: Samantha\n")  # changed elsewhere
    panel.user.editor.value = "Name: Sam\nTimezone: UTC\n"
    assert panel.save_user() is False
    assert mem.user == "Name: Samantha\n"
    assert "Not saved:" in panel.user.status.value
    assert panel.user.reload_button.button_style == "warning"
    panel.user.reload_button.click()
    assert panel.user.editor.value == "Name: Samantha\n"
    panel.user.editor.value = "Name: Samantha\nTimezone: UTC\n"
    assert panel.save_user() is True
    assert mem.user == "Name: Samantha\nTimezone: UTC\n"
    assert panel.save_soul() is True  # unchanged editor saves the same text again


# -- refresh after cells -------------------------------------------------------------------


def test_fingerprint_tracks_every_file(mem: AgentMemory) -> None:
    before = memory_fingerprint(mem)
    assert memory_fingerprint(mem) == before
    mem.append("x")
    after_append = memory_fingerprint(mem)
    assert after_append != before
    mem.write_soul("soul\n")
    assert memory_fingerprint(mem) != after_append


def test_panel_refreshes_after_a_cell_that_changed_memory(
    ip: InteractiveShell, mem: AgentMemory
) -> None:
    ip.run_line_magic("load_ext", "jupyter_agent_memory")
    panel = MemoryPanel(mem)
    try:
        ip.user_ns["mem"] = mem
        with capture_output():
            assert ip.run_cell("mem.append('from a cell', ['cell'])").success
        assert panel.last_results[0]["text"] == "from a cell"
        assert panel.journal_tag.options == ("cell",)
        with capture_output():
            ip.run_cell("%%fact_update --agent " + str(mem.path) + "\n- from a magic\n")
        assert panel.facts_editor.value == "- from a magic\n"
        # A cell that changes nothing does not rebuild the panel.
        calls = []
        panel.refresh = lambda: calls.append(1)  # type: ignore[method-assign]
        with capture_output():
            ip.run_cell("1 + 1")
        assert calls == []
    finally:
        panel.close()
        ip.user_ns.pop("mem", None)
        ip.run_line_magic("unload_ext", "jupyter_agent_memory")
    # After unload the hook is gone: panels are no longer refreshed by cells.
    other = MemoryPanel(mem)
    try:
        with capture_output():
            ip.run_cell(f"__import__('jupyter_agent_memory').AgentMemory.open({str(mem.path)!r})"
                        ".append('after unload')")
        assert other.last_results[0]["text"] == "from a cell"
    finally:
        other.close()


# -- memory written by a model ---------------------------------------------------------------


def test_hostile_memory_is_never_live_html(mem: AgentMemory, tmp_path: Path) -> None:
    """Every HTML the panel hands the front end shows the payloads as text and runs nothing."""
    assert mem.call_tool({"action": "update", "content": HOSTILE_FACTS}) == "Memory updated."
    mem.update_facts(HOSTILE_FACTS + PAYLOADS["svg"] + " (edited)\n")
    mem.write_soul(PAYLOADS["script"] + "\n")
    for name, payload in PAYLOADS.items():
        mem.append(payload, tags=[payload, name])
    # The folder name is shown in the title: it can be hostile too.
    odd = AgentMemory.open(tmp_path / "work" / "<img src=x onerror=alert(1)>")
    odd.update_facts(HOSTILE_FACTS)
    for agent in (mem, odd):
        panel = MemoryPanel(agent)
        try:
            (output,) = panel.facts_rendered.outputs
            assert output["data"]["text/plain"] == agent.facts
            rendered = assert_inert(output["data"]["text/html"])
            assert "<h1>Facts</h1>" in output["data"]["text/html"]
            for payload in (PAYLOADS["img"], PAYLOADS["script"], PAYLOADS["iframe"]):
                assert payload in rendered
            assert agent.path.name in assert_inert(panel.title.value)
            if agent is mem:
                journal = assert_inert(panel.journal_results.value)
                for payload in PAYLOADS.values():
                    assert payload in journal
                assert PAYLOADS["contents-write"] in assert_inert(panel.prompt_view.value)
                panel.history_select.value = mem.history()[0]["sha256"]
                panel.show_history_diff()
                diff = assert_inert(panel.history_output.value)
                assert "+" + PAYLOADS["svg"] + " (edited)" in diff
            # Status lines quote engine messages, which may quote memory text.
            panel.journal_since.value = PAYLOADS["img"]
            assert panel.search_journal() is None
            assert "onerror=\\\"alert('img')" in assert_inert(panel.journal_status.value)
        finally:
            panel.close()


def test_rendered_facts_are_converted_only_when_they_change(
    panel: MemoryPanel, mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jupyter_agent_memory.notebook import display

    calls: list[str] = []
    real = display.markdown_html
    monkeypatch.setattr(display, "markdown_html", lambda text: calls.append(text) or real(text))
    mem.update_facts("- one\n")
    panel.refresh()
    mem.append("journal only")  # changes the files, not FACT.md
    assert panel.refresh_if_changed() is True
    panel.refresh()
    assert calls == ["- one\n"]
    mem.update_facts("- two\n")
    panel.refresh()
    assert calls == ["- one\n", "- two\n"]
    assert "<li>two</li>" in panel.facts_rendered.outputs[0]["data"]["text/html"]


# -- the Journal tab searches on every change --------------------------------------------------


def test_every_journal_control_searches_on_change(panel: MemoryPanel, mem: AgentMemory) -> None:
    journal = mem.path / "memory" / "JOURNAL.jsonl"
    journal.write_text("".join(
        json.dumps({"ts": f"2026-11-0{day}T09:00:00.000Z", "tags": [tag], "text": text}) + "\n"
        for day, tag, text in ((1, "meeting", "Kickoff with Ana"),
                               (2, "writing", "Draft the report"),
                               (3, "meeting", "Report review"))))
    panel.refresh()
    texts = lambda: [e["text"] for e in panel.last_results]  # noqa: E731
    assert texts() == ["Report review", "Draft the report", "Kickoff with Ana"]
    panel.journal_tag.value = "meeting"  # no Search click: the change itself searches
    assert texts() == ["Report review", "Kickoff with Ana"]
    panel.journal_query.value = "report"
    assert texts() == ["Report review"]
    marks = re.findall(r"<mark [^>]*>(.*?)</mark>", panel.journal_results.value)
    assert marks == ["Report"]
    panel.journal_tag.value = ""
    assert texts() == ["Report review", "Draft the report"]
    panel.journal_limit.value = 1
    assert texts() == ["Report review"]
    first_ts = "2026-11-02T09:00:00.000Z"
    panel.journal_limit.value = 20
    panel.journal_query.value = ""
    panel.journal_until.value = first_ts
    assert texts() == ["Draft the report", "Kickoff with Ana"]
    panel.journal_since.value = first_ts
    assert texts() == ["Draft the report"]
    panel.journal_since.value = "not a date"
    assert (escape("Invalid 'since': expected an ISO-8601 date or time, got \"not a date\"")
            in panel.journal_status.value)
    assert texts() == ["Draft the report"]  # the last good results stay


def test_tags_of_a_big_journal_are_counted_only_when_asked(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jupyter_agent_memory.notebook import panel as panel_module

    monkeypatch.setattr(panel_module, "TAG_COUNT_AUTO_BYTES", 0)
    calls: list[int] = []
    real = AgentMemory.tag_counts
    monkeypatch.setattr(AgentMemory, "tag_counts",
                        lambda self: calls.append(1) or real(self))
    mem.append("one", ["alpha"])
    panel = MemoryPanel(mem)
    _run_and_close(panel, lambda: _big_journal_checks(panel, mem, calls))


def _run_and_close(panel: MemoryPanel, check: Any) -> None:
    try:
        check()
    finally:
        panel.close()


def _big_journal_checks(panel: MemoryPanel, mem: AgentMemory, calls: list[int]) -> None:
    assert calls == [] and panel.tag_counts is None
    assert "press Count tags" in panel.journal_tags_info.value
    panel.journal_tag.value = "alpha"  # a typed tag still searches
    assert [e["text"] for e in panel.last_results] == ["one"]
    panel.journal_count_button.click()
    assert calls == [1] and panel.tag_counts == {"alpha": 1}
    assert panel.journal_tag.options == ("alpha",)
    mem.append("two", ["beta"])
    assert panel.refresh_if_changed() is True
    assert calls == [1]  # refreshing never reads the whole journal again
    assert panel.tags_stale and "Count tags again" in panel.journal_tags_info.value


# -- conflicts, vanished folders, the editing guard ------------------------------------------


def test_overwrite_anyway_is_compare_and_swap_against_the_version_shown(
    panel: MemoryPanel, mem: AgentMemory
) -> None:
    mem.update_facts("- agent one\n")
    panel.facts_editor.value = "- mine\n"
    assert panel.save_facts() is False
    shown = panel.facts.conflict_sha
    assert shown == mem.facts_sha256
    # The agent writes again after the diff was shown: Overwrite must not clobber that.
    mem.update_facts("- agent two\n")
    assert panel.overwrite_facts() is False
    assert mem.facts == "- agent two\n"
    assert "+- mine" in panel.facts.conflict_view.value
    assert "-- agent two" in panel.facts.conflict_view.value
    # Keep editing closes the choices and keeps the text.
    panel.facts.keep_editing_button.click()
    assert panel.facts.conflict_box.layout.display == "none"
    assert panel.facts_editor.value == "- mine\n"
    panel.facts_editor.value = "- mine, edited\n"
    panel.facts.overwrite_button.click()
    assert mem.facts == "- mine, edited\n"
    assert "- agent two\n" in [mem.history_text(v["sha256"]) for v in mem.history()]
    assert not panel.facts_conflict and "Saved FACT.md" in panel.facts_status.value


def test_blank_fact_md_is_refused_by_the_editing_guard(panel: MemoryPanel,
                                                       mem: AgentMemory) -> None:
    from jupyter_agent_memory.errors import EmptyEditError

    mem.update_facts("- keep me\n")
    panel.refresh()
    panel.facts_editor.value = "  \n\t"
    assert panel.save_facts() is False
    assert mem.facts == "- keep me\n"
    assert escape(EmptyEditError().message) in panel.facts_status.value


def test_a_vanished_agent_folder_is_shown_and_never_recreated(
    panel: MemoryPanel, mem: AgentMemory
) -> None:
    import shutil

    mem.update_facts("- a fact\n")
    panel.refresh()
    panel.facts_editor.value = "- unsaved edit\n"
    shutil.rmtree(mem.path)
    assert panel.refresh_if_changed() is True
    assert panel.gone
    banner = panel.banner.value
    assert "The agent folder is gone" in banner and "does not exist" in banner
    assert panel.facts_editor.value == "- unsaved edit\n"  # kept
    assert panel.facts_save_button.disabled and panel.append_button.disabled
    assert panel.save_facts() is False
    assert "does not exist" in panel.facts_status.value
    assert "Errno" not in panel.facts_status.value
    panel.append_text.value = "x"
    assert panel.append_entry() is False and "Errno" not in panel.append_status.value
    assert not mem.path.exists()
    # The folder comes back: the panel works again.
    AgentMemory.open(mem.path)
    panel.refresh()
    assert not panel.gone and panel.banner.value == ""
    assert not panel.facts_save_button.disabled


def test_status_colours_follow_the_theme(panel: MemoryPanel, mem: AgentMemory) -> None:
    # The declaration that wins (the last) is the theme's colour moved towards the theme's
    # text colour; the browser suite measures its contrast in both themes.
    def last_colour(html: str) -> str:
        style = html.split('style="')[1].split('"')[0]
        return [d for d in style.split(";") if d.startswith("color:")][-1]

    panel.facts_editor.value = "- saved\n"
    assert panel.save_facts()
    assert last_colour(panel.facts_status.value) == (
        "color:color-mix(in srgb,var(--jp-success-color1,#388e3c) 65%,"
        "var(--jp-ui-font-color0,#000))")
    panel.journal_since.value = "bad"
    assert last_colour(panel.journal_status.value).startswith(
        "color:color-mix(in srgb,var(--jp-error-color1,")


# -- big memory -------------------------------------------------------------------------------


@pytest.mark.slow  # megabytes of text through the real formatters
def test_big_fact_md_is_bounded_until_asked(mem: AgentMemory) -> None:
    from jupyter_agent_memory.notebook.display import VIEW_LIMIT

    big = "".join(f"- fact {i} about the user's project\n" for i in range(90_000))  # ~3 MB
    (mem.path / "memory" / "FACT.md").write_text(big)
    panel = MemoryPanel(mem)
    try:
        (output,) = panel.facts_rendered.outputs
        assert len(output["data"]["text/html"]) < 1.3 * VIEW_LIMIT
        assert len(output["data"]["text/plain"]) < 1.1 * VIEW_LIMIT
        # The editor is not filled (that would send 3 MB); saving is off until asked.
        assert panel.facts.held_back and panel.facts_editor.value == ""
        assert panel.facts_save_button.disabled and panel.facts_editor.disabled
        assert "Edit here anyway" in panel.facts_status.value
        assert panel.save_facts() is False
        assert (mem.path / "memory" / "FACT.md").read_text() == big
        assert len(panel.prompt_view.value) < 1.2 * VIEW_LIMIT
        # Asked for: all of it.
        panel.facts_show_all.value = True
        (output,) = panel.facts_rendered.outputs
        assert output["data"]["text/html"].count("<li>") == 90_000
        panel.prompt_show_all.value = True
        assert panel.prompt_view.value.count("- fact ") == 90_000
        panel.prompt_copy_button.value = True
        assert panel.prompt_copy_text.value == panel.last_prompt.text
        panel.facts.large_button.click()
        assert panel.facts_editor.value == big and not panel.facts_save_button.disabled
    finally:
        panel.close()


# -- Sessions tab ---------------------------------------------------------------------------------


def test_sessions_tab(panel: MemoryPanel, mem: AgentMemory) -> None:
    from jupyter_agent_memory import PromptBuilder

    assert "No sessions on record yet" in panel.sessions_timeline.value
    assert panel.show_session() is None
    mem.update_facts("- metric units\n")
    first = PromptBuilder().start_session(mem, Path.cwd(), client={"name": "cli"}).receipt
    mem.update_facts("- imperial units\n")
    second = PromptBuilder().start_session(mem, Path.cwd(), client={"name": "ide"}).receipt
    panel.refresh()
    timeline = panel.sessions_timeline.value
    assert timeline.index(second["session_id"]) < timeline.index(first["session_id"])
    assert [v for _label, v in panel.session_pick.options] == [second["session_id"],
                                                                first["session_id"]]
    # The newest session is picked until the user picks another; the second pick is "none".
    assert panel.session_pick.value == second["session_id"] and panel.session_other.value == ""
    panel.session_pick.value = first["session_id"]
    panel.session_show_button.click()
    assert "- metric units" in panel.session_output.value
    assert "imperial" not in panel.session_output.value
    panel.session_other.value = second["session_id"]
    diff = panel.diff_sessions()
    assert diff is not None
    assert "-- metric units" in diff.lines and "+- imperial units" in diff.lines
    assert "+- imperial units" in panel.session_output.value
    panel.session_why_text.value = "metric"
    (origin,) = panel.why()
    assert (origin.section, origin.line) == ("facts", 1)
    assert re.search(r"<mark [^>]*>metric</mark>", panel.session_output.value)
    # Previews in the panel never record.
    panel.build_prompt()
    assert len(mem.sessions()) == 2


@pytest.mark.slow  # a benchmark run in a child process
def test_panel_bench_runs_and_prints_every_figure(tmp_path: Path) -> None:
    """The panel benchmark keeps working (a small run; its targets apply to 1M entries)."""
    import subprocess
    import sys

    bench = Path(__file__).resolve().parents[2] / "bench" / "panel_bench.py"
    run = subprocess.run(
        [sys.executable, str(bench), "--entries", "3000", "--rounds", "3",
         "--data", str(tmp_path / "data")],
        capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "IPYTHONDIR": str(tmp_path / "ipython")},
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert re.search(r"^data: FACT\.md 3\.0 MiB, journal 3,000 entries", out, re.M)
    for measure in ("open, 3 MB FACT.md + journal", "refresh after a cell, 1,000 entries",
                    "refresh after a cell, 3,000 entries", "refresh ratio big / small",
                    "prompt view HTML sent", "FACT.md view HTML sent"):
        assert re.search(rf"^{re.escape(measure)}\s+\S", out, re.M), measure
    assert "(a reduced run: targets are checked on 1,000,000 entries" in out
    # Nothing was written outside the data folder, and the big FACT.md stayed as built.
    assert (tmp_path / "data" / "big" / "memory" / "FACT.md").stat().st_size > 3_000_000
