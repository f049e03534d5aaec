"""REST API of the server extension: every route, status code and error, over real HTTP.

The server is pytest-jupyter's (``jp_fetch`` sends the token; unauthenticated access is off).
Data is written and checked through the engine and the files on disk, never through the API
alone, so a handler that only *looks* right fails here.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
from traitlets import TraitError

from jupyter_agent_memory import AgentMemory, list_templates
from jupyter_agent_memory.errors import EmptyEditError
from jupyter_agent_memory.server.config import AgentMemoryServer

API = ("agent-memory", "api")


@pytest.fixture
def agents_root(server_only_root: Path) -> Path:
    """The agents root, known to the server alone."""
    return server_only_root


@pytest.fixture
def server_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    """A small body limit, plus what a test gives by indirect parametrization."""
    return {"max_body_bytes": 4096, **getattr(request, "param", {})}


@pytest.fixture
def mem(agents_root: Path) -> AgentMemory:
    """The ``demo`` agent, created through the engine."""
    return AgentMemory.open_id("demo", agents_root)


def sha(data: bytes | str) -> str:
    """sha256 hex of bytes or UTF-8 text."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def fact_file(mem: AgentMemory) -> Path:
    """Path of the agent's FACT.md."""
    return mem.path / "memory" / "FACT.md"


# -- agents --------------------------------------------------------------------------------------


async def test_list_agents_on_empty_root(call, agents_root: Path) -> None:
    status, body = await call("GET", "agents")
    assert status == 200
    assert body == {
        "root": str(agents_root.resolve()),
        "default_agent": "default",
        "agents": [],
        "templates": list_templates(),
    }
    assert not agents_root.exists(), "listing must not create the root"


@pytest.mark.parametrize("server_settings", [{"default_agent": "tutor"}], indirect=True)
async def test_default_agent_follows_server_setting(call) -> None:
    status, body = await call("GET", "agents")
    assert (status, body["default_agent"]) == (200, "tutor")


async def test_create_agent_then_list(call, agents_root: Path) -> None:
    status, body = await call("POST", "agents", body={"id": "alpha"})
    assert status == 201
    folder = agents_root.resolve() / "alpha"
    assert body == {"id": "alpha", "path": str(folder), "created": True, "template": None}
    assert (folder / "memory").is_dir()
    assert (folder / "SOUL.md").read_text() == ""
    assert (folder / "USER.md").read_text() == ""

    status, body = await call("POST", "agents", body={"id": "alpha"})
    assert (status, body["created"]) == (200, False)

    await call("POST", "agents", body={"id": ".notes"})
    status, body = await call("GET", "agents")
    assert body["agents"] == [".notes", "alpha"]
    # ".notes" looks like a relative path; it must still land under the root.
    assert (agents_root / ".notes" / "memory").is_dir()


async def test_create_agent_from_template(call, agents_root: Path) -> None:
    template = list_templates()[0]
    status, body = await call("POST", "agents", body={"id": "guided", "template": template})
    assert (status, body["template"]) == (201, template)
    mem = AgentMemory.open_id("guided", agents_root)
    assert mem.template_info()["template"] == template
    assert mem.soul.strip(), "the template's SOUL.md is copied into a new agent"


async def test_create_agent_rejects_unknown_template_before_writing(
    call, agents_root: Path, tmp_path: Path
) -> None:
    status, body = await call("POST", "agents", body={"id": "x", "template": "no-such"})
    assert status == 400
    assert body["message"].startswith('Unknown template "no-such"; available: ')
    # A folder path is not accepted either: the REST API only offers built-in templates.
    status, body = await call("POST", "agents", body={"id": "x", "template": str(tmp_path)})
    assert status == 400
    status, body = await call("POST", "agents", body={"id": "x", "template": 3})
    assert (status, body) == (
        400,
        {"message": "'template' must be a template name (a string) or null"},
    )
    assert not (agents_root / "x").exists()


