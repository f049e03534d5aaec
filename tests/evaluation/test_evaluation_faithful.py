"""Scores a paper can print: token-aware answers, judges, faithful replay, stable prompts."""

from __future__ import annotations

import re

import pytest

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.engine.prompt import approx_tokens
from jupyter_agent_memory.evaluation import (
    CLOSING_TURN,
    FactsPolicy,
    LongMemEvalJudge,
    ModelJudge,
    ReplyAbstains,
    ReplyAnswers,
    ReplyJudged,
    Rule,
    Scenario,
    ScriptedModel,
    Session,
    SessionState,
    TurnRecord,
    call_tool,
    journal,
    load_longmemeval,
    longmemeval_scenario,
    recall,
    remember,
    run_scenario,
)
from jupyter_agent_memory.evaluation.expectations import answer_tokens, longmemeval_templates

DONE = {"bootstrap_completed": True}


def state(*replies: str) -> SessionState:
    return SessionState("", [], "", [TurnRecord(user="q", reply=r) for r in replies])


# ------------------------------------------------------------------------------ answers


@pytest.mark.parametrize(
    ("answer", "reply", "passed"),
    [
        ("3", "I don't know anything since 2023.", False),
        ("3", "You have three cats.", True),
        ("3", "You have 3 cats.", True),
        ("1000", "It cost 1,000 euros.", True),
        ("3.5", "About 3.50 hours.", True),
        ("2023-03-26", "On 2023-03-26 you renewed it.", True),
        ("2023-03-26", "On 2023-03-27 you renewed it.", False),
        ("the Pinot Noir", "I suggested a pinot noir.", True),
        ("Pinot Noir", "Pinot, or maybe a Noir.", False),
        ("Miso", "Misobar is a restaurant.", False),
        ("21", "On the 21st.", True),
    ],
)
def test_reply_answers_matches_whole_tokens_and_numbers_by_value(answer, reply, passed):
    outcome = ReplyAnswers(answer).check(state(reply))
    assert outcome.passed is passed
    assert outcome.scorer == "token-match"
    assert outcome.description == f"the last reply gives the answer {answer!r} (token match)"


def test_answer_tokens_and_refusals():
    assert answer_tokens("The 1,000th cat, twice!") == ["1000", "cat", "2"]
    with pytest.raises(ValueError, match="has no word or number to match"):
        ReplyAnswers("?!")


def test_a_long_reply_is_checked_in_one_pass():
    # Linear time: a megabyte of near misses is a few passes of the regex, not a quadratic scan.
    reply = "3 " * 500_000 + "4"
    assert ReplyAnswers("3 4").check(state(reply)).passed
    assert not ReplyAnswers("4 3").check(state(reply)).passed


# ------------------------------------------------------------------------------ judges


def item(**changes):
    base = {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "What is my cat called?",
        "answer": "Miso",
        "question_date": "2023/05/30 (Tue) 10:00",
        "haystack_session_ids": ["b", "a"],
        # Not in date order, as in LongMemEval's oracle file.
        "haystack_dates": ["2023/05/25 (Thu) 09:05", "2023/05/20 (Sat) 02:21"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "I renamed my cat to Tofu."},
                {"role": "assistant", "content": "Tofu it is.", "has_answer": True},
            ],
            [
                {"role": "user", "content": "My cat is Miso.", "has_answer": True},
                {"role": "assistant", "content": "Cute!"},
            ],
        ],
        "answer_session_ids": ["a", "b"],
    }
    base.update(changes)
    return base


def test_sessions_replay_in_date_order_with_turn_evidence():
    scenario = longmemeval_scenario(item())
    assert [s.name for s in scenario.sessions] == ["a", "b", "question"]
    evidence = scenario.sessions[-1].evidence
    assert (evidence.sessions, evidence.turns) == (("a", "b"), ("b#2", "a#1"))
    assert scenario.sessions[1].transcript[1] == {
        "role": "assistant",
        "content": "Tofu it is.",
        "has_answer": True,
    }


@pytest.mark.parametrize("key", ["question", "answer", "question_id", "question_type"])
def test_a_null_text_field_is_refused_naming_the_item(key):
    with pytest.raises(ValueError) as info:
        longmemeval_scenario(item(**{key: None}))
    label = "q1" if key != "question_id" else None
    assert str(info.value) == (
        f"LongMemEval item {label!r}: {key!r} must be a string or a number, got None"
    )


