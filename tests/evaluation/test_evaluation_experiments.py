"""Experiments that hold up: question-level statistics, resumed and parallel matrices,
cached model calls, and exports that are enough to run the experiment again."""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor

import pytest

from jupyter_agent_memory.evaluation import (
    FactsPolicy,
    JournalPolicy,
    MatrixResult,
    ModelTurn,
    Rule,
    Scenario,
    ScriptedModel,
    Session,
    bootstrap_interval,
    load_longmemeval_sample,
    paired_comparison,
    rerun,
    run_matrix,
)

DONE = {"bootstrap_completed": True}


# ------------------------------------------------------------------------------ statistics


def test_the_interval_resamples_questions_not_seeds():
    # Ten questions, each answered the same way by three seeds: the seeds add no information.
    per_question = [1, 1, 1, 0, 0, 1, 0, 1, 1, 0]
    question_level = bootstrap_interval(per_question, seed=1)
    as_rows = bootstrap_interval(per_question * 3, seed=1)  # seeds taken as independent
    assert question_level.mean == as_rows.mean == 0.6
    assert question_level.questions == 10
    assert (question_level.high - question_level.low) > 1.5 * (as_rows.high - as_rows.low)
    assert bootstrap_interval(per_question, seed=1) == question_level  # reproducible
    assert math.isnan(bootstrap_interval([math.nan]).mean)
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        bootstrap_interval([1.0], confidence=95)


def test_the_paired_test_is_exact_for_few_questions():
    a = [1, 1, 1, 1, 0, 1]
    b = [0, 0, 0, 0, 0, 1]
    found = paired_comparison(a, b)
    # Four questions differ, all in a's favour: 2 of the 16 sign patterns are that extreme.
    assert (found.p_value, found.exact) == (2 / 16, True)
    assert (found.wins, found.losses, found.ties, found.questions) == (4, 0, 2, 6)
    assert found.difference == pytest.approx(4 / 6)
    assert found.low <= found.difference <= found.high
    many = paired_comparison([1.0] * 40, [0.0] * 40, resamples=999)
    assert many.exact is False and many.p_value == pytest.approx(1 / 1000)
    assert paired_comparison([1, math.nan], [0, 1]).questions == 1
    with pytest.raises(ValueError, match="one pair per question"):
        paired_comparison([1], [1, 2])


def test_matrix_intervals_and_paired_comparison_per_question_type(tmp_path):
    matrix = run_matrix(
        {"facts": FactsPolicy(), "journal": JournalPolicy()},
        load_longmemeval_sample(),
        seeds=[0, 1],
        root=tmp_path / "runs",
        config=DONE,
    )
    intervals = matrix.intervals("pass_rate", resamples=500)
    assert list(intervals.columns) == ["model", "mean", "low", "high", "questions"]
    assert intervals.set_index("model").loc["facts", "questions"] == 6  # not 12 (seeds)
    assert intervals.set_index("model").loc["facts", "mean"] == 0.5
    typed = matrix.intervals("pass_rate", by="question_type", resamples=200)
    assert set(typed.question_type) == {
        "single-session-user", "single-session-assistant", "knowledge-update",
        "temporal-reasoning",
    }
    compared = matrix.compare("journal", "facts", by="question_type", resamples=500)
    overall = compared.iloc[0]
    assert (overall["question_type"], overall["questions"]) == ("all", 6)
    assert (overall["wins"], overall["losses"], overall["ties"]) == (1, 1, 4)
    assert overall["difference"] == 0.0 and overall["p_value"] == 1.0
    update = compared.set_index("question_type").loc["knowledge-update"]
    assert (update["mean_a"], update["mean_b"], update["wins"]) == (0.5, 0.0, 1)
    with pytest.raises(ValueError, match="No run of 'nobody'"):
        matrix.compare("nobody", "facts")
    # A label that is not text (LongMemEval's boolean ``abstention``) groups the same questions
    # in compare() as in intervals(); it once compared nothing (0 questions, NaN) per value.
    abstained = matrix.intervals("pass_rate", by="abstention", resamples=200)
    compared_abs = matrix.compare("journal", "facts", by="abstention", resamples=200)
    counts = abstained[abstained.model == "facts"].set_index("abstention")["questions"]
    assert list(compared_abs.abstention) == ["all", "False", "True"]
    by_value = compared_abs.set_index("abstention")
    assert by_value.loc["False", "questions"] == counts[False] > 0
    assert by_value.loc["True", "questions"] == counts[True] > 0
    figure = matrix.plot("pass_rate", hue="question_type", resamples=200)
    legend = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert sorted(legend) == sorted(set(typed.question_type))