@pytest.mark.parametrize(
    ("agent_id", "message"),
    [
        ("..", 'Invalid agent id "..": it cannot be "." or ".."'),
        (".", 'Invalid agent id ".": it cannot be "." or ".."'),
        ("a/b", 'Invalid agent id "a/b": it cannot contain "/" or "\\"'),
        ("a\\b", 'Invalid agent id "a\\b": it cannot contain "/" or "\\"'),
        ("system", 'Invalid agent id "system": "system" is reserved'),
        ("SyStem", 'Invalid agent id "SyStem": "system" is reserved'),
        ("", "Invalid agent id: it must be a non-empty string"),
        (None, "Invalid agent id: it must be a non-empty string"),
        (7, "Invalid agent id: it must be a non-empty string"),
        # Routes read "@path" as a folder: an agent by that id could never be opened.
        ("@x", 'Invalid agent id "@x": it cannot start with "@"'),
    ],
)
async def test_create_agent_rejects_bad_ids(call, agents_root: Path, agent_id, message) -> None:
    status, body = await call("POST", "agents", body={"id": agent_id})
    assert (status, body) == (400, {"message": message})
    assert not agents_root.exists()


async def test_create_agent_rejects_bad_bodies(call, agents_root: Path) -> None:
    status, body = await call("POST", "agents", raw=b"{not json")
    assert status == 400
    assert body["message"].startswith("Request body is not valid JSON: ")
    status, body = await call("POST", "agents", body=["alpha"])
    assert (status, body) == (400, {"message": "Request body must be a JSON object"})
    status, body = await call("POST", "agents", raw=b"")
    assert status == 400
    assert not agents_root.exists()


# -- agent ids in URLs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("encoded", "message"),
    [
        ("..", 'Invalid agent id "..": it cannot be "." or ".."'),
        ("%2E%2E", 'Invalid agent id "..": it cannot be "." or ".."'),
        ("a%2Fb", 'Invalid agent id "a/b": it cannot contain "/" or "\\"'),
        ("..%2Fetc", 'Invalid agent id "../etc": it cannot contain "/" or "\\"'),
        ("a%5Cb", 'Invalid agent id "a\\b": it cannot contain "/" or "\\"'),
        ("system", 'Invalid agent id "system": "system" is reserved'),
        ("SYSTEM", 'Invalid agent id "SYSTEM": "system" is reserved'),
    ],
)
@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        ("GET", "facts"),
        ("PUT", "facts"),
        ("GET", "journal"),
        ("POST", "journal"),
        ("GET", "prompt"),
        ("GET", "history"),
        ("GET", "history/abcdef0"),
    ],
)
async def test_bad_agent_ids_in_urls_are_400(
    http_server_client, jp_auth_header, jp_base_url, agents_root, encoded, message, method, suffix
) -> None:
    # Built by hand: jp_fetch would re-encode the "%" and the test would prove nothing.
    url = f"{jp_base_url}agent-memory/api/agents/{encoded}/{suffix}"
    body = json.dumps({"content": "x", "text": "x"}) if method != "GET" else None
    response = await http_server_client.fetch(
        url, method=method, body=body, headers=jp_auth_header, raise_error=False
    )
    assert response.code == 400
    assert json.loads(response.body) == {"message": message}
    assert not agents_root.exists()


async def test_unknown_agent_is_404_and_not_created(call, agents_root: Path) -> None:
    expected = {"message": f'Agent "ghost" does not exist under {agents_root.resolve()}'}
    for method, suffix, body in [
        ("GET", "facts", None),
        ("PUT", "facts", {"content": "x"}),
        ("GET", "journal", None),
        ("POST", "journal", {"text": "x"}),
        ("GET", "prompt", None),
        ("GET", "history", None),
        ("GET", "history/abcdef0", None),
    ]:
        status, reply = await call(method, "agents", "ghost", *suffix.split("/"), body=body)
        assert (method, suffix, status, reply) == (method, suffix, 404, expected)
    assert not (agents_root / "ghost").exists()


async def test_symlinked_agent_folder_is_refused(call, agents_root: Path, tmp_path: Path) -> None:
    elsewhere = AgentMemory.open(tmp_path / "elsewhere")
    elsewhere.update_facts("secret\n")
    agents_root.mkdir()
    (agents_root / "linked").symlink_to(elsewhere.path)
    status, body = await call("GET", "agents", "linked", "facts")
    assert status == 403
    assert str(agents_root.resolve() / "linked") in body["message"]
    status, body = await call("PUT", "agents", "linked", "facts", body={"content": "pwned\n"})
    assert status == 403
    assert elsewhere.facts == "secret\n"


