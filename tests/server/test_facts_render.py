"""``GET agents/{id}/facts?render=html``: the sidebar shows what ``%fact`` shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from markdown_cases import HIDING_CASES

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.render import markdown_html


@pytest.fixture
def agents_root(server_only_root: Path) -> Path:
    return server_only_root


@pytest.mark.parametrize("name", ["comment-definition", "style-hides-the-rest",
                                  "code-span-around-html", "table-extra-cell"])
async def test_the_server_renders_fact_md_with_the_notebooks_renderer(
    call: Any, agents_root: Path, name: str
) -> None:
    source, hidden = HIDING_CASES[name]
    AgentMemory.open_id("demo", agents_root).update_facts(source)
    status, body = await call("GET", "agents", "demo", "facts", params={"render": "html"})
    assert status == 200
    assert body["html"] == markdown_html(source)
    status, plain = await call("GET", "agents", "demo", "facts")
    assert "html" not in plain and plain["content"] == source


async def test_a_cut_view_renders_only_what_it_sends(call: Any, agents_root: Path) -> None:
    AgentMemory.open_id("demo", agents_root).update_facts("- first\n- second\n")
    status, body = await call("GET", "agents", "demo", "facts",
                              params={"render": "html", "max_chars": "8"})
    assert (status, body["content"], body["truncated"]) == (200, "- first\n", True)
    assert body["html"] == markdown_html("- first\n")


async def test_an_unknown_rendering_is_refused(call: Any, agents_root: Path) -> None:
    AgentMemory.open_id("demo", agents_root)
    assert await call("GET", "agents", "demo", "facts", params={"render": "markdown"}) == (
        400, {"message": "'render' must be 'html' or left out; got 'markdown'"})