def test_an_int_answer_is_its_text_and_abstention_follows_the_benchmark_rule():
    scenario = longmemeval_scenario(item(answer=3))
    assert scenario.sessions[-1].expect == [ReplyAnswers("3")]
    # The benchmark's scripts test '_abs' in the id, not only at its end.
    abstain = longmemeval_scenario(item(question_id="q1_abs_2"))
    assert abstain.labels["abstention"] is True
    assert abstain.sessions[-1].expect == [ReplyAbstains()]


def test_judge_only_types_are_refused_without_a_judge(tmp_path):
    items = [
        item(
            question_id="t1",
            question_type="temporal-reasoning",
            answer="7 days. 8 days (including the last day) is also acceptable.",
        ),
        item(question_id="p1", question_type="single-session-preference", answer="A rubric"),
        item(question_id="u1"),
        item(question_id="t2_abs", question_type="temporal-reasoning"),
    ]
    with pytest.raises(ValueError) as info:
        load_longmemeval(items)
    assert str(info.value) == (
        "2 LongMemEval item(s) need a judge (t1, p1): temporal-reasoning and preference answers "
        "cannot be scored by matching. Pass judge= (a model, scored with LongMemEval's "
        "prompts), unjudged='skip' to leave them out, or unjudged='match' to score them by "
        "token match anyway"
    )
    assert [s.name for s in load_longmemeval(items, unjudged="skip")] == ["u1", "t2_abs"]
    matched = load_longmemeval(items, unjudged="match")
    assert matched[0].sessions[-1].expect == [
        ReplyAnswers("7 days. 8 days (including the last day) is also acceptable.")
    ]
    with pytest.raises(ValueError, match="unjudged must be one of"):
        load_longmemeval(items, unjudged="ignore")


class Verdicts:
    """A scripted judge model: answers from a list, and keeps every prompt it was sent."""

    name = "scripted-judge"

    def __init__(self, *said):
        self.said = list(said)
        self.prompts = []

    def complete(self, messages, tools):
        from jupyter_agent_memory.evaluation import ModelTurn

        self.prompts.append(messages[0]["content"])
        text = self.said.pop(0)
        if isinstance(text, Exception):
            raise text
        return ModelTurn(text=text, usage={"prompt_tokens": 50, "completion_tokens": 1})


def test_longmemeval_judging_uses_the_benchmark_prompts_and_rule(tmp_path):
    templates = longmemeval_templates()
    assert set(templates) == {
        "single-session-user", "single-session-assistant", "multi-session",
        "temporal-reasoning", "knowledge-update", "single-session-preference", "abstention",
    }
    judge_model = Verdicts("  Yes.", "no", "Yes", "eyes")  # the benchmark's rule: 'yes' in it
    judge = LongMemEvalJudge(judge_model)
    items = [
        item(question_id="t1", question_type="temporal-reasoning", answer="7 days"),
        item(question_id="k1", question_type="knowledge-update", answer="Tofu"),
        item(question_id="q_abs", answer="You never mentioned a dog."),
        item(question_id="u1"),
    ]
    scenarios = load_longmemeval(items, judge=judge_model)
    answer = ScriptedModel([Rule("", reply="It is Tofu, 7 days.")])
    outcomes = []
    for scenario in scenarios:
        result = run_scenario(tmp_path / scenario.name, answer, scenario, config=DONE,
                              closing_turn=None)
        (outcome,) = result.sessions[-1].outcomes
        outcomes.append(outcome)
        assert result.sessions[-1].judge_calls[0].role == "judge"
        assert result.sessions[-1].summary()["judge_input_tokens"] == 50
    assert [o.passed for o in outcomes] == [True, False, True, True]
    assert {o.scorer for o in outcomes} == {"longmemeval-judge"}
    assert outcomes[0].judge["prompt"] == templates["temporal-reasoning"].format(
        "What is my cat called?", "7 days", "It is Tofu, 7 days."
    )
    assert outcomes[2].judge["prompt"] == templates["abstention"].format(
        "What is my cat called?", "You never mentioned a dog.", "It is Tofu, 7 days."
    )
    assert outcomes[0].judge["rule"].startswith("'yes' in the judge's reply")
    assert outcomes[0].judge["model"] == "scripted-judge"
    assert judge_model.prompts == [o.judge["prompt"] for o in outcomes]
    assert "do not penalize off-by-one errors" in templates["temporal-reasoning"]
    with pytest.raises(Exception, match="no answer-check prompt for question type 'mystery'"):
        judge.judgement("q", "a", "r", question_type="mystery")