# -- facts -----------------------------------------------------------------------------------------


async def test_get_facts_written_by_engine(call, mem: AgentMemory) -> None:
    status, body = await call("GET", "agents", "demo", "facts")
    assert (status, body["content"], body["sha256"]) == (200, "", sha(b""))
    mem.update_facts("- Prefers metric units.\n")
    status, body = await call("GET", "agents", "demo", "facts")
    assert status == 200
    assert body == {
        "agent": "demo",
        "path": str(fact_file(mem)),
        "content": "- Prefers metric units.\n",
        "sha256": sha("- Prefers metric units.\n"),
        "chars": 24,
        "truncated": False,
    }


async def test_put_facts_with_matching_sha_writes_file(call, mem: AgentMemory) -> None:
    old = mem.update_facts("- old\n")
    status, body = await call(
        "PUT", "agents", "demo", "facts", body={"content": "- new ü\n", "expected_sha256": old}
    )
    assert status == 200
    assert body == {"agent": "demo", "sha256": sha("- new ü\n"), "previous_sha256": old}
    assert fact_file(mem).read_bytes() == "- new ü\n".encode()
    assert [v["sha256"] for v in mem.history()] == [old]


async def test_put_facts_conflict_is_409_with_both_hashes(call, mem: AgentMemory) -> None:
    seen = mem.update_facts("- seen by the editor\n")
    actual = mem.update_facts("- written by the agent meanwhile\n")
    status, body = await call(
        "PUT", "agents", "demo", "facts", body={"content": "- edit\n", "expected_sha256": seen}
    )
    assert status == 409
    assert body["expected"] == seen
    assert body["actual"] == actual
    assert seen in body["message"] and actual in body["message"]
    assert body["message"].endswith("nothing was written")
    assert fact_file(mem).read_text() == "- written by the agent meanwhile\n"


async def test_put_facts_without_expected_sha_is_unconditional(call, mem: AgentMemory) -> None:
    before = mem.update_facts("- one\n")
    status, body = await call("PUT", "agents", "demo", "facts", body={"content": "- two\n"})
    assert (status, body["previous_sha256"]) == (200, before)
    assert mem.facts == "- two\n"


async def test_put_facts_rejects_bad_bodies(call, mem: AgentMemory) -> None:
    mem.update_facts("- keep\n")
    cases = [
        ({"content": 5}, "'content' must be a string"),
        ({}, "'content' must be a string"),
        ({"content": "ok \ud83d"}, "'content' is not valid Unicode text: lone surrogate "
         "U+D83D at position 3"),
        (
            {"content": "x", "expected_sha256": 12},
            "'expected_sha256' must be a sha256 hex string or null",
        ),
    ]
    for payload, message in cases:
        status, body = await call("PUT", "agents", "demo", "facts", body=payload)
        assert (status, body) == (400, {"message": message})
    status, body = await call("PUT", "agents", "demo", "facts", raw=b"\xff\xfe")
    assert status == 400
    assert mem.facts == "- keep\n"
    assert mem.history() == []


async def test_put_facts_over_body_limit_is_413(call, mem: AgentMemory) -> None:
    mem.update_facts("- keep\n")
    payload = json.dumps({"content": "x" * 5000}).encode()
    status, body = await call("PUT", "agents", "demo", "facts", raw=payload)
    assert status == 413
    assert body == {
        "message": f"Request body is {len(payload)} bytes; the limit is 4096 bytes "
        "(AgentMemoryServer.max_body_bytes)"
    }
    assert mem.facts == "- keep\n"


async def test_put_facts_through_symlinked_file_is_refused(
    call, mem: AgentMemory, tmp_path: Path
) -> None:
    target = tmp_path / "outside.md"
    target.write_text("outside\n")
    fact_file(mem).symlink_to(target)
    status, body = await call("PUT", "agents", "demo", "facts", body={"content": "x\n"})
    assert status == 403
    assert "FACT.md" in body["message"]
    assert target.read_text() == "outside\n"


# -- journal ---------------------------------------------------------------------------------------


