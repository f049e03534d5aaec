"""The evaluation lab with offline models: reply and tool-call expectations, judges, the
simulated clock, fixed transcripts, errors that do not lose the run, cost, JSON, progress."""

from __future__ import annotations

import io
import json
import re
from datetime import datetime, timedelta, timezone

import pytest

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.engine.prompt import approx_tokens
from jupyter_agent_memory.evaluation import (
    CLOSING_TURN,
    Check,
    EvaluationResult,
    FactContains,
    JudgeError,
    ModelJudge,
    ModelTurn,
    Progress,
    ReplyAbstains,
    ReplyContains,
    ReplyJudged,
    ReplyMatches,
    Rule,
    Scenario,
    ScriptedModel,
    Session,
    SessionState,
    SimulatedClock,
    ToolCalled,
    ToolCallRecord,
    TurnRecord,
    call_tool,
    default_toolset,
    journal,
    recall,
    remember,
    run_scenario,
    search,
)

DONE = {"bootstrap_completed": True}


def naive_model() -> ScriptedModel:
    """Adds a new name line without replacing the old one: stale facts stay in the prompt."""
    return ScriptedModel(
        [
            Rule(r"I am (\w+)", calls=[remember("- The user's name is {1}.")], reply="Hi {1}!"),
            Rule(r"I use (\w+) units", calls=[remember("- Units: {1}.")], reply="OK."),
            Rule(
                r"who am i",
                reply=recall(r"user's name is (\w+)", "You are {1}.", "I don't know."),
            ),
            Rule(r"which units", reply=recall(r"Units: (\w+)", "{1}", "I don't know.")),
            Rule(r"what did I log", calls=[search(query="zzz")], reply="{result}"),
        ]
    )


def correcting_model() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(
                r"I am (\w+)",
                calls=[remember("- The user's name is {1}.", replaces="user's name")],
                reply="Hi {1}!",
            ),
            Rule(r"I use (\w+) units", calls=[remember("- Units: {1}.", replaces="units")]),
            *naive_model().rules[2:],
        ]
    )


def stale_scenario() -> Scenario:
    return Scenario(
        [
            Session(["I am Ada", "I use metric units"]),
            Session(["Actually I am Bea", "I use imperial units"]),
            Session(
                ["Who am I?", "Which units do I prefer?", "What did I log?"],
                expect=[
                    ReplyContains("Bea", turn=0),
                    ReplyContains("Ada", turn=0, present=False),
                    ReplyContains("imperial", turn=1),
                    ReplyAbstains(turn=0, present=False),
                    ReplyContains("journal entries found", turn=None, present=False),
                ],
                name="recall",
            ),
        ],
        name="stale",
    )


def test_reply_checks_tell_a_stale_memory_from_a_correct_one(tmp_path):
    stale = run_scenario(tmp_path / "naive", naive_model(), stale_scenario(), config=DONE)
    assert not stale.passed
    assert [(o.description, o.passed, o.detail) for o in stale.sessions[2].outcomes] == [
        ("reply 0 contains 'Bea'", False, "reply was 'You are Ada.'"),
        ("reply 0 does not contain 'Ada'", False, "found, but it should be absent"),
        ("reply 1 contains 'imperial'", False, "reply was 'metric'"),
        ("reply 0 gives an answer", True, ""),
        (
            "a reply does not contain 'journal entries found'",
            False,
            "found, but it should be absent",
        ),
    ]
    good = run_scenario(tmp_path / "good", correcting_model(), stale_scenario(), config=DONE)
    assert [o.passed for o in good.sessions[2].outcomes] == [True, True, True, True, False]
    # Numeric pass/fail columns, not only "3/4".
    row = good.rows()[2]
    assert (row["passed"], row["failed"], row["pass_rate"], row["expectations"]) == (
        4,
        1,
        0.8,
        "4/5",
    )
    assert good.rows()[0]["pass_rate"] is None
    frame = stale.to_dataframe()
    assert frame.loc[3, "passed"] == 1 and frame.loc[3, "failed"] == 4
    outcomes = stale.outcomes_dataframe()
    assert list(outcomes["passed"]) == [0, 0, 0, 1, 0]
    assert list(outcomes.columns) == ["session", "expectation", "passed", "detail"]