def test_a_judge_outage_is_an_error_never_a_wrong_answer(tmp_path):
    judge_model = Verdicts(ConnectionError("judge endpoint down"))
    (scenario,) = load_longmemeval([item()], judge=judge_model)
    model = ScriptedModel([Rule("", reply="Miso")])
    result = run_scenario(tmp_path / "agent", model, scenario, config=DONE)
    session = result.sessions[-1]
    (outcome,) = session.outcomes
    assert (outcome.passed, outcome.error) == (
        False,
        "check raised ConnectionError: judge endpoint down",
    )
    assert result.errors == [(3, f"{outcome.description}: {outcome.error}")]
    summary = session.summary()
    assert (summary["passed"], summary["failed"], summary["errors"]) == (0, 0, 1)
    assert summary["pass_rate"] is None
    (call,) = session.judge_calls
    assert call.error == "ConnectionError: judge endpoint down"
    assert summary["failed_calls"] == 1
    # ModelJudge's own prompt: an answer that is neither yes nor no is no verdict either.
    silent = ReplyJudged("Miso", ModelJudge(Verdicts("perhaps")))
    judged = silent.check(state("Miso"))
    assert judged.error == "check raised JudgeError: judge gave no verdict: 'perhaps'"


# ------------------------------------------------------------------------------ replay


def test_the_last_assistant_turn_of_a_transcript_can_be_learned(tmp_path):
    """Single-session-assistant evidence at the end of a session reaches the model."""
    scenario = longmemeval_scenario(
        item(
            question_type="single-session-assistant",
            question="Which wine did you suggest?",
            answer="Pinot Noir",
            haystack_session_ids=["a"],
            haystack_dates=["2023/05/20 (Sat) 02:21"],
            haystack_sessions=[[
                {"role": "user", "content": "What wine goes with risotto?"},
                {"role": "assistant", "content": "I suggest a Pinot Noir.", "has_answer": True},
            ]],
            answer_session_ids=["a"],
        )
    )
    # A model that notes wine suggestions it has seen from the assistant.
    class Noting(ScriptedModel):
        def complete(self, messages, tools):
            said = [m["content"] for m in messages if m["role"] == "assistant" and m["content"]]
            last = messages[-1]
            if last["role"] == "user" and last["content"] == CLOSING_TURN and said:
                from jupyter_agent_memory.evaluation import ModelTurn, ToolCall

                note = {"action": "append", "text": f"Suggested: {said[-1]}", "tags": ["wine"]}
                return ModelTurn(tool_calls=[ToolCall("memory", note)])
            return super().complete(messages, tools)

    model = Noting([
        Rule("wine did you", calls=[call_tool("memory", action="search", query="Suggested")],
             reply=recall(r"Suggested: I suggest a (\w+ \w+)", "{1}", "No idea.")),
    ])
    result = run_scenario(tmp_path / "agent", model, scenario, config=DONE)
    assert result.passed, str(result)
    haystack = result.sessions[0]
    assert haystack.closing.user == CLOSING_TURN
    assert [e["text"] for e in haystack.new_entries] == ["Suggested: I suggest a Pinot Noir."]
    scores = {s.retriever: s for s in result.sessions[-1].retrieval}
    assert scores["agent"].turn_recall == 1.0 and scores["agent"].session_recall == 1.0
    # Without the closing turn the last reply is never shown: nothing is learned.
    silent = run_scenario(tmp_path / "none", model, scenario, config=DONE, closing_turn=None)
    assert silent.sessions[0].closing is None and silent.sessions[0].new_entries == []
    assert not silent.passed


def test_turn_recall_tells_the_evidence_turn_from_others_of_its_session(tmp_path):
    session = Session(
        transcript=[
            {"role": "user", "content": "note: I like tea"},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "note: my cat is Miso", "has_answer": True},
            {"role": "assistant", "content": "Cute."},
        ],
        name="chat",
    )
    from jupyter_agent_memory.evaluation import Evidence

    question = Session(
        ["cat?"], name="question", evidence=Evidence(sessions=("chat",), turns=("chat#3",))
    )
    model = ScriptedModel([
        Rule(r"^note: (.*)", calls=[journal("{1}")], reply="ok"),
        Rule(r"cat\?", calls=[call_tool("memory", action="search", query="tea")], reply="{result}"),
    ])
    result = run_scenario(tmp_path / "agent", model, Scenario([session, question]), config=DONE)
    (agent,) = [s for s in result.sessions[-1].retrieval if s.retriever == "agent"]
    # The search found an entry of the right session, but not of the evidence turn.
    assert (agent.session_recall, agent.turn_recall) == (1.0, 0.0)
    assert agent.metrics()["turn_recall@5"] == 0.0


