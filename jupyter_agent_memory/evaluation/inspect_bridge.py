"""A bridge to inspect_ai (the UK AI Security Institute's evaluation framework).

``inspect_task(scenarios, model)`` makes an inspect ``Task``: one ``Sample`` per scenario, a
solver running **our** runner and model on a fresh agent folder per sample and epoch, and **our**
scorer (correct when every verdict passed; a check that could not run is an error, never a wrong
answer). inspect adds logs, viewer, epochs and standard errors clustered by ``cluster``::

    from inspect_ai import eval
    task = inspect_task(load_longmemeval_sample(), FactsPolicy(), root="inspect-runs")
    eval(task, model="mockllm/model")    # our model runs; inspect's model is not called

Needs ``pip install "jupyter-agent-memory[lab]"``; the rest of the package never imports inspect.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .expectations import ReplyAnswers, ReplyContains, ReplyJudged
from .matrix import instantiate
from .models import import_extra
from .scenario import Scenario

__all__ = ["STORE_KEY", "inspect_task", "scenario_sample"]

STORE_KEY = "agent_memory_result"
"""Where each sample's ``EvaluationResult.to_dict()`` is kept in its inspect store."""


def _target(scenario: Scenario) -> str:
    for expectation in scenario.sessions[-1].expect:
        if isinstance(expectation, (ReplyAnswers, ReplyJudged)):
            return expectation.answer
        if isinstance(expectation, ReplyContains):
            return expectation.text
    return ""


def scenario_sample(scenario: Scenario) -> Any:
    """The inspect ``Sample`` for ``scenario``: id = its name, input = the last session's
    last turn, target = its expected answer (``''`` when none), metadata = its labels."""
    from inspect_ai.dataset import Sample

    last = scenario.sessions[-1]
    return Sample(input=last.turns[-1] if last.turns else "", target=_target(scenario),
                  id=scenario.name, metadata={str(k): v for k, v in scenario.labels.items()})


def inspect_task(
    scenarios: Sequence[Scenario], model: Any, *, root: str | os.PathLike[str] | None = None,
    cluster: str | None = "question_type", name: str = "agent_memory", **runner_options: Any,
) -> Any:
    """An inspect ``Task`` over ``scenarios`` run by ``model``, a model object or a function
    ``epoch -> model`` (epochs play seeds). Agent folders go under ``root`` (default: a temporary
    folder); ``runner_options`` go to ``EvaluationRunner``; ``cluster=None``: plain stderr."""
    import_extra("inspect_ai", "inspect_task", "inspect-ai",
                 'pip install "jupyter-agent-memory[lab]"')
    from inspect_ai import Task
    from inspect_ai.dataset import MemoryDataset
    from inspect_ai.model import ChatMessageAssistant, ModelOutput
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer, stderr
    from inspect_ai.solver import Generate, TaskState, solver

    scenario_list = list(scenarios)
    by_name = {scenario.name: scenario for scenario in scenario_list}
    if len(by_name) != len(scenario_list):
        raise ValueError("inspect_task needs scenarios with unique names (they are sample ids)")
    if cluster is not None and not all(cluster in s.labels for s in scenario_list):
        raise ValueError(f"every scenario needs the label {cluster!r} to cluster by it")
    base = Path(root if root is not None else tempfile.mkdtemp(prefix="agent-memory-inspect-"))

    def run(sample_id: str, epoch: int) -> dict[str, Any]:
        from .runner import EvaluationRunner

        folder = base / f"{sample_id}-epoch{epoch}"
        if folder.exists():
            raise FileExistsError(f"inspect_task needs a fresh agent folder, but {folder} exists")
        runner = EvaluationRunner(folder, instantiate(model, epoch), **runner_options)
        return runner.run(by_name[sample_id]).to_dict()

    @solver(name="agent_memory_runner")
    def replay() -> Any:
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            import anyio

            data = await anyio.to_thread.run_sync(run, str(state.sample_id), state.epoch)
            state.store.set(STORE_KEY, data)
            turns = data["sessions"][-1]["turns"]
            reply = turns[-1]["reply"] if turns else ""
            state.messages.append(ChatMessageAssistant(content=reply))
            state.output = ModelOutput.from_content(model=str(data["model"]), content=reply)
            state.completed = True
            return state

        return solve

    @scorer(metrics=[accuracy(), stderr(cluster=cluster)], name="agent_memory_expectations")
    def expectations() -> Any:
        async def score(state: TaskState, target: Target) -> Score:
            from .results import EvaluationResult

            result = EvaluationResult.from_dict(state.store.get(STORE_KEY))
            if result.errors:
                # An error is not a verdict: inspect records the sample as failed to score.
                index, text = result.errors[0]
                raise RuntimeError(f"session {index}: {text.strip().splitlines()[-1]}")
            failures = [f"session {i}: {o.description} ({o.detail})" for i, o in result.failures]
            return Score(
                value=CORRECT if result.passed else INCORRECT,
                answer=state.output.completion,
                explanation="; ".join(failures) or "every expectation held",
                metadata={"scorers": sorted({o.scorer for s in result.sessions
                                             for o in s.outcomes if o.scorer})},
            )

        return score

    dataset = MemoryDataset([scenario_sample(s) for s in scenario_list], name=name)
    return Task(dataset=dataset, solver=replay(), scorer=expectations(), name=name)