def test_tool_called_reads_arguments_the_model_sent_as_text() -> None:
    def state_with(arguments: dict | str) -> SessionState:
        call = ToolCallRecord("memory", arguments, "ok", is_error=False)
        return SessionState("", [], "", [TurnRecord("q", "done", tool_calls=[call])])

    as_text = state_with('{"action": "Append", "tags": ["Walk"]}')
    assert ToolCalled(action="append", arguments={"tags": ["Walk"]}).check(as_text).passed
    assert not ToolCalled(action="search").check(as_text).passed
    assert ToolCalled(action="append").check(state_with({"action": "append"})).passed
    for unusable in ('{"action": "append"', '["append"]', "append"):
        state = state_with(unusable)
        assert not ToolCalled(action="append").check(state).passed, unusable
        assert not ToolCalled(arguments={"action": "append"}).check(state).passed, unusable
        assert ToolCalled("memory").check(state).passed, unusable


def test_reply_matches_abstains_and_missing_turns():
    state = SessionState("", [], "", [TurnRecord("q", "I don't know, you never told me.")])
    assert ReplyAbstains().check(state).passed
    assert ReplyMatches(r"never\s+told").check(state).passed
    assert not ReplyMatches(r"^yes").check(state).passed
    assert ReplyMatches(r"^yes").check(state).detail == (
        'reply was "I don\'t know, you never told me."'
    )
    assert ReplyContains("x", turn=4).check(state).detail == (
        "no such turn: the session has 1 reply"
    )
    assert ReplyContains("x", turn=4).describe() == "reply 4 contains 'x'"
    with pytest.raises(ValueError, match="invalid pattern"):
        ReplyMatches("(")
    answered = SessionState("", [], "", [TurnRecord("q", "You are Bea.")])
    assert not ReplyAbstains().check(answered).passed


def test_tool_called_checks_name_action_arguments_and_status(tmp_path):
    model = ScriptedModel(
        [
            Rule("log", calls=[journal("Walked the dog", ["walk"])], reply="ok"),
            Rule("find", calls=[search(tag="WALK", limit=3)], reply="ok"),
            Rule("bad", calls=[call_tool("memory", action="update")], reply="ok"),
        ]
    )
    scenario = Scenario(
        [
            Session(
                ["log it", "find it", "bad"],
                expect=[
                    ToolCalled("memory", "append", {"tags": ["walk"]}),
                    ToolCalled(action="search", arguments={"tag": "walk", "limit": 3}),
                    ToolCalled(action="update", ok=False),
                    ToolCalled(action="update", ok=True, present=False),
                    ToolCalled("shell", present=False),
                    ToolCalled(action="search", arguments={"tag": "run"}),
                ],
            )
        ]
    )
    result = run_scenario(tmp_path / "agent", model, scenario, config=DONE)
    outcomes = result.sessions[0].outcomes
    assert [o.passed for o in outcomes] == [True, True, True, True, True, False]
    assert outcomes[5].description == "a call to a tool action 'search' tag='run'"
    assert outcomes[5].detail == "no match among 3 tool calls"
    # The MCP-prefixed name still matches "memory".
    prefixed = run_scenario(
        tmp_path / "p",
        model,
        Scenario([Session(["log"], expect=[ToolCalled("memory")])]),
        config=DONE,
        tool_name="mcp__agent-memory__memory",
    )
    assert prefixed.passed