def test_facts_policy_keeps_statements_that_start_with_my(tmp_path):
    scenario = Scenario([Session(["My cat is Miso."]), Session(["What is my cat called?"])])
    result = run_scenario(tmp_path / "agent", FactsPolicy(), scenario, config=DONE)
    assert result.sessions[0].facts_after == "- My cat is Miso.\n"
    assert result.sessions[1].turns[0].reply == "From my notes: My cat is Miso."


# ------------------------------------------------------------------------------ prompts


def test_prompts_and_token_counts_do_not_depend_on_the_run_folder(tmp_path):
    scenario = Scenario([
        Session(["Hi, my name is Ada."], date="2026-01-05T09:00"),
        Session(["What's my name?"], date="2026-01-06T09:00"),
    ])
    model = ScriptedModel([
        Rule(r"my name is (\w+)", calls=[remember("- Name: {1}")], reply="Hi {1}."),
        Rule(r"my name\?", reply=recall(r"Name: (\w+)", "You are {1}.", "?")),
    ])
    short = tmp_path / "a"
    long = tmp_path / ("a-much-longer-folder-name-" * 4) / "nested"
    results = []
    for base in (short, long):
        base.mkdir(parents=True)
        results.append(run_scenario(base / "agent", model, scenario, workspace=base))
    one, two = results
    assert [s.system_prompt for s in one.sessions] == [s.system_prompt for s in two.sessions]
    assert [s.next_prompt for s in one.sessions] == [s.next_prompt for s in two.sessions]
    assert [s.prompt_tokens for s in one.sessions] == [s.prompt_tokens for s in two.sessions]
    tokens = [[c.input_tokens for c in s.model_calls] for s in one.sessions]
    assert tokens == [[c.input_tokens for c in s.model_calls] for s in two.sessions]
    prompt = one.sessions[0].system_prompt
    assert "`/agent/memory/FACT.md`" in prompt and "(`/workspace`)" in prompt
    assert str(tmp_path) not in prompt
    assert one.sessions[0].prompt_tokens == approx_tokens(prompt)
    # path_aliases={} shows the real folders.
    real = run_scenario(tmp_path / "real", model, scenario, workspace=tmp_path, path_aliases={})
    assert f"`{tmp_path / 'real'}`" in real.sessions[0].system_prompt


def test_a_bootstrap_completes_through_the_profile_tool(tmp_path):
    soul = "I am Quill, a patient research aide. I answer briefly and cite sources.\n"
    user = "The user is Ada, in Paris (UTC+1). Prefers short answers.\n"
    model = ScriptedModel([
        Rule(
            "set up",
            calls=[
                call_tool("profile", file="soul", content=soul),
                call_tool("profile", file="user", content=user),
                journal("Bootstrap done: Quill for Ada.", ["bootstrap"]),
            ],
            reply="All set.",
        ),
    ])
    scenario = Scenario([Session(["Let's set up."]), Session(["Hello again."])])
    mem = AgentMemory.open(tmp_path / "agent")
    result = run_scenario(mem, model, scenario, workspace=tmp_path)
    first, second = result.sessions
    assert first.bootstrap is True
    assert "Save your role definition, name, personality, tone, principles and boundaries " \
        "with `profile` (`file`: `soul`, the whole SOUL.md)." in first.system_prompt
    assert "No tool of this session can write" not in first.system_prompt
    assert [(c.name, c.is_error) for c in first.tool_calls] == [
        ("profile", False), ("profile", False), ("memory", False)
    ]
    assert re.fullmatch(r"SOUL\.md updated \(sha256 [0-9a-f]{64}\)\.", first.tool_calls[0].result)
    assert second.bootstrap is False
    assert "## Bootstrap Mode" not in second.system_prompt
    assert f"<soul>\n{soul.strip()}\n</soul>" in second.system_prompt
    assert f"<user>\n{user.strip()}\n</user>" in second.system_prompt
    assert list(mem.entries())[-1]["tags"] == ["bootstrap"]


def test_the_shipped_policies_write_nothing_on_the_closing_turn(tmp_path):
    from jupyter_agent_memory.evaluation import JournalPolicy

    session = Session(transcript=[
        {"role": "user", "content": "I like tea."},
        {"role": "assistant", "content": "Noted."},
    ])
    for policy in (FactsPolicy(), JournalPolicy()):
        result = run_scenario(tmp_path / policy.name, policy, Scenario([session]), config=DONE)
        closing = result.sessions[0].closing
        assert (closing.reply, closing.tool_calls) == ("OK.", [])
    assert [e["text"] for e in result.sessions[0].new_entries] == ["I like tea."]
