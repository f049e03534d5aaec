"""Experiments as one tidy table: models × (templates ×) scenarios × seeds, a fresh agent each.

::

    matrix = run_matrix({"facts": FactsPolicy(), "journal": JournalPolicy()},
                        load_longmemeval_sample(), seeds=[0, 1])
    frame = matrix.to_dataframe()      # model, scenario, seed, session, metric, value (+ labels)
    matrix.plot("pass_rate")           # mean per model, one bar per model (and hue)

A model entry is a model object (used for every seed) or a function ``factory(seed)`` that
returns one, which is how seeded models are made (``lambda seed:
OpenAIChatModel(..., seed=seed)``). Memory policies are models (how they use the tool) or
templates (what the agent starts from): ``templates={"plain": None, "guide": "guide"}``
provisions each run's fresh folder first and adds a ``template`` column.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral
from pathlib import Path
from typing import Any

from .progress import make_progress
from .results import EvaluationResult, import_pandas, import_pyplot, load_json, new_axes, read_text
from .scenario import Scenario

__all__ = ["MatrixResult", "MatrixRun", "run_matrix"]

FORMAT = "jupyter-agent-memory/evaluation-matrix"


@dataclass
class MatrixRun:
    """One cell of the matrix: which model, template, scenario and seed, and its result."""

    model: str
    scenario: str
    seed: int
    result: EvaluationResult
    template: str | None = None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:40] or "run"


def _named(models: Any) -> dict[str, Any]:
    if isinstance(models, Mapping):
        named = {str(name): model for name, model in models.items()}
    else:
        if callable(getattr(models, "complete", None)):
            models = [models]
        named = {}
        for model in models:
            name = str(getattr(model, "name", None) or type(model).__name__)
            if name in named:
                raise ValueError(f"Two models are named {name!r}: pass a dict name -> model")
            named[name] = model
    if not named:
        raise ValueError("run_matrix needs at least one model")
    for name, model in named.items():
        if not (callable(getattr(model, "complete", None)) or callable(model)):
            raise TypeError(
                f"Model {name!r} must be a model object or a function seed -> model, got {model!r}"
            )
    return named


def _scenarios(scenarios: Any) -> list[Scenario]:
    if isinstance(scenarios, Scenario):
        scenarios = [scenarios]
    elif isinstance(scenarios, Mapping):
        scenarios = list(scenarios.values())
    scenarios = list(scenarios)
    if not scenarios:
        raise ValueError("run_matrix needs at least one scenario")
    for scenario in scenarios:
        if not isinstance(scenario, Scenario):
            raise TypeError(f"run_matrix scenarios must be Scenario objects, got {scenario!r}")
        if not scenario.sessions:  # refused before any run, not when its turn comes
            raise ValueError(f"Scenario {scenario.name!r} has no sessions to run")
    names = [scenario.name for scenario in scenarios]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"Scenario names must be unique, repeated: {duplicates}")
    return scenarios


def instantiate(model: Any, seed: int) -> Any:
    """The model for ``seed``: the object itself, or ``model(seed)`` for a factory."""
    if callable(getattr(model, "complete", None)):
        return model
    made = model(seed)
    if not callable(getattr(made, "complete", None)):
        raise TypeError(f"A model factory returned {made!r}, which has no complete()")
    return made


def run_matrix(
    models: Mapping[str, Any] | Sequence[Any] | Any,
    scenarios: Scenario | Sequence[Scenario] | Mapping[str, Scenario],
    *,
    seeds: Sequence[int] = (0,),
    templates: Mapping[str, str | os.PathLike[str] | None] | None = None,
    root: str | os.PathLike[str] | None = None,
    progress: Any = None,
    **runner_options: Any,
) -> MatrixResult:
    """Run every model on every scenario for every seed (and template), each on a fresh agent
    folder under ``root`` (default: a new temporary folder, kept for inspection).

    ``runner_options`` go to ``EvaluationRunner`` (``config``, ``workspace``, ``on_error``,
    ``retrieval_k``...). ``progress=True`` shows one line updated per run.
    """
    from .. import AgentMemory, provision
    from ..engine.templates import load_template
    from .runner import EvaluationRunner

    named = _named(models)
    scenario_list = _scenarios(scenarios)
    # int(1.7) or the characters of "012" would silently be other seeds than meant.
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Iterable):
        raise TypeError(f"seeds must be a list of integers, got {seeds!r}")
    seed_list = list(seeds)
    if not all(isinstance(seed, Integral) and not isinstance(seed, bool) for seed in seed_list):
        raise TypeError(f"seeds must be a list of integers, got {seeds!r}")
    seed_list = [int(seed) for seed in seed_list]  # numpy integers too
    if not seed_list:
        raise ValueError("run_matrix needs at least one seed")
    template_items: list[tuple[str | None, Any]] = (
        [(str(name), template) for name, template in templates.items()]
        if templates
        else [(None, None)]
    )
    for _, template in template_items:
        if template is not None:
            # A bad template is refused before any run, not after the runs before it.
            load_template(template)
    base = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="agent-memory-matrix-"))
    base.mkdir(parents=True, exist_ok=True)
    cells = [
        (name, template_name, template, scenario, seed)
        for name in named
        for template_name, template in template_items
        for scenario in scenario_list
        for seed in seed_list
    ]
    display = make_progress(progress, len(cells), "run_matrix", "runs")
    runs = []
    for number, (name, template_name, template, scenario, seed) in enumerate(cells, 1):
        label = " × ".join(
            part for part in (name, template_name, scenario.name, f"seed {seed}") if part
        )
        if display is not None:
            display.update(number - 1, label)
        parts = [name, template_name or "", scenario.name, f"s{seed}"]
        folder = base / f"{number:04d}-{_slug('-'.join(p for p in parts if p))}"
        if folder.exists():
            raise FileExistsError(f"run_matrix needs a fresh folder, but {folder} exists")
        memory = AgentMemory.open(folder)
        if template is not None:
            provision(template, memory)
        runner = EvaluationRunner(memory, instantiate(named[name], seed), **runner_options)
        result = runner.run(scenario)
        runs.append(MatrixRun(name, scenario.name, seed, result, template_name))
    if display is not None:
        display.update(len(cells), "done")
        display.close()
    return MatrixResult(runs, has_templates=bool(templates), root=str(base))


@dataclass
class MatrixResult:
    """Every run of a matrix, and the views over them."""

    runs: list[MatrixRun]
    has_templates: bool = False
    root: str = ""
    """The folder holding each run's agent folder."""
    _rows: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    def rows(self) -> list[dict[str, Any]]:
        """Tidy rows: model, [template,] scenario, seed, labels, session, name, metric, value."""
        if self._rows is None:
            rows = []
            for run in self.runs:
                keys: dict[str, Any] = {"model": run.model}
                if self.has_templates:
                    keys["template"] = run.template
                keys.update({"scenario": run.scenario, "seed": run.seed})
                for row in run.result.tidy_rows():
                    rows.append({**keys, **row})
            self._rows = rows
        return self._rows

    def to_dataframe(self) -> Any:
        """One long DataFrame: ``model``, (``template``,) ``scenario``, ``seed``, the scenario
        labels (e.g. ``question_type``), ``session``, ``name``, ``metric``, ``value``."""
        pandas = import_pandas("to_dataframe()")
        return pandas.DataFrame(self.rows())

    def groups(self) -> list[str]:
        """The columns that identify a run's policy: ``model`` (and ``template``)."""
        return ["model", "template"] if self.has_templates else ["model"]

    def summary(
        self,
        metrics: Sequence[str] = ("pass_rate", "input_tokens", "output_tokens"),
        by: Any = None,
    ) -> Any:
        """Mean of each metric per group (default: model, and template), NaN values left out;
        a wide DataFrame with one column per metric."""
        frame = self.to_dataframe()
        keys = list(by) if isinstance(by, (list, tuple)) else [by] if by else self.groups()
        chosen = frame[frame["metric"].isin(list(metrics))]
        table = chosen.pivot_table(index=keys, columns="metric", values="value", aggfunc="mean")
        return table.reindex(columns=[m for m in metrics if m in table.columns])

    def plot(
        self,
        metric: str = "pass_rate",
        *,
        by: str = "model",
        hue: str | None = None,
        ax: Any = None,
        title: str | None = None,
    ) -> Any:
        """Bars of the mean of ``metric`` per ``by`` (e.g. ``model``), one bar per ``hue``
        value side by side (e.g. ``question_type`` or ``scenario``); error bars show the spread
        over seeds when there are several. Returns the figure; draws into ``ax`` if given."""
        plt = import_pyplot("plot()")
        figure, axes = new_axes(plt, ax)
        rows = [r for r in self.rows() if r["metric"] == metric and not math.isnan(r["value"])]
        if not rows:
            raise ValueError(f"No run has the metric {metric!r}")
        groups = list(dict.fromkeys(str(row[by]) for row in rows))
        hues = list(dict.fromkeys(str(row[hue]) for row in rows)) if hue else [""]
        width = 0.8 / len(hues)
        for position, hue_value in enumerate(hues):
            means, spreads = [], []
            for group in groups:
                per_seed: dict[Any, list[float]] = {}
                for row in rows:
                    if str(row[by]) == group and (not hue or str(row[hue]) == hue_value):
                        per_seed.setdefault(row["seed"], []).append(row["value"])
                seed_means = [sum(v) / len(v) for v in per_seed.values()]
                mean = sum(seed_means) / len(seed_means) if seed_means else math.nan
                spread = (
                    math.sqrt(sum((m - mean) ** 2 for m in seed_means) / (len(seed_means) - 1))
                    if len(seed_means) > 1
                    else 0.0
                )
                means.append(mean)
                spreads.append(spread)
            offsets = [i - 0.4 + width * (position + 0.5) for i in range(len(groups))]
            axes.bar(
                offsets,
                means,
                width,
                yerr=spreads if any(spreads) else None,
                label=hue_value or None,
            )
        axes.set_xticks(range(len(groups)))
        axes.set_xticklabels(groups)
        axes.set_xlabel(by)
        axes.set_ylabel(f"mean {metric}")
        if hue:
            # Beside the bars, so it never hides one.
            axes.legend(title=hue, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        axes.set_title(title if title is not None else f"{metric} by {by}")
        return figure

    # -- JSON ------------------------------------------------------------------------------

    def to_json(self) -> str:
        """Every run as JSON text (``from_json`` loads it back equal)."""
        data = {
            "format": FORMAT,
            "version": 1,
            "has_templates": self.has_templates,
            "root": self.root,
            "runs": [
                {
                    "model": run.model,
                    "template": run.template,
                    "scenario": run.scenario,
                    "seed": run.seed,
                    "result": run.result.to_dict(),
                }
                for run in self.runs
            ],
        }
        return json.dumps(data, ensure_ascii=False, indent=1)

    @classmethod
    def from_json(cls, text: str) -> MatrixResult:
        """Load what ``to_json`` wrote."""
        data = load_json(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"Not an evaluation matrix: expected format {FORMAT!r}")
        try:
            runs = [
                MatrixRun(
                    item["model"],
                    item["scenario"],
                    item["seed"],
                    EvaluationResult.from_dict(item["result"]),
                    item.get("template"),
                )
                for item in data["runs"]
            ]
        except KeyError as exc:
            raise ValueError(f"Not a complete evaluation matrix: {exc} is missing") from None
        except (TypeError, AttributeError) as exc:
            raise ValueError(f"Not a valid evaluation matrix: {exc}") from None
        return cls(runs, has_templates=bool(data.get("has_templates")), root=data.get("root", ""))

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write ``to_json()`` to ``path``."""
        target = Path(path)
        target.write_text(self.to_json(), encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> MatrixResult:
        """Read a matrix written by ``save``."""
        return cls.from_json(read_text(path))

    def __str__(self) -> str:
        models = list(dict.fromkeys(run.model for run in self.runs))
        scenarios = list(dict.fromkeys(run.scenario for run in self.runs))
        seeds = list(dict.fromkeys(run.seed for run in self.runs))
        errors = sum(len(run.result.errors) for run in self.runs)
        lines = [
            f"{len(self.runs)} runs: {len(models)} model(s) × {len(scenarios)} scenario(s) × "
            f"{len(seeds)} seed(s), {errors} error(s)"
        ]
        for run in self.runs:
            total = sum(len(s.outcomes) for s in run.result.sessions)
            failed = len(run.result.failures)
            policy = run.model + (f" [{run.template}]" if run.template else "")
            lines.append(
                f"  {policy}  {run.scenario}  seed {run.seed}: {total - failed}/{total} passed"
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))