def test_judges_models_functions_and_failures(tmp_path):
    judge_model = ScriptedModel(
        [
            Rule(r"Expected answer: (\w+)\nAssistant's reply: .*\b\1\b", reply="Yes, it matches."),
            Rule(r"Expected answer", reply="No."),
        ]
    )
    calls = []

    def strict(question, answer, reply):
        calls.append((question, answer, reply))
        return answer in reply, "exact word"

    def broken(question, answer, reply):
        raise ConnectionError("judge endpoint down")

    scenario = Scenario(
        [
            Session(["I am Bea"]),
            Session(
                ["Who am I?"],
                expect=[
                    ReplyJudged("Bea", judge_model),
                    ReplyJudged("Ada", ModelJudge(judge_model)),
                    ReplyJudged("Bea", strict, question="What is my name?"),
                    ReplyJudged("Bea", broken),
                    Check(
                        lambda s: s.tool_calls == [] and s.replies == ["You are Bea."],
                        "no tools, one reply",
                    ),
                ],
            ),
        ]
    )
    result = run_scenario(tmp_path / "agent", correcting_model(), scenario, config=DONE)
    session = result.sessions[1]
    outcomes = session.outcomes
    assert [(o.passed, o.detail, o.error) for o in outcomes] == [
        (True, "", ""),
        (False, "judge said 'No.'", ""),
        (True, "", ""),
        (False, "", "check raised ConnectionError: judge endpoint down"),
        (True, "", ""),
    ]
    assert [o.scorer for o in outcomes] == ["judge", "judge", "judge", "judge", ""]
    assert outcomes[0].description == "the last reply is judged to answer 'Bea'"
    assert calls == [("What is my name?", "Bea", "You are Bea.")]
    # A judge outage is an error of the run, never a wrong answer.
    assert result.errors == [
        (2, "the last reply is judged to answer 'Bea': check raised ConnectionError: judge "
         "endpoint down")
    ]
    summary = session.summary()
    assert (summary["passed"], summary["failed"], summary["errors"]) == (3, 1, 1)
    assert summary["pass_rate"] == 0.75
    # The model judges' calls are in the session's cost, and each verdict names its prompt.
    assert [c.role for c in session.judge_calls] == ["judge", "judge"]
    assert summary["judge_calls"] == 2 and summary["model_calls"] == 3
    assert outcomes[0].judge["model"] == "scripted"
    assert outcomes[0].judge["prompt"].endswith(
        "Expected answer: Bea\nAssistant's reply: You are Bea.\n\n"
        "Is the reply correct? Answer yes or no only."
    )
    assert outcomes[0].judge["said"] == "Yes, it matches."
    silent = ScriptedModel([], default_reply="maybe")
    with pytest.raises(JudgeError, match="judge gave no verdict: 'maybe'"):
        ModelJudge(silent)("q", "a", "r")
    with pytest.raises(TypeError, match="model object or a function"):
        ReplyJudged("x", judge=42)


def test_custom_checks_see_the_whole_session_record(tmp_path):
    seen = {}

    def inspect(state):
        seen["turns"] = [(t.user, t.reply) for t in state.turns]
        seen["results"] = [c.result for c in state.tool_calls]
        seen["searches"] = [s.results for s in state.searches]
        return False, "custom detail"

    model = ScriptedModel(
        [
            Rule("log", calls=[journal("event")], reply="done"),
            Rule("find", calls=[search(query="event")], reply="found"),
        ]
    )
    scenario = Scenario([Session(["log", "find"], expect=[Check(inspect, "inspected")])])
    result = run_scenario(tmp_path / "agent", model, scenario, config=DONE)
    assert result.sessions[0].outcomes[0].detail == "custom detail"
    assert seen["turns"] == [("log", "done"), ("find", "found")]
    assert re.fullmatch(r"Journal entry added at \S+Z\.", seen["results"][0])
    assert json.loads(seen["results"][1])[0]["text"] == "event"
    assert seen["searches"] == [["j1"]]


# ------------------------------------------------------------------------- simulated time