async def test_append_then_search(call, mem: AgentMemory) -> None:
    status, body = await call(
        "POST", "agents", "demo", "journal", body={"text": "Ran the eval ✓", "tags": ["Eval", 3]}
    )
    assert status == 201
    entry = body["entry"]
    assert body == {"agent": "demo", "entry": entry}
    assert (entry["text"], entry["tags"]) == ("Ran the eval ✓", ["Eval"])
    line = (mem.path / "memory" / "JOURNAL.jsonl").read_text(encoding="utf-8")
    assert line == f'{{"ts":"{entry["ts"]}","tags":["Eval"],"text":"Ran the eval ✓"}}\n'

    status, body = await call("GET", "agents", "demo", "journal", params={"tag": "eval"})
    assert status == 200
    assert body == {
        "agent": "demo", "entries": [entry], "skipped": 0, "scanned": 1, "indexed": False
    }


async def test_append_tags_follow_the_tool_rule(call, mem: AgentMemory) -> None:
    status, body = await call(
        "POST", "agents", "demo", "journal", body={"text": "t", "tags": "not-a-list"}
    )
    assert (status, body["entry"]["tags"]) == (201, [])
    status, body = await call("POST", "agents", "demo", "journal", body={"text": "u"})
    assert (status, body["entry"]["tags"]) == (201, [])


@pytest.mark.parametrize("text", ["", None, 5])
async def test_append_requires_text(call, mem: AgentMemory, text) -> None:
    status, body = await call("POST", "agents", "demo", "journal", body={"text": text})
    assert (status, body) == (400, {"message": "'text' is required for append action"})
    assert not (mem.path / "memory" / "JOURNAL.jsonl").exists()


async def test_append_over_body_limit_is_413(call, mem: AgentMemory) -> None:
    status, body = await call("POST", "agents", "demo", "journal", body={"text": "y" * 5000})
    assert status == 413
    assert body["message"].endswith("the limit is 4096 bytes (AgentMemoryServer.max_body_bytes)")
    assert list(mem.entries()) == []


async def test_search_filters_newest_first(call, mem: AgentMemory) -> None:
    texts = ["alpha one", "beta two", "alpha three", "gamma four"]
    for i, text in enumerate(texts):
        mem.append(text, tags=["odd" if i % 2 else "even"])
    status, body = await call("GET", "agents", "demo", "journal")
    assert [e["text"] for e in body["entries"]] == texts[::-1]
    status, body = await call("GET", "agents", "demo", "journal", params={"query": "ALPHA"})
    assert [e["text"] for e in body["entries"]] == ["alpha three", "alpha one"]
    status, body = await call(
        "GET", "agents", "demo", "journal", params={"query": "a", "tag": "ODD", "limit": "1"}
    )
    assert [e["text"] for e in body["entries"]] == ["gamma four"]


@pytest.mark.parametrize(
    ("limit", "count"),
    # Below 1 becomes 1; anything non-numeric (or empty) means the default, 20.
    [("0", 1), ("-5", 1), ("2", 2), (" 3 ", 3), ("abc", 20), ("", 20), ("2.5", 20)],
)
async def test_search_limit_uses_engine_rules(call, mem: AgentMemory, limit, count) -> None:
    for i in range(30):
        mem.append(f"entry {i}")
    status, body = await call("GET", "agents", "demo", "journal", params={"limit": limit})
    assert status == 200
    assert len(body["entries"]) == count
    assert body["entries"][0]["text"] == "entry 29"


async def test_search_time_window(call, mem: AgentMemory) -> None:
    journal = mem.path / "memory" / "JOURNAL.jsonl"
    journal.write_text(
        '{"ts":"2026-01-01T00:00:00.000Z","tags":[],"text":"new year"}\n'
        '{"ts":"2026-03-01T12:00:00.000Z","tags":[],"text":"march"}\n'
        '{"ts":"2026-06-01T00:00:00.000Z","tags":[],"text":"june"}\n'
    )
    status, body = await call(
        "GET",
        "agents",
        "demo",
        "journal",
        params={"since": "2026-02-01", "until": "2026-03-01T12:00:00Z"},
    )
    assert (status, [e["text"] for e in body["entries"]]) == (200, ["march"])


@pytest.mark.parametrize("field", ["since", "until"])
async def test_search_bad_time_is_400_naming_field(call, mem: AgentMemory, field) -> None:
    status, body = await call("GET", "agents", "demo", "journal", params={field: "yesterday"})
    assert status == 400
    assert body == {
        "message": f"Invalid '{field}': expected an ISO-8601 date or time, got \"yesterday\""
    }


