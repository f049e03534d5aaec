"""Every view the magics display, and the memory panel with each of its tabs, for keyboard
and screen-reader users, in JupyterLab and Notebook 7, light and dark: axe-core finds
nothing critical or serious, every scrolling box can be reached with Tab and has a name, and
every highlight and status colour has at least 4.5:1 contrast (computed: axe leaves text
over a highlight "incomplete").

Tests wait for states (an output that is there, a kernel that is idle), never for time.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from axe import contrast_report, serious_violations
from conftest import Lab
from pages import (
    KERNEL_IDLE,
    THEMES,
    screenshot_dir,
    set_theme,
    write_notebook,
)
from playwright.sync_api import Page, expect

from jupyter_agent_memory import AgentMemory, PromptBuilder

FOLDER = "views-agent"
OUTPUTS = ".jp-Cell-outputArea"
#: Text whose colour our views set: highlights, status lines, notes, warnings, diff lines,
#: table cells (on the sticky header's background), the forget report.
COLOURED = ("mark, [style*='color'], .jp-AgentMemory-diff span, .jp-AgentMemory-warning, "
            "th, td, small")

#: Every element of the outputs that scrolls (or is made to): it must be focusable and named.
SCROLLERS = """
selector => [...document.querySelectorAll(selector + ' *')]
  .filter(n => ['auto', 'scroll'].includes(getComputedStyle(n).overflowY)
               && n.scrollHeight > n.clientHeight + 1 && n.getClientRects().length
               && !n.closest('.widget-textarea, .widget-select'))
  .map(n => ({tag: n.tagName, tabindex: n.getAttribute('tabindex'),
              label: n.getAttribute('aria-label'), role: n.getAttribute('role')}))
