"""The sidebar for keyboard and screen-reader users, in JupyterLab and Notebook 7, light and
dark: axe-core finds nothing critical or serious, and every highlight and status colour has
at least 4.5:1 contrast (computed: axe leaves text over a highlight "incomplete")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from axe import low_contrast, serious_violations
from conftest import Lab
from pages import THEMES, set_theme
from playwright.sync_api import Page, expect
from sidebar_page import PANEL, open_sidebar, settled

from jupyter_agent_memory import AgentMemory, PromptBuilder

#: Text whose colour the sidebar sets itself: highlights, status lines, notes, diffs, times.
COLOURED = (".jp-AgentMemory-match, .jp-mod-error, .jp-mod-warn, .jp-AgentMemory-note, "
            ".jp-AgentMemory-status, .jp-AgentMemory-diffLine, .jp-AgentMemory-ago, "
            ".jp-AgentMemory-entryMeta, .jp-AgentMemory-path, .jp-AgentMemory-promptSummary")


def fill_memory(agents_root: Path, workspace: Path) -> None:
    mem = AgentMemory.open_id("default", agents_root)
    mem.update_facts("# Facts\n\n- The user prefers metric units.\n")
    mem.update_facts("# Facts\n\n- The user prefers metric units.\n- Reports on Fridays.\n")
    mem.append("Finished the quarterly report", tags=["work"])
    mem.append("Report review went well", tags=["work", "review"])
    PromptBuilder().start_session(mem, workspace, client={"name": "cli"})


def show_everything(page: Page) -> None:
    """Open every section, search with a highlight, and show a diff and an error."""
    for section in ("persona", "sessions"):
        page.locator(f"{PANEL} .jp-AgentMemory-{section} > summary").click()
    page.locator(f"{PANEL} .jp-AgentMemory-history > summary").click()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-version")).to_have_count(1)
    page.locator(f"{PANEL} .jp-AgentMemory-versionDiff").click()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-historyDiff .jp-mod-added")).to_have_count(1)
    expect(page.locator(f"{PANEL} .jp-AgentMemory-session")).to_have_count(1)
    query = page.locator(f"{PANEL} .jp-AgentMemory-query")
    query.fill("report")
    query.press("Enter")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-entryText mark")).to_have_count(2)
    page.locator(f"{PANEL} .jp-AgentMemory-sessionDiff").click()  # no second session: an error
    expect(page.locator(f"{PANEL} .jp-AgentMemory-sessionOutput .jp-mod-error")).to_be_visible()
    settled(page)


def check(page: Page) -> None:
    for theme, label in THEMES:
        set_theme(page, theme)
        assert serious_violations(page, PANEL) == [], label
        assert low_contrast(page, PANEL, COLOURED) == [], label


def test_sidebar_in_jupyterlab_has_no_serious_a11y_violations(
    page: Page, agents_root: Path, lab: Lab
) -> None:
    fill_memory(agents_root, lab.workspace)
    open_sidebar(page)
    show_everything(page)
    check(page)
    # The editor too, with its label.
    page.locator(f"{PANEL} .jp-AgentMemory-edit").click()
    expect(page.get_by_role("textbox", name="Edit FACT.md")).to_be_focused()
    check(page)


def test_sidebar_in_notebook7_has_no_serious_a11y_violations(
    new_page: Any, agents_root: Path, lab: Lab
) -> None:
    fill_memory(agents_root, lab.workspace)
    page = new_page()
    page.goto(f"{lab.url}tree?token={lab.token}")
    page.wait_for_function("() => window.jupyterapp !== undefined")
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    page.evaluate("() => window.jupyterapp.commands.execute('agent-memory:open')")
    facts = page.locator(f"{PANEL} .jp-AgentMemory-factsView")
    expect(facts).to_contain_text("Reports on Fridays.")
    settled(page)
    show_everything(page)
    check(page)


@pytest.mark.parametrize("theme", [t for t, _ in THEMES])
def test_every_control_shows_where_the_focus_is(page: Page, agents_root: Path, theme: str) -> None:
    AgentMemory.open_id("default", agents_root)
    open_sidebar(page)
    set_theme(page, theme)
    picker = page.locator(f"{PANEL} .jp-AgentMemory-agentPicker")
    picker.focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")  # a keyboard focus, so :focus-visible applies
    expect(picker).to_be_focused()
    outline = picker.evaluate("n => getComputedStyle(n).outlineStyle + ' ' + "
                              "getComputedStyle(n).outlineWidth")
    assert outline == "solid 2px"
