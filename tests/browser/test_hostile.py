"""Memory written by a prompt-injected model, shown in a real JupyterLab and Notebook 7.

A notebook loads the extension, lets the "model" write every payload of :mod:`hostile` into
FACT.md and the journal through the memory tool, then shows ``%fact``, ``%journal``,
``%memprompt`` and the panel. The page must open no dialog, request nothing from the host the
payloads name, write no file through the contents API, and hold no element carrying a payload's
handler, while the payloads stay readable as text.

Screenshots (light and dark theme) go to ``$AGENT_MEMORY_SCREENSHOTS`` when it is set, else to
the test's temporary folder.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import Lab, watch_of
from hostile import ATTACKER_HOST, DANGEROUS_TAGS, HOSTILE_FACTS, PAYLOADS
from markdown_cases import HIDING_CASES
from pages import KERNEL_IDLE, THEMES, screenshot_dir, set_theme
from playwright.sync_api import Page, expect
from sidebar_page import open_sidebar, settled

from jupyter_agent_memory import AgentMemory

WORD = re.compile(r"[^\W_]+")

# Every attribute, script or URL in the DOM that could only have come from a payload.
FIND_LIVE_PAYLOADS = """
() => {
  const marker = /alert\\(|fetch\\(|pwned/;
  const found = [];
  const describe = (node, what) => found.push(`<${node.tagName.toLowerCase()}> ${what}`);
  for (const node of document.querySelectorAll('*')) {
    for (const attr of node.attributes) {
      const name = attr.name.toLowerCase();
      const value = attr.value;
      if (name.startsWith('on') && marker.test(value)) {
        describe(node, `${name}=${value}`);
      }
      if (name === 'srcdoc') {
        describe(node, `srcdoc=${value}`);
      }
      if ((name === 'href' || name === 'src' || name === 'xlink:href') &&
          /^\\s*(javascript|vbscript|data):/i.test(value)) {
        describe(node, `${name}=${value}`);
      }
      if (name === 'src' && value.includes('ATTACKER')) {
        describe(node, `src=${value}`);
      }
    }
    if (node.tagName === 'SCRIPT' && marker.test(node.textContent)) {
      describe(node, node.textContent.slice(0, 80));
    }
    if (node.tagName === 'STYLE' && node.textContent.includes('ATTACKER')) {
      describe(node, node.textContent.slice(0, 80));
    }
  }
  return found;
}
""".replace("ATTACKER", ATTACKER_HOST)

def write_notebook(lab: Lab, name: str) -> Path:
    """A notebook in which the model writes every payload and the user looks at memory."""
    entries = [{"action": "append", "text": payload, "tags": [key, payload]}
               for key, payload in PAYLOADS.items()]
    cells = [
        "%load_ext jupyter_agent_memory",
        "%agent_memory hostile",
        "from jupyter_agent_memory import AgentMemory\n"
        "mem = AgentMemory.open('hostile')\n"
        f"print(mem.call_tool({{'action': 'update', 'content': {HOSTILE_FACTS!r}}}))\n"
        f"for call in {entries!r}:\n"
        "    mem.call_tool(call)",
        "%fact",
        "%journal -n 50",
        "%memprompt",
        "%agent_memory",
    ]
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    path = lab.workspace / name
    nbformat.write(notebook, path)
    return path


def run_all_cells(page: Page) -> None:
    """Wait for the kernel, run every cell, and wait until the panel is on screen."""
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    expect(page.get_by_text("Agent memory: hostile")).to_be_visible(timeout=60_000)
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)


def assert_nothing_ran(page: Page, lab: Lab) -> None:
    watch = watch_of(page)
    assert watch.dialogs == []
    assert [url for url in watch.requests if ATTACKER_HOST in url] == []
    assert [url for url in watch.requests if "pwned" in url] == []
    assert not (lab.workspace / "pwned.txt").exists()
    assert page.evaluate(FIND_LIVE_PAYLOADS) == []


def assert_payloads_readable(page: Page) -> None:
    """Each output shows the payloads as text; the cells ran without an error."""
    outputs = page.locator(".jp-OutputArea-output")
    expect(outputs.filter(has_text="Memory updated.")).to_have_count(1)
    assert page.locator('.jp-OutputArea-output[data-mime-type*="stderr"]').count() == 0
    fact = outputs.filter(has=page.locator(".jp-AgentMemory-markdown")).first
    expect(fact.locator("h1")).to_have_text("Facts")
    expect(fact.get_by_role("link", name="safe link")).to_have_attribute(
        "href", "https://example.org/docs"
    )
    for payload in (PAYLOADS["img"], PAYLOADS["script"], PAYLOADS["iframe"],
                    PAYLOADS["contents-write"], PAYLOADS["mathjax"]):
        expect(fact).to_contain_text(payload)
    journal = page.locator("table.jp-AgentMemory-journal").first
    for payload in PAYLOADS.values():
        expect(journal).to_contain_text(payload)
    expect(page.locator("pre.jp-AgentMemory-prompt").first).to_contain_text(PAYLOADS["svg"])


def screenshots(page: Page, folder: Path, prefix: str) -> list[Path]:
    """Full page in both themes, then the panel's Rendered tab (dark)."""
    shots = []
    for theme, label in THEMES:
        set_theme(page, theme)
        page.locator(".jp-AgentMemory-markdown").first.scroll_into_view_if_needed()
        shot = folder / f"{prefix}-{label}.png"
        page.screenshot(path=str(shot))
        shots.append(shot)
    page.locator(".lm-TabBar-tab", has_text="Rendered").first.click()
    rendered = page.locator(".widget-output .jp-AgentMemory-markdown").first
    expect(rendered).to_be_visible()
    rendered.scroll_into_view_if_needed()
    shot = folder / f"{prefix}-panel-rendered-dark.png"
    page.screenshot(path=str(shot))
    shots.append(shot)
    set_theme(page, "JupyterLab Light")
    return shots


def shut_down_kernels(page: Page) -> None:
    page.evaluate("() => window.jupyterapp.serviceManager.sessions.shutdownAll()")


@pytest.fixture
def notebook_lab(lab: Lab, agents_root: Path) -> Any:
    yield lab
    for leftover in ("hostile.ipynb", "pwned.txt"):
        (lab.workspace / leftover).unlink(missing_ok=True)


def test_hostile_memory_in_jupyterlab_runs_nothing(
    new_page: Any, notebook_lab: Lab, tmp_path: Path
) -> None:
    lab = notebook_lab
    write_notebook(lab, "hostile.ipynb")
    page = new_page()
    page.goto(lab.lab_url("hostile.ipynb"))
    page.wait_for_function("() => window.jupyterapp !== undefined")
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    try:
        run_all_cells(page)
        assert_nothing_ran(page, lab)
        assert_payloads_readable(page)
        # The sidebar shows the same memory as text.
        page.locator('.jp-SideBar .lm-TabBar-tab[data-id="jp-agent-memory"]').click()
        page.locator("#jp-agent-memory .jp-AgentMemory-agentPicker").select_option("hostile")
        expect(page.locator("#jp-agent-memory .jp-AgentMemory-factsView")).to_have_text(
            HOSTILE_FACTS
        )
        expect(page.locator("#jp-agent-memory .jp-AgentMemory-entryText")).to_have_count(
            len(PAYLOADS)
        )
        screenshots(page, screenshot_dir(tmp_path), "jupyterlab")
        assert_nothing_ran(page, lab)
        assert watch_of(page).errors == []
        # Saved and opened again, the stored outputs (trusted: the user saved them) are as inert.
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        expect(page.locator(".jp-mod-dirty")).to_have_count(0)
        saved = nbformat.read(lab.workspace / "hostile.ipynb", as_version=4)
        (fact_output,) = saved.cells[3].outputs
        assert set(fact_output["data"]) == {"text/plain", "text/html"}
        shut_down_kernels(page)
        page.goto(lab.lab_url("hostile.ipynb"))
        page.wait_for_function("() => window.jupyterapp !== undefined")
        page.evaluate("async () => { await window.jupyterapp.restored; }")
        expect(page.locator(".jp-AgentMemory-markdown h1")).to_have_text("Facts")
        assert_nothing_ran(page, lab)
        assert_payloads_readable(page)
    finally:
        shut_down_kernels(page)


def test_hostile_memory_in_notebook7_runs_nothing(
    new_page: Any, notebook_lab: Lab, tmp_path: Path
) -> None:
    lab = notebook_lab
    write_notebook(lab, "hostile.ipynb")
    page = new_page()
    page.goto(f"{lab.url}tree?token={lab.token}")
    page.wait_for_function("() => window.jupyterapp !== undefined")
    expect(page.locator(".jp-DirListing-item", has_text="hostile.ipynb")).to_be_visible()
    page.screenshot(path=str(screenshot_dir(tmp_path) / "notebook7-tree.png"))
    page.goto(f"{lab.url}notebooks/hostile.ipynb?token={lab.token}")
    page.wait_for_function("() => window.jupyterapp !== undefined")
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    try:
        run_all_cells(page)
        assert_nothing_ran(page, lab)
        assert_payloads_readable(page)
        screenshots(page, screenshot_dir(tmp_path), "notebook7")
        assert_nothing_ran(page, lab)
        # Notebook 7.6 itself throws one TypeError in its shortcuts settings on every page
        # (also with this package's extension blocked); none may come from us or a payload.
        ours = [e for e in watch_of(page).errors
                if "agent-memory" in e or "alert(" in e or "pwned" in e]
        assert ours == []
    finally:
        shut_down_kernels(page)
    # The payloads reached memory intact: nothing was lost by showing them safely.
    fact = lab.agents_root / "hostile" / "memory" / "FACT.md"
    assert fact.read_text(encoding="utf-8") == HOSTILE_FACTS
    journal = (lab.agents_root / "hostile" / "memory" / "JOURNAL.jsonl").read_text("utf-8")
    assert [json.loads(line)["text"] for line in journal.splitlines()] == list(PAYLOADS.values())


# -- FACT.md that Markdown would partly hide, in the sidebar ----------------------------------

SIDEBAR_CASES = ("code-span-around-html", "style-hides-the-rest", "comment-definition",
                 "titled-definition", "link-shows-another-target", "table-extra-cell")


def assert_hidden_lines_visible(page: Page, lab: Lab, agent: str) -> None:
    """Each case, written to ``agent``'s FACT.md, shows its hidden line in the sidebar's
    rendered view, runs nothing and sends nothing anywhere but the server."""
    rendered = page.locator("#jp-agent-memory .jp-AgentMemory-factsRendered")
    mem = AgentMemory.open_id(agent, lab.agents_root)
    for name in SIDEBAR_CASES:
        source, hidden = HIDING_CASES[name]
        mem.update_facts(source)
        page.locator("#jp-agent-memory .jp-AgentMemory-refresh").click()
        settled(page)
        expect(rendered).to_be_visible()
        shown = "".join(WORD.findall(rendered.inner_text()))
        assert "".join(WORD.findall(hidden)) in shown, (name, rendered.inner_text())
        assert rendered.locator("style, script, img, iframe, svg").count() == 0
        if name == "code-span-around-html":
            expect(rendered.locator("code").first).to_have_text("<h1>Heading from a code span</h1>")
            assert rendered.locator("h1").count() == 0
    # Every payload the notebook views are tried with: readable as text in the rendered view,
    # with no element that could run, load or restyle anything.
    mem.update_facts(HOSTILE_FACTS)
    page.locator("#jp-agent-memory .jp-AgentMemory-refresh").click()
    settled(page)
    expect(rendered.get_by_role("link", name="safe link")).to_have_attribute(
        "href", "https://example.org/docs"
    )
    for payload in (PAYLOADS["img"], PAYLOADS["script"], PAYLOADS["iframe"],
                    PAYLOADS["contents-write"], PAYLOADS["mathjax"]):
        expect(rendered).to_contain_text(payload)
    live = ", ".join(sorted(DANGEROUS_TAGS))
    assert rendered.locator(live).count() == 0
    watch = watch_of(page)
    assert watch.dialogs == []
    outside = [u for u in watch.requests if u.startswith("http") and not u.startswith(lab.url)]
    assert outside == []
    assert page.evaluate(FIND_LIVE_PAYLOADS) == []


def test_sidebar_shows_every_line_markdown_would_hide_in_jupyterlab(
    page: Page, notebook_lab: Lab
) -> None:
    AgentMemory.open_id("default", notebook_lab.agents_root)
    open_sidebar(page)
    assert_hidden_lines_visible(page, notebook_lab, "default")


def test_sidebar_shows_every_line_markdown_would_hide_in_notebook7(
    new_page: Any, notebook_lab: Lab
) -> None:
    lab = notebook_lab
    AgentMemory.open_id("default", lab.agents_root).update_facts("- ready\n")
    page = new_page()
    page.goto(f"{lab.url}tree?token={lab.token}")
    page.wait_for_function("() => window.jupyterapp !== undefined")
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    page.evaluate("() => window.jupyterapp.commands.execute('agent-memory:open')")
    expect(page.locator("#jp-agent-memory .jp-AgentMemory-refresh")).to_be_visible()
    assert_hidden_lines_visible(page, lab, "default")
