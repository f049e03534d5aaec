"""The evaluation runner puts every session start on record (docs/guarantees.md).

A multi-session ScriptedModel run is replayed session by session from its receipts: each
recorded prompt is, byte for byte, the system message the model was given, and every line of it
is traced to the file version and line it came from (or to the text the runner or builder wrote).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent_memory import AgentMemory, __version__
from jupyter_agent_memory.evaluation import (
    EvaluationResult,
    ModelTurn,
    Rule,
    Scenario,
    ScriptedModel,
    Session,
    journal,
    remember,
    run_scenario,
)
from jupyter_agent_memory.evaluation.runner import CLIENT_NAME


class Spy:
    """A model that remembers the system message of every call, then asks ScriptedModel."""

    name = "spy"

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model
        self.systems: list[str] = []

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelTurn:
        assert messages[0]["role"] == "system"
        self.systems.append(messages[0]["content"])
        return self.model.complete(messages, tools)


def scripted() -> Spy:
    return Spy(
        ScriptedModel(
            [
                Rule(
                    r"my name is (\w+)",
                    calls=[remember("- The user's name is {1}."), journal("Met {1}.", ["intro"])],
                    reply="Hello {1}.",
                ),
                Rule(r"I live in (\w+)", calls=[remember("- The user lives in {1}.")], reply="Ok."),
                Rule(r"lunch was (.*)", calls=[journal("Lunch: {1}", ["food"])], reply="Logged."),
            ],
            default_reply="Sure.",
        )
    )


SCENARIO = Scenario(
    [
        Session(["Hi, my name is Ada.", "Lunch was ramen"], name="intro"),
        Session(["I live in Paris", "what's new?"], name="move"),
        Session(["Anything to add?"], name="check"),
    ],
    name="sessions-on-record",
)

DATED = Scenario(
    [
        Session(["Hi, my name is Ada."], name="first", date="2026-03-02T09:00:00Z"),
        Session(["I live in Oslo"], name="second", date="2026-03-09T14:30:00Z"),
    ],
    name="dated",
)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def distinct_in_order(values: list[str]) -> list[str]:
    found: list[str] = []
    for value in values:
        if not found or found[-1] != value:
            found.append(value)
    return found


def replay(mem: AgentMemory, result: EvaluationResult, spy: Spy) -> list[dict[str, Any]]:
    """Check the run against its receipts; the receipts, oldest first."""
    receipts = mem.sessions()[::-1]
    assert [r["session_id"] for r in receipts] == [s.session_id for s in result.sessions]
    # The model got one system message per session, the recorded prompt, byte for byte.
    recorded = [mem.session_prompt(r["session_id"]) for r in receipts]
    assert distinct_in_order(spy.systems) == distinct_in_order(recorded)
    assert recorded == [s.system_prompt for s in result.sessions]
    for receipt, text in zip(receipts, recorded, strict=True):
        assert receipt["client"] == {"name": CLIENT_NAME, "version": __version__}
        assert receipt["prompt_sha256"] == sha(text)
        assert (receipt["chars"], len(receipt["warnings"])) == (len(text), 0)
        assert sum(s["chars"] for s in receipt["sections"]) + 2 * (
            len(receipt["sections"]) - 1
        ) == len(text)
    return receipts


def file_text(mem: AgentMemory, source: str, version: str) -> str:
    """The text of ``source`` at ``version``, read independently of the sessions store."""
    if source == str(mem.path / "memory" / "FACT.md"):
        if version == mem.facts_sha256:
            return mem.facts
        full, text = mem.history_version(version)
        assert full == version
        return text
    text = Path(source).read_text()
    assert sha(text) == version, "SOUL.md, USER.md and system.md do not change in these runs"
    return text


def trace_every_line(mem: AgentMemory, receipt: dict[str, Any]) -> list[str]:
    """``why`` for every non-blank line; the sections of the lines that are builder text."""
    session = receipt["session_id"]
    builder_sections = []
    for line in mem.session_prompt(session).split("\n"):
        if not line.strip():
            continue
        exact = [o for o in mem.why(session, line) if o.text == line]
        assert exact, line
        for origin in exact:
            if origin.source is None:
                builder_sections.append(origin.section)
                continue
            assert origin.version and origin.line
            source_line = file_text(mem, origin.source, origin.version).split("\n")[
                origin.line - 1
            ]
            assert source_line == line
    return builder_sections


def test_every_session_is_recorded_and_replays_byte_for_byte(tmp_path: Path) -> None:
    mem = AgentMemory.open(tmp_path / "agent")
    (tmp_path / "space").mkdir()
    (tmp_path / "space" / "system.md").write_text("You are a careful assistant.\n")
    spy = scripted()
    result = run_scenario(
        mem,
        spy,
        SCENARIO,
        workspace=tmp_path / "space",
        config={"bootstrap_completed": True},
    )
    assert [s.error for s in result.sessions] == ["", "", ""]
    receipts = replay(mem, result, spy)
    assert len(receipts) == 3, "the prompt built after each session is a preview"
    assert receipts[0]["base"] == {
        "source": str(tmp_path / "space" / "system.md"),
        "version": sha("You are a careful assistant.\n"),
    }
    # What the model wrote in one session is in the next one's prompt, and on record there.
    assert "The user's name is Ada." not in mem.session_prompt(receipts[0]["session_id"])
    assert "The user's name is Ada." in mem.session_prompt(receipts[1]["session_id"])
    assert "+- The user lives in Paris.\n" in mem.diff_sessions(
        receipts[1]["session_id"], receipts[2]["session_id"]
    )
    facts = [
        next(s["version"] for s in r["sections"] if s["name"] == "facts") for r in receipts[1:]
    ]
    assert facts[1] == mem.facts_sha256 and facts[0] == mem.history()[0]["sha256"]
    for receipt in receipts:
        assert set(trace_every_line(mem, receipt)) <= {"memories", "facts", "soul", "user"}
    (origin,) = mem.why(receipts[2]["session_id"], "lives in Paris")
    assert (origin.source, origin.line) == (str(mem.path / "memory" / "FACT.md"), 2)


def test_the_runners_base_prompt_and_date_line_are_on_record(tmp_path: Path) -> None:
    mem = AgentMemory.open(tmp_path / "agent")
    spy = scripted()
    result = run_scenario(mem, spy, DATED, base_prompt="  You are terse.  \n")
    receipts = replay(mem, result, spy)
    first = mem.session_prompt(receipts[0]["session_id"])
    assert first.startswith("You are terse.\n\n")
    assert first.endswith("\n\nCurrent date: 2026-03-02 09:00 UTC (Monday).")
    names = [s["name"] for s in receipts[0]["sections"]]
    assert (names[0], names[-1]) == ("system", "date")
    assert receipts[0]["base"] == {"source": None, "version": None}
    for receipt in receipts:
        traced = trace_every_line(mem, receipt)
        assert {"system", "date"} <= set(traced)
    (date,) = mem.why(receipts[1]["session_id"], "Current date")
    assert (date.section, date.source, date.text) == (
        "date", None, "Current date: 2026-03-09 14:30 UTC (Monday)."
    )
    assert str(date) == (
        "builder text of the 'date' section: 'Current date: 2026-03-09 14:30 UTC (Monday).'"
    )


def test_recording_does_not_move_the_simulated_clock(tmp_path: Path) -> None:
    mem = AgentMemory.open(tmp_path / "agent")
    result = run_scenario(mem, scripted(), DATED)
    receipts = mem.sessions()[::-1]
    assert [r["ts"] for r in receipts] == ["2026-03-02T09:00:00.000Z", "2026-03-09T14:30:00.000Z"]
    assert [s.started for s in result.sessions] == [r["ts"] for r in receipts]
    # The first entry of a session still gets the session's own time, as without records.
    entries = {e["text"]: e["ts"] for e in mem.entries()}
    assert entries == {"Met Ada.": "2026-03-02T09:00:00.000Z"}
    assert result.sessions[0].new_entries[0]["ts"] == "2026-03-02T09:00:00.000Z"


def test_the_session_id_survives_the_json_export(tmp_path: Path) -> None:
    mem = AgentMemory.open(tmp_path / "agent")
    result = run_scenario(mem, scripted(), SCENARIO)
    loaded = EvaluationResult.from_json(result.to_json())
    recorded = [r["session_id"] for r in mem.sessions()[::-1]]
    assert [s.session_id for s in loaded.sessions] == recorded
    assert all(len(s.session_id) == 16 for s in loaded.sessions)


@pytest.mark.parametrize("announce_date", [True, False])
def test_an_undated_run_records_no_date_line(tmp_path: Path, announce_date: bool) -> None:
    mem = AgentMemory.open(tmp_path / "agent")
    run_scenario(mem, scripted(), SCENARIO, announce_date=announce_date)
    for receipt in mem.sessions():
        assert [s["name"] for s in receipt["sections"]][-1] != "date"
        assert "Current date" not in mem.session_prompt(receipt["session_id"])