def test_dated_sessions_drive_journal_history_and_time_windows(tmp_path):
    mem = AgentMemory.open(tmp_path / "agent")
    model = ScriptedModel(
        [
            Rule(r"^note (.*)", calls=[journal("{1}")], reply="ok"),
            Rule(r"^fact (.*)", calls=[remember("- {1}")], reply="ok"),
            Rule(
                r"what happened in march",
                calls=[
                    call_tool(
                        "memory", action="search", since="2026-03-01", until="2026-03-31T23:59:59"
                    )
                ],
                reply="{result}",
            ),
        ]
    )
    scenario = Scenario(
        [
            Session(["note paid rent", "fact likes tea"], date="2026-02-27T08:00", name="feb"),
            Session(
                ["note dentist", "fact likes coffee"], date="2026/03/10 (Tue) 14:30", name="mar"
            ),
            Session(["note holiday"], date=datetime(2026, 4, 2, 9, 0), name="apr"),
            Session(["What happened in March?"], name="ask"),
        ]
    )
    result = run_scenario(mem, model, scenario, config=DONE)
    assert [e["ts"] for e in mem.entries()] == [
        "2026-02-27T08:00:00.000Z",
        "2026-03-10T14:30:00.000Z",
        "2026-04-02T09:00:00.000Z",
    ]
    assert [s.started for s in result.sessions] == [
        "2026-02-27T08:00:00.000Z",
        "2026-03-10T14:30:00.000Z",
        "2026-04-02T09:00:00.000Z",
        "2026-04-02T09:00:01.000Z",
    ]
    # FACT.md history names follow the scenario's clock too.
    assert [v["ts"][:10] for v in mem.history()] == ["2026-03-10"]
    # since/until compare against the stored (simulated) times.
    found = json.loads(result.sessions[3].turns[0].reply)
    assert [e["text"] for e in found] == ["dentist"]
    # The date is announced in the system prompt, and the wall clock is back after the run.
    assert result.sessions[1].system_prompt.endswith(
        "Current date: 2026-03-10 14:30 UTC (Tuesday)."
    )
    assert mem.clock is None
    assert abs((mem.now() - datetime.now(timezone.utc)).total_seconds()) < 60


def test_undated_scenarios_use_the_wall_clock_and_start_sets_one(tmp_path):
    model = ScriptedModel([Rule("note", calls=[journal("x")], reply="ok")])
    before = datetime.now(timezone.utc) - timedelta(seconds=5)
    result = run_scenario(tmp_path / "a", model, Scenario([Session(["note"])]), config=DONE)
    stamp = datetime.fromisoformat(result.sessions[0].new_entries[0]["ts"].replace("Z", "+00:00"))
    assert stamp >= before
    assert "Current date" not in result.sessions[0].system_prompt
    started = Scenario([Session(["note"])], start="2030-01-01")
    result = run_scenario(
        tmp_path / "b",
        model,
        started,
        config=DONE,
        announce_date=False,
        clock_step=timedelta(minutes=1),
    )
    assert result.sessions[0].new_entries[0]["ts"] == "2030-01-01T00:00:00.000Z"
    assert "Current date" not in result.sessions[0].system_prompt
    clock = SimulatedClock(datetime(2030, 1, 1))
    assert [clock(), clock()] == [
        datetime(2030, 1, 1, tzinfo=timezone.utc),
        datetime(2030, 1, 1, 0, 0, 1, tzinfo=timezone.utc),
    ]
    with pytest.raises(ValueError, match="Invalid session date 'yesterday'"):
        Session(["x"], date="yesterday")


# -------------------------------------------------------------------------- transcripts


class Recording(ScriptedModel):
    def __init__(self, rules, **kw):
        super().__init__(rules, **kw)
        self.requests = []

    def complete(self, messages, tools):
        self.requests.append([dict(m) for m in messages])
        return super().complete(messages, tools)


