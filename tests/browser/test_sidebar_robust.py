"""The sidebar against journals written by other tools, failing loads and hostile text.

Any JSON object on a journal line is an entry, whatever its values; a failed load must never
leave another agent's memory on screen, and Save must never write without the hash of the
FACT.md version the sidebar showed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from conftest import watch_of
from hostile import PAYLOADS
from pages import screenshot_dir, set_theme
from playwright.sync_api import Page, expect
from sidebar_page import PANEL, open_sidebar, settled

from jupyter_agent_memory import AgentMemory

HUGE = 1_500_000  # characters in one entry's text (a megabyte and a half)
SHOWN = 2000  # MAX_SHOWN_CHARS in labextension/src/dom.ts

LIVE_PAYLOADS = """
() => [...document.querySelectorAll('*')].filter(node =>
  [...node.attributes].some(a => a.name.startsWith('on') && /alert\\(|fetch\\(/.test(a.value))
).map(node => node.outerHTML.slice(0, 120))
"""




def write_lines(mem: AgentMemory, entries: list[Any]) -> None:
    """Append JSON lines as another tool would, bypassing the engine's entry shape."""
    with (mem.path / "memory" / "JOURNAL.jsonl").open("a", encoding="utf-8") as f:
        for entry in entries:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")


TS = "2026-11-30T10:00:00.000Z"
ODD_ENTRIES: list[dict[str, Any]] = [
    {"ts": TS, "tags": "solo", "text": "tags is a string"},
    {"ts": TS, "tags": 5, "text": "tags is a number"},
    {"ts": TS, "tags": None, "text": "tags is null"},
    {"ts": TS, "tags": ["ok", 7, {"k": "v"}, None], "text": "odd tag items"},
    {"ts": TS, "tags": [], "text": 42},
    {"ts": TS, "tags": [], "text": None},
    {"ts": TS, "tags": [], "text": {"nested": ["a", 1]}},
    {"tags": ["no-ts"], "text": "no ts"},
    {"ts": 1234, "text": "numeric ts, no tags"},
    {"ts": TS, "tags": ["x"], "text": "extra keys", "source": "other-tool", "score": 0.5,
     "__proto__": {"polluted": True}, "constructor": "c"},
    {},
    {"ts": TS, "tags": [PAYLOADS["svg"]], "text": PAYLOADS["img"],
     PAYLOADS["script"]: PAYLOADS["details"]},
    {"ts": TS, "tags": ["big"], "text": "A" * HUGE},
]
# What each entry's text area shows, newest (last written) first.
SHOWN_TEXTS = [
    "A" * SHOWN + "…" + f"Show all ({HUGE:,} characters)",
    PAYLOADS["img"],
    "",
    "extra keys",
    "numeric ts, no tags",
    "no ts",
    '{"nested":["a",1]}',
    "null",
    "42",
    "odd tag items",
    "tags is null",
    "tags is a number",
    "tags is a string",
]


def test_sidebar_renders_any_json_entry(page: Page, agents_root: Path, tmp_path: Path) -> None:
    mem = AgentMemory.open_id("default", agents_root)
    mem.append("written by the engine", tags=["normal"])
    write_lines(mem, ODD_ENTRIES)
    open_sidebar(page)
    texts = page.locator(f"{PANEL} .jp-AgentMemory-entryText")
    expect(texts).to_have_text([*SHOWN_TEXTS, "written by the engine"])
    expect(page.locator(f"{PANEL} .jp-AgentMemory-journalNote")).to_have_text(
        f"{len(ODD_ENTRIES) + 1} entries, newest first."
    )
    entries = page.locator(f"{PANEL} .jp-AgentMemory-entry")
    # Newest first: index i shows ODD_ENTRIES[-1 - i].
    def entry(index: int) -> Any:
        return entries.nth(len(ODD_ENTRIES) - 1 - index)

    # Only string items of a tags list are clickable tags; other values are shown as JSON.
    expect(entry(0).locator("button.jp-AgentMemory-entryTag")).to_have_count(0)
    expect(entry(0).locator(".jp-AgentMemory-entryTag")).to_have_text(["solo"])
    expect(entry(1).locator(".jp-AgentMemory-entryTag")).to_have_text(["5"])
    expect(entry(2).locator(".jp-AgentMemory-entryTag")).to_have_count(0)
    expect(entry(3).locator(".jp-AgentMemory-entryTag")).to_have_text(
        ["ok", "7", '{"k":"v"}', "null"]
    )
    expect(entry(3).locator("button.jp-AgentMemory-entryTag")).to_have_text(["ok"])
    expect(entry(7).locator(".jp-AgentMemory-entryTs")).to_have_text("")
    expect(entry(8).locator(".jp-AgentMemory-entryTs")).to_have_text("1234")
    expect(entry(9).locator(".jp-AgentMemory-entryExtraKey")).to_have_text(
        ["source", "score", "__proto__", "constructor"]
    )
    expect(entry(9).locator(".jp-AgentMemory-entryExtraValue")).to_have_text(
        ["other-tool", "0.5", '{"polluted":true}', "c"]
    )
    assert page.evaluate("() => ({}).polluted === undefined")
    # Hostile text, tags and keys are text.
    expect(entry(11).locator(".jp-AgentMemory-entryTag")).to_have_text([PAYLOADS["svg"]])
    expect(entry(11).locator(".jp-AgentMemory-entryExtraKey")).to_have_text([PAYLOADS["script"]])
    expect(entry(11).locator(".jp-AgentMemory-entryExtraValue")).to_have_text(
        [PAYLOADS["details"]]
    )
    assert page.evaluate(LIVE_PAYLOADS) == []
    for theme, label in (("JupyterLab Dark", "dark"), ("JupyterLab Light", "light")):
        set_theme(page, theme)
        entry(9).scroll_into_view_if_needed()
        shot = screenshot_dir(tmp_path) / f"sidebar-odd-{label}.png"
        page.screenshot(path=str(shot))
    # The huge entry is cut until asked for.
    big = entry(12).locator(".jp-AgentMemory-entryText")
    big.get_by_role("button", name=f"Show all ({HUGE:,} characters)").click()
    expect(big.get_by_role("button")).to_have_count(0)
    full = big.locator("textarea.jp-AgentMemory-fullText")
    expect(full).to_have_attribute("readonly", "")
    assert full.evaluate("node => node.value") == "A" * HUGE
    # A refresh that finds the same entries keeps their nodes: the opened entry stays open.
    full.evaluate("node => { node.dataset.kept = 'yes'; }")
    with page.expect_response(lambda r: r.request.method == "GET" and "/journal" in r.url):
        page.locator(f"{PANEL} .jp-AgentMemory-refresh").click()
    settled(page)
    expect(big.locator("textarea.jp-AgentMemory-fullText[data-kept='yes']")).to_have_count(1)
    # A clickable tag still searches.
    entry(3).get_by_role("button", name="ok").click()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-tag")).to_have_value("ok")
    expect(texts).to_have_text(["odd tag items"])
    watch = watch_of(page)
    assert (watch.dialogs, watch.errors) == ([], [])


DETACHED_REFRESH = """
async () => {
  const panel = [...window.jupyterapp.shell.widgets('left')].find(w => w.id === 'jp-agent-memory');
  panel.parent = null;  // detached, as Notebook 7 can hold it before it shows it
  await panel.refresh();
  const picker = panel.node.querySelector('.jp-AgentMemory-agentPicker');
  return {
    attached: panel.isAttached,
    facts: panel.node.querySelector('.jp-AgentMemory-factsView').textContent,
    agents: [...picker.options].map(option => option.value),
  };
}
"""


def test_a_load_finished_before_the_sidebar_is_attached_still_fills_it(
    page: Page, agents_root: Path
) -> None:
    mem = AgentMemory.open_id("default", agents_root)
    mem.update_facts("- before\n")
    AgentMemory.open_id("tutor", agents_root)
    open_sidebar(page)
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsView")).to_have_text("- before\n")
    mem.update_facts("- loaded while detached\n")
    AgentMemory.open_id("zeta", agents_root)
    shown = page.evaluate(DETACHED_REFRESH)
    assert shown == {
        "attached": False,
        "facts": "- loaded while detached\n",
        "agents": ["default", "tutor", "zeta"],
    }


def test_switching_agents_never_shows_the_previous_agents_memory(
    page: Page, agents_root: Path
) -> None:
    AgentMemory.open_id("default", agents_root).append("default's entry", tags=["mine"])
    AgentMemory.open_id("default", agents_root).update_facts("- default's fact\n")
    broken = AgentMemory.open_id("broken", agents_root)
    # Its journal and FACT.md cannot be read: a directory, and a link the engine refuses.
    (broken.path / "memory" / "JOURNAL.jsonl").mkdir()
    outside = agents_root.parent / "outside-fact.md"
    outside.write_text("- not this agent's fact\n")
    fact = broken.path / "memory" / "FACT.md"
    fact.unlink(missing_ok=True)
    fact.symlink_to(outside)
    odd = AgentMemory.open_id("odd", agents_root)
    write_lines(odd, [{"ts": TS, "tags": 5, "text": "odd's entry"}])

    open_sidebar(page)
    texts = page.locator(f"{PANEL} .jp-AgentMemory-entryText")
    view = page.locator(f"{PANEL} .jp-AgentMemory-factsView")
    expect(texts).to_have_text(["default's entry"])
    expect(view).to_have_text("- default's fact\n")
    picker = page.locator(f"{PANEL} .jp-AgentMemory-agentPicker")

    picker.select_option("broken")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-journalNote")).to_have_class(
        "jp-AgentMemory-note jp-AgentMemory-journalNote jp-mod-error"
    )
    expect(texts).to_have_count(0)
    expect(view).to_have_text("")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-path")).to_have_text("")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-edit")).to_be_disabled()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsNote")).to_contain_text(
        "Could not load FACT.md: Refusing to use"
    )

    # One entry whose tags is not a list used to stop rendering and keep the old list.
    picker.select_option("odd")
    expect(texts).to_have_text(["odd's entry"])
    expect(page.locator(f"{PANEL} .jp-AgentMemory-entryTag")).to_have_text(["5"])
    expect(view).to_have_text("")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsNote")).to_have_text("FACT.md is empty.")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-edit")).to_be_enabled()
    assert watch_of(page).errors == []


