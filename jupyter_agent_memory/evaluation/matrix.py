"""Experiments as one tidy table: models × (templates ×) scenarios × seeds, a fresh agent each.

A model entry is a model object or a function ``factory(seed)``; ``templates`` provisions each
fresh folder first. Each cell runs in its own folder under ``root`` and saves ``result.json``;
``run_matrix`` again with the same arguments and ``root`` keeps finished cells and runs the
others (failed ones too, ``retry_failed``). ``executor`` is any ``concurrent.futures.Executor``
(models and scenarios must then pickle); ``cache=folder`` wraps each model in a ``CachedModel``.
``MatrixResult.provenance`` records the experiment; ``rerun`` reproduces every number but latency.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import platform
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from numbers import Integral
from pathlib import Path
from typing import Any

from .. import AgentMemory, __version__, provision
from ..engine.functions import Toolset
from ..engine.templates import load_template
from .models import CachedModel, model_name, model_spec, read_json, write_whole
from .progress import make_progress
from .results import EvaluationResult, Exported, dataframe, load_json, new_axes
from .runner import EvaluationRunner
from .scenario import Scenario
from .specs import model_from_spec
from .stats import bootstrap_interval, paired_comparison

__all__ = ["MatrixResult", "MatrixRun", "rerun", "run_matrix"]

FORMAT = "jupyter-agent-memory/evaluation-matrix"
MANIFEST = "matrix.json"
RESULT = "result.json"
LATENCY_METRICS = ("latency_s", "judge_latency_s")  # the metrics a re-run cannot reproduce


@dataclass
class MatrixRun:
    """One cell of the matrix: model, template, scenario, seed, its result and model spec."""

    model: str
    scenario: str
    seed: int
    result: EvaluationResult
    template: str | None = None
    model_spec: dict[str, Any] = field(default_factory=dict)
    resumed: bool = False


def _named(models: Any) -> dict[str, Any]:
    if isinstance(models, Mapping):
        named = {str(name): model for name, model in models.items()}
    else:
        if callable(getattr(models, "complete", None)):
            models = [models]
        named = {}
        for model in models:
            name = model_name(model)
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


def _plain(value: Any) -> Any:
    """A runner option as JSON data; ``TypeError`` for one that has no plain form."""
    if isinstance(value, Toolset):
        return {"toolset": asdict(value)}
    if isinstance(value, timedelta):
        return {"seconds": value.total_seconds()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(type(value).__name__)


def _options_from_plain(options: Mapping[str, Any]) -> dict[str, Any]:
    rebuilt: dict[str, Any] = {}
    for key, value in options.items():
        if isinstance(value, Mapping) and set(value) == {"toolset"}:
            value = Toolset(**value["toolset"])
        elif key == "clock_step" and isinstance(value, Mapping):
            value = timedelta(seconds=value["seconds"])
        rebuilt[key] = value
    return rebuilt


@dataclass
class _Cell:
    """One run to make: everything a worker process needs (it must pickle)."""

    number: int
    model_name: str
    model: Any
    template_name: str | None
    template: Any
    scenario: Scenario
    seed: int
    folder: str
    runner_options: dict[str, Any]
    cache: str | None

    def key(self) -> dict[str, Any]:
        return {"folder": Path(self.folder).name, "model": self.model_name,
                "template": self.template_name, "scenario": self.scenario.name, "seed": self.seed}


def _matrix_run(keys: Mapping[str, Any], data: Mapping[str, Any], resumed: bool) -> MatrixRun:
    """The run of a cell's ``keys`` (model, template, scenario, seed) from its saved ``data``."""
    return MatrixRun(keys["model"], keys["scenario"], keys["seed"],
                     EvaluationResult.from_dict(data["result"]), keys.get("template"),
                     dict(data.get("model_spec") or {}), resumed)


def run_cell(cell: _Cell) -> dict[str, Any]:
    """Run one cell on a fresh agent folder; its result as data, also saved in its folder."""
    folder = Path(cell.folder)
    if folder.exists():
        shutil.rmtree(folder)  # an unfinished or failed attempt of this very cell
    folder.mkdir(parents=True)
    memory = AgentMemory.open(folder / "agent")
    if cell.template is not None:
        provision(cell.template, memory)
    model = instantiate(cell.model, cell.seed)
    spec = model_spec(model)
    if cell.cache is not None:
        model = CachedModel(model, cell.cache, key=f"{cell.model_name}/seed {cell.seed}")
    result = EvaluationRunner(memory, model, **cell.runner_options).run(cell.scenario)
    data = {"cell": cell.key(), "model_spec": spec, "result": result.to_dict()}
    write_whole(folder / RESULT, json.dumps(data, ensure_ascii=False))  # a resume reads it whole
    return data