async def test_search_reports_skipped_lines_and_extra_keys(call, mem: AgentMemory) -> None:
    (mem.path / "memory" / "JOURNAL.jsonl").write_text(
        '{"ts":"2026-01-01T00:00:00.000Z","tags":[],"text":"kept","source":"other-tool"}\n'
        "{this line is torn\n"
        '{"ts":"2026-01-02T00:00:00.000Z","tags":["x"],"text":"also kept"}\n'
    )
    with pytest.warns(UserWarning, match="Skipped 1 corrupted line"):
        status, body = await call("GET", "agents", "demo", "journal")
    assert status == 200
    assert (body["skipped"], body["scanned"]) == (1, 3)
    assert body["entries"][1] == {
        "ts": "2026-01-01T00:00:00.000Z",
        "tags": [],
        "text": "kept",
        "source": "other-tool",
    }


async def test_search_without_journal_file(call, mem: AgentMemory) -> None:
    status, body = await call("GET", "agents", "demo", "journal", params={"query": "x"})
    assert (status, body) == (
        200, {"agent": "demo", "entries": [], "skipped": 0, "scanned": 0, "indexed": False}
    )


# -- prompt ----------------------------------------------------------------------------------------


async def test_prompt_shows_facts_and_sections(call, mem: AgentMemory, jp_root_dir: Path) -> None:
    mem.update_facts("- The user's cat is called Miso.\n")
    status, body = await call("GET", "agents", "demo", "prompt")
    assert status == 200
    assert body["agent"] == "demo"
    assert body["workspace"] == str(Path(jp_root_dir).resolve())
    assert body["base"] is None
    assert "## Memories" in body["text"]
    assert "<facts>\n- The user's cat is called Miso.\n</facts>" in body["text"]
    assert body["text"].endswith(body["context"])
    assert body["tokens"] >= body["memory_tokens"] > 0
    assert (body["budget_tokens"], body["over_budget"], body["warnings"]) == (None, False, [])
    sections = {part["name"]: part for part in body["sections"]}
    block = "<facts>\n- The user's cat is called Miso.\n</facts>"
    assert sections["facts"] == {
        "name": "facts",
        "source": str(fact_file(mem)),
        "chars": len(block),
        "tokens": (len(block) + 3) // 4,
    }
    assert sections["memories"]["source"] is None


async def test_prompt_uses_server_root_as_workspace(
    call, mem: AgentMemory, jp_root_dir: Path
) -> None:
    (Path(jp_root_dir) / "system.md").write_text("  You are a careful lab assistant.  \n")
    status, body = await call("GET", "agents", "demo", "prompt")
    assert (status, body["base"]) == (200, "You are a careful lab assistant.")
    assert body["text"].startswith("You are a careful lab assistant.\n\n")


@pytest.mark.parametrize("server_settings", [{"prompt_budget_tokens": 10}], indirect=True)
async def test_prompt_budget_from_server_setting(call, mem: AgentMemory) -> None:
    mem.update_facts("- fact\n" * 200)
    with warnings.catch_warnings(record=True) as logged:
        warnings.simplefilter("always")
        status, body = await call("GET", "agents", "demo", "prompt")
    assert status == 200
    assert (body["budget_tokens"], body["over_budget"]) == (10, True)
    # The warning is in the reply; a preview does not repeat it in the server's log.
    assert "over the budget of 10" in body["warnings"][0]
    assert not [w for w in logged if "over the budget" in str(w.message)]
    assert "- fact\n" * 200 in body["text"], "over budget is reported, never truncated"


@pytest.mark.parametrize("server_settings", [{"tool_name": "memory"}], indirect=True)
async def test_prompt_names_the_configured_tool(call, mem: AgentMemory) -> None:
    status, body = await call("GET", "agents", "demo", "prompt")
    assert status == 200
    assert "`memory`" in body["text"]
    assert "mcp__agent-memory__memory" not in body["text"]


