"""The sidebar never pulls more than a bounded view of a big file unless the reader asks.

A 3 MB FACT.md: the first response is about 100 KB (measured on the wire), Show all fetches
the whole file, and Edit loads the whole text, so a save sends the whole edit with the hash
of the version shown.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from conftest import watch_of
from playwright.sync_api import Page, Response, expect
from sidebar_page import PANEL, TAB, settled

from jupyter_agent_memory import AgentMemory

BOUND = 100_000  # DEFAULT_VIEW_CHARS in jupyter_agent_memory/server/handlers.py
# The most bytes a bounded view may take on the wire: JSON writes each newline as two bytes
# (one character in 17 or more is a newline here), and the response carries the path, the
# hashes and (for the prompt) its sections.
WIRE = int(BOUND * 1.12)
WHOLE = 3_000_000
LAST_LINE = "- the very last fact\n"


def big_facts() -> str:
    """Exactly WHOLE ASCII characters of numbered facts, the marker line at the end."""
    lines = []
    size = 0
    number = 0
    while size < WHOLE - len(LAST_LINE):
        line = f"- fact number {number:07d} about something\n"
        lines.append(line)
        size += len(line)
        number += 1
    text = "".join(lines)[: WHOLE - len(LAST_LINE)]
    return text + LAST_LINE


def test_a_3_mb_fact_md_is_shown_bounded_in_full_on_request_and_edited_whole(
    page: Page, agents_root: Path
) -> None:
    mem = AgentMemory.open_id("default", agents_root)
    text = big_facts()
    assert len(text) == WHOLE
    # Written as another tool would (the engine refuses more than 1 MiB per write).
    (mem.path / "memory" / "FACT.md").write_text(text, encoding="utf-8")
    responses: list[Response] = []
    writes: list[dict[str, Any]] = []
    # Bodies are read after the fact: a handler must not block the page's event stream.
    page.on("response", lambda response: responses.append(response)
            if "/agent-memory/api/agents/default/facts" in response.url
            and response.request.method == "GET" else None)
    page.on("request", lambda request: writes.append(json.loads(request.post_data or "{}"))
            if request.method == "PUT" and "/agent-memory/api/" in request.url else None)

    page.locator(TAB).click()
    view = page.locator(f"{PANEL} .jp-AgentMemory-factsView")
    rendered = page.locator(f"{PANEL} .jp-AgentMemory-factsRendered")
    show_all = rendered.locator(".jp-AgentMemory-showAll")
    expect(show_all).to_have_text(f"Show all ({WHOLE:,} characters)")
    # Every FACT.md response so far is the bounded view: about 100 KB, not 3 MB.
    facts_bodies = [(response.url, len(response.body())) for response in responses]
    assert facts_bodies, "no FACT.md response seen"
    # FACT.md's view carries its bounded text twice: as text and rendered by the server.
    assert all(size < 3 * WIRE for _, size in facts_bodies), facts_bodies
    shown = view.evaluate("node => node.firstChild.textContent")
    assert shown == text[:BOUND]
    expect(rendered).not_to_contain_text("the very last fact")

    # Show all fetches the rest.
    with page.expect_response(
        lambda response: "/facts?" in response.url and "max_chars=all" in response.url
    ) as whole:
        show_all.click()
    assert len(whole.value.body()) > WHOLE
    expect(rendered).to_contain_text("the very last fact", timeout=60_000)
    expect(rendered.locator(".jp-AgentMemory-showAll")).to_have_count(0)

    # Edit holds the whole file; the save sends the whole edit against the shown version.
    page.locator(f"{PANEL} .jp-AgentMemory-edit").click()
    editor = page.locator(f"{PANEL} .jp-AgentMemory-factsEditor")
    expect(editor).to_be_visible()
    assert editor.evaluate("node => node.value.length") == WHOLE
    assert editor.evaluate("node => node.value.endsWith('- the very last fact\\n')")
    # Trimmed to its last 200 000 characters (a save over 1 MiB is refused by the engine).
    editor.evaluate(
        "node => { node.value = node.value.slice(-200000).replace('very last', 'edited last');"
        " node.dispatchEvent(new Event('input')); }"
    )
    page.locator(f"{PANEL} .jp-AgentMemory-save").click()
    edited = text[-200_000:].replace("very last", "edited last")
    saved = hashlib.sha256(edited.encode()).hexdigest()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsNote")).to_have_text(
        f"Saved (sha256 {saved[:12]}).", timeout=30_000
    )
    assert writes == [
        {"content": edited, "expected_sha256": hashlib.sha256(text.encode()).hexdigest()}
    ]
    assert (mem.path / "memory" / "FACT.md").read_text(encoding="utf-8") == edited
    assert watch_of(page).errors == []


def test_a_new_page_asks_only_for_bounded_views(page: Page, agents_root: Path) -> None:
    """No request of a fresh sidebar asks for a whole text; each memory view is bounded."""
    mem = AgentMemory.open_id("default", agents_root)
    (mem.path / "memory" / "FACT.md").write_text("prose words here\n" * 100_000, encoding="utf-8")
    (mem.path / "SOUL.md").write_text("I am big.\n" * 200_000, encoding="utf-8")
    sizes: dict[str, int] = {}
    page.on("response", lambda response: sizes.__setitem__(response.url, len(response.body()))
            if "/agent-memory/api/" in response.url and response.request.method == "GET"
            else None)
    page.locator(TAB).click()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-factsRendered .jp-AgentMemory-showAll"))\
        .to_have_text("Show all (1,700,000 characters)", timeout=30_000)
    page.locator(f"{PANEL} .jp-AgentMemory-persona > summary").click()
    expect(page.locator(f"{PANEL} .jp-AgentMemory-soulView .jp-AgentMemory-showAll")).to_have_text(
        "Show all (2,000,000 characters)"
    )
    prompt = page.locator(f"{PANEL} .jp-AgentMemory-promptText")
    expect(prompt.locator(".jp-AgentMemory-showAll")).to_be_visible(timeout=30_000)
    settled(page)
    memory_views = [url for url in sizes if any(
        part in url for part in ("/facts", "/soul", "/user", "/prompt"))]
    assert any("/soul" in url for url in memory_views), sizes
    assert any("/prompt" in url for url in memory_views), sizes
    assert all("max_chars=all" not in url for url in sizes), sizes
    # The prompt view carries its cut text and, within it, the cut memory part.
    # ... and FACT.md's its text twice (as text, and rendered by the server).
    bounds = {"/prompt": 2 * WIRE, "/facts": 3 * WIRE}
    assert all(sizes[url] < next((b for part, b in bounds.items() if part in url), WIRE)
               for url in memory_views), sizes
    assert watch_of(page).errors == []
