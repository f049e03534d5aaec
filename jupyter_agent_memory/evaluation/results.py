"""What an evaluation run recorded, and ways to look at it: a plain-text table, pandas
DataFrames, a matplotlib figure, or rich HTML in a notebook (every text written by the model or
read from memory is escaped). ``save``/``load`` keep a run on disk and load it back equal.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .expectations import ExpectationOutcome
from .models import import_extra
from .records import SessionRecord

__all__ = ["EvaluationResult"]

FORMAT = "jupyter-agent-memory/evaluation-result"
FORMAT_VERSION = 1

NUMERIC_METRICS = (
    "turns", "tool_calls", "tool_errors", "prompt_chars", "prompt_tokens", "facts",
    "facts_added", "facts_removed", "new_entries", "searches", "passed", "failed", "pass_rate",
    "errors", "input_tokens", "output_tokens", "model_calls", "tool_rounds", "latency_s",
)
"""The per-session numbers of ``tidy()`` (retrieval metrics come on top, per retriever)."""


def new_axes(ax: Any) -> tuple[Any, Any]:
    """``(figure, axes)`` for a ``plot()``: ``ax``, or a new figure that pyplot forgets at once
    (so it is not shown twice), which still displays and saves."""
    plt = import_extra("matplotlib.pyplot", "plot()")
    if ax is not None:
        return ax.figure, ax
    figure, axes = plt.subplots(figsize=(7, 3.2), layout="constrained")
    plt.close(figure)
    return figure, axes


_COLUMNS = [
    ("session", "session"), ("name", "name"), ("turns", "turns"), ("tool_calls", "calls"),
    ("tool_errors", "errors"), ("prompt_chars", "prompt chars"),
    ("prompt_tokens", "prompt tokens"), ("facts", "facts"), ("facts_added", "+lines"),
    ("facts_removed", "-lines"), ("new_entries", "journal+"), ("expectations", "expect"),
]


def dataframe(what: str, rows: Any, **options: Any) -> Any:
    """``pandas.DataFrame(rows, **options)``; ``what`` is named if pandas is missing."""
    return import_extra("pandas", what).DataFrame(rows, **options)


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


class Report:
    """A record whose text form is its report: ``repr`` and IPython show ``str(self)``."""

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


class Exported(Report):
    """A record kept on disk as the JSON text of ``to_json``, of format ``FORMAT``."""

    FORMAT = ""
    WHAT = ""

    def to_json(self) -> str:
        """This record as JSON text (``from_json`` loads it back equal)."""
        raise NotImplementedError

    @classmethod
    def from_json(cls: type[E], text: str) -> E:
        """Load what ``to_json`` wrote."""
        raise NotImplementedError

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write ``to_json()`` to ``path`` (UTF-8); returns the path."""
        target = Path(path)
        target.write_text(self.to_json(), encoding="utf-8")
        return target

    @classmethod
    def load(cls: type[E], path: str | os.PathLike[str]) -> E:
        """Read what ``save`` wrote; a file that is not UTF-8 is a ``ValueError`` naming it."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            where = f"{exc.reason} at byte {exc.start}"
            raise ValueError(f"{path} is not UTF-8 text ({where})") from None
        return cls.from_json(text)

    @classmethod
    def parsed(cls, data: Any, build: Callable[[], T]) -> T:
        """``build()`` from exported ``data``, or a ``ValueError`` saying what is wrong."""
        if not isinstance(data, dict) or data.get("format") != cls.FORMAT:
            raise ValueError(f"Not an {cls.WHAT}: expected format {cls.FORMAT!r}")
        try:
            return build()
        except KeyError as exc:
            raise ValueError(f"Not a complete {cls.WHAT}: {exc} is missing") from None
        except (TypeError, AttributeError) as exc:
            raise ValueError(f"Not a valid {cls.WHAT}: {exc}") from None


E = TypeVar("E", bound=Exported)
T = TypeVar("T")


def load_json(text: str) -> Any:
    """``json.loads``, with a nesting too deep for the parser as a ``ValueError`` too."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("Not valid JSON: nested too deeply") from None


