"""``jupyter-agent-memory forget`` and ``lint`` (docs/guarantees.md), on real agent folders.

Every claim the command prints is checked independently: a byte scan of the agent folder in
raw, case-folded and JSON-escaped forms, the files themselves, and a freshly built prompt.
"""

from __future__ import annotations

import io
import json
import re
import types
from pathlib import Path

import pytest
from cli_calls import run
from forget_checks import SESSION_ID, TEXT, TOKEN, copies, holding_text, stored

from jupyter_agent_memory import AgentMemory, PromptBuilder, lint
from jupyter_agent_memory.cli import main

ERROR = "jupyter-agent-memory: error: "
KINDS = ("facts", "journal", "history", "sessions", "caches")  # at least these, in order


@pytest.fixture
def agent(agents_root: Path) -> AgentMemory:
    """The ``pip`` agent holding TEXT everywhere forgetting looks."""
    return holding_text(AgentMemory.open("pip"))


def test_dry_run_lists_what_would_change_and_changes_nothing(
    agent: AgentMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    before = stored(agent)
    code, out, err = run(capsys, "forget", TEXT, "--dry-run", "--json", "--agent", "pip")
    assert (code, err) == (0, "")
    receipt = json.loads(out)
    assert receipt["dry_run"] is True
    kinds = list(receipt["changed"])
    assert [kind for kind in kinds if kind in KINDS] == list(KINDS)
    for kind in ("facts", "journal", "history", "sessions"):
        assert receipt["changed"][kind] >= 1, kind
    assert TEXT not in out and TEXT.casefold() not in out.casefold()
    code, out, err = run(capsys, "forget", TEXT, "--dry-run", "--agent", "pip")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "Dry run, nothing changed. Forgetting would change:"
    # Each count says what it counts: lines, entries, versions, files.
    shown = [line.split(": ", 1) for line in lines[1 : 1 + len(kinds)]]
    assert [kind.strip() for kind, _ in shown] == kinds
    counts = {kind.strip(): rest for kind, rest in shown}
    assert counts["facts"] == f"{receipt['changed']['facts']} line" + (
        "" if receipt["changed"]["facts"] == 1 else "s") + " of FACT.md"
    n = receipt["changed"]["sessions"]
    assert counts["sessions"].startswith(f"{n} stored session text")
    assert [line[4:] for line in lines if line.startswith("  - ")] == receipt["places"]
    # Nothing was forgotten and no receipt kept: the hash is of what *would* be forgotten, keyed
    # with a throwaway key (a dry run writes no key), so two dry runs show different hashes.
    assert re.fullmatch(r"Dry run at \S+Z, no receipt written; keyed sha256 of what would be "
                        r"forgotten [0-9a-f]{12}\.", lines[-1])
    assert TEXT.casefold() not in out.casefold()
    assert stored(agent) == before


def test_forget_removes_every_copy_and_says_it_verified(
    agent: AgentMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "forget", TEXT, "--reason", "asked by Bea", "--agent", "pip")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "Forgotten. Changed:"
    shown = [line.split(":")[0].strip() for line in lines[1:] if not line.startswith("  - ")]
    assert [kind for kind in shown if kind in KINDS] == list(KINDS)
    assert re.fullmatch(r"Receipt \S+ \(in memory/FORGET\.jsonl\), keyed sha256 of what was "
                        r"forgotten [0-9a-f]{12}\.", lines[-2])
    assert lines[-1] == (
        "Verified: found in no form (raw, case-folded, JSON-escaped) in the agent's files."
    )
    assert TEXT.casefold() not in out.casefold()
    # Independently of the receipt: no copy anywhere, nothing else lost.
    assert copies(agent.path, TEXT) == []
    assert "- Keep this." in agent.facts
    assert any(e.get("text") == "Unrelated entry about lunch" for e in agent.entries())
    assert TEXT.casefold() not in PromptBuilder().build_session(agent).text.casefold()


def test_a_rerun_finds_nothing_left(agent: AgentMemory, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "forget", TEXT, "--agent", "pip")[0] == 0
    before = stored(agent)
    code, out, _ = run(capsys, "forget", TEXT, "--json", "--agent", "pip")
    receipt = json.loads(out)
    assert code == 0
    assert receipt["verified"] is True and receipt["remaining"] == []
    assert set(receipt["changed"].values()) == {0}
    assert {k: v for k, v in stored(agent).items() if "JOURNAL" not in k} == {
        k: v for k, v in before.items() if "JOURNAL" not in k
    }


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r", ""])
def test_forget_reads_the_text_from_stdin(
    agent: AgentMemory,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    ending: str,
) -> None:
    # A Windows console or file ends the line with CRLF: the CR is not part of the text.
    stdin = types.SimpleNamespace(buffer=io.BytesIO((TEXT + ending).encode()))
    monkeypatch.setattr("sys.stdin", stdin)
    code, out, err = run(capsys, "forget", "-", "--agent", "pip")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "Forgotten. Changed:"
    assert copies(agent.path, TEXT) == []


def test_forget_a_pattern(agent: AgentMemory, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "forget", "--pattern", r"(?i)code \d{4}", "--json", "--agent", "pip")
    assert code == 0
    receipt = json.loads(out)
    assert receipt["verified"] is True and receipt["changed"]["facts"] >= 1
    assert copies(agent.path, "code 4417") == []
    assert "- Keep this." in agent.facts


def test_nothing_to_forget(agent: AgentMemory, capsys: pytest.CaptureFixture[str]) -> None:
    before = stored(agent)
    code, out, _ = run(capsys, "forget", "never stored anywhere", "--agent", "pip")
    assert code == 0
    assert out.splitlines()[0] == "Nothing to forget: no stored place holds it."
    assert {k: v for k, v in stored(agent).items() if "JOURNAL" not in k} == {
        k: v for k, v in before.items() if "JOURNAL" not in k
    }


def test_a_failed_verification_exits_1_and_names_the_places(
    agent: AgentMemory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The engine's verification is tested with the engine; here only how the command reports
    # a receipt that says a copy was still found.
    receipt = {
        "ts": "2026-01-01T00:00:00.000Z", "forgotten_sha256": "0" * 64, "dry_run": False,
        "changed": dict.fromkeys(KINDS, 1), "places": ["memory/FACT.md"], "verified": False,
        "remaining": ["memory/odd-copy.txt"],
    }
    monkeypatch.setattr("jupyter_agent_memory.engine.forgetting.forget", lambda *a, **k: receipt)
    code, out, err = run(capsys, "forget", TEXT, "--agent", "pip")
    assert code == 1
    assert err == "Verification FAILED: still found in memory/odd-copy.txt\n"
    assert "Verified" not in out
    code, out, _ = run(capsys, "forget", TEXT, "--agent", "pip", "--json")
    assert (code, json.loads(out)) == (1, receipt)


@pytest.mark.parametrize(
    "argv",
    [["forget"], ["forget", "x", "--pattern", "y"], ["forget", "x", "--secrets"],
     ["forget", "--pattern", "y", "--secrets"]],
)
def test_exactly_one_of_text_pattern_or_secrets(
    agent: AgentMemory, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    before = stored(agent)
    with pytest.raises(SystemExit) as info:
        main([*argv, "--agent", "pip"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "one of the arguments TEXT --pattern --secrets is required" in err or (
        "not allowed with argument" in err
    )
    assert stored(agent) == before


def test_engine_refusals_are_clear_errors(
    agent: AgentMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    before = stored(agent)
    code, out, err = run(capsys, "forget", "--pattern", "(unclosed", "--agent", "pip")
    assert (code, out) == (1, "")
    assert err.startswith(ERROR)
    assert stored(agent) == before


# -- lint -----------------------------------------------------------------------------------------


@pytest.fixture
def leaky(agents_root: Path) -> AgentMemory:
    """An agent whose memory holds a credential (stored with the guard off)."""
    mem = AgentMemory.open("leaky", secret_guard=False)
    mem.update_facts(f"# Facts\n\n- Deploys use {TOKEN} for the API.\n- Keep this.\n")
    mem.append(f"Got the token {TOKEN} from Bea", tags=["ops"])
    mem.append("Unrelated entry about lunch", tags=["food"])
    return mem


def test_lint_reports_stored_credentials_without_their_value(
    leaky: AgentMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    findings = lint(leaky)
    assert {f["file"] for f in findings} >= {"memory/FACT.md", "memory/JOURNAL.jsonl"}
    code, out, err = run(capsys, "lint", "--agent", "leaky")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[: len(findings)] == [f"{f['file']}:{f['line']}: {f['kind']}" for f in findings]
    assert "memory/FACT.md:3: a GitHub token" in lines
    count = len(findings)
    assert lines[len(findings) :] == [
        f"{count} stored credentials. Remove with (--dry-run shows what would change):",
        "  jupyter-agent-memory forget --secrets --agent leaky",
    ]
    code, out, _ = run(capsys, "lint", "--agent", "leaky", "--json")
    assert code == 1
    assert json.loads(out) == {
        "secrets": findings, "forget": "jupyter-agent-memory forget --secrets --agent leaky"
    }
    assert TOKEN not in out and TOKEN[4:20] not in out


def test_forget_secrets_then_lint_is_clean(
    leaky: AgentMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "forget", "--secrets", "--reason", "lint", "--agent", "leaky")
    assert (code, err) == (0, "")
    assert TOKEN not in out
    assert copies(leaky.path, TOKEN) == []
    assert "- Keep this." in leaky.facts
    assert run(capsys, "lint", "--agent", "leaky") == (0, "No credentials stored in leaky.\n", "")
    assert run(capsys, "lint", "--agent", "leaky", "--json") == (
        0, json.dumps({"secrets": [], "forget": None}, indent=2) + "\n", ""
    )


def test_lint_of_a_clean_agent(agent: AgentMemory, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "lint", "--agent", "pip") == (0, "No credentials stored in pip.\n", "")


def test_sessions_whose_prompt_was_scrubbed_say_so(
    agent: AgentMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    PromptBuilder().start_session(agent, session_id="abcdef0000000002")  # holds the text too
    agent.update_facts("- Keep this.\n")
    PromptBuilder().start_session(agent, session_id="abcdef0000000003")  # does not
    assert run(capsys, "forget", TEXT, "--agent", "pip")[0] == 0
    code, out, _ = run(capsys, "sessions", "--agent", "pip")
    rows = {line.split()[1]: line for line in out.splitlines()[1:]}
    assert rows[SESSION_ID].endswith("  -  (text forgotten since)")
    assert rows["abcdef0000000002"].endswith("  -  (text forgotten since)")
    assert rows["abcdef0000000003"].endswith("  -")
    code, out, _ = run(capsys, "sessions", "show", SESSION_ID, "--agent", "pip")
    assert code == 0 and "[forgotten]" in out and TEXT.casefold() not in out.casefold()