# ------------------------------------------------------------------------------ resuming


class Interrupting:
    """A policy stopped (as by Ctrl-C or a kill) when it is asked ``question``."""

    name = "facts"

    def __init__(self, question: str) -> None:
        self.question = question
        self.inner = FactsPolicy()

    def complete(self, messages, tools):
        if messages[-1]["content"] == self.question:
            raise KeyboardInterrupt
        return self.inner.complete(messages, tools)


def test_an_interrupted_matrix_resumes_keeping_finished_cells(tmp_path):
    scenarios = load_longmemeval_sample()[:3]
    root = tmp_path / "runs"
    stop = Interrupting(scenarios[2].sessions[-1].turns[0])
    with pytest.raises(KeyboardInterrupt):
        run_matrix({"facts": stop}, scenarios, root=root, config=DONE)
    finished = sorted(p.parent.name for p in root.glob("*/result.json"))
    assert len(finished) == 2 and (root / "0003-facts-sample_update_01-s0" / "agent").is_dir()
    resumed = run_matrix({"facts": FactsPolicy()}, scenarios, root=root, config=DONE)
    assert [run.resumed for run in resumed.runs] == [True] * len(finished) + [False] * (
        3 - len(finished)
    )
    fresh = run_matrix({"facts": FactsPolicy()}, scenarios, root=tmp_path / "fresh", config=DONE)
    assert resumed.reproduces(fresh)
    # Another experiment in the same root is refused, naming the problem.
    with pytest.raises(FileExistsError, match="holds another experiment"):
        run_matrix({"facts": FactsPolicy()}, scenarios[:2], root=root, config=DONE)


class FailsOnce:
    name = "flaky"

    def __init__(self) -> None:
        self.failed = False

    def complete(self, messages, tools):
        if not self.failed:
            self.failed = True
            raise ConnectionError("server went away")
        return ModelTurn(text="hello")


def test_a_failed_cell_is_retried_on_resume(tmp_path):
    scenario = Scenario([Session(["hi"])], name="hi")
    model = FailsOnce()
    first = run_matrix([model], scenario, root=tmp_path / "runs")
    assert first.runs[0].result.errors
    second = run_matrix([model], scenario, root=tmp_path / "runs")
    assert second.runs[0].resumed is False and not second.runs[0].result.errors
    kept = run_matrix([model], scenario, root=tmp_path / "runs")
    assert kept.runs[0].resumed is True


# --------------------------------------------------------------------- parallel and cached


def test_threads_give_the_same_matrix(tmp_path):
    scenarios = load_longmemeval_sample()
    policies = {"facts": FactsPolicy(), "journal": JournalPolicy()}
    serial = run_matrix(policies, scenarios, root=tmp_path / "serial", config=DONE)
    with ThreadPoolExecutor(2) as pool:
        threaded = run_matrix(
            policies, scenarios, root=tmp_path / "threads", config=DONE, executor=pool
        )
    assert threaded.reproduces(serial)
    assert [r.scenario for r in threaded.runs] == [r.scenario for r in serial.runs]


class Counting(ScriptedModel):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked = 0

    def complete(self, messages, tools):
        self.asked += 1
        return super().complete(messages, tools)


