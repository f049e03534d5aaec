"""The sidebar on par with the panel, in a real JupyterLab (and Notebook 7) through Chromium:
rendered FACT.md through JupyterLab's sanitising Markdown renderer, Open in editor, Ctrl+S and
Escape, SOUL.md and USER.md, FACT.md history with diff and restore, recorded sessions, agents
opened by folder path (file browser context menu, the notebook's active agent).

Screenshots (light and dark) go to ``$AGENT_MEMORY_SCREENSHOTS`` when set, else to the test's
temporary folder.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import nbformat
from conftest import Lab, watch_of
from hostile import ATTACKER_HOST, HOSTILE_FACTS, PAYLOADS
from pages import KERNEL_IDLE, in_both_themes, screenshot_dir
from playwright.sync_api import Page, expect
from sidebar_page import PANEL, open_sidebar, run_notebook
from test_hostile import FIND_LIVE_PAYLOADS

from jupyter_agent_memory import AgentMemory, PromptBuilder


def default_agent(agents_root: Path) -> AgentMemory:
    return AgentMemory.open_id("default", agents_root)




def both_themes(page: Page, folder: Path, name: str) -> None:
    in_both_themes(
        page,
        lambda label: page.locator(PANEL).screenshot(
            path=str(folder / f"sidebar-{name}-{label}.png")
        ),
    )


def test_fact_md_is_rendered_by_jupyterlab_and_runs_nothing(
    page: Page, agents_root: Path, lab: Lab, tmp_path: Path
) -> None:
    mem = default_agent(agents_root)
    mem.update_facts(
        "# Facts\n\n- The user prefers **metric** units.\n- Costs $5 and $6 today.\n"
        "- Raw <b>bold</b> stays text.\n- ![chart](https://example.org/chart.png)\n"
        "- `code <i>kept</i>`\n\n" + HOSTILE_FACTS
    )
    open_sidebar(page)
    rendered = page.locator(f"{PANEL} .jp-AgentMemory-factsRendered")
    expect(rendered.locator("h1").first).to_have_text(re.compile(r"^Facts¶?$"))
    expect(rendered.locator("strong").first).to_have_text("metric")
    # Raw HTML is text, an image is a link, dollars are not typeset, code is left alone.
    expect(rendered).to_contain_text("Raw <b>bold</b> stays text.")
    expect(rendered).to_contain_text("Costs $5 and $6 today.")
    expect(rendered.locator("code").first).to_have_text("code <i>kept</i>")
    expect(rendered.locator('a[href="https://example.org/chart.png"]')).to_have_text(
        "image: chart")
    expect(rendered).to_contain_text("image: chart (https://example.org/chart.png)")
    assert rendered.locator("img, script, iframe, style, svg, math, mjx-container").count() == 0
    for payload in (PAYLOADS["img"], PAYLOADS["script"]):
        expect(rendered).to_contain_text(payload)
    # No element carries a payload's handler, script or URL (the hostile notebook's check).
    assert page.evaluate(FIND_LIVE_PAYLOADS) == []
    watch = watch_of(page)
    assert [u for u in watch.requests if ATTACKER_HOST in u or "example.org" in u] == []
    assert watch.dialogs == [] and watch.errors == []
    # The raw text is one click away.
    view = page.locator(f"{PANEL} .jp-AgentMemory-factsView")
    expect(view).to_be_hidden()
    page.locator(f"{PANEL} .jp-AgentMemory-factsTextToggle").click()
    expect(view).to_be_visible()
    expect(view).to_have_text(mem.facts)
    page.locator(f"{PANEL} .jp-AgentMemory-factsTextToggle").click()
    both_themes(page, screenshot_dir(tmp_path), "rendered")


def test_ctrl_s_saves_and_escape_cancels(page: Page, agents_root: Path) -> None:
    mem = default_agent(agents_root)
    mem.update_facts("- one\n")
    open_sidebar(page)
    editor = page.locator(f"{PANEL} .jp-AgentMemory-factsEditor")
    note = page.locator(f"{PANEL} .jp-AgentMemory-factsNote")
    page.locator(f"{PANEL} .jp-AgentMemory-edit").click()
    editor.fill("- one\n- two\n")
    editor.press("Control+s")
    expect(note).to_contain_text("Saved (sha256")
    expect(editor).to_be_hidden()
    assert mem.facts == "- one\n- two\n"
    # The focus stays in the sidebar, on Edit, not on the page's body.
    edit = page.locator(f"{PANEL} .jp-AgentMemory-edit")
    expect(edit).to_be_focused()

    # Escape with no change cancels at once; with changes it asks for a second Escape.
    page.locator(f"{PANEL} .jp-AgentMemory-edit").click()
    editor.press("Escape")
    expect(editor).to_be_hidden()
    page.locator(f"{PANEL} .jp-AgentMemory-edit").click()
    editor.fill("- typed, then thrown away\n")
    editor.press("Escape")
    expect(editor).to_be_visible()
    expect(note).to_have_text("Press Escape again to discard your edit (Ctrl+S saves it).")
    editor.press("Escape")
    expect(editor).to_be_hidden()
    expect(note).to_have_text("Edit discarded.")
    expect(edit).to_be_focused()
    assert mem.facts == "- one\n- two\n"
    # The browser's own Save dialog never opened, and no notebook was saved.
    assert watch_of(page).dialogs == []


def test_soul_and_user_are_edited_with_compare_and_swap(
    page: Page, agents_root: Path, tmp_path: Path
) -> None:
    mem = default_agent(agents_root)
    mem.write_soul("I am Ada.\n")
    open_sidebar(page)
    page.locator(f"{PANEL} .jp-AgentMemory-persona > summary").click()
    soul = page.locator(f"{PANEL} .jp-AgentMemory-soulView")
    expect(soul).to_have_text("I am Ada.\n")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-userNote")).to_have_text("USER.md is empty.")
    page.locator(f"{PANEL} .jp-AgentMemory-soulEdit").click()
    page.locator(f"{PANEL} .jp-AgentMemory-soulEditor").fill("I am Ada, and careful.\n")
    page.locator(f"{PANEL} .jp-AgentMemory-soulEditor").press("Control+s")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-soulNote")).to_contain_text("Saved (sha256")
    assert mem.soul == "I am Ada, and careful.\n"

    page.locator(f"{PANEL} .jp-AgentMemory-userEdit").click()
    page.locator(f"{PANEL} .jp-AgentMemory-userEditor").fill("Prefers metric.\n")
    mem.write_user("Written by the agent.\n")
    page.locator(f"{PANEL} .jp-AgentMemory-userSave").click()
    conflict = page.locator(f"{PANEL} .jp-AgentMemory-userConflict")
    expect(conflict).to_be_visible()
    both_themes(page, screenshot_dir(tmp_path), "conflict")
    expect(conflict.locator(".jp-AgentMemory-diffLine.jp-mod-added")).to_have_text(
        ["+ Prefers metric."])
    assert mem.user == "Written by the agent.\n"
    conflict.get_by_role("button", name="Overwrite anyway").click()
    expect(conflict).to_be_hidden()
    # The conflict hides as the write starts: the file is read once the sidebar says it saved.
    expect(page.locator(f"{PANEL} .jp-AgentMemory-userNote")).to_contain_text("Saved (sha256")
    assert mem.user == "Prefers metric.\n"


def test_history_diff_and_restore(page: Page, agents_root: Path, tmp_path: Path) -> None:
    mem = default_agent(agents_root)
    first = mem.update_facts("- a\n- b\n")
    mem.update_facts("- a\n- c\n")
    open_sidebar(page)
    page.locator(f"{PANEL} .jp-AgentMemory-history > summary").click()
    versions = page.locator(f"{PANEL} .jp-AgentMemory-version")
    expect(versions).to_have_count(1)
    expect(versions.first.locator(".jp-AgentMemory-versionSha")).to_have_text(f" {first[:12]} ")
    expect(versions.first.locator(".jp-AgentMemory-ago")).to_have_text(" · just now")
    versions.first.locator(".jp-AgentMemory-versionDiff").click()
    diff = page.locator(f"{PANEL} .jp-AgentMemory-historyDiff")
    expect(diff.locator(".jp-mod-removed")).to_have_text(["- - b"])
    expect(diff.locator(".jp-mod-added")).to_have_text(["+ - c"])
    versions.first.locator(".jp-AgentMemory-versionRestore").click()
    page.locator(".jp-Dialog").get_by_role("button", name="Restore").click()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsNote")).to_contain_text(
        f"Restored version {first[:12]}")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsView")).to_have_text("- a\n- b\n")
    assert mem.facts == "- a\n- b\n"
    expect(versions).to_have_count(2)  # the replaced version is kept
    both_themes(page, screenshot_dir(tmp_path), "history")


def test_sessions_prompt_diff_and_why(
    page: Page, agents_root: Path, lab: Lab, tmp_path: Path
) -> None:
    mem = default_agent(agents_root)
    empty_page_note = "No sessions on record yet"
    mem.update_facts("- The user prefers metric units.\n")
    first = PromptBuilder().start_session(mem, lab.workspace, client={"name": "cli"}).receipt
    mem.update_facts("- The user prefers imperial units.\n")
    second = PromptBuilder().start_session(mem, lab.workspace,
                                           client={"name": "ide", "version": "2.0"}).receipt
    open_sidebar(page)
    page.locator(f"{PANEL} .jp-AgentMemory-sessions > summary").click()
    rows = page.locator(f"{PANEL} .jp-AgentMemory-session")
    expect(rows).to_have_count(2)
    expect(rows.first.locator(".jp-AgentMemory-sessionId")).to_have_text(second["session_id"])
    expect(rows.first.locator(".jp-AgentMemory-sessionClient")).to_have_text("ide 2.0")
    expect(rows.first.locator(".jp-AgentMemory-sessionSha")).to_have_text(
        second["prompt_sha256"][:12])
    expect(page.locator(f"{PANEL} .jp-AgentMemory-sessionsNote")).to_have_text(
        "2 sessions on record, newest first.")
    assert empty_page_note not in page.locator(PANEL).text_content()
    # Clicking a session shows the exact prompt it started with.
    rows.nth(1).locator(".jp-AgentMemory-entryMeta").click()
    prompt = page.locator(f"{PANEL} .jp-AgentMemory-sessionPrompt")
    expect(prompt).to_contain_text("- The user prefers metric units.")
    assert prompt.text_content() == mem.session_prompt(first["session_id"])
    page.locator(f"{PANEL} .jp-AgentMemory-sessionOther").select_option(second["session_id"])
    page.locator(f"{PANEL} .jp-AgentMemory-sessionDiff").click()
    output = page.locator(f"{PANEL} .jp-AgentMemory-sessionOutput")
    expect(output.locator(".jp-mod-removed")).to_have_text(["- - The user prefers metric units."])
    expect(output.locator(".jp-mod-added")).to_have_text(["+ - The user prefers imperial units."])
    page.locator(f"{PANEL} .jp-AgentMemory-whyText").fill("metric")
    page.locator(f"{PANEL} .jp-AgentMemory-why").click()
    where = output.locator(".jp-AgentMemory-originWhere")
    (origin,) = mem.why(first["session_id"], "metric")
    expect(where).to_have_text([f"{origin.source} @ {origin.version[:12]} line 1"])
    both_themes(page, screenshot_dir(tmp_path), "sessions")


def test_an_agent_folder_opened_from_the_file_browser(
    page: Page, agents_root: Path, lab: Lab, tmp_path: Path
) -> None:
    folder = lab.workspace / "demo-agent"
    shutil.rmtree(folder, ignore_errors=True)
    mem = AgentMemory.open(folder)
    mem.update_facts("- from the tutorial's own folder\n")
    try:
        page.evaluate("() => window.jupyterapp.commands.execute('filebrowser:refresh')")
        item = page.locator(".jp-DirListing-item", has_text="demo-agent")
        item.click(button="right")
        page.locator(".lm-Menu-item", has_text="Open as Agent Memory").click()
        expect(page.locator(PANEL)).to_be_visible()
        expect(page.locator(f"{PANEL} .jp-AgentMemory-agentPicker")).to_have_value("@demo-agent")
        expect(page.locator(f"{PANEL} .jp-AgentMemory-factsView")).to_have_text(
            "- from the tutorial's own folder\n")
        assert not (agents_root / "demo-agent").exists()
        # Below the server's root, FACT.md opens in JupyterLab's own editor.
        open_button = page.locator(f"{PANEL} .jp-AgentMemory-factsOpenEditor")
        expect(open_button).to_be_enabled()
        open_button.click()
        tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="FACT.md")
        expect(tab).to_be_visible()
        expect(page.locator(".jp-FileEditor .cm-content")).to_contain_text(
            "- from the tutorial's own folder")
        # Edits in the sidebar go to that folder.
        page.locator(f"{PANEL} .jp-AgentMemory-edit").click()
        page.locator(f"{PANEL} .jp-AgentMemory-factsEditor").fill("- edited by path\n")
        page.locator(f"{PANEL} .jp-AgentMemory-save").click()
        expect(page.locator(f"{PANEL} .jp-AgentMemory-factsNote")).to_contain_text("Saved")
        assert mem.facts == "- edited by path\n"
        # The folder vanishes: the sidebar says so and recreates nothing.
        shutil.rmtree(folder)
        page.locator(f"{PANEL} .jp-AgentMemory-refresh").click()
        expect(page.locator(f"{PANEL} .jp-AgentMemory-status")).to_contain_text(
            'The folder "demo-agent" is gone')
        expect(page.locator(f"{PANEL} .jp-AgentMemory-agentPicker")).to_have_value("default")
        assert not folder.exists()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_an_agent_outside_the_server_root_has_no_open_in_editor(
    page: Page, agents_root: Path
) -> None:
    default_agent(agents_root).update_facts("- x\n")
    open_sidebar(page)
    # No button that does nothing: the reason is said in the sidebar itself.
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsOpenEditor")).to_be_hidden()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsOpenNote")).to_have_text(
        "JupyterLab's editor cannot open FACT.md here: it is outside the server's root. "
        "Edit it with Edit above, or start JupyterLab in a folder above it.")


def test_the_notebooks_active_agent(new_page: Any, lab: Lab, agents_root: Path) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("%load_ext jupyter_agent_memory"),
                      nbformat.v4.new_code_cell("%agent_memory ./nb-agent"),
                      nbformat.v4.new_code_cell("%journal append from the notebook")]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    nbformat.write(notebook, lab.workspace / "active.ipynb")
    page = new_page()
    try:
        run_notebook(page, lab.lab_url("active.ipynb"))
        expect(page.get_by_text("Journal entry added at")).to_be_visible(timeout=60_000)
        page.wait_for_function(KERNEL_IDLE, timeout=60_000)
        page.evaluate(
            "() => window.jupyterapp.commands.execute('agent-memory:open-notebook-agent')")
        expect(page.locator(f"{PANEL} .jp-AgentMemory-agentPicker")).to_have_value("@nb-agent")
        expect(page.locator(f"{PANEL} .jp-AgentMemory-entryText")).to_have_text(
            ["from the notebook"])
        assert not (agents_root / "nb-agent").exists()
    finally:
        page.evaluate("() => window.jupyterapp.serviceManager.sessions.shutdownAll()")
        (lab.workspace / "active.ipynb").unlink(missing_ok=True)
        shutil.rmtree(lab.workspace / "nb-agent", ignore_errors=True)


def test_notebook7_loads_the_sidebar_quietly(
    new_page: Any, lab: Lab, agents_root: Path, tmp_path: Path
) -> None:
    default_agent(agents_root).update_facts("- seen in Notebook 7\n")
    messages: list[str] = []
    page = new_page()
    page.on("console", lambda message: messages.append(message.text))
    page.goto(f"{lab.url}tree?token={lab.token}")
    page.wait_for_function("() => window.jupyterapp !== undefined")
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    expect(page.locator(".jp-DirListing")).to_be_visible()
    page.evaluate("() => window.jupyterapp.commands.execute('agent-memory:open')")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsView")).to_have_text(
        "- seen in Notebook 7\n")
    page.screenshot(path=str(screenshot_dir(tmp_path) / "sidebar-notebook7-tree.png"))
    assert [m for m in messages if "No provider for" in m] == []
    ours = [e for e in watch_of(page).errors if "agent-memory" in e.lower()]
    assert ours == []


def test_journal_matches_are_highlighted_as_text(page: Page, agents_root: Path) -> None:
    mem = default_agent(agents_root)
    mem.append(PAYLOADS["img"] + " then <b>IMG</b> again", ["odd"])
    open_sidebar(page)
    query = page.locator(f"{PANEL} .jp-AgentMemory-query")
    query.fill("<img")
    query.press("Enter")  # a change searches, as the Search button does
    entries = page.locator(f"{PANEL} .jp-AgentMemory-entryText")
    expect(entries).to_have_count(1)
    expect(entries.locator("mark")).to_have_text(["<img"])
    expect(entries).to_have_text(PAYLOADS["img"] + " then <b>IMG</b> again")
    assert entries.locator("img, b").count() == 0
    assert page.evaluate(FIND_LIVE_PAYLOADS) == []
    assert watch_of(page).dialogs == []