def test_save_never_writes_without_the_hash_it_showed(page: Page, agents_root: Path) -> None:
    mem = AgentMemory.open_id("default", agents_root)
    outside = agents_root.parent / "outside-fact.md"
    outside.write_text("- outside\n")
    fact = mem.path / "memory" / "FACT.md"
    fact.unlink(missing_ok=True)
    fact.symlink_to(outside)
    writes: list[dict[str, Any]] = []
    # Only this API's writes: JupyterLab itself PUTs its workspace layout now and then.
    page.on("request", lambda request: writes.append(json.loads(request.post_data or "{}"))
            if request.method == "PUT" and "/agent-memory/api/" in request.url else None)

    open_sidebar(page)
    note = page.locator(f"{PANEL} .jp-AgentMemory-factsNote")
    expect(note).to_have_class("jp-AgentMemory-note jp-AgentMemory-factsNote jp-mod-error")
    edit = page.locator(f"{PANEL} .jp-AgentMemory-edit")
    expect(edit).to_be_disabled()
    expect(note).to_contain_text("Could not load FACT.md: Refusing to use")
    # Even a forced click starts no edit: there is no version to compare a save with.
    edit.evaluate("button => { button.disabled = false; button.click(); }")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsEditor")).to_be_hidden()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-save")).to_be_hidden()

    # The file is repaired (by the agent); the sidebar shows it once it loads.
    fact.unlink()
    fact.write_text("- written by the agent\n", encoding="utf-8")
    page.locator(f"{PANEL} .jp-AgentMemory-refresh").click()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsView")).to_have_text(
        "- written by the agent\n"
    )
    expect(edit).to_be_enabled()
    assert writes == []
    edit.click()
    page.locator(f"{PANEL} .jp-AgentMemory-factsEditor").fill("- edited in the sidebar\n")
    page.locator(f"{PANEL} .jp-AgentMemory-save").click()
    saved = hashlib.sha256(b"- edited in the sidebar\n").hexdigest()
    expect(note).to_have_text(f"Saved (sha256 {saved[:12]}).")
    shown = hashlib.sha256(b"- written by the agent\n").hexdigest()
    assert writes == [{"content": "- edited in the sidebar\n", "expected_sha256": shown}]
    assert mem.facts == "- edited in the sidebar\n"
    assert outside.read_text() == "- outside\n"


def test_sidebar_source_sets_no_html() -> None:
    """Memory text reaches the DOM as text, or as FACT.md through JupyterLab's own Markdown
    renderer on an untrusted model (markdown.ts): no HTML-parsing sink exists in our code."""
    source = Path(__file__).resolve().parents[2] / "labextension" / "src"
    files = sorted(source.glob("*.ts"))
    assert [f.name for f in files] == [
        "agentPicker.ts", "api.ts", "diff.ts", "dom.ts", "factsSection.ts", "fileEditor.ts",
        "index.ts", "journalSection.ts", "markdown.ts", "model.ts", "panel.ts",
        "personaSection.ts", "promptSection.ts", "section.ts", "sessionsSection.ts",
    ]
    markdown = (source / "markdown.ts").read_text("utf-8")
    assert "trusted: false" in markdown and "trusted: true" not in markdown
    assert "latexTypesetter:" not in markdown.split("new RenderMimeRegistry(")[1].split("});")[0]
    sinks = ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
             "createContextualFragment", "DOMParser", "srcdoc", "dangerouslySetInnerHTML")
    found = [(f.name, sink) for f in files for sink in sinks if sink in f.read_text("utf-8")]
    assert found == []