def test_cached_model_calls_are_not_paid_twice(tmp_path):
    model = Counting([Rule("hi", reply="hello")])
    scenario = Scenario([Session(["hi", "hi again"])], name="hi")
    first = run_matrix({"m": model}, scenario, root=tmp_path / "a", cache=tmp_path / "cache")
    assert model.asked == 2
    again = run_matrix({"m": model}, scenario, root=tmp_path / "b", cache=tmp_path / "cache")
    assert model.asked == 2
    calls = again.runs[0].result.sessions[0].model_calls
    assert [c.cached for c in calls] == [True, True]
    assert again.reproduces(first)
    assert len(list((tmp_path / "cache").glob("*/*.json"))) == 2
    assert again.provenance["cache"] is True


@pytest.mark.slow
def test_the_same_matrix_runs_on_a_local_dask_cluster(tmp_path):
    distributed = pytest.importorskip("distributed")
    scenarios = load_longmemeval_sample()[:4]
    policies = {"facts": FactsPolicy(), "journal": JournalPolicy()}
    serial = run_matrix(policies, scenarios, root=tmp_path / "serial", config=DONE)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        on_dask = run_matrix(
            policies, scenarios, root=tmp_path / "dask", config=DONE,
            executor=client.get_executor(),
        )
    assert on_dask.reproduces(serial)
    assert len(list((tmp_path / "dask").glob("*/result.json"))) == 8


# ------------------------------------------------------------------------------ provenance


class ScriptedJudge:
    """A deterministic judge model: yes when the reply holds the answer line's last word."""

    name = "scripted-judge"

    def complete(self, messages, tools):
        prompt = messages[0]["content"]
        answer = prompt.split("Correct Answer: ")[-1].split("\n")[0].split("Explanation: ")[-1]
        reply = prompt.split("Model Response: ")[-1].split("\n")[0]
        said = "yes" if answer.split()[-1].strip(".").lower() in reply.lower() else "no"
        return ModelTurn(text=said, usage={"prompt_tokens": 80, "completion_tokens": 1})


def test_an_export_is_enough_to_run_the_experiment_again(tmp_path):
    scenarios = load_longmemeval_sample(judge=ScriptedJudge())[:3]
    matrix = run_matrix(
        {"facts": FactsPolicy(), "journal": JournalPolicy()},
        scenarios,
        seeds=[0, 1],
        root=tmp_path / "runs",
        config=DONE,
        retrieval_k=3,
    )
    saved = matrix.save(tmp_path / "matrix.json")
    provenance = json.loads(saved.read_text())["provenance"]
    from jupyter_agent_memory import __version__

    assert provenance["package"] == {"name": "jupyter-agent-memory", "version": __version__}
    assert provenance["runner_options"] == {"config": DONE, "retrieval_k": 3}
    assert provenance["seeds"] == [0, 1]
    assert provenance["rerun"] == {"complete": False, "needs": ["judge model 'scripted-judge'"]}
    judged = provenance["scenarios"][0]["sessions"][-1]["expect"][0]
    assert judged["judge"]["kind"] == "longmemeval-judge"
    assert matrix.runs[0].model_spec == {"name": "facts", "kind": "facts-policy", "rebuild": True}
    with pytest.raises(ValueError, match="judge model 'scripted-judge' cannot be rebuilt"):
        rerun(saved, root=tmp_path / "again")
    again = rerun(saved, judges={"scripted-judge": ScriptedJudge()}, root=tmp_path / "again")
    assert again.reproduces(matrix)
    assert again.rows() != [] and not MatrixResult.load(saved).reproduces(
        run_matrix({"facts": FactsPolicy()}, scenarios, root=tmp_path / "other", config=DONE)
    )
    # A scripted model is code: the export says so, and rerun asks for it by name.
    model = ScriptedModel([Rule("hi", reply="hello")])
    scripted = run_matrix([model], Scenario([Session(["hi"])], name="a"), root=tmp_path / "s")
    assert scripted.provenance["rerun"]["needs"] == ["model 'scripted'"]
    with pytest.raises(ValueError, match="model 'scripted' cannot be rebuilt"):
        rerun(scripted, root=tmp_path / "s2")
    assert rerun(scripted, models={"scripted": model}, root=tmp_path / "s3").reproduces(scripted)