"""


def fill_agent(folder: Path) -> list[str]:
    """An agent with facts and their history, journal entries about a report, and two
    sessions with different prompts; returns the session ids, oldest first."""
    shutil.rmtree(folder, ignore_errors=True)
    mem = AgentMemory.open(folder)
    mem.update_facts("# Facts\n\n- The user prefers metric units.\n")
    first = PromptBuilder().start_session(mem, client={"name": "cli"}).receipt
    mem.update_facts("# Facts\n\n- The user prefers metric units.\n- Reports on Fridays.\n")
    second = PromptBuilder().start_session(mem, client={"name": "cli"}).receipt
    for n in range(30):
        mem.append(f"Report review {n}: the report went well", ["work", "review"])
    mem.append("Throwaway note zq-forget-me", ["tmp"])
    return [first["session_id"], second["session_id"]]


def views_notebook(lab: Lab, sessions: list[str]) -> str:
    """A notebook showing every view the magics make, then the panel; returns its name."""
    first, second = sessions
    sources = [
        f"%load_ext jupyter_agent_memory\n%agent_memory ./{FOLDER}",
        "%fact",
        "%fact --history",
        "%fact --diff",
        "%journal search report",
        "%memprompt --budget 50",
        "%memprompt --sessions",
        "%memprompt --why metric",
        f"%memprompt --session {second}",
        f"%memprompt --diff {first} {second}",
        "%forget --dry-run Throwaway",
        "%forget zq-forget-me",
        "%agent_memory",
    ]
    name = f"{FOLDER}.ipynb"
    write_notebook(lab.workspace / name, sources)
    return name


def run_all(page: Page) -> None:
    """Run every cell and wait until each view is in the page."""
    page.wait_for_function("() => window.jupyterapp !== undefined")
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    outputs = page.locator(OUTPUTS)
    for selector in ("table.jp-AgentMemory-history", "table.jp-AgentMemory-journal mark",
                     ".jp-AgentMemory-warning", "table.jp-AgentMemory-sessions",
                     "table.jp-AgentMemory-why mark", ".jp-AgentMemory-prompt"):
        expect(outputs.locator(selector).first).to_be_visible(timeout=60_000)
    expect(outputs.get_by_text("Verified: found in no form")).to_be_visible()
    expect(outputs.get_by_text(f"Agent memory: {FOLDER}")).to_be_visible(timeout=60_000)
    expect(outputs.locator(".jp-AgentMemory-diff")).to_have_count(2)
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)


CURRENT = re.compile(r"\blm-mod-current\b")


def panel_tab(page: Page, title: str) -> None:
    tab = page.locator(f"{OUTPUTS} .widget-tab .lm-TabBar-tab", has_text=title).first
    tab.click()
    expect(tab).to_have_class(CURRENT)


def walk(page: Page, mem: AgentMemory) -> Iterator[str]:
    """Bring the panel through each tab and its statuses, naming each state reached."""
    yield "views, panel on Facts"
    panel = page.locator(f"{OUTPUTS} .jp-AgentMemory-panel").first
    editor = panel.get_by_role("textbox", name="FACT.md")
    editor.fill("- mine\n")
    mem.update_facts(f"- written by the agent at {time.monotonic()}\n")
    panel.get_by_role("button", name="Save FACT.md").click()
    expect(panel.get_by_role("button", name="Overwrite anyway")).to_be_visible()
    yield "Facts, a conflict (error status, diff, danger button)"
    panel.get_by_role("button", name="Keep editing").click()
    expect(panel.get_by_text("Still editing.")).to_be_visible()
    yield "Facts, keep editing (warning status)"
    panel.get_by_role("button", name="Reload").click()  # the conflict's own is hidden
    panel.get_by_role("button", name="Save FACT.md").click()
    expect(panel.get_by_text("Saved FACT.md")).to_be_visible()
    yield "Facts, saved (ok status)"
    for sub in ("Rendered", "History"):
        panel_tab(page, sub)
        yield f"Facts, {sub}"
    panel.get_by_role("option").first.click()
    panel.get_by_role("button", name="Diff with current").click()
    expect(panel.get_by_role("region", name=re.compile("^Differences from FACT.md@"))
           ).to_be_visible()
    yield "Facts, History diff"
    panel_tab(page, "Edit")
    panel_tab(page, "Journal")
    query = panel.get_by_placeholder("text contains…")
    query.fill("report")
    query.press("Enter")
    expect(panel.locator(".jp-AgentMemory-journal mark").first).to_be_visible()
    since = panel.get_by_placeholder("e.g. 2026-11-01T09:00Z")
    since.fill("not a time")
    since.press("Enter")
    expect(panel.get_by_text("'since'")).to_be_visible()
    yield "Journal, search and an error"
    since.fill("")
    since.press("Enter")
    for title in ("Prompt", "Persona", "Sessions"):
        panel_tab(page, title)
        yield title
    why = panel.get_by_placeholder("a line or part of one")
    why.fill("metric")
    why.press("Enter")
    expect(panel.locator(".jp-AgentMemory-why mark").first).to_be_visible()
    yield "Sessions, why"
    panel_tab(page, "Facts")


def check_everything(page: Page, mem: AgentMemory, where: str, shots: Path) -> None:
    """Every state of :func:`walk`, in both themes: axe, contrast, scroll boxes; then a
    screenshot of the panel and two views per theme into ``shots``."""
    problems: dict[str, Any] = {}
    for theme, label in THEMES:
        set_theme(page, theme)
        for state in walk(page, mem):
            key = f"{where}, {label}, {state}"
            violations = serious_violations(page, OUTPUTS)
            if violations:
                problems[f"{key}: axe"] = violations
            report = contrast_report(page, OUTPUTS, COLOURED)
            assert report["checked"] > 10, key  # the views really were measured
            if report["found"]:
                problems[f"{key}: contrast"] = report["found"]
            unreachable = [s for s in page.evaluate(SCROLLERS, OUTPUTS)
                           if s["tabindex"] != "0" or not s["label"]]
            if unreachable:
                problems[f"{key}: scroll boxes"] = unreachable
        for name, selector in (("panel", ".jp-AgentMemory-panel"),
                               ("journal-search", "table.jp-AgentMemory-journal"),
                               ("memprompt-why", "table.jp-AgentMemory-why")):
            view = page.locator(f"{OUTPUTS} {selector}").first
            view.scroll_into_view_if_needed()
            view.screenshot(path=str(shots / f"{name}-{where}-{label}.png"))
    assert problems == {}


@pytest.mark.parametrize("front_end", ["lab", "notebook7"])
def test_every_view_and_the_panel_have_no_serious_a11y_problems(
    new_page: Any, lab: Lab, agents_root: Path, tmp_path: Path, front_end: str
) -> None:
    sessions = fill_agent(lab.workspace / FOLDER)
    name = views_notebook(lab, sessions)
    page = new_page()
    try:
        if front_end == "lab":
            page.goto(lab.lab_url(name))
        else:
            page.goto(f"{lab.url}notebooks/{name}?token={lab.token}")
        run_all(page)
        check_everything(page, AgentMemory.open(lab.workspace / FOLDER), front_end,
                         screenshot_dir(tmp_path))
    finally:
        page.evaluate("() => window.jupyterapp.serviceManager.sessions.shutdownAll()")
        (lab.workspace / name).unlink(missing_ok=True)
        shutil.rmtree(lab.workspace / FOLDER, ignore_errors=True)