async def test_prompt_applies_the_agents_template_settings(call, agents_root: Path) -> None:
    from jupyter_agent_memory import PromptBuilder, provision

    mem = AgentMemory.open_id("guided", agents_root)
    provision("guide", mem)
    expected = PromptBuilder().build_session(mem)
    status, body = await call("GET", "agents", "guided", "prompt")
    assert status == 200
    # The guide template sets a budget and has role instructions (so no bootstrap block).
    assert (body["budget_tokens"], body["bootstrap"]) == (4000, False)
    assert (body["budget_tokens"], body["bootstrap"]) == (
        expected.budget_tokens,
        expected.bootstrap,
    )


# -- history ---------------------------------------------------------------------------------------


async def test_history_and_one_version(call, mem: AgentMemory) -> None:
    status, body = await call("GET", "agents", "demo", "history")
    assert (status, body) == (200, {"agent": "demo", "versions": []})
    first = mem.update_facts("- v1\n")
    second = mem.update_facts("- v2 ü\n")
    mem.update_facts("- v3\n")
    status, body = await call("GET", "agents", "demo", "history")
    assert status == 200
    assert [(v["sha256"], v["size"]) for v in body["versions"]] == [
        (second, len("- v2 ü\n".encode())),
        (first, 5),
    ]
    assert all(v["ts"].endswith("Z") for v in body["versions"])

    for key in (second, second[:7], second[:12].upper()):
        status, body = await call("GET", "agents", "demo", "history", key)
        assert (status, body) == (200, {"agent": "demo", "sha256": second, "content": "- v2 ü\n"})


async def test_history_version_errors(call, mem: AgentMemory) -> None:
    mem.update_facts("- v1\n")
    mem.update_facts("- v2\n")
    status, body = await call("GET", "agents", "demo", "history", "0000000")
    assert (status, body) == (404, {"message": 'No FACT.md version matches "0000000"'})
    for bad in ("abc", "not-hex-at-all"):
        status, body = await call("GET", "agents", "demo", "history", bad)
        assert status == 400
        assert body == {
            "message": f'Invalid version "{bad}": give a sha256 or a prefix of at least 7 '
            "hex digits"
        }


# -- plumbing --------------------------------------------------------------------------------------


async def test_error_bodies_are_json(jp_fetch, mem: AgentMemory) -> None:
    response = await jp_fetch(*API, "agents", "demo", "history", "zz", raise_error=False)
    assert response.code == 400
    assert response.headers["Content-Type"].startswith("application/json")


async def test_a_write_waiting_for_the_lock_does_not_block_the_server(
    call, mem: AgentMemory
) -> None:
    # Engine work runs in worker threads: while an append waits for the agent's file lock
    # (held here, as another process would), other requests are still answered.
    fd = os.open(mem.path / "memory" / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # closing the descriptor releases it
    closed = threading.Lock()

    def close_once() -> None:
        if closed.acquire(blocking=False):
            os.close(fd)

    # Safety net: were the loop blocked by the append, this timer frees the lock so the test
    # fails on the assertions below instead of hanging.
    release = threading.Timer(3, close_once)
    release.start()
    try:
        pending = asyncio.ensure_future(
            call("POST", "agents", "demo", "journal", body={"text": "waited for the lock"})
        )
        await asyncio.sleep(0.3)
        assert not pending.done()
        status, _ = await asyncio.wait_for(call("GET", "agents", "demo", "facts"), 2)
        assert status == 200
        assert not pending.done()
    finally:
        release.cancel()
        close_once()
    status, body = await asyncio.wait_for(pending, 10)
    assert (status, body["entry"]["text"]) == (201, "waited for the lock")
    assert [e["text"] for e in mem.entries()] == ["waited for the lock"]


async def test_unsupported_method_is_405(jp_fetch) -> None:
    response = await jp_fetch(*API, "agents", method="DELETE", raise_error=False)
    assert response.code == 405


async def test_extension_state_uses_settings(jp_serverapp, agents_root: Path) -> None:
    # The extension loaded during jp_serverapp start-up; the state it keeps uses the setting.
    state = jp_serverapp.web_app.settings["agent_memory"]
    assert state.config.resolved_root() == agents_root.resolve()
    assert state.workspace == Path(os.path.abspath(jp_serverapp.root_dir))



@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("max_body_bytes", 0, "max_body_bytes must be at least 1, got 0"),
        ("worker_threads", -2, "worker_threads must be at least 1, got -2"),
        ("prompt_budget_tokens", -1, "prompt_budget_tokens cannot be negative, got -1"),
    ],
)
def test_a_setting_out_of_range_is_refused_by_name(setting: str, value: int, message: str) -> None:
    with pytest.raises(TraitError) as info:
        AgentMemoryServer(**{setting: value})
    assert str(info.value) == message
    assert getattr(AgentMemoryServer(**{setting: 1}), setting) == 1


