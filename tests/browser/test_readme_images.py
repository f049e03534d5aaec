"""The README's pictures, made from the real thing: the sidebar (light theme) and the output
of ``%memprompt`` in a notebook.

Every run makes them (into the test's temporary folder) and checks they are small, cropped
PNGs. To refresh the committed ones, with JupyterLab in a folder whose path says nothing of
this machine (it must not exist yet)::

    AGENT_MEMORY_LAB_BASE=/home/you/jupyter AGENT_MEMORY_README_IMAGES=docs/images \
        pytest tests/browser/test_readme_images.py
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import nbformat
from conftest import Lab
from pages import KERNEL_IDLE, set_theme
from playwright.sync_api import Page, expect
from sidebar_page import PANEL, open_sidebar, run_notebook, settled

from jupyter_agent_memory import AgentMemory

FACTS = (
    "# Facts\n\n- The user wants metric units.\n- Reports are due on Fridays.\n"
    "- Prefers short answers with one example.\n"
)


def destination(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("AGENT_MEMORY_README_IMAGES") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is no PNG"
    return struct.unpack(">II", data[16:24])


def check_small(path: Path) -> None:
    width, height = png_size(path)
    assert 240 <= width <= 1000 and 200 <= height <= 900, (width, height)
    assert path.stat().st_size < 250_000


def test_sidebar_image(page: Page, agents_root: Path, tmp_path: Path) -> None:
    mem = AgentMemory.open_id("default", agents_root)
    mem.update_facts(FACTS)
    mem.append("Sent the Q3 report draft to the team", tags=["work", "report"])
    mem.append("The user asked for the report in metric units", tags=["preference"])
    page.set_viewport_size({"width": 1200, "height": 860})
    set_theme(page, "JupyterLab Light")
    open_sidebar(page)
    query = page.locator(f"{PANEL} .jp-AgentMemory-query")
    query.fill("report")
    query.press("Enter")
    expect(page.locator(f"{PANEL} .jp-AgentMemory-entryText mark")).to_have_count(2)
    settled(page)
    page.locator(f"{PANEL} .jp-AgentMemory-prompt > summary").click()  # fold the long prompt
    page.locator(PANEL).evaluate("node => { node.scrollTop = 0; }")
    box = page.locator(PANEL).bounding_box()
    assert box is not None
    shot = destination(tmp_path) / "sidebar.png"
    page.screenshot(path=str(shot), clip={"x": box["x"], "y": box["y"],
                                          "width": box["width"], "height": min(box["height"], 760)})
    check_small(shot)


def test_memprompt_image(new_page: Any, lab: Lab, agents_root: Path, tmp_path: Path) -> None:
    folder = lab.workspace / "readme-agent"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in (
        "%load_ext jupyter_agent_memory",
        f"%agent_memory {folder}",
        f"%%fact_update\n{FACTS}",
        # A persona, so the prompt shows what was learned rather than the first-run steps.
        "from jupyter_agent_memory import AgentMemory\n"
        f"mem = AgentMemory.open({str(folder)!r})\n"
        "mem.write_soul('# Soul\\n\\nI am Quill, a concise research assistant: one worked "
        "example, metric units, and no jargon.\\n')\n"
        "mem.write_user('# User\\n\\nDana, a data scientist in London (Europe/London).\\n')",
        "%memprompt",
    )]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    nbformat.write(notebook, lab.workspace / "readme.ipynb")
    page = new_page()
    page.set_viewport_size({"width": 1100, "height": 900})
    try:
        run_notebook(page, lab.lab_url("readme.ipynb"))
        output = page.locator(".jp-Cell").nth(4).locator(".jp-OutputArea-output")
        expect(output.locator("pre.jp-AgentMemory-prompt")).to_be_visible(timeout=60_000)
        page.wait_for_function(KERNEL_IDLE, timeout=60_000)
        # The sizes table, and the end of the prompt: what the next session remembers.
        output.locator("pre.jp-AgentMemory-prompt").evaluate(
            "node => { node.scrollTop = node.scrollHeight; }"
        )
        output.scroll_into_view_if_needed()
        box = output.bounding_box()
        assert box is not None
        shot = destination(tmp_path) / "memprompt.png"
        page.screenshot(path=str(shot), clip={"x": box["x"], "y": box["y"],
                                              "width": min(box["width"], 900),
                                              "height": min(box["height"], 800)})
        check_small(shot)
    finally:
        page.evaluate("() => window.jupyterapp.serviceManager.sessions.shutdownAll()")
        (lab.workspace / "readme.ipynb").unlink(missing_ok=True)
