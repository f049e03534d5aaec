"""What the sidebar's browser tests share: where it is, opening it, and waiting for it to
settle (the panel is ``aria-busy`` while the agent list or a section loads).

Tests wait for states, never for time: a busy machine makes every load slower, and an
assertion made while a load is still running would see the list it is about to replace.
"""

from __future__ import annotations

from playwright.sync_api import Page, expect

SIDEBAR_ID = "jp-agent-memory"
PANEL = f"#{SIDEBAR_ID}"
TAB = f'.jp-SideBar .lm-TabBar-tab[data-id="{SIDEBAR_ID}"]'


def settled(page: Page) -> None:
    """Wait until the sidebar is visible and nothing in it is loading."""
    expect(page.locator(f'{PANEL}[aria-busy="false"]')).to_be_visible()


def open_sidebar(page: Page, agent: str = "default") -> None:
    """Click the Agent Memory tab and wait until it shows ``agent`` with everything loaded."""
    page.locator(TAB).click()
    expect(page.locator(PANEL)).to_be_visible()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-agentPicker")).to_have_value(agent)
    settled(page)


def run_notebook(page: Page, url: str) -> None:
    """Open the notebook at ``url``, wait for its kernel, and start Run All."""
    from pages import KERNEL_IDLE

    page.goto(url)
    page.wait_for_function("() => window.jupyterapp !== undefined")
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
