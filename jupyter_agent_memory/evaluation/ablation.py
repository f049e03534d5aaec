"""Leave-one-fact-out: which FACT.md lines help a scenario, and which hurt.

``leave_one_fact_out`` runs a scenario on a copy of the agent folder (the baseline), then once
per fact line (``count_facts``' lines) on a copy whose FACT.md lacks it; the original is never
written. A negative ``pass_rate_delta`` means the line helped, a positive one that it hurt.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import AgentMemory
from .matrix import instantiate
from .records import fact_lines
from .results import EvaluationResult, Report, dataframe
from .runner import EvaluationRunner
from .scenario import Scenario

__all__ = ["FactAblation", "leave_one_fact_out", "run_scores"]


def run_scores(result: EvaluationResult) -> dict[str, float]:
    """A run's ``passed``, ``total``, ``pass_rate`` and mean retrieval metrics per retriever."""
    total = sum(len(session.outcomes) for session in result.sessions)
    passed = total - len(result.failures)
    scores: dict[str, float] = {"passed": float(passed), "total": float(total),
                                "pass_rate": passed / total if total else math.nan}
    for retriever, metrics in result.retrieval_summary().items():
        scores.update({f"{retriever}.{name}": value for name, value in metrics.items()})
    return scores


@dataclass(repr=False)
class FactAblation(Report):
    """The baseline run, one run per removed line (``runs[i]`` without ``lines[i]``, the fact
    lines in FACT.md order), and the per-line report."""

    lines: list[str]
    baseline: EvaluationResult
    runs: list[EvaluationResult]

    def rows(self) -> list[dict[str, Any]]:
        """Per line: its number, ``fact``, every score without it and ``<score>_delta``."""
        base = run_scores(self.baseline)
        rows = []
        for number, (line, run) in enumerate(zip(self.lines, self.runs, strict=True), 1):
            row: dict[str, Any] = {"line": number, "fact": line}
            for key, value in run_scores(run).items():
                row[key] = value
                row[f"{key}_delta"] = value - base.get(key, math.nan)
            rows.append(row)
        return rows

    def to_dataframe(self) -> Any:
        """``rows()`` as a DataFrame indexed by line number."""
        return dataframe("to_dataframe()", self.rows()).set_index("line")

    def __str__(self) -> str:
        base = run_scores(self.baseline)
        out = [
            f"Leave-one-fact-out on {self.baseline.scenario!r}: {len(self.lines)} fact lines; "
            f"baseline {int(base['passed'])}/{int(base['total'])} expectations passed"
        ]
        for row in self.rows():
            delta = row["passed_delta"]
            effect = "helps" if delta < 0 else "hurts" if delta > 0 else "no effect"
            out.append(
                f"  {row['line']:>2}. {row['fact']}  ->  without it {int(row['passed'])}/"
                f"{int(row['total'])} ({delta:+.0f}: {effect})"
            )
        return "\n".join(out)


def leave_one_fact_out(agent: Any, model: Any, scenario: Scenario, *,
                       workdir: str | os.PathLike[str] | None = None,
                       **runner_options: Any) -> FactAblation:
    """Replay ``scenario`` without each FACT.md line of ``agent`` (an ``AgentMemory`` or a
    folder) in turn. ``model`` is a model or a factory (called with 0 for every replay); copies
    go under ``workdir`` (default: a new temporary folder); ``runner_options`` go to
    ``EvaluationRunner``."""
    source = Path(agent.path if isinstance(agent, AgentMemory) else agent)
    text = AgentMemory.open(source, create=False).facts
    lines = fact_lines(text)
    base = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="agent-lofo-"))
    base.mkdir(parents=True, exist_ok=True)

    def replay(folder: Path, facts: str | None) -> EvaluationResult:
        # Links inside are copied as links (never followed), so nothing outside leaks in.
        memory = AgentMemory.open(shutil.copytree(source, folder, symlinks=True))
        if facts is not None:
            memory.update_facts(facts)
        return EvaluationRunner(memory, instantiate(model, 0), **runner_options).run(scenario)

    if source.is_symlink() or not source.is_dir():
        raise ValueError(f"leave_one_fact_out needs a real agent folder, got {source}")
    baseline = replay(base / "baseline", None)
    # ``fact_lines`` keeps lines of ``text.splitlines()`` in order, so matching greedily finds
    # each fact's own position even when two facts read the same.
    bare, full = text.splitlines(), text.splitlines(keepends=True)
    positions: list[int] = []
    for index, line in enumerate(bare):
        if len(positions) < len(lines) and line == lines[len(positions)]:
            positions.append(index)
    runs = []
    for number, position in enumerate(positions, 1):
        kept = "".join(raw for index, raw in enumerate(full) if index != position)
        runs.append(replay(base / f"without-{number:03d}", kept))
    return FactAblation(lines, baseline, runs)
