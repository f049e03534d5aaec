"""The ipywidgets memory panel in a real JupyterLab through Chromium: the Journal tab searches
on every change, the plain tags field, themed tables, conflicts with Overwrite anyway, a vanished
agent folder, the Sessions tab, and how it looks (no label or placeholder cut short, tables as
wide as their boxes, one Reload at a time, controls off when there is nothing to act on).
Screenshots in both themes go to ``$AGENT_MEMORY_SCREENSHOTS`` when set, else to the test's
temporary folder.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from conftest import Lab, watch_of
from pages import (
    KERNEL_IDLE,
    in_both_themes,
    screenshot_dir,
    write_notebook,
)
from playwright.sync_api import Page, expect

from jupyter_agent_memory import AgentMemory, PromptBuilder


def shots(page: Page, tmp_path: Path, name: str) -> None:
    folder = screenshot_dir(tmp_path)
    in_both_themes(
        page,
        lambda label: page.locator(".widget-tab").first.screenshot(
            path=str(folder / f"panel-{name}-{label}.png")
        ),
    )


def open_panel(new_page: Any, lab: Lab, folder: str) -> Page:
    write_notebook(lab.workspace / f"{folder}.ipynb", [
        "%load_ext jupyter_agent_memory", f"%agent_memory ./{folder}", "%agent_memory"])
    page = new_page()
    page.goto(lab.lab_url(f"{folder}.ipynb"))
    page.wait_for_function("() => window.jupyterapp !== undefined")
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    expect(page.get_by_text(f"Agent memory: {folder}")).to_be_visible(timeout=60_000)
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)
    return page


def tab(page: Page, title: str) -> None:
    tab = page.locator(".widget-tab .lm-TabBar-tab", has_text=title).first
    tab.click()
    expect(tab).to_have_class(re.compile(r"\blm-mod-current\b"))


#: Visible buttons and inputs of the panel whose text does not fit: a button label cut short
#: (its text wider than the button) or a placeholder wider than its empty field (measured
#: with the field's own font).
CUT_SHORT = """
() => {
  const panel = document.querySelector('.jp-OutputArea .jp-AgentMemory-panel');
  const shown = n => n.getClientRects().length && getComputedStyle(n).visibility !== 'hidden';
  const cut = [];
  for (const button of panel.querySelectorAll('button.jupyter-button')) {
    if (shown(button) && button.scrollWidth > button.clientWidth + 1)
      cut.push('button: ' + button.textContent.trim());
  }
  const canvas = document.createElement('canvas').getContext('2d');
  for (const field of panel.querySelectorAll('input[placeholder], textarea[placeholder]')) {
    if (!shown(field) || !field.placeholder) continue;
    const style = getComputedStyle(field);
    canvas.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    const room = field.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    if (canvas.measureText(field.placeholder).width > room + 1)
      cut.push('placeholder: ' + field.placeholder);
  }
  return cut;
}
"""

#: Tables of the panel next to the box they sit in: [class, table width, box content width].
TABLE_WIDTHS = """
() => [...document.querySelectorAll('.jp-OutputArea .widget-tab table[class^="jp-AgentMemory"]')]
  .filter(t => t.getClientRects().length)
  .map(t => [t.className, t.getBoundingClientRect().width, t.parentElement.clientWidth])