def test_fixed_transcripts_keep_their_assistant_turns(tmp_path):
    model = Recording(
        [Rule(r"my cat is (\w+)", calls=[remember("- Cat: {1}")], reply="model says hi")],
        default_reply="model reply",
    )
    session = Session(
        transcript=[
            {"role": "assistant", "content": "Welcome back!"},
            {"role": "user", "content": "My cat is Miso"},
            {"role": "assistant", "content": "Lovely name."},
            {"role": "assistant", "content": "Tell me more."},
            {"role": "user", "content": "She sleeps a lot"},
            {"role": "assistant", "content": "Cats do."},
        ],
        date="2023/05/20 (Sat) 02:21",
        name="haystack",
    )
    assert session.turns == ["My cat is Miso", "She sleeps a lot"]
    result = run_scenario(tmp_path / "agent", model, Scenario([session]), config=DONE)
    turns = result.sessions[0].turns
    assert [(t.user, t.reply, t.assistant) for t in turns] == [
        ("My cat is Miso", "model says hi", "Lovely name.\n\nTell me more."),
        ("She sleeps a lot", "model reply", "Cats do."),
    ]
    # The closing turn shows the model the transcript's last assistant reply.
    closing = result.sessions[0].closing
    assert (closing.user, closing.reply) == (CLOSING_TURN, "model reply")
    assert [(m["role"], m["content"]) for m in model.requests[-1][-2:]] == [
        ("assistant", "Cats do."),
        ("user", CLOSING_TURN),
    ]
    last = model.requests[-2]
    assert [(m["role"], m.get("content")) for m in last[1:]] == [
        ("assistant", "Welcome back!"),
        ("user", "My cat is Miso"),
        ("assistant", ""),  # the tool-calling message: a string, as local servers need
        ("tool", "Memory updated."),
        ("assistant", "Lovely name.\n\nTell me more."),
        ("user", "She sleeps a lot"),
    ]
    assert result.sessions[0].facts_after == "- Cat: Miso\n"
    with pytest.raises(ValueError, match="not both"):
        Session(["x"], transcript=[{"role": "user", "content": "y"}])
    with pytest.raises(ValueError, match="role 'system'"):
        Session(transcript=[{"role": "system", "content": "y"}])
    with pytest.raises(ValueError, match="at least one user message"):
        Session(transcript=[{"role": "assistant", "content": "y"}])


# ------------------------------------------------------------------------------- errors


class Flaky:
    """Fails on chosen user turns with a chosen exception, otherwise answers."""

    name = "flaky"

    def __init__(self, failures):
        self.failures = failures

    def complete(self, messages, tools):
        user = [m for m in messages if m["role"] == "user"][-1]["content"]
        if user in self.failures:
            raise self.failures[user]
        if user == "bad shape":
            return {"text": "not a ModelTurn"}
        return ModelTurn(text=f"re: {user}", finish_reason="stop")


def error_scenario() -> Scenario:
    return Scenario(
        [
            Session(["one"], expect=[ReplyContains("one")]),
            Session(["two", "boom", "three"], expect=[ReplyContains("three")]),
            Session(["four", "bad shape"]),
            Session(["five"], expect=[ReplyContains("five")]),
        ],
        name="errors",
    )


def test_errors_are_recorded_and_the_run_continues(tmp_path):
    model = Flaky({"boom": TimeoutError("the endpoint timed out")})
    result = run_scenario(tmp_path / "agent", model, error_scenario(), config=DONE)
    assert len(result.sessions) == 4 and not result.stopped
    boom = result.sessions[1].turns[1]
    assert boom.reply == ""
    assert boom.error.startswith("Traceback (most recent call last):")
    assert boom.error.rstrip().endswith("TimeoutError: the endpoint timed out")
    assert result.sessions[1].turns[2].reply == "re: three"
    assert result.sessions[1].passed
    shape = result.sessions[2].turns[1].error
    assert (
        "TypeError: model.complete must return a ModelTurn, got {'text': 'not a ModelTurn'}"
        in shape
    )
    assert [index for index, _ in result.errors] == [2, 3]
    assert result.rows()[1]["errors"] == 1
    assert not result.passed
    assert "[ERROR] session 2: TimeoutError: the endpoint timed out" in str(result)
    assert "4 sessions, 3/3 expectations passed, 2 errors" in str(result)