def _finished(cell: _Cell, retry_failed: bool) -> dict[str, Any] | None:
    """The saved data of a cell that already ran (and needs no retry), else None."""
    data = read_json(Path(cell.folder) / RESULT)
    if not isinstance(data, dict) or data.get("cell") != cell.key():
        return None
    try:
        result = EvaluationResult.from_dict(data["result"])
    except (KeyError, ValueError):
        return None
    return None if retry_failed and result.errors else data


def _check_root(base: Path, manifest: dict[str, Any]) -> None:
    """Refuse a root that holds something other than this experiment's cells."""
    if (base / MANIFEST).exists():
        saved = read_json(base / MANIFEST)
        if not isinstance(saved, dict) or saved.get("cells") != manifest["cells"]:
            raise FileExistsError(
                f"{base} holds another experiment (its {MANIFEST} lists other cells): give "
                "run_matrix a fresh root, or the same models, templates, scenarios and seeds "
                "to resume it"
            )
        return
    if base.exists() and any(base.iterdir()):
        raise FileExistsError(
            f"run_matrix needs a fresh or resumable root, but {base} is not empty"
        )


def run_matrix(
    models: Mapping[str, Any] | Sequence[Any] | Any,
    scenarios: Scenario | Sequence[Scenario] | Mapping[str, Scenario], *,
    seeds: Sequence[int] = (0,),
    templates: Mapping[str, str | os.PathLike[str] | None] | None = None,
    root: str | os.PathLike[str] | None = None, progress: Any = None, executor: Any = None,
    cache: str | os.PathLike[str] | None = None, retry_failed: bool = True, **runner_options: Any,
) -> MatrixResult:
    """Run every model on every scenario for every seed (and template), each on a fresh agent
    folder under ``root`` (default: a new temporary folder); see the module docstring."""
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
    template_items: list[tuple[str | None, Any]] = [
        (str(name), template) for name, template in templates.items()
    ] if templates else [(None, None)]
    for _, template in template_items:
        if template is not None:
            # A bad template is refused before any run, not after the runs before it.
            load_template(template)
    base = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="agent-memory-matrix-"))
    cells = []
    combos = itertools.product(named, template_items, scenario_list, seed_list)
    for number, (name, (template_name, template), scenario, seed) in enumerate(combos, 1):
        parts = "-".join(p for p in (name, template_name, scenario.name, f"s{seed}") if p)
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", parts).strip("-.")[:40] or "run"
        folder = base / f"{number:04d}-{slug}"
        cells.append(_Cell(number, name, named[name], template_name, template, scenario, seed,
                           str(folder), dict(runner_options),
                           None if cache is None else os.fspath(cache)))
    manifest = {"format": FORMAT + "-cells", "cells": [cell.key() for cell in cells]}
    _check_root(base, manifest)
    base.mkdir(parents=True, exist_ok=True)
    (base / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    display = make_progress(progress, len(cells), "run_matrix", "runs")

    def label(cell: _Cell) -> str:
        parts = (cell.model_name, cell.template_name, cell.scenario.name, f"seed {cell.seed}")
        return " × ".join(part for part in parts if part)

    finished = {cell.number: _finished(cell, retry_failed) for cell in cells}
    done = {number: (data, True) for number, data in finished.items() if data is not None}
    todo = [cell for cell in cells if cell.number not in done]
    if done:
        display.update(len(done), f"{len(done)} kept from an earlier run")
    if executor is None:
        for cell in todo:
            display.update(len(done), label(cell))
            done[cell.number] = (run_cell(cell), False)
    else:
        futures = [(cell, executor.submit(run_cell, cell)) for cell in todo]
        for cell, future in futures:
            done[cell.number] = (future.result(), False)
            display.update(len(done), label(cell))
    display.update(len(cells), "done")
    display.close()
    runs = [_matrix_run(cell.key(), *done[cell.number]) for cell in cells]
    provenance = _provenance(named, scenario_list, seed_list, template_items, runner_options,
                             cache is not None, runs)
    return MatrixResult(runs, has_templates=bool(templates), root=str(base), provenance=provenance)


def _provenance(named: Mapping[str, Any], scenarios: Sequence[Scenario], seeds: Sequence[int],
                templates: Sequence[tuple[str | None, Any]], options: Mapping[str, Any],
                cached: bool, runs: Sequence[MatrixRun]) -> dict[str, Any]:
    """What the experiment was, as data, and what a re-run would need given again."""
    needs: list[str] = []
    plain_options: dict[str, Any] = {}
    for key, value in options.items():
        try:
            plain_options[key] = _plain(value)
        except TypeError as exc:
            needs.append(f"runner option {key!r} ({exc})")
    scenario_data = [scenario.to_dict() for scenario in scenarios]
    text = json.dumps(scenario_data)
    if '"custom"' in text:
        needs.append("scenarios (an expectation is code)")
    for spec in re.findall(r'"kind": "function", "name": "([^"]*)"', text):
        needs.append(f"judge function {spec!r}")
    judges = re.findall(r'"model": \{"name": "([^"]*)", "kind": "[^"]*", "rebuild": false\}', text)
    needs += [f"judge model {name!r}" for name in dict.fromkeys(judges)]
    unbuilt = [run.model for run in runs if not run.model_spec.get("rebuild")]
    needs += [f"model {name!r}" for name in dict.fromkeys(unbuilt)]
    return {
        "package": {"name": "jupyter-agent-memory", "version": __version__},
        "python": platform.python_version(),
        "models": {name: ("factory" if not callable(getattr(model, "complete", None))
                          else "object") for name, model in named.items()},
        "seeds": list(seeds),
        "templates": [[name, None if t is None else os.fspath(t)] for name, t in templates],
        "runner_options": plain_options,
        "cache": cached,
        "scenarios": scenario_data,
        "rerun": {"complete": not needs, "needs": needs},
    }


def rerun(
    matrix: MatrixResult | str | os.PathLike[str], *, models: Mapping[str, Any] | None = None,
    scenarios: Sequence[Scenario] | None = None, judges: Mapping[str, Any] | None = None,
    api_key: str | None = None, root: str | os.PathLike[str] | None = None, **options: Any,
) -> MatrixResult:
    """Run the experiment an export (a ``MatrixResult`` or a saved file) describes again.
    ``models`` gives by name the models that cannot be rebuilt from their specs, ``scenarios``
    replaces scenarios whose expectations are code, ``judges`` names judge models or functions.
    """
    if not isinstance(matrix, MatrixResult):
        matrix = MatrixResult.load(matrix)
    recorded = matrix.provenance
    if not recorded:
        raise ValueError("This matrix has no provenance: it was saved by an older version")
    given = dict(models or {})
    rebuilt: dict[str, Any] = {}
    for name in recorded["models"]:
        if name in given:
            rebuilt[name] = given[name]
            continue
        specs = {run.seed: run.model_spec for run in matrix.runs if run.model == name}
        made = {seed: model_from_spec(spec, api_key=api_key) for seed, spec in specs.items()}
        if any(model is None for model in made.values()):
            raise ValueError(
                f"The model {name!r} cannot be rebuilt from the export: give it again with "
                f"models={{{name!r}: ...}}"
            )
        rebuilt[name] = made[min(made)] if len(made) == 1 else (lambda seed, m=made: m[seed])
    if scenarios is None:
        scenarios = [Scenario.from_dict(data, judges=judges) for data in recorded["scenarios"]]
    templates = dict(recorded["templates"]) if matrix.has_templates else None
    runner_options = {**_options_from_plain(recorded["runner_options"]), **options}
    return run_matrix(rebuilt, list(scenarios), seeds=recorded["seeds"], templates=templates,
                      root=root, **runner_options)


def run_value(result: EvaluationResult, metric: str) -> float:
    """One run's ``pass_rate`` over all its verdicts, or mean ``metric`` over its sessions."""
    if metric == "pass_rate":
        verdicts = [o for s in result.sessions for o in s.verdicts]
        return sum(o.passed for o in verdicts) / len(verdicts) if verdicts else math.nan
    found = [value for session in result.sessions
             if not math.isnan(value := result.metrics(session).get(metric, math.nan))]
    return sum(found) / len(found) if found else math.nan


@dataclass(repr=False)
class MatrixResult(Exported):
    """Every run of a matrix, and the views over them."""

    FORMAT = FORMAT
    WHAT = "evaluation matrix"
    runs: list[MatrixRun]
    has_templates: bool = False
    root: str = ""
    """The folder holding each run's agent folder."""
    provenance: dict[str, Any] = field(default_factory=dict)
    """What the experiment was, and under ``rerun`` what else a re-run would need."""
    _rows: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    def rows(self) -> list[dict[str, Any]]:
        """Tidy rows: model, [template,] scenario, seed, labels, session, name, metric, value."""
        if self._rows is None:
            self._rows = [
                {**dict(zip(self.groups(), self._policy(run), strict=True)),
                 "scenario": run.scenario, "seed": run.seed, **row}
                for run in self.runs for row in run.result.tidy_rows()
            ]
        return self._rows

    def to_dataframe(self) -> Any:
        """``rows()`` as one long DataFrame."""
        return dataframe("to_dataframe()", self.rows())

    def groups(self) -> list[str]:
        """The columns that identify a run's policy: ``model`` (and ``template``)."""
        return ["model", "template"] if self.has_templates else ["model"]

    def _policy(self, run: MatrixRun) -> tuple[Any, ...]:
        """The values of ``groups()`` for ``run``."""
        return (run.model, run.template) if self.has_templates else (run.model,)

    def summary(self, metrics: Sequence[str] = ("pass_rate", "input_tokens", "output_tokens"),
                by: Any = None) -> Any:
        """Mean of each metric per group (default: ``groups()``), one column per metric."""
        frame = self.to_dataframe()
        keys = list(by) if isinstance(by, (list, tuple)) else [by] if by else self.groups()
        chosen = frame[frame["metric"].isin(list(metrics))]
        table = chosen.pivot_table(index=keys, columns="metric", values="value", aggfunc="mean")
        return table.reindex(columns=[m for m in metrics if m in table.columns])

    def question_values(self, metric: str = "pass_rate",
                        by: str | None = None) -> dict[tuple[Any, ...], dict[str, float]]:
        """Per policy group (and ``by``): each question's ``run_value``, averaged over seeds."""

        def key(run: MatrixRun) -> tuple[Any, ...]:
            if by is None:
                return self._policy(run)
            return (*self._policy(run), self._label(run, by))

        return self._question_means(metric, key)

    @staticmethod
    def _label(run: MatrixRun, by: str) -> Any:
        """A run's value of ``by``: a scenario label, else a run attribute (as it is, not text)."""
        return run.result.labels.get(by, getattr(run, by, None))

    def _question_means(self, metric: str,
                        key: Callable[[MatrixRun], Any]) -> dict[Any, dict[str, float]]:
        """Per ``key(run)``: each question's ``metric`` averaged over its seeds (NaN left out)."""
        values: dict[Any, dict[str, list[float]]] = {}
        for run in self.runs:
            value = run_value(run.result, metric)
            if not math.isnan(value):
                values.setdefault(key(run), {}).setdefault(run.scenario, []).append(value)
        return {
            group: {question: sum(v) / len(v) for question, v in questions.items()}
            for group, questions in values.items()
        }

    def intervals(self, metric: str = "pass_rate", *, by: str | None = None,
                  confidence: float = 0.95, resamples: int = 10_000, seed: int = 0) -> Any:
        """Mean of ``metric`` per policy (and ``by``) with a bootstrap interval that resamples
        questions (see ``stats``): ``mean``, ``low``, ``high``, ``questions``."""
        columns = [*self.groups(), *([by] if by else []), "mean", "low", "high", "questions"]
        rows = []
        for group, questions in self.question_values(metric, by).items():
            found = bootstrap_interval(list(questions.values()), confidence=confidence,
                                       resamples=resamples, seed=seed)
            rows.append([*group, found.mean, found.low, found.high, found.questions])
        return dataframe("intervals()", rows, columns=columns)

    def compare(self, a: str, b: str, metric: str = "pass_rate", *, by: str | None = None,
                confidence: float = 0.95, resamples: int = 10_000, seed: int = 0) -> Any:
        """Model (or ``(model, template)``) ``a`` against ``b`` on the questions both answered,
        overall and per ``by`` value: a ``paired_comparison`` per row."""
        keys = [tuple(policy) if isinstance(policy, tuple) else (policy,) for policy in (a, b)]
        known = self.question_values(metric)
        for policy, key in zip((a, b), keys, strict=True):
            if key not in known:
                raise ValueError(f"No run of {policy!r} has the metric {metric!r}")
        scopes: list[tuple[str | None, Any]] = [(None, "all")]
        if by is not None:
            # Grouped by the values themselves (a boolean label stays a boolean), shown as text.
            labels = sorted({self._label(run, by) for run in self.runs}, key=str)
            scopes += [(by, label) for label in labels]
        rows = []
        for scope_by, label in scopes:
            values = self.question_values(metric, scope_by)
            suffix: tuple[Any, ...] = () if scope_by is None else (label,)
            left, right = (values.get(key + suffix, {}) for key in keys)
            shared = [q for q in left if q in right]
            found = paired_comparison([left[q] for q in shared], [right[q] for q in shared],
                                      confidence=confidence, resamples=resamples, seed=seed)
            numbers = asdict(found)  # mean_a, mean_b, difference ... ties, in the table's order
            del numbers["confidence"], numbers["exact"]
            rows.append({(by or "scope"): str(label), "a": str(a), "b": str(b), **numbers})
        return dataframe("compare()", rows)

    def plot(self, metric: str = "pass_rate", *, by: str = "model", hue: str | None = None,
             ax: Any = None, title: str | None = None, confidence: float = 0.95,
             resamples: int = 2_000, seed: int = 0) -> Any:
        """Bars of the mean of ``metric`` per ``by`` (and ``hue``), with question-level bootstrap
        intervals as error bars (see ``intervals``). Returns the figure; draws into ``ax``."""
        figure, axes = new_axes(ax)

        def column(run: MatrixRun, name: str) -> str:
            if name in ("model", "template", "scenario", "seed"):
                return str(getattr(run, name))
            return str(run.result.labels.get(name))

        def key(run: MatrixRun) -> tuple[str, str]:
            return column(run, by), column(run, hue) if hue else ""

        values = self._question_means(metric, key)
        if not values:
            raise ValueError(f"No run has the metric {metric!r}")
        groups = list(dict.fromkeys(group for group, _ in values))
        hues = list(dict.fromkeys(shade for _, shade in values)) if hue else [""]
        width = 0.8 / len(hues)
        for position, hue_value in enumerate(hues):
            means, below, above = [], [], []
            for group in groups:
                found = bootstrap_interval(list(values.get((group, hue_value), {}).values()),
                                           confidence=confidence, resamples=resamples, seed=seed)
                means.append(found.mean)
                below.append(0.0 if math.isnan(found.low) else found.mean - found.low)
                above.append(0.0 if math.isnan(found.high) else found.high - found.mean)
            offsets = [i - 0.4 + width * (position + 0.5) for i in range(len(groups))]
            errors = [below, above] if any(below) or any(above) else None
            axes.bar(offsets, means, width, yerr=errors, label=hue_value or None)
        axes.set_xticks(range(len(groups)))
        axes.set_xticklabels(groups)
        axes.set_xlabel(by)
        axes.set_ylabel(f"mean {metric}")
        if hue:  # beside the bars, so it never hides one
            axes.legend(title=hue, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        axes.set_title(title if title is not None else f"{metric} by {by}")
        return figure

    def reproduces(self, other: MatrixResult) -> bool:
        """Whether ``other`` has every number of this matrix but latency, row for row."""

        nan = object()  # stands for NaN, so that two NaNs compare equal

        def numbers(matrix: MatrixResult) -> list[dict[str, Any]]:
            return [{k: nan if isinstance(v, float) and math.isnan(v) else v
                     for k, v in row.items()}
                    for row in matrix.rows() if row["metric"] not in LATENCY_METRICS]

        return numbers(self) == numbers(other)

    def to_json(self) -> str:
        """Every run as JSON text (``from_json`` loads it back equal)."""
        data = {
            "format": FORMAT, "version": 1, "has_templates": self.has_templates,
            "root": self.root, "provenance": self.provenance,
            "runs": [
                {"model": run.model, "template": run.template, "scenario": run.scenario,
                 "seed": run.seed, "model_spec": run.model_spec, "resumed": run.resumed,
                 "result": run.result.to_dict()}
                for run in self.runs
            ],
        }
        return json.dumps(data, ensure_ascii=False, indent=1)

    @classmethod
    def from_json(cls, text: str) -> MatrixResult:
        """Load what ``to_json`` wrote."""
        data = load_json(text)
        runs = cls.parsed(data, lambda: [
            _matrix_run(item, item, bool(item.get("resumed"))) for item in data["runs"]
        ])
        return cls(runs, bool(data.get("has_templates")), data.get("root", ""),
                   dict(data.get("provenance") or {}))

    def __str__(self) -> str:
        runs = self.runs
        errors = sum(len(run.result.errors) for run in runs)
        lines = [
            f"{len(runs)} runs: {len({run.model for run in runs})} model(s) × "
            f"{len({run.scenario for run in runs})} scenario(s) × "
            f"{len({run.seed for run in runs})} seed(s), {errors} error(s)"
        ]
        for run in runs:
            total = sum(len(s.outcomes) for s in run.result.sessions)
            passed = total - len(run.result.failures)
            policy = run.model + (f" [{run.template}]" if run.template else "")
            lines.append(f"  {policy}  {run.scenario}  seed {run.seed}: {passed}/{total} passed")
        return "\n".join(lines)
