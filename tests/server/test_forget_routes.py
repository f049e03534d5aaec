"""``POST agents/{id}/forget`` (docs/guarantees.md) over a real jupyter_server.

What the route claims is checked on disk: a byte scan of the agent folder in raw, case-folded
and JSON-escaped forms, FACT.md and the journal, and a freshly built prompt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from forget_checks import TEXT, TOKEN, copies, holding_text, stored

from jupyter_agent_memory import AgentMemory, PromptBuilder, lint


@pytest.fixture
def agents_root(server_only_root: Path) -> Path:
    """The agents root, known to the server alone."""
    return server_only_root


@pytest.fixture
def server_settings() -> dict[str, Any]:
    """A small body limit, so an oversized request is cheap to send."""
    return {"max_body_bytes": 4096}


@pytest.fixture
def call(call):
    """``await call(body_or_raw, agent="demo")`` POSTs to forget -> (status, parsed body).

    Built on the shared REST ``call`` this fixture overrides (bytes are sent as they are).
    """

    async def _forget(body: Any, agent: str = "demo", **kwargs: Any) -> tuple[int, Any]:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await call("POST", "agents", agent, "forget", raw=raw, **kwargs)

    return _forget


@pytest.fixture
def mem(agents_root: Path) -> AgentMemory:
    """The ``demo`` agent holding TEXT everywhere forgetting looks."""
    return holding_text(AgentMemory.open_id("demo", agents_root))


async def test_dry_run_says_what_would_change_and_changes_nothing(call, mem) -> None:
    before = stored(mem)
    status, body = await call({"text": TEXT, "dry_run": True})
    assert status == 200
    assert body["agent"] == "demo"
    receipt = body["receipt"]
    assert receipt["dry_run"] is True
    for kind in ("facts", "journal", "history", "sessions"):
        assert receipt["changed"][kind] >= 1, kind
    assert "memory/FACT.md" in receipt["places"]
    assert TEXT.casefold() not in json.dumps(body, ensure_ascii=False).casefold()
    assert stored(mem) == before


async def test_forget_removes_every_copy(call, mem: AgentMemory) -> None:
    status, body = await call({"text": TEXT, "reason": "asked by Bea"})
    assert status == 200
    receipt = body["receipt"]
    assert (receipt["dry_run"], receipt["verified"], receipt["remaining"]) == (False, True, [])
    assert len(receipt["forgotten_sha256"]) == 64
    assert TEXT.casefold() not in json.dumps(body, ensure_ascii=False).casefold()
    assert copies(mem.path, TEXT) == []
    assert "- Keep this." in mem.facts
    assert any(e.get("text") == "Unrelated entry about lunch" for e in mem.entries())
    assert TEXT.casefold() not in PromptBuilder().build_session(mem).text.casefold()


async def test_forget_a_pattern_and_secrets(call, agents_root: Path) -> None:
    mem = AgentMemory.open_id("leaky", agents_root, secret_guard=False)
    mem.update_facts(f"- Deploys use {TOKEN}.\n- Room 4417 is ours.\n- Keep this.\n")
    status, body = await call({"pattern": r"Room \d+"}, agent="leaky")
    assert (status, body["receipt"]["verified"]) == (200, True)
    assert "Room 4417" not in mem.facts and TOKEN in mem.facts
    status, body = await call({"secrets": True, "reason": "lint"}, agent="leaky")
    assert (status, body["receipt"]["verified"]) == (200, True)
    assert TOKEN not in json.dumps(body)
    assert copies(mem.path, TOKEN) == []
    assert mem.facts.endswith("- Keep this.\n")
    assert lint(mem) == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "Give exactly one of 'text', 'pattern' or 'secrets': true"),
        ({"text": TEXT, "pattern": "x"}, "Give exactly one of 'text', 'pattern' or 'secrets'"),
        ({"text": TEXT, "secrets": True}, "Give exactly one of 'text', 'pattern' or 'secrets'"),
        ({"secrets": False}, "Give exactly one of 'text', 'pattern' or 'secrets': true"),
        ({"text": 4417}, "'text' must be a string or null"),
        ({"pattern": ["x"]}, "'pattern' must be a string or null"),
        ({"text": TEXT, "dry_run": "false"}, "'dry_run' must be true or false"),
        ({"secrets": "yes"}, "'secrets' must be true or false"),
        ({"text": TEXT, "reason": 3}, "'reason' must be a string"),
        ({"pattern": "(unclosed"}, "Invalid pattern: "),
        ({"text": "   "}, "The text to forget must be a non-empty string"),
        ([TEXT], "Request body must be a JSON object"),
        # A misspelt dry_run must not turn a rehearsal into forgetting for real.
        (
            {"text": TEXT, "dryrun": True},
            "Unknown field 'dryrun' in the request; expected text, pattern, secrets, "
            "dry_run, reason",
        ),
        (
            {"text": TEXT, "dry-run": True, "why": "x"},
            "Unknown fields 'dry-run', 'why' in the request; expected text, pattern,",
        ),
    ],
)
async def test_bad_bodies_are_400_and_change_nothing(
    call, mem: AgentMemory, body: Any, message: str
) -> None:
    before = stored(mem)
    status, answer = await call(body)
    assert status == 400
    assert answer["message"].startswith(message)
    assert stored(mem) == before


async def test_malformed_and_oversized_bodies(call, mem: AgentMemory) -> None:
    before = stored(mem)
    status, answer = await call(b"{not json")
    assert status == 400 and answer["message"].startswith("Request body is not valid JSON")
    status, answer = await call({"text": "x" * 5000})
    assert status == 413
    assert stored(mem) == before


async def test_a_missing_agent_is_404_and_created_nowhere(call, agents_root: Path) -> None:
    status, body = await call({"text": "x"}, agent="nosuch")
    assert status == 404
    assert body["message"].startswith('Agent "nosuch" does not exist')
    assert not (agents_root / "nosuch").exists()


async def test_forget_needs_the_xsrf_check_and_a_token(
    http_server_client, jp_base_url, mem: AgentMemory
) -> None:
    before = stored(mem)
    response = await http_server_client.fetch(
        jp_base_url + "agent-memory/api/agents/demo/forget",
        method="POST",
        body=json.dumps({"text": TEXT}),
        raise_error=False,
    )
    assert response.code == 403
    assert stored(mem) == before
    assert copies(mem.path, TEXT)


async def test_a_failed_verification_is_reported_in_the_receipt(
    call, mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The engine's verification is tested with the engine; here only that the route passes a
    # receipt saying a copy was left through unchanged, for the client to act on.
    receipt = {
        "ts": "2026-01-01T00:00:00.000Z", "forgotten_sha256": "0" * 64, "what": "text",
        "reason": "", "dry_run": False, "changed": {"facts": 1}, "places": ["memory/FACT.md"],
        "verified": False, "remaining": ["memory/odd-copy.txt"],
    }
    seen: list[tuple[Any, ...]] = []

    def fake(*args: Any, **kwargs: Any) -> dict[str, Any]:
        seen.append((args[1:], kwargs))
        return receipt

    monkeypatch.setattr("jupyter_agent_memory.server.handlers.forget", fake)
    status, body = await call({"text": TEXT, "dry_run": False, "reason": "why"})
    assert (status, body) == (200, {"agent": "demo", "receipt": receipt})
    assert seen == [
        ((TEXT,), {"pattern": None, "secrets": False, "dry_run": False, "reason": "why"})
    ]