def test_on_error_stop_keeps_every_record_so_far(tmp_path):
    mem = AgentMemory.open(tmp_path / "agent")
    model = Flaky({"boom": ConnectionError("reset by peer")})
    result = run_scenario(mem, model, error_scenario(), config=DONE, on_error="stop")
    assert result.stopped
    assert [len(s.turns) for s in result.sessions] == [1, 2]
    assert result.sessions[0].turns[0].reply == "re: one"
    assert result.sessions[1].outcomes[0].passed is False
    assert "(stopped at the first error)" in str(result)
    with pytest.raises(ValueError, match="on_error must be 'continue' or 'stop'"):
        run_scenario(mem, model, error_scenario(), on_error="ignore")


def test_a_session_error_outside_turns_is_recorded(tmp_path):
    mem = AgentMemory.open(tmp_path / "agent")
    model = ScriptedModel([])
    scenario = Scenario([Session(["hi"]), Session(["again"])])

    from jupyter_agent_memory.evaluation import EvaluationRunner

    runner = EvaluationRunner(mem, model, config=DONE)
    builds = []
    original = runner.build_prompt

    def failing_build():
        builds.append(1)
        if len(builds) == 3:  # the second session's start
            raise OSError("disk gone")
        return original()

    runner.build_prompt = failing_build
    result = runner.run(scenario)
    assert result.sessions[1].error.rstrip().endswith("OSError: disk gone")
    assert result.sessions[1].turns == []
    assert result.sessions[0].turns[0].reply == "OK."


# ---------------------------------------------------------------------------------- cost


def test_cost_columns_estimated_for_models_without_usage(tmp_path):
    model = Recording([Rule("log", calls=[journal("x")], reply="done")])
    result = run_scenario(
        tmp_path / "agent", model, Scenario([Session(["log", "hi"])]), config=DONE
    )
    session = result.sessions[0]
    assert [len(t.model_calls) for t in session.turns] == [2, 1]
    assert [t.tool_rounds for t in session.turns] == [1, 0]
    first = session.turns[0].model_calls[0]
    assert first.estimated and first.finish_reason == "tool_calls"
    assert first.input_tokens == approx_tokens(json.dumps(model.requests[0], ensure_ascii=False))
    cost = session.cost()
    assert cost["model_calls"] == 3 and cost["tool_rounds"] == 1
    assert cost["tokens_estimated"] is True and cost["finish_reason"] == "stop"
    assert cost["input_tokens"] == sum(c.input_tokens for c in session.model_calls)
    assert cost["latency_s"] >= 0
    frame = result.to_dataframe()
    for column in (
        "input_tokens",
        "output_tokens",
        "model_calls",
        "tool_rounds",
        "latency_s",
        "finish_reason",
        "tokens_estimated",
    ):
        assert column in frame.columns
    assert frame.loc[1, "model_calls"] == 3


def test_reported_usage_is_used_when_present(tmp_path):
    class Metered:
        def complete(self, messages, tools):
            return ModelTurn(
                text="hi",
                usage={"prompt_tokens": 900, "completion_tokens": 3},
                finish_reason="length",
            )

    result = run_scenario(tmp_path / "a", Metered(), Scenario([Session(["a", "b"])]), config=DONE)
    cost = result.sessions[0].cost()
    assert (cost["input_tokens"], cost["output_tokens"], cost["tokens_estimated"]) == (
        1800,
        6,
        False,
    )
    assert cost["finish_reason"] == "length"


# ------------------------------------------------------------------- JSON, HTML, progress


