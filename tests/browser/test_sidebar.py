"""The Agent Memory sidebar in a real JupyterLab, driven through Chromium.

Memory is written and checked through the engine and the files on disk, so each test proves
the whole path: engine -> REST API -> sidebar -> REST API -> engine.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect
from sidebar_page import PANEL, TAB, open_sidebar, settled

from jupyter_agent_memory import AgentMemory


def default_agent(agents_root: Path) -> AgentMemory:
    """The agent the sidebar starts on, as the engine sees it."""
    return AgentMemory.open_id("default", agents_root)




def test_sidebar_shows_facts_written_by_engine(page: Page, agents_root: Path) -> None:
    mem = default_agent(agents_root)
    mem.update_facts("- The user's cat is called Miso.\n")
    expect(page.locator(TAB)).to_have_attribute("title", "Agent Memory")
    open_sidebar(page)
    view = page.locator(f"{PANEL} .jp-AgentMemory-factsView")
    expect(view).to_have_text("- The user's cat is called Miso.\n")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-path")).to_have_text(
        str(mem.path / "memory" / "FACT.md")
    )


def test_sidebar_creates_the_default_agent(page: Page, agents_root: Path) -> None:
    assert not (agents_root / "default").exists()
    open_sidebar(page)
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsNote")).to_have_text("FACT.md is empty.")
    assert (agents_root / "default" / "memory").is_dir()


def test_command_palette_opens_sidebar(page: Page, agents_root: Path) -> None:
    default_agent(agents_root).update_facts("- from the palette test\n")
    expect(page.locator(PANEL)).to_be_hidden()
    # The palette's own command, not its key: a key pressed before the shell listens is lost.
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:activate-command-palette')")
    palette = page.locator("#command-palette")
    search = palette.locator("input")
    expect(search).to_be_focused()
    search.fill("Open Agent Memory")
    item = palette.locator('.lm-CommandPalette-item[data-command="agent-memory:open"]')
    expect(item).to_be_visible()
    item.click()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsView")).to_have_text(
        "- from the palette test\n"
    )
    settled(page)
    # The keyboard came along: the focus is in the sidebar, on the agent picker.
    expect(page.locator(f"{PANEL} .jp-AgentMemory-agentPicker")).to_be_focused()


def test_edit_and_save_writes_the_file(page: Page, agents_root: Path) -> None:
    mem = default_agent(agents_root)
    mem.update_facts("- old fact\n")
    open_sidebar(page)
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsView")).to_have_text("- old fact\n")
    save = page.locator(f"{PANEL} .jp-AgentMemory-save")
    editor = page.locator(f"{PANEL} .jp-AgentMemory-factsEditor")
    expect(save).to_be_hidden()
    expect(editor).to_be_hidden()
    page.locator(f"{PANEL} .jp-AgentMemory-edit").click()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-edit")).to_be_hidden()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-agentPicker")).to_be_disabled()
    expect(editor).to_have_value("- old fact\n")
    editor.fill("- new fact, saved from the sidebar ✓\n")
    save.click()
    new_sha = hashlib.sha256("- new fact, saved from the sidebar ✓\n".encode()).hexdigest()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsNote")).to_have_text(
        f"Saved (sha256 {new_sha[:12]})."
    )
    expect(save).to_be_hidden()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsView")).to_have_text(
        "- new fact, saved from the sidebar ✓\n"
    )
    fact = mem.path / "memory" / "FACT.md"
    assert fact.read_text(encoding="utf-8") == "- new fact, saved from the sidebar ✓\n"
    # The previous version went to history, as for every engine update.
    assert [v["size"] for v in mem.history()] == [len("- old fact\n")]


def test_conflict_shows_hashes_a_diff_and_reload_shows_current_file(
    page: Page, agents_root: Path
) -> None:
    mem = default_agent(agents_root)
    seen = mem.update_facts("- seen by the editor\n")
    open_sidebar(page)
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsView")).to_have_text(
        "- seen by the editor\n"
    )
    page.locator(f"{PANEL} .jp-AgentMemory-edit").click()
    page.locator(f"{PANEL} .jp-AgentMemory-factsEditor").fill("- my edit\n")
    # An agent writes FACT.md while the user is typing.
    now = mem.update_facts("- written by the agent meanwhile\n")
    page.locator(f"{PANEL} .jp-AgentMemory-save").click()

    conflict = page.locator(f"{PANEL} .jp-AgentMemory-factsConflict")
    expect(conflict).to_be_visible()
    detail = conflict.locator(".jp-AgentMemory-conflictDetail")
    expect(detail).to_contain_text(f"You started from {seen[:12]}; it is now {now[:12]}.")
    expect(detail).to_contain_text("Nothing was written.")
    assert seen not in detail.text_content() and now not in detail.text_content()
    expect(conflict.locator(".jp-AgentMemory-diffLine.jp-mod-removed")).to_have_text(
        ["- - written by the agent meanwhile"]
    )
    expect(conflict.locator(".jp-AgentMemory-diffLine.jp-mod-added")).to_have_text(
        ["+ - my edit"]
    )
    expect(conflict.locator("button")).to_have_text(
        ["Reload", "Keep editing", "Overwrite anyway"]
    )
    assert mem.facts == "- written by the agent meanwhile\n"
    conflict.get_by_role("button", name="Reload").click()
    expect(conflict).to_be_hidden()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsView")).to_have_text(
        "- written by the agent meanwhile\n"
    )
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsNote")).to_have_text(
        "Reloaded the current FACT.md; your edit was discarded."
    )
    assert mem.facts == "- written by the agent meanwhile\n"


def test_conflict_keep_editing_then_overwrite_anyway(page: Page, agents_root: Path) -> None:
    mem = default_agent(agents_root)
    mem.update_facts("- v1\n")
    open_sidebar(page)
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsView")).to_have_text("- v1\n")
    page.locator(f"{PANEL} .jp-AgentMemory-edit").click()
    editor = page.locator(f"{PANEL} .jp-AgentMemory-factsEditor")
    editor.fill("- my careful edit\n")
    mem.update_facts("- v2 from the agent\n")
    page.locator(f"{PANEL} .jp-AgentMemory-save").click()
    conflict = page.locator(f"{PANEL} .jp-AgentMemory-factsConflict")
    conflict.get_by_role("button", name="Keep editing").click()
    expect(conflict).to_be_hidden()
    expect(editor).to_be_visible()
    expect(editor).to_have_value("- my careful edit\n")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsNote")).to_contain_text("not saved")
    assert mem.facts == "- v2 from the agent\n"

    # Saving again shows the conflict again; the agent writes once more after it was shown,
    # so Overwrite anyway (a compare-and-swap against the version shown) must refuse.
    page.locator(f"{PANEL} .jp-AgentMemory-save").click()
    expect(conflict).to_be_visible()
    v3 = mem.update_facts("- v3 from the agent\n")
    conflict.get_by_role("button", name="Overwrite anyway").click()
    expect(conflict.locator(".jp-AgentMemory-conflictDetail")).to_contain_text(
        f"it is now {v3[:12]}"
    )
    assert mem.facts == "- v3 from the agent\n"
    # Now nothing moves between showing and overwriting: the edit is written.
    conflict.get_by_role("button", name="Overwrite anyway").click()
    expect(conflict).to_be_hidden()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsNote")).to_contain_text("Saved (sha256")
    assert mem.facts == "- my careful edit\n"
    assert "- v3 from the agent\n" in [mem.history_text(v["sha256"]) for v in mem.history()]


def test_journal_search_and_append(page: Page, agents_root: Path) -> None:
    mem = default_agent(agents_root)
    mem.append("Compared two retrieval settings", tags=["eval"])
    mem.append("Lunch with the team", tags=["life"])
    mem.append("Eval run 2 finished: recall up", tags=["eval", "run"])
    open_sidebar(page)
    entries = page.locator(f"{PANEL} .jp-AgentMemory-entryText")
    expect(entries).to_have_text(
        ["Eval run 2 finished: recall up", "Lunch with the team", "Compared two retrieval settings"]
    )

    page.locator(f"{PANEL} .jp-AgentMemory-query").fill("RECALL")
    page.locator(f"{PANEL} .jp-AgentMemory-search").click()
    expect(entries).to_have_text(["Eval run 2 finished: recall up"])
    expect(entries.locator("mark")).to_have_text(["recall"])

    page.locator(f"{PANEL} .jp-AgentMemory-query").fill("")
    page.locator(f"{PANEL} .jp-AgentMemory-tag").fill("EVAL")
    page.locator(f"{PANEL} .jp-AgentMemory-limit").fill("1")
    page.locator(f"{PANEL} .jp-AgentMemory-search").click()
    expect(entries).to_have_text(["Eval run 2 finished: recall up"])

    page.locator(f"{PANEL} .jp-AgentMemory-tag").fill("")
    page.locator(f"{PANEL} .jp-AgentMemory-limit").fill("20")
    page.locator(f"{PANEL} .jp-AgentMemory-appendText").fill("Noted from the sidebar")
    page.locator(f"{PANEL} .jp-AgentMemory-appendTags").fill("ui, manual")
    page.locator(f"{PANEL} .jp-AgentMemory-append").click()
    expect(entries.first).to_have_text("Noted from the sidebar")
    last = list(mem.entries())[-1]
    assert (last["text"], last["tags"]) == ("Noted from the sidebar", ["ui", "manual"])
    # The time to the minute, as people read it (the stored ISO value has microseconds).
    expect(page.locator(f"{PANEL} .jp-AgentMemory-journalNote")).to_have_text(
        re.compile(r"^Journal entry added at \d{4}-\d\d-\d\d \d\d:\d\d\.$")
    )
    ts = entries.first.locator("xpath=..").locator(".jp-AgentMemory-entryTs")
    expect(ts).to_have_attribute("datetime", last["ts"])
    expect(ts).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d · just now$"))


def test_prompt_preview_shows_facts_and_sizes(page: Page, agents_root: Path) -> None:
    mem = default_agent(agents_root)
    mem.update_facts("- Prefers answers in metric units.\n")
    open_sidebar(page)
    prompt = page.locator(f"{PANEL} .jp-AgentMemory-promptText")
    expect(prompt).to_contain_text("## Memories")
    expect(prompt).to_contain_text("<facts>\n- Prefers answers in metric units.\n</facts>")
    block = "<facts>\n- Prefers answers in metric units.\n</facts>"
    row = page.locator(f"{PANEL} .jp-AgentMemory-promptSection", has_text="facts")
    expect(row.locator("td")).to_have_text(["facts", str(len(block)), str((len(block) + 3) // 4)])
    expect(page.locator(f"{PANEL} .jp-AgentMemory-promptSummary")).to_contain_text("tokens")


def test_sidebar_refreshes_when_shown_again(page: Page, agents_root: Path) -> None:
    mem = default_agent(agents_root)
    mem.update_facts("- first\n")
    open_sidebar(page)
    view = page.locator(f"{PANEL} .jp-AgentMemory-factsView")
    expect(view).to_have_text("- first\n")
    page.locator(TAB).click()  # collapse the left area
    expect(page.locator(PANEL)).to_be_hidden()
    mem.update_facts("- changed while hidden\n")
    page.locator(TAB).click()
    expect(view).to_have_text("- changed while hidden\n")


def test_writes_need_the_xsrf_header(page: Page, lab: Any, agents_root: Path) -> None:
    mem = default_agent(agents_root)
    mem.update_facts("- keep\n")
    # The page is cookie-authenticated; a write without the XSRF header must be refused.
    status = page.evaluate(
        """async () => {
            const r = await fetch('/agent-memory/api/agents/default/facts', {
                method: 'PUT', body: JSON.stringify({content: 'pwned'}),
                headers: {'Content-Type': 'application/json'}});
            return r.status;
        }"""
    )
    assert status == 403
    assert mem.facts == "- keep\n"
    result = page.evaluate(
        """async () => {
            const xsrf = document.cookie.split('; ').find(c => c.startsWith('_xsrf='));
            const r = await fetch('/agent-memory/api/agents/default/facts', {
                method: 'PUT', body: JSON.stringify({content: '- with header\\n'}),
                headers: {'Content-Type': 'application/json',
                          'X-XSRFToken': decodeURIComponent(xsrf.slice(6))}});
            return [r.status, await r.text()];
        }"""
    )
    assert result[0] == 200, result
    assert json.loads(result[1])["agent"] == "default"
    assert mem.facts == "- with header\n"


def test_new_agent_from_template_and_switching(page: Page, agents_root: Path) -> None:
    default_agent(agents_root).update_facts("- default's fact\n")
    open_sidebar(page)
    page.locator(f"{PANEL} .jp-AgentMemory-newAgent").click()
    dialog = page.locator(".jp-Dialog")
    dialog.locator("input").fill("tutor")
    dialog.get_by_role("button", name="OK").click()
    expect(page.locator(".jp-Dialog-header")).to_have_text('Template for "tutor"')
    page.locator(".jp-Dialog select").select_option("guide")
    page.locator(".jp-Dialog").get_by_role("button", name="OK").click()
    picker = page.locator(f"{PANEL} .jp-AgentMemory-agentPicker")
    expect(picker).to_have_value("tutor")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-status")).to_have_text(
        f'Created agent "tutor" in {(agents_root / "tutor").resolve()}.'
    )
    tutor = AgentMemory.open_id("tutor", agents_root)
    assert tutor.template_info()["template"] == "guide"
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsView")).to_have_text(tutor.facts)

    picker.select_option("default")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsView")).to_have_text("- default's fact\n")
    expect(picker.locator("option")).to_have_text(["default", "tutor"])


def test_removed_agent_falls_back_to_default(page: Page, agents_root: Path) -> None:
    default_agent(agents_root).update_facts("- default's fact\n")
    gone = AgentMemory.open_id("gone", agents_root)
    gone.update_facts("- soon deleted\n")
    open_sidebar(page)
    picker = page.locator(f"{PANEL} .jp-AgentMemory-agentPicker")
    picker.select_option("gone")
    view = page.locator(f"{PANEL} .jp-AgentMemory-factsView")
    expect(view).to_have_text("- soon deleted\n")
    shutil.rmtree(gone.path)
    page.locator(f"{PANEL} .jp-AgentMemory-refresh").click()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-status")).to_have_text(
        'Agent "gone" no longer exists; showing the default agent.'
    )
    expect(picker).to_have_value("default")
    expect(view).to_have_text("- default's fact\n")
    assert not gone.path.exists(), "a removed agent is never re-created"
