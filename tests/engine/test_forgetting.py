"""Forgetting that is verified, and no secrets in memory (docs/guarantees.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from credential_corpus import FAKE

from jupyter_agent_memory import AgentMemory, MemoryToolError, PromptBuilder, forget, lint


def test_the_guard_can_be_turned_off_per_agent(agents_root: Path) -> None:
    open_minded = AgentMemory.open("lab", secret_guard=False)
    open_minded.update_facts(f"- test key {FAKE['an AWS access key']}\n")
    guarded = AgentMemory.open("other")
    with pytest.raises(MemoryToolError):
        guarded.update_facts(f"- test key {FAKE['an AWS access key']}\n")


def seeded(agents_root: Path) -> AgentMemory:
    """An agent that stored a secret everywhere before the guard existed."""
    mem = AgentMemory.open("leaky", secret_guard=False)
    key = FAKE["an OpenAI API key"]
    mem.write_user("- Name: Ada\n- Favourite tea: oolong\n")
    mem.update_facts(f"# Facts\n\n- Ada prefers metric units.\n- API key: {key}\n")
    mem.update_facts(f"# Facts\n\n- Ada prefers metric units.\n- API key: {key}\n- Mondays.\n")
    mem.update_facts("# Facts\n\n- Ada prefers metric units.\n- Mondays.\n")  # key in history
    mem.append("Set up the deploy", ["deploy"])
    mem.append(f"Ada pasted the key {key} into chat", ["oops"])
    mem.append("Lunch with \u00c5sa about the ROADMAP")
    mem.update_facts(f"# Facts\n\n- Ada prefers metric units.\n- Key: {key}\n")
    PromptBuilder().start_session(mem, agents_root)  # the key reaches a stored prompt
    return mem


def scan(mem: AgentMemory, needle: str) -> list[str]:
    forms = {needle.encode(), needle.casefold().encode(), json.dumps(needle)[1:-1].encode()}
    found = []
    for dirpath, _dirs, files in os.walk(mem.path):
        for name in files:
            data = (Path(dirpath) / name).read_bytes()
            if any(form in data or form in data.lower() for form in forms):
                found.append(str((Path(dirpath) / name).relative_to(mem.path)))
    return sorted(found)


def test_lint_reports_stored_secrets_without_showing_them(agents_root: Path) -> None:
    mem = seeded(agents_root)
    findings = lint(mem)
    files = {f["file"] for f in findings}
    assert "memory/FACT.md" in files and "memory/JOURNAL.jsonl" in files
    assert any(f.startswith("memory/.history/") for f in files)
    assert any(f.startswith("memory/.sessions/") for f in files)
    assert {f["kind"] for f in findings} == {"an OpenAI API key"}
    assert FAKE["an OpenAI API key"] not in json.dumps(findings)
    assert lint(AgentMemory.open("clean")) == []


def test_forgetting_secrets_removes_every_copy_and_proves_it(agents_root: Path) -> None:
    mem = seeded(agents_root)
    key = FAKE["an OpenAI API key"]
    assert scan(mem, key)
    plan = forget(mem, secrets=True, dry_run=True, reason="credential")
    assert plan["dry_run"] and not plan["verified"]
    assert scan(mem, key)  # a dry run changes nothing
    receipt = forget(mem, secrets=True, reason="credential")
    assert receipt["verified"] is True and receipt["remaining"] == []
    assert receipt["changed"]["facts"] == 1 and receipt["changed"]["journal"] == 1
    assert receipt["changed"]["history"] >= 1 and receipt["changed"]["sessions"] >= 1
    # The dry run came before the agent had a receipt key: its hash is under a key not kept.
    assert plan["forgotten_sha256"] != receipt["forgotten_sha256"]
    assert len(receipt["forgotten_sha256"]) == 64
    unkeyed = ("ts", "forgotten_sha256")
    assert {k: v for k, v in receipt.items() if k not in unkeyed} == {
        **{k: v for k, v in plan.items()
           if k not in (*unkeyed, "dry_run", "verified", "remaining")},
        "dry_run": False, "verified": True, "remaining": [],
    }
    again = forget(mem, secrets=True, dry_run=True)
    assert again["forgotten_sha256"] == receipt["forgotten_sha256"]  # same key, same hash
    assert scan(mem, key) == []
    assert lint(mem) == []
    assert key not in PromptBuilder().build(mem).text
    # The journal keeps the time of the forgotten entry and says why, never what.
    entries = list(mem.entries())
    assert [e["text"] for e in entries] == [
        "Set up the deploy", "[forgotten: credential]", "Lunch with \u00c5sa about the ROADMAP"
    ]
    assert entries[1]["tags"] == ["forgotten"] and entries[1]["ts"]
    assert mem.facts == "# Facts\n\n- Ada prefers metric units.\n"
    # The receipt log names kinds and counts and a hash, never the text.
    log = (mem.path / "memory" / "FORGET.jsonl").read_text()
    assert key not in log and json.loads(log.splitlines()[-1])["verified"] is True


def test_forgetting_a_text_matches_case_and_json_escapes(agents_root: Path) -> None:
    mem = seeded(agents_root)
    receipt = forget(mem, "åsa about the roadmap")
    assert receipt["verified"] is True
    assert receipt["changed"]["journal"] == 1
    assert scan(mem, "\u00c5sa about the ROADMAP") == []
    assert scan(mem, "\\u00c5sa") == []
    again = forget(mem, "åsa about the roadmap")  # a rerun finds nothing left to do
    assert again["changed"] == dict.fromkeys(again["changed"], 0) and again["verified"]


def test_forgetting_a_pattern_and_the_profile(agents_root: Path) -> None:
    mem = seeded(agents_root)
    receipt = forget(mem, pattern=r"(?i)favourite tea")
    assert receipt["changed"]["profile"] == 1 and receipt["verified"]
    assert mem.user == "- Name: Ada\n"


def test_bad_forget_requests(agents_root: Path) -> None:
    mem = AgentMemory.open("x")
    for kwargs, message in [
        ({}, "Forget needs exactly one of"),
        ({"text": "a", "secrets": True}, "Forget needs exactly one of"),
        ({"text": "  "}, "The text to forget must be a non-empty string"),
        ({"text": "two\nlines"}, "Forget one line of text at a time"),
        ({"pattern": "("}, "Invalid pattern: "),
        ({"text": "tea", "reason": "no more tea"}, "The reason must not contain"),
    ]:
        with pytest.raises(MemoryToolError, match=message):
            forget(mem, **kwargs)
    assert not (mem.path / "memory" / "FORGET.jsonl").exists()


def test_a_crash_mid_way_is_finished_by_a_rerun(
    agents_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jupyter_agent_memory.engine import forgetting

    mem = seeded(agents_root)
    key = FAKE["an OpenAI API key"]

    def crash(*args: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(forgetting, "_history", crash)
    with pytest.raises(OSError):
        forget(mem, secrets=True)
    assert key not in mem.facts  # files done before the crash are done, atomically
    assert any(f.startswith("memory/.history/") for f in scan(mem, key))
    monkeypatch.undo()
    receipt = forget(mem, secrets=True)
    assert receipt["verified"] is True and scan(mem, key) == []


def test_forgetting_drops_the_search_index_and_scans_it(
    agents_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_CACHE", str(tmp_path / "cache"))
    mem = AgentMemory.open("indexed", secret_guard=False)
    for i in range(50):
        mem.append(f"entry {i} about the harbour")
    mem.append("the door code is 4711 for the harbour office")
    mem.build_index()
    assert [e["text"] for e in mem.search("door code")] == [
        "the door code is 4711 for the harbour office"
    ]
    caches = {p: p.stat().st_ino for p in (tmp_path / "cache").rglob("*") if p.is_file()}
    assert caches
    receipt = forget(mem, "door code is 4711")
    assert receipt["changed"]["caches"] == len(caches) and receipt["verified"] is True
    assert set(receipt["places"]) >= {str(p) for p in caches}
    assert all(not p.exists() for p in caches)  # derived copies are gone, not patched
    assert mem.search("door code") == []  # searches scan until the index is built again
    assert len(mem.search("harbour", limit=100)) == 50


def test_an_append_racing_a_forget_lands_in_the_new_journal(
    agents_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = AgentMemory.open("t")
    mem.append("first")
    appender = mem._journal_appender()
    locked = appender._locked

    def rewritten_before_we_lock():  # another process forgets between our check and lock
        forget(AgentMemory.open("t"), "first")
        return locked()

    monkeypatch.setattr(appender, "_locked", rewritten_before_we_lock)
    mem.append("second")
    assert [e["text"] for e in mem.entries()] == ["[forgotten]", "second"]


def test_why_still_traces_every_line_after_a_forget(agents_root: Path, tmp_path: Path) -> None:
    mem = AgentMemory.open("w")
    mem.write_soul("I am Pip.\nMy secret hobby is knitting.\nI like tea.\n" + "x" * 60 + "\n")
    mem.update_facts("- Keep this fact.\n")
    session = PromptBuilder().start_session(mem, tmp_path).receipt["session_id"]
    forget(mem, "secret hobby")
    (origin,) = mem.why(session, "Keep this fact")
    assert (origin.source, origin.line) == (str(mem.path / "memory" / "FACT.md"), 1)
    (origin,) = mem.why(session, "I like tea")
    assert (origin.source, origin.line) == (str(mem.path / "SOUL.md"), 3)
    assert "knitting" not in mem.session_prompt(session)
    assert mem.sessions()[0]["forgotten"] is True


def test_a_deeply_nested_line_cannot_crash_forget_or_lint(agents_root: Path) -> None:
    mem = AgentMemory.open("n")
    mem.append("the door code is 1234")
    with (mem.path / "memory" / "JOURNAL.jsonl").open("ab") as journal:
        journal.write(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    assert lint(mem) == []
    receipt = forget(mem, "door code")
    assert receipt["changed"]["journal"] == 1 and receipt["verified"] is True


def _agent_bytes(mem: AgentMemory) -> dict[str, bytes]:
    return {
        str(p.relative_to(mem.path)): p.read_bytes()
        for p in sorted(mem.path.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


@pytest.mark.parametrize("pattern", ["", ".*", "x*", "(?:)"])
def test_a_pattern_that_matches_the_empty_string_is_refused(mem: AgentMemory, pattern: str) -> None:
    mem.update_facts("- Ada lives in Paris.\n")
    before = _agent_bytes(mem)
    for dry_run in (True, False):
        with pytest.raises(MemoryToolError) as info:
            forget(mem, pattern=pattern, dry_run=dry_run)
        assert info.value.code == -32602
    assert _agent_bytes(mem) == before


def test_a_text_with_a_lone_surrogate_is_a_clear_error(mem: AgentMemory) -> None:
    mem.update_facts("- Ada lives in Paris.\n")
    before = _agent_bytes(mem)
    with pytest.raises(MemoryToolError) as info:
        forget(mem, "Paris\ud800")
    assert info.value.code == -32602
    assert _agent_bytes(mem) == before