# -- hostile and careless requests -------------------------------------------------------------


async def test_deeply_nested_json_is_400_not_500(call, mem: AgentMemory) -> None:
    raw = b"[" * 100_000 + b"]" * 100_000
    status, body = await call("PUT", "agents", "demo", "facts", raw=raw)
    assert status in (400, 413)
    assert body["message"].startswith("Request body")


@pytest.mark.parametrize("server_settings", [{"max_body_bytes": 100_000}], indirect=True)
async def test_deeply_nested_json_within_the_body_limit_is_400(call, mem: AgentMemory) -> None:
    raw = b"[" * 40_000 + b"]" * 40_000
    status, body = await call("PUT", "agents", "demo", "facts", raw=raw)
    assert (status, body) == (400, {"message": "Request body is not valid JSON: nested too deeply"})


async def test_overlong_agent_id_is_400(call, agents_root: Path) -> None:
    status, body = await call("GET", "agents", "a" * 300, "facts")
    assert (status, body) == (
        400, {"message": "Invalid agent id: it is 300 bytes long; the limit is 255 (a folder name)"}
    )
    status, body = await call("POST", "agents", body={"id": "b" * 256})
    assert status == 400
    assert not agents_root.exists() or list(agents_root.iterdir()) == []


async def test_a_journal_that_is_a_directory_is_refused_not_a_crash(
    call, mem: AgentMemory
) -> None:
    (mem.path / "memory" / "JOURNAL.jsonl").mkdir()
    status, body = await call("GET", "agents", "demo", "journal")
    assert status == 403
    assert "JOURNAL.jsonl" in body["message"] and "a directory" in body["message"]
    status, body = await call("POST", "agents", "demo", "journal", body={"text": "x"})
    assert status == 403
    assert "JOURNAL.jsonl" in body["message"]


@pytest.mark.parametrize("content", ["", " ", "\n\n", "\t \n"])
async def test_put_facts_refuses_an_empty_editor_buffer(call, mem: AgentMemory, content) -> None:
    mem.update_facts("- keep\n")
    status, body = await call("PUT", "agents", "demo", "facts", body={"content": content})
    assert (status, body) == (400, {"message": EmptyEditError().message})
    assert mem.facts == "- keep\n"


@pytest.mark.parametrize("server_settings", [{"max_body_bytes": 4 * 1024 * 1024}], indirect=True)
async def test_text_over_the_engine_limit_is_413_with_the_engine_text(
    call, mem: AgentMemory
) -> None:
    mem.update_facts("- keep\n")
    status, body = await call(
        "PUT", "agents", "demo", "facts", body={"content": "x" * (1024 * 1024 + 1)}
    )
    assert (status, body) == (
        413, {"message": "'content' is too large: 1048577 bytes, the limit is 1048576 bytes"}
    )
    assert mem.facts == "- keep\n"


async def test_reads_take_no_lock(call, mem: AgentMemory) -> None:
    lock = mem.path / "memory" / ".lock"
    lock.unlink(missing_ok=True)
    for route in ("facts", "journal", "history", "prompt"):
        status, _ = await call("GET", "agents", "demo", route)
        assert status == 200
    assert not lock.exists()


