"""The inspect_ai bridge, run offline: our runner and scorer inside inspect's eval loop."""

from __future__ import annotations

import pytest

from jupyter_agent_memory.evaluation import (
    FactsPolicy,
    JournalPolicy,
    load_longmemeval_sample,
    run_scenario,
)

inspect_ai = pytest.importorskip("inspect_ai")

DONE = {"bootstrap_completed": True}


def test_a_scenario_set_runs_as_an_inspect_task(tmp_path):
    from jupyter_agent_memory.evaluation.inspect_bridge import STORE_KEY, inspect_task

    scenarios = load_longmemeval_sample()
    task = inspect_task(scenarios, JournalPolicy(), root=tmp_path / "runs", config=DONE)
    (log,) = inspect_ai.eval(
        task, model="mockllm/model", log_dir=str(tmp_path / "logs"), display="none"
    )
    assert log.status == "success"
    samples = {sample.id: sample for sample in log.samples}
    assert set(samples) == {s.name for s in scenarios}
    # The same verdicts as our own runner gives.
    for scenario in scenarios:
        ours = run_scenario(tmp_path / f"own-{scenario.name}", JournalPolicy(), scenario,
                            config=DONE)
        sample = samples[scenario.name]
        (score,) = sample.scores.values()
        assert score.value == ("C" if ours.passed else "I"), scenario.name
        assert sample.output.completion == ours.sessions[-1].turns[0].reply
        assert sample.store[STORE_KEY]["scenario"] == scenario.name
    (scores,) = log.results.scores
    assert scores.metrics["accuracy"].value == 0.5  # as run_matrix says for this policy
    assert "stderr" in scores.metrics
    assert samples["sample_update_02"].metadata["question_type"] == "knowledge-update"


class DownJudge:
    name = "down"

    def complete(self, messages, tools):
        raise ConnectionError("judge endpoint down")


def test_a_judge_outage_is_a_sample_error_in_inspect_too(tmp_path):
    from jupyter_agent_memory.evaluation.inspect_bridge import inspect_task

    scenarios = load_longmemeval_sample(judge=DownJudge())[:1]
    task = inspect_task(scenarios, FactsPolicy(), root=tmp_path / "runs", config=DONE)
    (log,) = inspect_ai.eval(
        task, model="mockllm/model", log_dir=str(tmp_path / "logs"), display="none",
        fail_on_error=False,
    )
    (sample,) = log.samples
    assert sample.error is not None and "judge endpoint down" in sample.error.message
    assert not sample.scores


def test_bad_scenario_sets_are_refused(tmp_path):
    from jupyter_agent_memory.evaluation import Scenario, Session
    from jupyter_agent_memory.evaluation.inspect_bridge import inspect_task

    same = [Scenario([Session(["hi"])], name="a"), Scenario([Session(["hi"])], name="a")]
    with pytest.raises(ValueError, match="unique names"):
        inspect_task(same, FactsPolicy(), cluster=None)
    with pytest.raises(ValueError, match="needs the label 'question_type'"):
        inspect_task(same[:1], FactsPolicy())