def test_results_export_to_json_and_load_back_identically(tmp_path):
    result = run_scenario(tmp_path / "agent", naive_model(), stale_scenario(), config=DONE)
    text = result.to_json()
    loaded = EvaluationResult.from_json(text)
    assert loaded == result
    assert loaded.to_json() == text
    path = result.save(tmp_path / "run.json")
    assert EvaluationResult.load(path) == result
    assert json.loads(path.read_text())["format"] == "jupyter-agent-memory/evaluation-result"
    failing = run_scenario(
        tmp_path / "e", Flaky({"boom": OSError("x")}), error_scenario(), config=DONE
    )
    assert EvaluationResult.from_json(failing.to_json()) == failing
    with pytest.raises(ValueError, match="Not an evaluation result"):
        EvaluationResult.from_json('{"sessions": []}')
    with pytest.raises(ValueError, match="Unsupported evaluation result version 9"):
        EvaluationResult.from_json(
            json.dumps({"format": "jupyter-agent-memory/evaluation-result", "version": 9})
        )


def test_html_escapes_everything_the_model_or_memory_wrote(tmp_path):
    payload = "<img src=x onerror=alert(1)>"
    model = ScriptedModel(
        [Rule("go", calls=[journal(payload, [payload]), remember(payload)], reply=payload)]
    )

    def raising(messages, tools):
        raise RuntimeError("<script>bad()</script>")

    class Raiser:
        complete = staticmethod(raising)

    result = run_scenario(
        tmp_path / "a", model, Scenario([Session(["go"], name=payload)]), config=DONE
    )
    page = result._repr_html_()
    assert payload not in page
    assert html_escaped(payload) in page
    broken = run_scenario(tmp_path / "b", Raiser(), Scenario([Session(["go"])]), config=DONE)
    page = broken._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;bad()&lt;/script&gt;" in page


def html_escaped(text):
    import html

    return html.escape(text)


def test_progress_hook_and_stream(tmp_path):
    events = []
    model = ScriptedModel([])
    scenario = Scenario([Session(["a"], name="first"), Session(["b"])], name="demo")
    run_scenario(
        tmp_path / "a",
        model,
        scenario,
        config=DONE,
        progress=lambda done, total, text: events.append((done, total, text)),
    )
    assert events == [(0, 2, "first"), (1, 2, "session 2"), (2, 2, "done")]
    stream = io.StringIO()
    display = Progress(2, "demo", "sessions", stream=stream)
    run_scenario(tmp_path / "b", model, scenario, config=DONE, progress=display)
    assert stream.getvalue() == (
        "\rdemo: 0/2 sessions · first"
        "\rdemo: 1/2 sessions · session 2"
        "\rdemo: 2/2 sessions · done     \n"
    )
    with pytest.raises(TypeError, match="progress must be"):
        run_scenario(tmp_path / "c", model, scenario, progress="yes")