@dataclass(repr=False)
class EvaluationResult(Exported):
    """The outcome of running a scenario: one ``SessionRecord`` per session."""

    FORMAT = FORMAT
    WHAT = "evaluation result"
    scenario: str
    model: str
    agent_path: str
    sessions: list[SessionRecord]
    labels: dict[str, Any] = field(default_factory=dict)
    """The scenario's labels (e.g. a benchmark's question type)."""
    stopped: bool = False
    """True when ``on_error="stop"`` ended the run early."""
    journal: list[dict[str, Any]] = field(default_factory=list)
    """Every journal entry the run saw: ``{"id", "session", "entry"}``."""

    @property
    def passed(self) -> bool:
        """Whether every expectation of every session held and no error happened."""
        return all(session.passed for session in self.sessions) and not self.errors

    @property
    def failures(self) -> list[tuple[int, ExpectationOutcome]]:
        """``(session index, outcome)`` for every expectation that did not hold."""
        return [(s.index, outcome) for s in self.sessions for outcome in s.outcomes
                if not outcome.passed]

    @property
    def errors(self) -> list[tuple[int, str]]:
        """``(session index, traceback text)`` for every error of the run."""
        return [(s.index, text) for s in self.sessions for text in s.errors]

    def entry(self, entry_id: str) -> dict[str, Any]:
        """The journal entry with id ``entry_id`` (``KeyError`` when there is none)."""
        for item in self.journal:
            if item["id"] == entry_id:
                return item["entry"]
        raise KeyError(entry_id)

    def rows(self) -> list[dict[str, Any]]:
        """The summary rows (one dict per session), as used by the table and the DataFrame."""
        return [session.summary() for session in self.sessions]

    def table(self) -> str:
        """A plain-text table with one line per session."""
        headers = [title for _, title in _COLUMNS]
        cells = [["" if row[key] is None else str(row[key]) for key, _ in _COLUMNS]
                 for row in self.rows()]
        widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

        def line(values: Sequence[str]) -> str:
            return "  ".join(
                value.ljust(width) if i == 1 else value.rjust(width)
                for i, (value, width) in enumerate(zip(values, widths, strict=True))
            ).rstrip()

        return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, cells)])

    def expectations_text(self) -> str:
        """Every expectation outcome, one per line: ``[PASS]`` / ``[FAIL]`` with details."""
        return "\n".join(
            f"[{'PASS' if outcome.passed else 'FAIL'}] session {session.index}: "
            f"{outcome.description}{f' ({outcome.detail})' if outcome.detail else ''}"
            for session in self.sessions for outcome in session.outcomes
        )

    def _counts(self) -> str:
        total = sum(len(session.outcomes) for session in self.sessions)
        failed = len(self.failures)
        head = f"{len(self.sessions)} sessions, {total - failed}/{total} expectations passed"
        errors = len(self.errors)
        if errors:
            head += f", {errors} error{'' if errors == 1 else 's'}"
        if self.stopped:
            head += " (stopped at the first error)"
        return head

    def __str__(self) -> str:
        headline = f"Scenario {self.scenario!r} with model {self.model}: {self._counts()}"
        parts = [headline, "", self.table()]
        expectations = self.expectations_text()
        if expectations:
            parts += ["", expectations]
        for index, text in self.errors:
            last = text.strip().splitlines()[-1] if text.strip() else ""
            parts.append(f"[ERROR] session {index}: {last}")
        return "\n".join(parts)

    def metrics(self, session: SessionRecord) -> dict[str, float]:
        """Every number of ``session``: ``NUMERIC_METRICS`` and ``<retriever>.<metric>``."""
        row = session.summary()
        values = {name: _number(row[name]) for name in NUMERIC_METRICS}
        for score in session.retrieval:
            for name, value in score.metrics().items():
                values[f"{score.retriever}.{name}"] = _number(value)
        return values

    def tidy_rows(self) -> list[dict[str, Any]]:
        """One dict per session and metric: labels, ``session``, ``name``, ``metric``, ``value``."""
        return [{**self.labels, "session": session.index, "name": session.name, "metric": metric,
                 "value": value}
                for session in self.sessions for metric, value in self.metrics(session).items()]

    def tidy(self) -> Any:
        """``tidy_rows()`` as a pandas DataFrame (long format, for groupby and plots)."""
        return dataframe("tidy()", self.tidy_rows())

    def to_dataframe(self) -> Any:
        """The summary rows and the scenario's labels as a DataFrame indexed by session."""
        frame = dataframe("to_dataframe()", self.rows()).set_index("session")
        for key, value in self.labels.items():
            frame[key] = value
        return frame

    def retrieval_rows(self) -> list[dict[str, Any]]:
        """One dict per session and retriever with every retrieval metric."""
        return [{**self.labels, "session": session.index, "name": session.name,
                 "retriever": score.retriever, "gold": score.gold, "returned": score.returned,
                 **score.metrics()}
                for session in self.sessions for score in session.retrieval]

    def retrieval_dataframe(self) -> Any:
        """``retrieval_rows()`` as a DataFrame."""
        return dataframe("retrieval_dataframe()", self.retrieval_rows())

    def retrieval_summary(self) -> dict[str, dict[str, float]]:
        """Mean of each retrieval metric per retriever, ``None`` values left out."""
        sums: dict[str, dict[str, list[float]]] = {}
        for row in self.retrieval_rows():
            by_metric = sums.setdefault(row["retriever"], {})
            for key, value in row.items():
                if ("@" in key or key == "mrr") and value is not None:
                    by_metric.setdefault(key, []).append(float(value))
        return {retriever: {key: sum(values) / len(values) for key, values in metrics.items()}
                for retriever, metrics in sums.items()}

    def outcomes_dataframe(self) -> Any:
        """One row per session and expectation: ``passed`` as 0/1, and the detail."""
        rows = [{**self.labels, "session": session.index, "expectation": outcome.description,
                 "passed": int(outcome.passed), "detail": outcome.detail}
                for session in self.sessions for outcome in session.outcomes]
        columns = [*self.labels, "session", "expectation", "passed", "detail"]
        return dataframe("outcomes_dataframe()", rows, columns=columns)

    def plot(self, metric: str | None = None, *, ax: Any = None, title: str | None = None) -> Any:
        """A figure over sessions: prompt tokens and fact count, or ``metric`` as bars."""
        figure, axes = new_axes(ax)
        indexes = [session.index for session in self.sessions]
        axes.set_xlabel("session")
        axes.set_xticks(indexes)
        if metric is not None:
            values = [self.metrics(session).get(metric, math.nan) for session in self.sessions]
            if all(math.isnan(value) for value in values):
                raise ValueError(f"No session has the metric {metric!r}")
            axes.bar(indexes, values, color="#6baed6")
            axes.set_ylabel(metric)
            axes.set_title(title if title is not None else f"{self.scenario}: {metric}")
            return figure
        tokens = [session.prompt_tokens for session in self.sessions]
        axes.bar(indexes, tokens, color="#9ecae1", label="prompt tokens")
        axes.set_ylabel("prompt tokens (approx.)")
        facts_axes = axes.twinx()
        facts = [session.fact_count for session in self.sessions]
        facts_axes.plot(indexes, facts, color="#d62728", marker="o", label="facts")
        facts_axes.set_ylabel("facts in FACT.md (end)")
        facts_axes.set_ylim(0, max(facts, default=0) + 1)
        from matplotlib.ticker import MaxNLocator

        facts_axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        handles, labels = axes.get_legend_handles_labels()
        more_handles, more_labels = facts_axes.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
        if ax is None:
            figure.legend(handles, labels, loc="outside lower center", ncols=2)
        else:  # someone else's figure: keep the legend inside these axes
            axes.legend(handles, labels, loc="best", fontsize=8)
        default = f"{self.scenario}: prompt size and facts per session"
        axes.set_title(title if title is not None else default)
        return figure

    def to_dict(self) -> dict[str, Any]:
        """Every recorded value as JSON-ready data (``from_dict`` loads it back equal)."""
        return {
            "format": FORMAT, "version": FORMAT_VERSION, "scenario": self.scenario,
            "model": self.model, "agent_path": self.agent_path, "labels": self.labels,
            "stopped": self.stopped, "journal": self.journal,
            "sessions": [session.to_dict() for session in self.sessions],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvaluationResult:
        """Load what ``to_dict`` produced; a different format raises ``ValueError``."""
        if isinstance(data, dict) and data.get("format") == FORMAT and (
            data.get("version") != FORMAT_VERSION
        ):
            raise ValueError(
                f"Unsupported evaluation result version {data.get('version')!r} "
                f"(this version reads {FORMAT_VERSION})"
            )
        return cls.parsed(data, lambda: cls(
            data["scenario"], data["model"], data["agent_path"],
            [SessionRecord.from_dict(s) for s in data["sessions"]],
            dict(data.get("labels") or {}), bool(data.get("stopped")),
            list(data.get("journal") or []),
        ))

    def to_json(self, indent: int | None = 1) -> str:
        """The result as JSON text (non-ASCII kept)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent)

    @classmethod
    def from_json(cls, text: str) -> EvaluationResult:
        """Load a result from ``to_json`` text."""
        return cls.from_dict(load_json(text))

    def _repr_html_(self) -> str:
        esc = html.escape
        out = [
            '<div class="jp-AgentMemory-evaluation">',
            f"<p><b>Scenario {esc(self.scenario)}</b> with model <code>{esc(self.model)}</code>: "
            f"{esc(self._counts())}</p>",
            "<table><thead><tr>",
            *(f"<th>{esc(title)}</th>" for _, title in _COLUMNS),
            "</tr></thead><tbody>",
        ]
        for row in self.rows():
            out.append("<tr>" + "".join(f"<td>{esc(str(row[k]))}</td>" for k, _ in _COLUMNS))
            out.append("</tr>")
        out.append("</tbody></table>")
        out.extend(_session_html(session) for session in self.sessions)
        out.append("</div>")
        return "\n".join(out)


def _pre(text: str) -> str:
    return f"<pre style='white-space: pre-wrap'>{html.escape(text)}</pre>"


def _list(head: str, items: Sequence[str]) -> list[str]:
    """The lines of an HTML list of ``items`` after ``head``."""
    return [f"{head}<ul>", *(f"<li>{item}</li>" for item in items), "</ul>"]


def _session_html(session: SessionRecord) -> str:
    esc = html.escape
    title = f"Session {session.index}" + (f": {session.name}" if session.name else "")
    status = "" if not session.outcomes else (" ✔" if session.passed else " ✘")
    if session.errors:
        status += " ⚠ error"
    out = [f"<details><summary><b>{esc(title)}</b>{status}</summary>"]
    sections = ", ".join(f"{name} {chars} chars" for name, chars, _ in session.prompt_sections)
    cost = session.cost()
    out.append(
        f"<p>System prompt: {session.prompt_chars} chars, ~{session.prompt_tokens} tokens"
        f"{' (bootstrap mode)' if session.bootstrap else ''}. {esc(sections)}</p>"
        f"<p>Model calls: {cost['model_calls']}, tool rounds: {cost['tool_rounds']}, "
        f"tokens in/out: {cost['input_tokens']}/{cost['output_tokens']}"
        f"{' (estimated)' if cost['tokens_estimated'] else ''}.</p>"
    )
    out.extend(f"<p><b>Warning:</b> {esc(warning)}</p>" for warning in session.prompt_warnings)
    out.append(f"<details><summary>System prompt</summary>{_pre(session.system_prompt)}</details>")
    out.append("<table><thead><tr><th>user</th><th>tool calls</th><th>reply</th></tr></thead>")
    out.append("<tbody>")
    for turn in session.turns:
        calls = "<br>".join(
            f"<code>{esc(call.name)}({esc(call.arguments_text())})</code> → "
            f"{'<b>error</b> ' if call.is_error else ''}<code>{esc(call.result)}</code>"
            for call in turn.tool_calls
        )
        reply = esc(turn.reply) + (f" <i>({esc(turn.note)})</i>" if turn.note else "")
        if turn.assistant is not None:
            reply += f"<br><i>transcript:</i> {esc(turn.assistant)}"
        if turn.error:
            reply += _pre(turn.error)
        out.append(f"<tr><td>{esc(turn.user)}</td><td>{calls}</td><td>{reply}</td></tr>")
    out.append("</tbody></table>")
    if session.error:
        out.append(f"<p><b>Error:</b></p>{_pre(session.error)}")
    diff = session.facts_diff or "(FACT.md unchanged)"
    out.append(f"<p>FACT.md diff:</p>{_pre(diff)}")
    if session.new_entries:
        entries = []
        for entry_id, entry in zip(session.new_entry_ids, session.new_entries, strict=False):
            tags = ", ".join(str(tag) for tag in entry.get("tags") or [])
            entries.append(
                f"<code>{esc(entry_id)}</code> <code>{esc(str(entry.get('ts', '')))}</code> "
                f"{esc(str(entry.get('text', '')))}{f' [{esc(tags)}]' if tags else ''}"
            )
        out += _list("<p>New journal entries:</p>", entries)
    if session.searches:
        out += _list("<p>Searches (entry ids, best first):</p>", [
            f"{esc(search.retriever)} <code>{esc(search.query)}</code> → "
            f"{esc(', '.join(search.results) or '(nothing)')}"
            for search in session.searches
        ])
    if session.retrieval:
        out.append("<table><thead><tr><th>retriever</th>")
        out.extend(f"<th>{esc(name)}</th>" for name in session.retrieval[0].metrics())
        out.append("</tr></thead><tbody>")
        for score in session.retrieval:
            cells = "".join(
                f"<td>{'' if value is None else f'{value:.3g}'}</td>"
                for value in score.metrics().values()
            )
            out.append(f"<tr><td>{esc(score.retriever)}</td>{cells}</tr>")
        out.append("</tbody></table>")
    if session.outcomes:
        out += _list("", [
            f"<b>{'PASS' if o.passed else 'FAIL'}</b> {esc(o.description)}"
            f"{f' ({esc(o.detail)})' if o.detail else ''}"
            for o in session.outcomes
        ])
    out.append("</details>")
    return "\n".join(out)
