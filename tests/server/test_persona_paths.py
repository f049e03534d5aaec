"""REST: SOUL.md and USER.md routes, and agents opened by a folder path below the server's root
(``@relative/path`` ids, what the sidebar's "open this folder as an agent" uses), over real HTTP.
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent_memory import AgentMemory


@pytest.fixture
def agents_root(server_only_root: Path) -> Path:
    """The agents root, known to the server alone."""
    return server_only_root


@pytest.fixture
def call(http_server_client, jp_auth_header, jp_base_url):
    """``await call(method, agent_id, *rest, body=...)``: the id is sent as one URL segment
    (``/`` encoded as ``%2F``), as the sidebar's client sends it."""

    async def _call(method: str, agent: str, *rest: str, body: Any = None) -> tuple[int, Any]:
        segments = ["agent-memory", "api", "agents", agent, *rest]
        path = "/".join(urllib.parse.quote(s, safe="") for s in segments)
        raw = json.dumps(body).encode() if body is not None else (
            b"" if method in ("POST", "PUT") else None)
        response = await http_server_client.fetch(
            jp_base_url.rstrip("/") + "/" + path, method=method, body=raw,
            headers=dict(jp_auth_header), raise_error=False)
        text = response.body.decode() if response.body else ""
        return response.code, json.loads(text) if text else None

    return _call


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def test_soul_and_user_read_and_compare_and_swap(call, agents_root: Path) -> None:
    mem = AgentMemory.open_id("demo", agents_root)
    mem.write_soul("I am Ada.\n")
    status, body = await call("GET", "demo", "soul")
    assert status == 200
    assert body == {"agent": "demo", "name": "SOUL.md", "path": str(mem.path / "SOUL.md"),
                    "content": "I am Ada.\n", "sha256": sha("I am Ada.\n"),
                    "chars": 10, "truncated": False}
    status, body = await call("PUT", "demo", "soul",
                              body={"content": "I am Ada, careful.\n",
                                    "expected_sha256": sha("I am Ada.\n")})
    assert status == 200 and body["sha256"] == sha("I am Ada, careful.\n")
    assert body["previous_sha256"] == sha("I am Ada.\n")
    assert (mem.path / "SOUL.md").read_text() == "I am Ada, careful.\n"

    # A stale hash is a 409 with both hashes, and nothing is written.
    status, body = await call("PUT", "demo", "soul",
                              body={"content": "clobber\n", "expected_sha256": sha("I am Ada.\n")})
    assert status == 409
    assert (body["expected"], body["actual"]) == (sha("I am Ada.\n"), sha("I am Ada, careful.\n"))
    assert (mem.path / "SOUL.md").read_text() == "I am Ada, careful.\n"

    status, body = await call("GET", "demo", "user")
    assert (status, body["name"], body["content"]) == (200, "USER.md", "")
    status, _ = await call("PUT", "demo", "user",
                           body={"content": "Prefers metric.\n", "expected_sha256": sha("")})
    assert status == 200 and mem.user == "Prefers metric.\n"
    status, body = await call("PUT", "demo", "user", body={"content": 5})
    assert status == 400 and "'content' must be a string" in body["message"]
    status, body = await call("PUT", "demo", "user",
                              body={"content": "x", "expected_sha256": 7})
    assert status == 400 and "expected_sha256" in body["message"]
    status, _ = await call("GET", "nobody", "soul")
    assert status == 404
    assert not (agents_root / "nobody").exists()


async def test_an_agent_opened_by_path_below_the_server_root(
    call, jp_root_dir: Path, agents_root: Path
) -> None:
    folder = jp_root_dir / "projects" / "demo-agent"
    mem = AgentMemory.open(folder)
    mem.update_facts("- from the tutorial\n")
    agent = "@projects/demo-agent"
    status, body = await call("GET", agent, "facts")
    assert status == 200
    assert (body["agent"], body["content"]) == (agent, "- from the tutorial\n")
    assert body["path"] == str(folder / "memory" / "FACT.md")
    status, _ = await call("PUT", agent, "facts",
                           body={"content": "- edited in the sidebar\n",
                                 "expected_sha256": sha("- from the tutorial\n")})
    assert status == 200 and mem.facts == "- edited in the sidebar\n"
    status, body = await call("POST", agent, "journal", body={"text": "seen", "tags": []})
    assert status == 201 and [e["text"] for e in mem.entries()] == ["seen"]
    for route in ("journal", "prompt", "history", "sessions", "soul"):
        status, _ = await call("GET", agent, route)
        assert status == 200, route
    assert not agents_root.exists()  # nothing went to the agents root


@pytest.mark.parametrize(
    ("agent", "status", "message"),
    [
        ("@", 400, "Invalid agent folder"),
        ("@../outside", 400, "Invalid agent folder"),
        ("@a/../../outside", 400, "Invalid agent folder"),
        ("@/etc", 400, "Invalid agent folder"),
        ("@a//b", 400, "Invalid agent folder"),
        ("@a\\b", 400, "Invalid agent folder"),
        ("@missing", 404, 'No folder "missing" under the server'),
    ],
)
async def test_path_agents_stay_below_the_root(call, agent: str, status: int,
                                               message: str, jp_root_dir: Path) -> None:
    got, body = await call("GET", agent, "facts")
    assert got == status and message in body["message"]
    assert not (jp_root_dir / "missing").exists()


async def test_a_link_out_of_the_root_is_refused(call, jp_root_dir: Path, tmp_path: Path) -> None:
    outside = AgentMemory.open(tmp_path / "outside")
    outside.update_facts("secret\n")
    (jp_root_dir / "linked").symlink_to(outside.path)
    (jp_root_dir / "real").mkdir()
    (jp_root_dir / "real" / "inner").symlink_to(outside.path)
    for agent in ("@linked", "@real/inner"):
        status, body = await call("GET", agent, "facts")
        assert status == 403 and "a link on the way" in body["message"], agent
        status, _ = await call("PUT", agent, "facts", body={"content": "pwned\n"})
        assert status == 403
    assert outside.facts == "secret\n"
    (jp_root_dir / "file").write_text("x")
    status, body = await call("GET", "@file", "facts")
    assert status == 403 and "is not a folder" in body["message"]
