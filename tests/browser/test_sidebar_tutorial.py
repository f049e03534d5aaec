"""The quickstart and the sidebar meet: the tutorial's agent lives in a temporary folder
outside the server's root, and the sidebar follows it as the tutorial says."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import nbformat
from conftest import Lab, watch_of
from pages import KERNEL_IDLE
from playwright.sync_api import expect
from sidebar_page import PANEL, TAB, run_notebook, settled

QUICKSTART = Path(__file__).resolve().parents[2] / "notebooks" / "01-quickstart.ipynb"


def test_the_quickstart_tells_the_user_to_open_the_sidebar_and_it_follows(
    new_page: Any, lab: Lab, agents_root: Path
) -> None:
    told = [cell.source for cell in nbformat.read(QUICKSTART, as_version=4).cells
            if cell.cell_type == "markdown" and "Agent Memory** sidebar" in cell.source]
    assert len(told) == 1 and "Show the\nNotebook's Agent Memory" in told[0]
    shutil.copy(QUICKSTART, lab.workspace / "quickstart.ipynb")
    page = new_page()
    try:
        run_notebook(page, lab.lab_url("quickstart.ipynb"))
        printed = page.locator(".jp-OutputArea-output pre", has_text="The tutorial folder:")
        expect(printed).to_be_visible(timeout=120_000)
        page.wait_for_function(KERNEL_IDLE, timeout=60_000)
        folder = printed.inner_text().split(": ", 1)[1].strip()
        agent = Path(folder) / "demo-agent"
        assert not agent.resolve().is_relative_to(lab.workspace.resolve())

        # As the tutorial says: the bookmark icon in the left bar.
        page.locator(TAB).click()
        picker = page.locator(f"{PANEL} .jp-AgentMemory-agentPicker")
        expect(picker).to_have_value(re.compile(r"^~[0-9a-f]{16}$"))
        settled(page)
        expect(picker.locator("option:checked")).to_have_text(
            f"{agent.resolve()} (notebook's agent)")
        rendered = page.locator(f"{PANEL} .jp-AgentMemory-factsRendered")
        expect(rendered).to_contain_text("The user wants metric units.")
        expect(rendered).to_contain_text("Reports are due on Fridays.")
        expect(page.locator(f"{PANEL} .jp-AgentMemory-entryText").first).to_contain_text("Q3")

        # And from the command palette's command: the same agent, nothing refused.
        page.evaluate("() => window.jupyterapp.commands.execute("
                      "'agent-memory:open-notebook-agent')")
        settled(page)
        expect(page.locator(f"{PANEL} .jp-AgentMemory-status")).not_to_have_class(
            re.compile("jp-mod-error"))
        assert watch_of(page).dialogs == []
    finally:
        page.evaluate("() => window.jupyterapp.serviceManager.sessions.shutdownAll()")
        (lab.workspace / "quickstart.ipynb").unlink(missing_ok=True)