def test_plot_takes_ax_title_and_metric(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    result = run_scenario(tmp_path / "a", correcting_model(), stale_scenario(), config=DONE)
    figure = result.plot()
    assert figure.axes[0].get_title() == "stale: prompt size and facts per session"
    own, ax = plt.subplots()
    returned = result.plot("pass_rate", ax=ax, title="Pass rate")
    assert returned is own
    assert ax.get_title() == "Pass rate" and ax.get_ylabel() == "pass_rate"
    heights = [bar.get_height() for bar in ax.patches]
    assert heights[2] == pytest.approx(0.8)
    plt.close(own)
    with pytest.raises(ValueError, match="No session has the metric 'nope'"):
        result.plot("nope")


def test_facts_expectation_still_works_with_new_records(tmp_path):
    result = run_scenario(tmp_path / "a", correcting_model(), stale_scenario(), config=DONE)
    state = SessionState(result.sessions[1].facts_after, [], "")
    assert FactContains("Bea").check(state).passed
    assert not FactContains("Ada").check(state).passed


def test_scenario_from_dict_with_transcripts_dates_evidence_and_reply_checks(tmp_path):
    from jupyter_agent_memory.evaluation import Evidence

    scenario = Scenario.from_dict(
        {
            "name": "data",
            "labels": {"kind": "demo"},
            "start": "2026-01-05T09:00",
            "sessions": [
                {
                    "name": "chat",
                    "date": "2026/01/06 (Tue) 10:00",
                    "transcript": [
                        {"role": "user", "content": "note: renewed my passport"},
                        {"role": "assistant", "content": "Great!"},
                    ],
                },
                {
                    "name": "question",
                    "turns": ["When did I renew my passport?"],
                    "query": "passport",
                    "evidence": {"sessions": ["chat"], "texts": ["passport"]},
                    "expect": [
                        {"reply": "passport"},
                        {"reply_matches": "renewed", "turn": None},
                        {"abstains": True, "present": False},
                        {"tool": "memory", "action": "search", "arguments": {"query": "passport"}},
                    ],
                },
            ],
        }
    )
    chat, question = scenario.sessions
    assert scenario.labels == {"kind": "demo"}
    assert scenario.start == datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
    assert chat.turns == ["note: renewed my passport"]
    assert chat.date == datetime(2026, 1, 6, 10, 0, tzinfo=timezone.utc)
    assert question.evidence == Evidence(texts=("passport",), sessions=("chat",))
    assert question.question == "passport"
    assert question.expect == [
        ReplyContains("passport"),
        ReplyMatches("renewed", turn=None),
        ReplyAbstains(present=False),
        ToolCalled("memory", "search", {"query": "passport"}),
    ]
    model = ScriptedModel(
        [
            Rule(r"^note: (.*)", calls=[journal("{1}")], reply="ok"),
            Rule(r"passport\?", calls=[search(query="passport")], reply="{result}"),
        ]
    )
    result = run_scenario(tmp_path / "agent", model, scenario, config=DONE)
    assert result.passed, str(result)
    assert result.labels == {"kind": "demo"}
    assert result.sessions[1].retrieval[0].recall_all == 1.0
    for bad, message in [
        ({"sessions": [{"turns": ["x"], "evidence": {"ids": ["j1"]}}]}, "unknown evidence keys"),
        ({"sessions": [{"turns": ["x"], "evidence": {}}]}, "needs entries, texts, sessions"),
        ({"sessions": [{"turns": ["x"], "date": "soon"}]}, "Session 1: Invalid session date"),
        ({"sessions": [{"turns": ["x"], "expect": [{"tool": "m", "arguments": 3}]}]}, "must be"),
        ({"sessions": [], "labels": []}, "'labels' must be an object"),
        ({"sessions": ["x"]}, "Session 1 must be an object"),
    ]:
        with pytest.raises(ValueError, match=message):
            Scenario.from_dict(bad)


def test_prompts_follow_the_agents_template_unless_config_is_given(tmp_path):
    from jupyter_agent_memory import PromptBuilder, provision

    template = tmp_path / "template"
    (template / "memory").mkdir(parents=True)
    (template / "agent.json").write_text(
        json.dumps({"name": "strict", "configuration": {"bootstrap_completed": False}})
    )
    (template / "SOUL.md").write_text("I am Quill, a patient and precise research assistant.\n")
    (template / "USER.md").write_text("")
    (template / "memory" / "FACT.md").write_text("")
    mem = AgentMemory.open(tmp_path / "agent")
    provision(template, mem)
    model = ScriptedModel([])
    result = run_scenario(mem, model, Scenario([Session(["hi"])]), workspace=tmp_path)
    # The template says bootstrap is not done, so the session prompt is in bootstrap mode,
    # although SOUL.md alone would say otherwise.
    assert result.sessions[0].bootstrap is True
    # Built as the runner builds it: its tools (memory and profile), the folders shown as
    # /agent and /workspace.
    builder = PromptBuilder(
        tools=default_toolset(), path_aliases={tmp_path: "/workspace", mem.path: "/agent"}
    )
    expected = builder.build_session(mem, workspace=tmp_path)
    assert result.sessions[0].system_prompt == expected.text
    assert "with `profile` (`file`: `soul`" in expected.text
    assert PromptBuilder(tool_name="memory").build(mem, workspace=tmp_path).bootstrap is False
    explicit = run_scenario(
        mem, model, Scenario([Session(["hi"])]), workspace=tmp_path, config=DONE
    )
    assert explicit.sessions[0].bootstrap is False
