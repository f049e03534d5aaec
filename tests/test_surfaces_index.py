"""Every surface says whether the journal's index narrowed a search, and the command line
builds, shows and drops the index. (The memory tool's texts never change: they are the same
with or without an index.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_calls import run

from jupyter_agent_memory import AgentMemory, environment

NOTE = "(the journal's index narrowed this search)\n"


@pytest.fixture
def indexed(agents_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentMemory:
    """The agent ``t`` with 200 entries, two about a zeppelin; its cache folder in tmp_path."""
    monkeypatch.setenv(environment.CACHE, str(tmp_path / "cache"))
    monkeypatch.delenv(environment.INDEX, raising=False)
    mem = AgentMemory.open("t")
    for i in range(200):
        mem.append(f"entry {i}" + (" saw a zeppelin" if i in (50, 150) else ""), ["x"])
    return mem


def test_the_cli_builds_shows_and_drops_the_index(
    indexed: AgentMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    size = (indexed.path / "memory" / "JOURNAL.jsonl").stat().st_size
    code, out, err = run(capsys, "index", "status", "--agent", "t")
    assert (code, err) == (0, "")
    assert out.startswith(f"state: missing\nindexed: 0 of {size:,} journal bytes\n")
    assert "kept up to date after appends: no\n" in out
    code, out, err = run(capsys, "index", "build", "--agent", "t")
    assert (code, err) == (0, "")
    assert out.startswith(f"state: ready\nindexed: {size:,} of {size:,} journal bytes\n")
    db = indexed.index_status()["path"]
    assert f"path: {db}\n" in out
    code, out, err = run(capsys, "--json", "index", "status", "--agent", "t")
    assert json.loads(out) == indexed.index_status()
    code, out, err = run(capsys, "index", "drop", "--agent", "t")
    assert code == 0 and out.startswith("Dropped ") and f"  {db}\n" in out
    assert indexed.index_status()["state"] == "missing"
    code, out, err = run(capsys, "index", "drop", "--json", "--agent", "t")
    assert (code, json.loads(out)) == (0, {"dropped": []})


def test_index_commands_never_create_an_agent(
    agents_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for action in ("status", "build", "drop"):
        code, out, err = run(capsys, "index", action, "--agent", "nobody")
        assert code == 1 and out == "" and "nobody" in err
    assert not (agents_root / "nobody").exists()


def test_the_cli_notes_on_stderr_when_the_index_narrowed_a_search(
    indexed: AgentMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    code, plain_out, err = run(capsys, "journal", "search", "zeppelin", "--agent", "t")
    assert (code, err) == (0, "") and plain_out.count("saw a zeppelin") == 2
    code, json_out, err = run(capsys, "journal", "search", "zeppelin", "--json", "--agent", "t")
    assert err == ""
    indexed.build_index()
    assert run(capsys, "journal", "search", "zeppelin", "--agent", "t") == (0, plain_out, NOTE)
    # The JSON for scripts is the tool's own text, the same with or without the index.
    assert run(capsys, "journal", "search", "zeppelin", "--json", "--agent", "t") == (
        0, json_out, ""
    )
    assert json_out == indexed.call_tool({"action": "search", "query": "zeppelin"}) + "\n"
    # A shape the index cannot narrow says nothing.
    assert run(capsys, "journal", "search", "-t", "x", "-n", "1", "--agent", "t")[2] == ""
    assert run(capsys, "journal", "search", "absent-word", "--agent", "t") == (
        0, "No matching journal entries found.\n", ""
    )


async def test_the_rest_journal_search_reports_the_index(call: Any, indexed: AgentMemory) -> None:
    params = {"query": "zeppelin"}
    status, body = await call("GET", "agents", "t", "journal", params=params)
    assert (status, body["indexed"], len(body["entries"])) == (200, False, 2)
    indexed.build_index()
    status, again = await call("GET", "agents", "t", "journal", params=params)
    assert (status, again["indexed"], again["entries"]) == (200, True, body["entries"])


def test_the_journal_magic_notes_the_index_under_its_table(indexed: AgentMemory, ip: Any) -> None:
    from IPython.utils.capture import capture_output

    ip.run_line_magic("load_ext", "jupyter_agent_memory")
    try:
        with capture_output():
            plain = ip.run_line_magic("journal", "search zeppelin --agent t")
        indexed.build_index()
        with capture_output():
            narrowed = ip.run_line_magic("journal", "search zeppelin --agent t")
    finally:
        ip.run_line_magic("unload_ext", "jupyter_agent_memory")
    assert narrowed == plain and (plain.indexed, narrowed.indexed) == (False, True)
    assert str(plain).endswith("(2 entries, newest first)")
    assert str(narrowed).endswith("(2 entries, newest first; narrowed by the journal's index)")
    assert "newest first; narrowed by the journal&#x27;s index</small>" in narrowed._repr_html_()
