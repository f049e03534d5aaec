"""``jupyter-agent-memory sessions``: list, show (byte for byte), diff and why, text and JSON."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_calls import run

from jupyter_agent_memory import AgentMemory, PromptBuilder
from jupyter_agent_memory.cli import main

ERROR = "jupyter-agent-memory: error: "


@pytest.fixture
def agent(agents_root: Path) -> AgentMemory:
    mem = AgentMemory.open("pip")
    mem.write_user("- Name: Zoë\n")
    mem.update_facts("# Facts\n\n- Zoë prefers metric units.\n")
    return mem


def two_sessions(mem: AgentMemory) -> tuple[dict, dict]:
    builder = PromptBuilder()
    first = builder.start_session(
        mem, client={"name": "inspector", "version": "0.9"}, session_id="aaaaaa0000000001"
    ).receipt
    mem.update_facts("# Facts\n\n- Zoë prefers imperial units.\n- Reports on Mondays.\n")
    second = builder.start_session(mem, session_id="bbbbbb0000000002").receipt
    return first, second


def test_list_shows_time_id_tokens_prompt_hash_and_client(
    agent: AgentMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = two_sessions(agent)
    code, out, err = run(capsys, "sessions", "--agent", "pip")
    assert (code, err) == (0, "")
    header, *rows = out.splitlines()
    assert header.split() == ["TIME", "SESSION", "TOKENS", "PROMPT", "CLIENT"]
    assert rows == [
        f"{second['ts']:<24}  bbbbbb0000000002  {second['tokens']:>6}  "
        f"{second['prompt_sha256'][:12]}  -",
        f"{first['ts']:<24}  aaaaaa0000000001  {first['tokens']:>6}  "
        f"{first['prompt_sha256'][:12]}  inspector 0.9",
    ]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["ts"])
    code, out, _ = run(capsys, "--json", "sessions", "--agent", "pip")
    assert (code, json.loads(out)) == (0, agent.sessions())


def test_list_shows_a_hostile_client_name_as_inert_text_on_one_row(
    agent: AgentMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    # The client names itself in its initialize request: newlines, ESC sequences and a
    # right-to-left override must neither start a row nor reach the terminal raw.
    name = "evil\n2026-01-01  ffffff0000000009\x1b[2J\u202eredoc"
    receipt = PromptBuilder().start_session(
        agent, client={"name": name, "version": "1\r\n"}, session_id="cccccc0000000003"
    ).receipt
    code, out, err = run(capsys, "sessions", "--agent", "pip")
    assert (code, err) == (0, "")
    header, *rows = out.splitlines()
    assert rows == [
        f"{receipt['ts']:<24}  cccccc0000000003  {receipt['tokens']:>6}  "
        f"{receipt['prompt_sha256'][:12]}  "
        "evil\\n2026-01-01  ffffff0000000009\\x1b[2J\\u202eredoc 1\\r\\n"
    ]
    assert "\x1b" not in out and "\u202e" not in out
    # The receipt itself keeps the name exactly as the client sent it.
    code, out, _ = run(capsys, "--json", "sessions", "--agent", "pip")
    assert json.loads(out)[0]["client"] == {"name": name, "version": "1\r\n"}


def test_list_cuts_a_very_long_client_name_to_its_column(
    agent: AgentMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "x" * 1_000_000
    PromptBuilder().start_session(agent, client={"name": name, "version": "2"})
    code, out, err = run(capsys, "sessions", "--agent", "pip")
    assert (code, err) == (0, "")
    (row,) = out.splitlines()[1:]
    assert row.endswith("  " + "x" * 59 + "…")
    assert len(row) == 24 + 2 + 16 + 2 + 6 + 2 + 12 + 2 + 60
    code, out, _ = run(capsys, "--json", "sessions", "--agent", "pip")
    # The receipt itself keeps at most 200 characters of a self-chosen name.
    assert json.loads(out)[0]["client"] == {"name": "x" * 200 + "…", "version": "2"}


def test_list_without_sessions(agent: AgentMemory, capsys: pytest.CaptureFixture[str]) -> None:
    PromptBuilder().build_session(agent)  # a preview records nothing
    empty = "No sessions recorded for pip yet.\n"
    assert run(capsys, "sessions", "--agent", "pip") == (0, empty, "")
    assert run(capsys, "sessions", "--agent", "pip", "--json") == (0, "[]\n", "")


def test_show_prints_the_exact_prompt_bytes(
    agent: AgentMemory, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    # Odd bytes on purpose: CR, a tab, trailing spaces and non-ASCII must come back unchanged.
    agent.update_facts("- Zoë\r\n-\tspaced   \n- 日本語\n")
    started = PromptBuilder().start_session(agent, session_id="cccccc0000000003")
    assert main(["sessions", "show", "cccccc", "--agent", "pip"]) == 0
    out, err = capsysbinary.readouterr()
    assert out == started.prompt.text.encode()
    assert err == b""
    assert not out.endswith(b"\n"), "nothing is added to the prompt"


def test_show_json_has_the_receipt_and_the_text(
    agent: AgentMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    first, _second = two_sessions(agent)
    code, out, _ = run(capsys, "sessions", "show", "aaaaaa00", "--json", "--agent", "pip")
    assert code == 0
    assert json.loads(out) == {
        "receipt": first,
        "text": agent.session_prompt("aaaaaa0000000001"),
    }


def test_show_through_the_real_console_script(agent: AgentMemory, tmp_path: Path) -> None:
    started = PromptBuilder().start_session(agent, session_id="dddddd0000000004")
    script = Path(sys.executable).with_name("jupyter-agent-memory")
    shown = subprocess.run(
        [str(script), "sessions", "show", "dddddd0000000004", "--agent", "pip"],
        capture_output=True,
        check=True,
    )
    assert shown.stdout == started.prompt.text.encode()
    assert b"Zo\xc3\xab" in shown.stdout


def test_diff_of_two_sessions(agent: AgentMemory, capsys: pytest.CaptureFixture[str]) -> None:
    two_sessions(agent)
    code, out, err = run(capsys, "sessions", "diff", "aaaaaa", "bbbbbb", "--agent", "pip")
    assert (code, err) == (0, "")
    expected = agent.diff_sessions("aaaaaa", "bbbbbb")
    assert out == expected + "\n"
    assert (
        "-- Zoë prefers metric units.\n+- Zoë prefers imperial units.\n+- Reports on Mondays.\n"
    ) in out
    assert out.splitlines()[0].startswith("--- session aaaaaa0000000001 (")
    code, out, _ = run(capsys, "sessions", "diff", "aaaaaa", "bbbbbb", "--agent", "pip", "--json")
    assert json.loads(out) == {
        "first": "aaaaaa0000000001", "second": "bbbbbb0000000002", "diff": expected
    }


def test_diff_of_identical_prompts(agent: AgentMemory, capsys: pytest.CaptureFixture[str]) -> None:
    two_sessions(agent)
    assert run(capsys, "sessions", "diff", "bbbbbb", "bbbbbb", "--agent", "pip") == (
        0, "", "The two sessions started with the same prompt.\n"
    )


def test_why_names_file_version_and_line(
    agent: AgentMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    two_sessions(agent)
    version = agent.history()[0]["sha256"]
    facts = agent.path / "memory" / "FACT.md"
    code, out, err = run(capsys, "sessions", "why", "aaaaaa", "metric", "--agent", "pip")
    assert (code, err) == (0, "")
    assert out == f"{facts} @ {version[:12]} line 3: '- Zoë prefers metric units.'\n"
    code, out, _ = run(capsys, "sessions", "why", "aaaaaa", "<facts>", "--agent", "pip", "--json")
    assert code == 0
    assert json.loads(out) == [
        {"section": "facts", "source": None, "version": None, "line": None, "text": "<facts>"}
    ]


def test_why_for_text_no_line_holds(agent: AgentMemory, capsys: pytest.CaptureFixture[str]) -> None:
    two_sessions(agent)
    assert run(capsys, "sessions", "why", "aaaaaa", "Mondays", "--agent", "pip") == (
        1, "", "No line of that session's prompt contains 'Mondays'.\n"
    )
    assert run(capsys, "sessions", "why", "aaaaaa", "Mondays", "--json", "--agent", "pip") == (
        1, "[]\n", ""
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sessions", "show", "xyz"], 'Invalid session id "xyz": give an id or a prefix of at'),
        (["sessions", "show", "0123456789"], 'No recorded session matches "0123456789"'),
        (["sessions", "diff", "aaaaaa", "eeeeee"], 'No recorded session matches "eeeeee"'),
        (["sessions", "why", "aaaaaa", "  "], "Give the text (or part of a line) to trace"),
    ],
)
def test_bad_session_ids_and_texts_are_clear_errors(
    agent: AgentMemory, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    two_sessions(agent)
    log = (agent.path / "memory" / "SESSIONS.jsonl").read_bytes()
    code, out, err = run(capsys, *argv, "--agent", "pip")
    assert (code, out) == (1, "")
    assert err.startswith(ERROR + message)
    assert (agent.path / "memory" / "SESSIONS.jsonl").read_bytes() == log


@pytest.mark.parametrize(
    "argv",
    [["sessions"], ["sessions", "show", "aaaaaa"], ["forget", "x"], ["forget", "--secrets"],
     ["lint"]],
)
def test_a_missing_agent_is_refused_and_nothing_created(
    agents_root: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run(capsys, *argv, "--agent", "nosuch")
    assert (code, out) == (1, "")
    assert err.startswith(ERROR + "Agent ")
    assert "does not exist (no folder at " in err
    assert not agents_root.exists()


def test_usage_errors(agent: AgentMemory, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["sessions", "show"], ["sessions", "diff", "aaaaaa"], ["sessions", "why", "a"]):
        with pytest.raises(SystemExit) as info:
            main([*argv, "--agent", "pip"])
        assert info.value.code == 2
        assert "the following arguments are required" in capsys.readouterr().err
