"""Benchmark-shaped data (LongMemEval format, the shipped sample), run_matrix, leave-one-fact-out
and the two deterministic memory policies, on real agent folders."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.evaluation import (
    SAMPLE_PATH,
    EvaluationResult,
    Evidence,
    FactsPolicy,
    JournalPolicy,
    MatrixResult,
    ReplyAbstains,
    ReplyAnswers,
    ReplyContains,
    ReplyJudged,
    Rule,
    Scenario,
    ScriptedModel,
    Session,
    leave_one_fact_out,
    load_longmemeval,
    load_longmemeval_sample,
    longmemeval_scenario,
    parse_date,
    recall,
    remember,
    run_matrix,
    run_scenario,
)
from jupyter_agent_memory.evaluation.sample import build_sample, main, sample_text

DONE = {"bootstrap_completed": True}


def item(**changes):
    base = {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "What is my cat called?",
        "answer": "Miso",
        "question_date": "2023/05/30 (Tue) 10:00",
        "haystack_session_ids": ["a", "b"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 09:05"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "My cat is Miso.", "has_answer": True},
                {"role": "assistant", "content": "Cute!"},
            ],
            [{"role": "user", "content": "Rice tips?"}, {"role": "assistant", "content": "Rinse."}],
        ],
        "answer_session_ids": ["a"],
    }
    base.update(changes)
    return base


# ------------------------------------------------------------------------------- loader


def test_an_item_becomes_a_dated_scenario_with_gold_evidence():
    scenario = longmemeval_scenario(item())
    assert scenario.name == "q1"
    assert scenario.labels == {
        "question_id": "q1",
        "question_type": "single-session-user",
        "abstention": False,
    }
    first, second, question = scenario.sessions
    assert (first.name, first.date) == ("a", datetime(2023, 5, 20, 2, 21, tzinfo=timezone.utc))
    assert first.transcript == [
        {"role": "user", "content": "My cat is Miso.", "has_answer": True},
        {"role": "assistant", "content": "Cute!"},
    ]
    assert second.turns == ["Rice tips?"]
    assert question.turns == ["What is my cat called?"]
    assert question.date == datetime(2023, 5, 30, 10, 0, tzinfo=timezone.utc)
    assert question.evidence == Evidence(sessions=("a",), turns=("a#1",))
    assert question.expect == [ReplyAnswers("Miso")]
    assert scenario.dated


def test_abstention_judges_filters_and_limits(tmp_path):
    abstain = longmemeval_scenario(item(question_id="q2_abs", answer="Never said."))
    assert abstain.labels["abstention"] is True
    assert abstain.sessions[-1].expect == [ReplyAbstains()]
    assert abstain.sessions[-1].evidence is None

    def judge(question, answer, reply):
        return True

    judged = longmemeval_scenario(item(answer=42), judge=judge)
    (expectation,) = judged.sessions[-1].expect
    assert isinstance(expectation, ReplyJudged)
    assert (expectation.answer, expectation.question) == ("42", "What is my cat called?")

    path = tmp_path / "data.json"
    items = [item(question_id=f"q{n}", question_type=t) for n, t in enumerate("xyxy")]
    path.write_text(json.dumps(items))
    assert [s.name for s in load_longmemeval(path)] == ["q0", "q1", "q2", "q3"]
    assert [s.name for s in load_longmemeval(path, question_types=["y"])] == ["q1", "q3"]
    assert [s.name for s in load_longmemeval(path, question_types=["x"], limit=1)] == ["q0"]
    assert [s.name for s in load_longmemeval(items[:2])] == ["q0", "q1"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"question": None}, None),
        ({"haystack_dates": ["2023/05/20 (Sat) 02:21"]}, "2 session ids, 1 dates and 2 sessions"),
        ({"haystack_sessions": "nope"}, "haystack fields must be lists"),
        (
            {"haystack_sessions": [[{"role": "system", "content": "x"}], []]},
            "session 'a': Transcript message 1 has role 'system'",
        ),
        ({"haystack_dates": ["someday", "2023/05/21"]}, "Invalid session date 'someday'"),
        ({"haystack_dates": ["2023/02/30 (Thu) 10:00", "2023/05/21"]}, "day is out of range"),
    ],
)
def test_bad_items_are_refused_naming_the_question(changes, message):
    data = item(**changes)
    if message is None:
        del data["question"]
        message = "LongMemEval item 'q1' lacks question"
    with pytest.raises(ValueError, match=message):
        longmemeval_scenario(data)


def test_bad_files_are_refused(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("[{")
    with pytest.raises(ValueError, match="is not valid JSON"):
        load_longmemeval(path)
    path.write_text('{"a": 1}')
    with pytest.raises(ValueError, match="holds a JSON list of items"):
        load_longmemeval(path)


def test_dates_in_both_formats():
    assert parse_date("2023/05/20 (Sat) 02:21") == datetime(2023, 5, 20, 2, 21, tzinfo=timezone.utc)
    assert parse_date("2023/05/20") == datetime(2023, 5, 20, tzinfo=timezone.utc)
    assert parse_date("2023-05-20T02:21:00+02:00") == datetime(
        2023, 5, 20, 0, 21, tzinfo=timezone.utc
    )
    assert parse_date(datetime(2023, 5, 20)) == datetime(2023, 5, 20, tzinfo=timezone.utc)
    with pytest.raises(TypeError, match="datetime or a string"):
        parse_date(20230520)


# ------------------------------------------------------------------------------- sample


def test_the_shipped_sample_is_what_the_generator_makes(tmp_path, capsys):
    assert SAMPLE_PATH.read_text(encoding="utf-8") == sample_text()
    assert build_sample() == build_sample(0)
    assert build_sample(1) != build_sample(0)
    main([str(tmp_path / "out.json")])
    assert (tmp_path / "out.json").read_text(encoding="utf-8") == sample_text()
    main([])
    assert capsys.readouterr().out == sample_text()
    scenarios = load_longmemeval_sample()
    assert [s.labels["question_type"] for s in scenarios] == [
        "single-session-user",
        "single-session-assistant",
        "knowledge-update",
        "knowledge-update",
        "temporal-reasoning",
        "single-session-user",
    ]
    assert [s.labels["abstention"] for s in scenarios] == [False] * 5 + [True]
    # Every evidence session holds a has_answer turn, every filler none.
    for data in build_sample():
        for session_id, turns in zip(
            data["haystack_session_ids"], data["haystack_sessions"], strict=True
        ):
            has = any(turn.get("has_answer") for turn in turns)
            assert has == (session_id in data["answer_session_ids"]) or data[
                "question_id"
            ].endswith("_abs")


EXPECTED_PASSES = {
    "facts": [True, False, False, False, True, True],
    "journal": [True, False, False, True, True, False],
}


def test_both_policies_on_the_sample_pass_and_fail_where_they_should(tmp_path):
    scenarios = load_longmemeval_sample()
    for name, policy in (("facts", FactsPolicy()), ("journal", JournalPolicy())):
        passes = []
        for scenario in scenarios:
            result = run_scenario(
                tmp_path / f"{name}-{scenario.name}", policy, scenario, config=DONE
            )
            assert not result.errors
            passes.append(result.passed)
        assert passes == EXPECTED_PASSES[name], name
    # The temporal answer is the session's simulated date, not today's.
    temporal = scenarios[4]
    result = run_scenario(tmp_path / "temporal", JournalPolicy(), temporal, config=DONE)
    answer = temporal.sessions[-1].expect[0].answer
    assert result.sessions[-1].turns[0].reply.startswith(f"On {answer}: Renewed my passport")
    scores = {s.retriever: s for s in result.sessions[-1].retrieval}
    assert (scores["agent"].session_recall, scores["tool"].session_recall) == (1.0, 0.0)
    assert scores["bm25"].mrr == 1.0


def test_facts_policy_dates_its_lines_and_keeps_stale_ones(tmp_path):
    scenario = load_longmemeval_sample()[3]  # metric, then imperial
    mem = AgentMemory.open(tmp_path / "agent")
    result = run_scenario(mem, FactsPolicy(), scenario, config=DONE)
    lines = mem.facts.splitlines()
    assert any(line.startswith("- (2023-") and "metric" in line for line in lines)
    assert any("imperial" in line for line in lines)
    assert result.sessions[-1].turns[0].reply.startswith("From my notes: (2023-")
    assert "metric" in result.sessions[-1].turns[0].reply


# ------------------------------------------------------------------------------- matrix


def scripted(seed: int) -> ScriptedModel:
    model = ScriptedModel(
        [
            Rule(r"I am (\w+)", calls=[remember("- Name: {1}")], reply="Hi"),
            Rule(r"who am i", reply=recall(r"Name: (\w+)", "You are {1}.", "I don't know.")),
        ]
    )
    model.name = f"scripted-{seed}"
    return model


def forgetful(seed: int) -> ScriptedModel:
    return ScriptedModel([], default_reply="I don't know.")


def matrix_scenarios():
    return [
        Scenario(
            [Session(["I am Ada"]), Session(["Who am I?"], expect=[ReplyContains("Ada")])],
            name="ada",
            labels={"kind": "name"},
        ),
        Scenario(
            [Session(["Who am I?"], expect=[ReplyAbstains()])], name="blank", labels={"kind": "abs"}
        ),
    ]


def test_run_matrix_gives_one_tidy_table(tmp_path):
    matrix = run_matrix(
        {"remembers": scripted, "forgets": forgetful},
        matrix_scenarios(),
        seeds=[0, 1],
        root=tmp_path / "runs",
        config=DONE,
    )
    assert [(r.model, r.scenario, r.seed) for r in matrix.runs] == [
        ("remembers", "ada", 0),
        ("remembers", "ada", 1),
        ("remembers", "blank", 0),
        ("remembers", "blank", 1),
        ("forgets", "ada", 0),
        ("forgets", "ada", 1),
        ("forgets", "blank", 0),
        ("forgets", "blank", 1),
    ]
    # The factory got each seed, and every run had a fresh folder.
    assert [r.result.model for r in matrix.runs[:2]] == ["scripted-0", "scripted-1"]
    folders = [r.result.agent_path for r in matrix.runs]
    assert len(set(folders)) == 8
    assert all(folder.startswith(str(tmp_path / "runs")) for folder in folders)
    frame = matrix.to_dataframe()
    assert list(frame.columns) == [
        "model",
        "scenario",
        "seed",
        "kind",
        "session",
        "name",
        "metric",
        "value",
    ]
    rates = frame[(frame.metric == "pass_rate") & frame.value.notna()]
    assert list(
        zip(rates.model, rates.scenario, rates.seed, rates.session, rates.value, strict=True)
    ) == [
        ("remembers", "ada", 0, 2, 1.0),
        ("remembers", "ada", 1, 2, 1.0),
        ("remembers", "blank", 0, 1, 1.0),
        ("remembers", "blank", 1, 1, 1.0),
        ("forgets", "ada", 0, 2, 0.0),
        ("forgets", "ada", 1, 2, 0.0),
        ("forgets", "blank", 0, 1, 1.0),
        ("forgets", "blank", 1, 1, 1.0),
    ]
    summary = matrix.summary(["pass_rate", "model_calls"])
    assert summary.loc["remembers", "pass_rate"] == 1.0
    assert summary.loc["forgets", "pass_rate"] == 0.5
    assert list(summary.columns) == ["pass_rate", "model_calls"]
    by_kind = matrix.summary(["pass_rate"], by=["model", "kind"])
    assert by_kind.loc[("forgets", "name"), "pass_rate"] == 0.0
    assert "8 runs: 2 model(s) × 2 scenario(s) × 2 seed(s), 0 error(s)" in str(matrix)
    loaded = MatrixResult.from_json(matrix.to_json())
    assert loaded.runs == matrix.runs and loaded.rows() == matrix.rows()
    saved = matrix.save(tmp_path / "matrix.json")
    assert MatrixResult.load(saved).to_json() == matrix.to_json()


def test_matrix_plots_take_ax_title_metric_and_hue(tmp_path):
    import matplotlib.pyplot as plt

    matrix = run_matrix(
        {"remembers": scripted, "forgets": forgetful},
        matrix_scenarios(),
        root=tmp_path / "runs",
        config=DONE,
    )
    figure = matrix.plot()
    axes = figure.axes[0]
    assert axes.get_title() == "pass_rate by model"
    assert [bar.get_height() for bar in axes.patches] == [1.0, 0.5]
    own, ax = plt.subplots()
    assert matrix.plot("pass_rate", hue="kind", ax=ax, title="By kind") is own
    assert ax.get_title() == "By kind"
    assert [bar.get_height() for bar in ax.patches] == [1.0, 0.0, 1.0, 1.0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["name", "abs"]
    matrix.plot("input_tokens", ax=ax)
    plt.close(own)
    with pytest.raises(ValueError, match="No run has the metric 'nope'"):
        matrix.plot("nope")


def test_matrix_templates_and_bad_input(tmp_path):
    matrix = run_matrix(
        [scripted(0)],
        matrix_scenarios()[0],
        templates={"plain": None, "guide": "guide"},
        root=tmp_path / "runs",
        config=DONE,
    )
    assert [(r.model, r.template) for r in matrix.runs] == [
        ("scripted-0", "plain"),
        ("scripted-0", "guide"),
    ]
    assert list(matrix.to_dataframe().columns[:4]) == ["model", "template", "scenario", "seed"]
    guided = AgentMemory.open(matrix.runs[1].result.agent_path, create=False)
    assert guided.template_info()["template"] == "guide"
    assert AgentMemory.open(matrix.runs[0].result.agent_path).template_info() is None
    with pytest.raises(ValueError, match="Scenario names must be unique"):
        run_matrix([scripted(0)], [matrix_scenarios()[0]] * 2, root=tmp_path / "x")
    with pytest.raises(ValueError, match="Two models are named"):
        run_matrix([scripted(0), scripted(0)], matrix_scenarios(), root=tmp_path / "x")
    with pytest.raises(TypeError, match="must be a model object or a function"):
        run_matrix({"x": 3}, matrix_scenarios(), root=tmp_path / "x")
    with pytest.raises(TypeError, match="has no complete"):
        run_matrix({"x": lambda seed: 3}, matrix_scenarios(), root=tmp_path / "y")
    with pytest.raises(ValueError, match="at least one seed"):
        run_matrix([scripted(0)], matrix_scenarios(), seeds=[], root=tmp_path / "x")


def test_matrix_progress_and_sample_policies(tmp_path):
    events = []
    matrix = run_matrix(
        {"facts": FactsPolicy(), "journal": JournalPolicy()},
        load_longmemeval_sample(),
        root=tmp_path / "runs",
        config=DONE,
        progress=lambda done, total, text: events.append((done, total, text)),
    )
    assert events[0] == (0, 12, "facts × sample_user_01 × seed 0")
    assert events[-1] == (12, 12, "done")
    summary = matrix.summary(["pass_rate"], by=["model"])
    assert summary.loc["facts", "pass_rate"] == 0.5
    assert summary.loc["journal", "pass_rate"] == 0.5
    frame = matrix.to_dataframe()
    assert "question_type" in frame.columns
    recall_rows = frame[(frame.metric == "agent.session_recall@5") & (frame.model == "journal")]
    assert len(recall_rows) == 5  # every question with evidence (abstention has none)


# ---------------------------------------------------------------------- leave-one-fact-out


def test_leave_one_fact_out_shows_which_lines_help_and_hurt(tmp_path):
    mem = AgentMemory.open(tmp_path / "agent")
    facts = "# Facts\n- Units: metric\n- Name: Bea\n- Units: imperial\n- Likes tea\n"
    mem.update_facts(facts)
    model = ScriptedModel(
        [
            Rule(r"units", reply=recall(r"Units: (\w+)", "You use {1}.", "I don't know.")),
            Rule(r"name", reply=recall(r"Name: (\w+)", "You are {1}.", "I don't know.")),
        ]
    )
    scenario = Scenario(
        [
            Session(["Which units?"], expect=[ReplyContains("imperial")]),
            Session(["My name?"], expect=[ReplyContains("Bea")]),
        ],
        name="recall",
    )
    ablation = leave_one_fact_out(mem, model, scenario, workdir=tmp_path / "lofo", config=DONE)
    assert ablation.lines == ["- Units: metric", "- Name: Bea", "- Units: imperial", "- Likes tea"]
    rows = ablation.rows()
    assert [(r["line"], r["passed"], r["passed_delta"]) for r in rows] == [
        (1, 2.0, 1.0),  # the stale line hurts: without it the imperial answer comes through
        (2, 0.0, -1.0),  # the name helps
        (3, 1.0, 0.0),  # imperial alone does not help while metric comes first
        (4, 1.0, 0.0),
    ]
    assert [r["pass_rate_delta"] for r in rows] == [0.5, -0.5, 0.0, 0.0]
    text = str(ablation)
    assert "baseline 1/2 expectations passed" in text
    assert " 1. - Units: metric  ->  without it 2/2 (+1: hurts)" in text
    assert " 2. - Name: Bea  ->  without it 0/2 (-1: helps)" in text
    # The original folder is untouched; each replay ran on its own copy.
    assert mem.facts == facts and mem.history() == []
    assert (tmp_path / "lofo" / "without-001").is_dir()
    copy = AgentMemory.open(tmp_path / "lofo" / "without-001", create=False)
    assert copy.facts == "# Facts\n- Name: Bea\n- Units: imperial\n- Likes tea\n"
    frame = ablation.to_dataframe()
    assert list(frame.index) == [1, 2, 3, 4] and frame.loc[1, "fact"] == "- Units: metric"
    again = leave_one_fact_out(mem.path, model, scenario, workdir=tmp_path / "lofo2", config=DONE)
    assert again.rows() == rows


def test_leave_one_fact_out_refuses_a_missing_agent(tmp_path):
    from jupyter_agent_memory.errors import AgentNotFoundError

    with pytest.raises(AgentNotFoundError):
        leave_one_fact_out(tmp_path / "nobody", ScriptedModel([]), Scenario([Session(["x"])]))
    assert not (tmp_path / "nobody").exists()


def test_results_of_a_benchmark_run_round_trip(tmp_path):
    result = run_scenario(
        tmp_path / "a", JournalPolicy(), load_longmemeval_sample()[4], config=DONE
    )
    assert EvaluationResult.from_json(result.to_json()) == result
    assert result.to_dataframe()["question_type"].unique().tolist() == ["temporal-reasoning"]