@pytest.mark.parametrize(
    "server_settings", [{"lock_timeout": 0.5, "worker_threads": 4}], indirect=True
)
@pytest.mark.slow
async def test_a_lock_held_elsewhere_delays_no_other_agent(
    call, mem: AgentMemory, agents_root: Path
) -> None:
    import asyncio
    import fcntl
    import os
    import time

    other = AgentMemory.open_id("other", agents_root)
    other.update_facts("- other\n")
    fd = os.open(mem.path / "memory" / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as another process's writer would
    try:
        started = time.monotonic()
        writes = [
            asyncio.ensure_future(
                call("POST", "agents", "demo", "journal", body={"text": f"w{i}"})
            )
            for i in range(6)
        ]
        await asyncio.sleep(0.05)
        t0 = time.monotonic()
        listed = await call("GET", "agents")
        read_other = await call("GET", "agents", "other", "facts")
        read_locked = await call("GET", "agents", "demo", "facts")
        elapsed = time.monotonic() - t0
        assert listed[0] == 200 and sorted(listed[1]["agents"]) == ["demo", "other"]
        assert (read_other[0], read_other[1]["content"]) == (200, "- other\n")
        assert read_locked[0] == 200
        assert elapsed < 0.4, f"reads waited {elapsed:.2f} s behind a held lock"
        results = await asyncio.gather(*writes)
        assert time.monotonic() - started < 10
        for status, body in results:
            assert status == 503
            assert body["message"].startswith("Timed out after 0.5 s waiting for the lock ")
            assert ".lock" in body["message"]
    finally:
        os.close(fd)
    assert list(mem.entries()) == []
    status, body = await call("POST", "agents", "demo", "journal", body={"text": "after"})
    assert status == 201


async def test_lone_surrogates_are_refused_naming_the_field(call, mem: AgentMemory) -> None:
    raw = b'{"text": "half \\ud83d an emoji"}'
    status, body = await call("POST", "agents", "demo", "journal", raw=raw)
    assert status == 400
    assert body["message"].startswith("'text' is not valid Unicode text: lone surrogate U+D83D")
    raw = b'{"content": "x\\udc00"}'
    status, body = await call("PUT", "agents", "demo", "facts", raw=raw)
    assert (status, body) == (
        400, {"message": "'content' is not valid Unicode text: lone surrogate U+DC00 at position 1"}
    )
    assert list(mem.entries()) == [] and mem.facts == ""


async def test_search_returns_badly_written_lines_with_replacement_characters(
    call, mem: AgentMemory
) -> None:
    (mem.path / "memory" / "JOURNAL.jsonl").write_bytes(
        b'{"ts":"2026-01-01T00:00:00.000Z","tags":[],"text":"half \\ud83d emoji"}\n'
        b'{"ts":"2026-01-01T00:00:01.000Z","tags":[],"text":"bad \xff byte"}\n'
    )
    status, body = await call("GET", "agents", "demo", "journal")
    assert status == 200
    assert [e["text"] for e in body["entries"]] == ["bad \ufffd byte", "half \ufffd emoji"]


async def test_facts_report_the_real_file_name(call, mem: AgentMemory) -> None:
    (mem.path / "memory" / "fact.md").write_text("- lower\n")
    status, body = await call("GET", "agents", "demo", "facts")
    assert (status, body["path"], body["content"]) == (
        200, str(mem.path / "memory" / "fact.md"), "- lower\n"
    )
    status, body = await call(
        "PUT", "agents", "demo", "facts", body={"content": "- new\n", "expected_sha256": None}
    )
    assert (status, body["previous_sha256"]) == (200, sha("- lower\n"))
    assert (mem.path / "memory" / "fact.md").read_text() == "- new\n"


@pytest.mark.parametrize("route", ["facts", "soul", "user"])
async def test_put_with_the_sha256_field_get_returns_is_refused_not_a_blind_write(
    call, server_root: Path, route: str
) -> None:
    mem = AgentMemory.open_id("a", server_root)
    mem.update_facts("- Ada lives in Paris.\n")
    mem.write_soul("# Soul\nI am Pip.\n")
    mem.write_user("# User\nAda.\n")
    status, body = await call("GET", "agents", "a", route)
    assert status == 200
    stale = body["sha256"]
    # Someone else saves in between: the sidebar's copy is now stale.
    theirs = {"content": "- theirs\n", "expected_sha256": stale}
    assert (await call("PUT", "agents", "a", route, body=theirs))[0] == 200
    mine = {"content": "- mine\n", "sha256": stale}
    status, body = await call("PUT", "agents", "a", route, body=mine)
    assert status in (400, 409), body
    status, body = await call("GET", "agents", "a", route)
    assert body["content"] == "- theirs\n"


async def test_an_unknown_route_under_the_api_is_a_json_404(call, server_root: Path) -> None:
    AgentMemory.open_id("a", server_root)
    status, body = await call("GET", "agents", "a", "no-such-route")
    assert status == 404
    assert isinstance(body["message"], str)