"""


def assert_nothing_cut_short(page: Page, where: str) -> None:
    assert page.evaluate(CUT_SHORT) == [], where
    widths = page.evaluate(TABLE_WIDTHS)
    assert widths, where
    for name, table, box in widths:
        assert abs(table - box) <= 1, (where, name, table, box)


def close(page: Page, lab: Lab, folder: str) -> None:
    page.evaluate("() => window.jupyterapp.serviceManager.sessions.shutdownAll()")
    (lab.workspace / f"{folder}.ipynb").unlink(missing_ok=True)
    shutil.rmtree(lab.workspace / folder, ignore_errors=True)


def test_journal_tab_searches_on_change_with_plain_tags(
    new_page: Any, lab: Lab, agents_root: Path, tmp_path: Path
) -> None:
    folder = "panel-journal"
    mem = AgentMemory.open(lab.workspace / folder)
    mem.append("Kickoff with Ana", ["meeting"])
    mem.append("Draft the report", ["writing"])
    page = open_panel(new_page, lab, folder)
    try:
        tab(page, "Journal")
        results = page.locator(".jp-OutputArea .jp-AgentMemory-journal tbody tr")
        expect(results).to_have_count(2)
        # The Tag field alone searches again (no button), and its list offers the tags used.
        tag = page.get_by_placeholder("any tag")
        tag.fill("meeting")
        tag.press("Enter")
        expect(results).to_have_count(1)
        expect(results.first).to_contain_text("Kickoff with Ana")
        tag.fill("")
        tag.press("Enter")
        query = page.get_by_placeholder("text contains…")
        query.fill("report")
        query.press("Enter")
        expect(results).to_have_count(1)
        expect(results.locator("mark")).to_have_text(["report"])
        # A plain comma-separated tags field: what is typed is what is stored, first click.
        page.get_by_placeholder("What happened? (one journal entry)").fill("Met Ben")
        page.get_by_placeholder("comma-separated, e.g. meeting, q3").fill("alpha, beta,")
        page.get_by_role("button", name="Append").click()
        expect(page.get_by_text("Journal entry added at")).to_be_visible()
        entries = list(mem.entries())
        assert (entries[-1]["text"], entries[-1]["tags"]) == ("Met Ben", ["alpha", "beta"])
        query.fill("")
        query.press("Enter")
        expect(results).to_have_count(3)
        # The table follows the theme: its header uses JupyterLab's variables.
        style = results.first.locator("td").first.get_attribute("style") or ""
        assert "var(--jp-border-color2" in style
        shots(page, tmp_path, "journal")
        assert watch_of(page).errors == []
    finally:
        close(page, lab, folder)


def test_conflict_overwrite_and_a_vanished_folder(
    new_page: Any, lab: Lab, agents_root: Path, tmp_path: Path
) -> None:
    folder = "panel-conflict"
    mem = AgentMemory.open(lab.workspace / folder)
    mem.update_facts("- shown in the panel\n")
    page = open_panel(new_page, lab, folder)
    try:
        editor = page.locator(".widget-textarea textarea").first
        expect(editor).to_have_value("- shown in the panel\n")
        editor.fill("- my edit\n")
        now = mem.update_facts("- written by the agent\n")
        page.get_by_role("button", name="Save FACT.md").click()
        expect(page.get_by_text(f"it is now {now[:12]}")).to_be_visible()
        expect(page.get_by_role("button", name="Overwrite anyway")).to_be_visible()
        expect(page.locator(".jp-AgentMemory-diff").first).to_contain_text("+- my edit")
        assert mem.facts == "- written by the agent\n"
        shots(page, tmp_path, "conflict")
        page.get_by_role("button", name="Overwrite anyway").click()
        expect(page.get_by_text("Saved FACT.md (sha256")).to_be_visible()
        assert mem.facts == "- my edit\n"

        # The folder is deleted (the quickstart's last cell): the panel says so, recreates
        # nothing, and Save shows the engine's message, never a raw errno.
        shutil.rmtree(mem.path)
        page.get_by_role("button", name="Refresh").first.click()
        expect(page.get_by_text("The agent folder is gone")).to_be_visible()
        expect(page.get_by_role("button", name="Save FACT.md")).to_be_disabled()
        assert not mem.path.exists()
        assert "Errno" not in page.locator(".widget-tab").first.text_content()
    finally:
        close(page, lab, folder)


def test_sessions_tab(new_page: Any, lab: Lab, agents_root: Path, tmp_path: Path) -> None:
    folder = "panel-sessions"
    mem = AgentMemory.open(lab.workspace / folder)
    mem.update_facts("- metric units\n")
    receipt = PromptBuilder().start_session(mem, lab.workspace, client={"name": "cli"}).receipt
    page = open_panel(new_page, lab, folder)
    try:
        tab(page, "Sessions")
        timeline = page.locator(".jp-OutputArea table.jp-AgentMemory-sessions")
        expect(timeline).to_contain_text(receipt["session_id"])
        output = page.locator(".jp-AgentMemory-panelSessionOutput")
        page.get_by_role("button", name="Show prompt").click()
        expect(output.locator(".jp-AgentMemory-prompt")).to_contain_text("- metric units")
        expect(output).to_contain_text(f"Session {receipt['session_id']}")
        why = page.get_by_placeholder("a line or part of one")
        why.fill("metric")
        why.press("Enter")
        expect(output.locator(".jp-AgentMemory-why mark")).to_have_text(["metric"])
        shots(page, tmp_path, "sessions")
    finally:
        close(page, lab, folder)


def test_nothing_is_cut_short_and_controls_follow_what_exists(
    new_page: Any, lab: Lab, agents_root: Path, tmp_path: Path
) -> None:
    folder = "panel-looks"
    mem = AgentMemory.open(lab.workspace / folder)
    mem.update_facts("- first\n")
    mem.update_facts("- first\n- second\n")
    for n in range(3):
        mem.append(f"Entry {n} about the quarterly report", ["work"])
    page = open_panel(new_page, lab, folder)
    try:
        panel = page.locator(".jp-OutputArea .jp-AgentMemory-panel").first
        for title in ("Journal", "Prompt", "Sessions"):
            tab(page, title)
            if title == "Sessions":  # no session yet: its tables are not there
                break
            assert_nothing_cut_short(page, title)
        # No session on record: nothing to pick, show, trace or diff.
        for name in ("Show prompt", "Diff", "Trace"):
            expect(panel.get_by_role("button", name=name)).to_be_disabled()
        expect(panel.get_by_role("combobox", name="Session")).to_be_disabled()
        expect(panel.get_by_role("textbox", name="Why")).to_be_disabled()
        assert page.evaluate(CUT_SHORT) == []
        shots(page, tmp_path, "sessions-empty")
        # One session: it can be shown and traced, still not diffed; two: diffed too.
        PromptBuilder().start_session(mem, lab.workspace, client={"name": "cli"})
        panel.get_by_role("button", name="Refresh").click()
        expect(panel.get_by_role("button", name="Show prompt")).to_be_enabled()
        expect(panel.get_by_role("textbox", name="Why")).to_be_enabled()
        expect(panel.get_by_role("button", name="Diff")).to_be_disabled()
        mem.update_facts("- first\n- second\n- third\n")
        PromptBuilder().start_session(mem, lab.workspace, client={"name": "cli"})
        panel.get_by_role("button", name="Refresh").click()
        expect(panel.get_by_role("button", name="Diff")).to_be_enabled()
        expect(panel.get_by_role("combobox", name="Diff with")).to_be_enabled()
        assert_nothing_cut_short(page, "Sessions")

        # A conflict shows its own Reload; the editor's hides, so one Reload at a time,
        # and every choice is readable in full.
        tab(page, "Facts")
        editor = panel.get_by_role("textbox", name="FACT.md")
        editor.fill("- mine\n")
        mem.update_facts("- the agent's\n")
        panel.get_by_role("button", name="Save FACT.md").click()
        expect(panel.get_by_role("button", name="Overwrite anyway")).to_be_visible()
        reloads = panel.get_by_role("button", name=re.compile("reload", re.IGNORECASE))
        expect(reloads).to_have_count(1)
        expect(reloads).to_have_text("Discard mine, reload")
        assert page.evaluate(CUT_SHORT) == []
        shots(page, tmp_path, "conflict-choices")
        panel.get_by_role("button", name="Keep editing").click()
        expect(panel.get_by_role("button", name="Overwrite anyway")).to_be_hidden()
        expect(reloads).to_have_count(1)
        expect(reloads).to_have_text("Reload")
        assert watch_of(page).errors == []
    finally:
        close(page, lab, folder)
