"""REST views are bounded: ``GET facts``, ``soul``, ``user``, ``prompt`` and a session's prompt
send at most ``max_chars`` characters of text (about 100 KB unless asked), say ``truncated``
and the whole text's ``chars``, and keep the whole file's ``sha256`` so a save still compares
with the right version. Over a real jupyter_server; files are checked on disk.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from jupyter_agent_memory import AgentMemory, PromptBuilder
from jupyter_agent_memory.server.handlers import DEFAULT_VIEW_CHARS

# Letters of 1, 2, 3 and 4 UTF-8 bytes (the last one two UTF-16 units in a browser).
MIXED = "a é € 🧠\n"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def agents_root(server_only_root: Path) -> Path:
    """The agents root, known to the server alone."""
    return server_only_root


@pytest.fixture
def demo(agents_root: Path) -> AgentMemory:
    return AgentMemory.open_id("demo", agents_root)


def long_text(chars: int) -> str:
    """A text of exactly ``chars`` characters, mixing widths, ending in a marker line."""
    tail = "- the last fact\n"
    body = (MIXED * (chars // len(MIXED) + 1))[: chars - len(tail)]
    return body + tail


async def test_facts_default_view_is_bounded_and_keeps_the_whole_files_hash(
    call, jp_fetch, demo: AgentMemory
) -> None:
    text = long_text(3 * DEFAULT_VIEW_CHARS + 7)
    sha_before = demo.update_facts(text)
    status, body = await call("GET", "agents", "demo", "facts")
    assert status == 200
    assert body["content"] == text[:DEFAULT_VIEW_CHARS]
    assert (body["truncated"], body["chars"], body["sha256"]) == (True, len(text), sha_before)
    assert "- the last fact" not in body["content"]
    # What actually goes over the wire stays near the bound (JSON escapes non-ASCII letters).
    response = await jp_fetch("agent-memory", "api", "agents", "demo", "facts")
    assert len(response.body) < 7 * DEFAULT_VIEW_CHARS
    # A bound longer than any text (int() refuses over 4,300 digits) is the whole text too.
    for everything in ("all", "ALL", "0", "000", "9" * 5000, "1" + "0" * 20):
        status, body = await call(
            "GET", "agents", "demo", "facts", params={"max_chars": everything}
        )
        assert status == 200
        assert (body["content"], body["truncated"], body["chars"]) == (text, False, len(text))
        assert body["sha256"] == sha_before


async def test_a_bound_cuts_between_characters_never_inside_one(call, demo: AgentMemory) -> None:
    demo.update_facts("🧠é€" * 5)
    status, body = await call("GET", "agents", "demo", "facts", params={"max_chars": "4"})
    assert status == 200
    assert body["content"] == "🧠é€🧠"
    assert (body["truncated"], body["chars"]) == (True, 15)
    # A bound the file fits in is no cut at all.
    status, body = await call("GET", "agents", "demo", "facts", params={"max_chars": "15"})
    assert (body["content"], body["truncated"], body["chars"]) == ("🧠é€" * 5, False, 15)


@pytest.mark.parametrize("bad", ["-1", "abc", "1.5", "", "1e3", "٣", "all of it"])
async def test_a_malformed_bound_is_refused_and_names_the_argument(
    call, demo: AgentMemory, bad: str
) -> None:
    demo.update_facts("- kept\n")
    for route in ("facts", "soul", "user", "prompt"):
        status, body = await call("GET", "agents", "demo", route, params={"max_chars": bad})
        assert status == 400, route
        assert body == {
            "message": "'max_chars' must be a whole number of characters (0 for all) or "
            f"'all'; got {bad!r}"
        }


async def test_editing_a_cut_file_loads_it_whole_and_saves_against_the_right_version(
    call, demo: AgentMemory
) -> None:
    """What the sidebar does: show the bounded view, fetch everything to edit, save with the
    hash the view carried. A 3 MB FACT.md (written by some other tool: the engine refuses
    more than 1 MiB per write) is trimmed to its last part, which the view never showed."""
    text = long_text(3_000_000)
    (demo.path / "memory" / "FACT.md").write_text(text, encoding="utf-8")
    _, view = await call("GET", "agents", "demo", "facts")
    _, whole = await call("GET", "agents", "demo", "facts", params={"max_chars": "all"})
    assert view["sha256"] == whole["sha256"] == sha(text)
    assert whole["content"] == text
    edited = whole["content"][-300_000:].replace("- the last fact\n", "- the last fact, edited\n")
    status, saved = await call(
        "PUT", "agents", "demo", "facts",
        body={"content": edited, "expected_sha256": view["sha256"]},
    )
    assert status == 200
    assert (saved["sha256"], saved["previous_sha256"]) == (sha(edited), sha(text))
    assert (demo.path / "memory" / "FACT.md").read_text(encoding="utf-8") == edited
    # Saving the cut view's text against that hash now is a conflict: nothing is written.
    status, _ = await call(
        "PUT", "agents", "demo", "facts",
        body={"content": view["content"], "expected_sha256": view["sha256"]},
    )
    assert status == 409
    assert (demo.path / "memory" / "FACT.md").read_text(encoding="utf-8") == edited


@pytest.mark.parametrize(("route", "name"), [("soul", "SOUL.md"), ("user", "USER.md")])
async def test_soul_and_user_views_are_bounded(
    call, demo: AgentMemory, route: str, name: str
) -> None:
    text = long_text(DEFAULT_VIEW_CHARS + 1)
    (demo.write_soul if route == "soul" else demo.write_user)(text)
    status, body = await call("GET", "agents", "demo", route)
    assert status == 200
    assert body["name"] == name
    assert body["content"] == text[:DEFAULT_VIEW_CHARS]
    assert (body["truncated"], body["chars"], body["sha256"]) == (True, len(text), sha(text))
    status, body = await call("GET", "agents", "demo", route, params={"max_chars": "0"})
    assert (body["content"], body["truncated"]) == (text, False)


async def test_prompt_view_is_bounded_and_its_sizes_describe_the_whole_prompt(
    call, demo: AgentMemory
) -> None:
    demo.update_facts(long_text(5_000))
    _, whole = await call("GET", "agents", "demo", "prompt", params={"max_chars": "all"})
    assert whole["truncated"] is False
    assert whole["chars"] == len(whole["text"]) > 5_000
    status, view = await call("GET", "agents", "demo", "prompt", params={"max_chars": "1000"})
    assert status == 200
    assert view["text"] == whole["text"][:1000]
    assert (view["truncated"], view["chars"]) == (True, whole["chars"])
    for same in ("tokens", "memory_tokens", "sections", "warnings", "over_budget"):
        assert view[same] == whole[same], same
    # The parts are cut where the text is, so the view carries no more than its bound twice.
    assert whole["text"] == whole["context"] and whole["base"] is None
    assert view["context"] == view["text"]


async def test_prompt_view_cuts_base_and_context_where_the_text_is_cut(
    call, demo: AgentMemory, jp_root_dir: Path
) -> None:
    base = "You are a careful lab assistant.\n" * 40
    (Path(jp_root_dir) / "system.md").write_text(base, encoding="utf-8")
    demo.update_facts(long_text(5_000))
    _, whole = await call("GET", "agents", "demo", "prompt", params={"max_chars": "all"})
    assert whole["text"] == f"{whole['base']}\n\n{whole['context']}"
    cut_at = len(whole["base"]) + 500
    _, view = await call("GET", "agents", "demo", "prompt", params={"max_chars": str(cut_at)})
    assert view["truncated"] is True
    assert (view["base"], view["context"]) == (whole["base"], whole["context"][:498])
    _, view = await call("GET", "agents", "demo", "prompt", params={"max_chars": "100"})
    assert (view["base"], view["context"]) == (whole["base"][:100], "")


async def test_session_prompt_view_is_bounded_and_whole_on_request(
    call, demo: AgentMemory
) -> None:
    demo.update_facts(long_text(DEFAULT_VIEW_CHARS + 50_000))
    PromptBuilder().start_session(demo, session_id="c" * 16)
    receipt = demo.sessions()[0]
    status, view = await call("GET", "agents", "demo", "sessions", "cccccc")
    assert status == 200
    assert view["receipt"] == receipt
    recorded = demo.session_prompt("c" * 16)
    assert len(recorded) > DEFAULT_VIEW_CHARS
    assert view["text"] == recorded[:DEFAULT_VIEW_CHARS]
    assert (view["truncated"], view["chars"]) == (True, len(recorded))
    _, whole = await call(
        "GET", "agents", "demo", "sessions", "cccccc", params={"max_chars": "all"}
    )
    assert (whole["text"], whole["truncated"]) == (recorded, False)
    assert sha(whole["text"]) == receipt["prompt_sha256"]
