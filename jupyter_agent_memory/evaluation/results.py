"""What an evaluation run recorded, and ways to look at it.

``EvaluationResult`` holds one ``SessionRecord`` per session. View it as a plain-text table
(``str(result)`` / ``result.table()``), a pandas DataFrame (``result.to_dataframe()``, needs
pandas), a matplotlib figure of prompt size and fact count over sessions (``result.plot()``,
needs matplotlib), or rich HTML in a notebook (just display the result).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .scenario import ExpectationOutcome

__all__ = ["EvaluationResult", "SessionRecord", "ToolCallRecord", "TurnRecord", "count_facts"]

EVAL_INSTALL_HINT = 'pip install "jupyter-agent-memory[eval]"'

_LIST_ITEM = ("- ", "* ", "+ ")


def count_facts(text: str) -> int:
    """Count the facts in a FACT.md text.

    Markdown list items (``-``, ``*``, ``+`` or ``1.``) each count as one fact; a file without
    any list item counts its non-empty lines that are not headings. A rough measure, meant for
    watching how memory grows over sessions.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    items = [
        line
        for line in lines
        if line.startswith(_LIST_ITEM) or (line.split(".", 1)[0].isdigit() and ". " in line)
    ]
    if items:
        return len(items)
    return sum(1 for line in lines if not line.startswith("#"))


@dataclass
class ToolCallRecord:
    """One tool call made during a session and what it returned."""

    name: str
    arguments: dict[str, Any] | str
    result: str
    is_error: bool

    def arguments_text(self) -> str:
        """The arguments as compact JSON (raw text when the model sent unparsable text)."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass
class TurnRecord:
    """One user turn: the tool calls it caused and the final reply."""

    user: str
    reply: str
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    note: str = ""
    """Set when the turn ended abnormally (e.g. too many tool rounds)."""


@dataclass
class SessionRecord:
    """Everything recorded for one session."""

    index: int
    """1-based position in the scenario."""
    name: str
    system_prompt: str
    """The exact system prompt the session started from."""
    prompt_chars: int
    prompt_tokens: int
    """Approximate, as computed by the prompt builder."""
    prompt_sections: list[tuple[str, int, int]]
    """(name, chars, tokens) per prompt section."""
    prompt_warnings: list[str]
    bootstrap: bool
    """Whether the prompt was in bootstrap mode."""
    turns: list[TurnRecord]
    facts_before: str
    facts_after: str
    facts_diff: str
    """Unified diff of FACT.md over the session ('' when unchanged)."""
    new_entries: list[dict[str, Any]]
    """Journal entries added during the session, oldest first."""
    next_prompt: str
    """The system prompt built right after the session (what the next session sees)."""
    outcomes: list[ExpectationOutcome]

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        """Every tool call of the session, in order."""
        return [call for turn in self.turns for call in turn.tool_calls]

    @property
    def fact_count(self) -> int:
        """``count_facts`` of FACT.md after the session."""
        return count_facts(self.facts_after)

    @property
    def passed(self) -> bool:
        """Whether every expectation of the session held (``True`` when there are none)."""
        return all(outcome.passed for outcome in self.outcomes)

    def summary(self) -> dict[str, Any]:
        """One row of the results table."""
        added, removed = _diff_counts(self.facts_diff)
        return {
            "session": self.index,
            "name": self.name,
            "turns": len(self.turns),
            "tool_calls": len(self.tool_calls),
            "tool_errors": sum(1 for call in self.tool_calls if call.is_error),
            "prompt_chars": self.prompt_chars,
            "prompt_tokens": self.prompt_tokens,
            "facts": self.fact_count,
            "facts_added": added,
            "facts_removed": removed,
            "new_entries": len(self.new_entries),
            "expectations": f"{sum(o.passed for o in self.outcomes)}/{len(self.outcomes)}",
        }


def _diff_counts(diff: str) -> tuple[int, int]:
    added = removed = 0
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


_COLUMNS = [
    ("session", "session"),
    ("name", "name"),
    ("turns", "turns"),
    ("tool_calls", "calls"),
    ("tool_errors", "errors"),
    ("prompt_chars", "prompt chars"),
    ("prompt_tokens", "prompt tokens"),
    ("facts", "facts"),
    ("facts_added", "+lines"),
    ("facts_removed", "-lines"),
    ("new_entries", "journal+"),
    ("expectations", "expect"),
]


def _format_table(rows: Sequence[dict[str, Any]]) -> str:
    headers = [title for _, title in _COLUMNS]
    cells = [[str(row[key]) for key, _ in _COLUMNS] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            value.ljust(width) if i == 1 else value.rjust(width)
            for i, (value, width) in enumerate(zip(values, widths, strict=True))
        ).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)


@dataclass
class EvaluationResult:
    """The outcome of running a scenario: one ``SessionRecord`` per session."""

    scenario: str
    model: str
    agent_path: str
    sessions: list[SessionRecord]

    @property
    def passed(self) -> bool:
        """Whether every expectation of every session held."""
        return all(session.passed for session in self.sessions)

    @property
    def failures(self) -> list[tuple[int, ExpectationOutcome]]:
        """``(session index, outcome)`` for every expectation that did not hold."""
        return [
            (session.index, outcome)
            for session in self.sessions
            for outcome in session.outcomes
            if not outcome.passed
        ]

    def rows(self) -> list[dict[str, Any]]:
        """The summary rows (one dict per session), as used by the table and the DataFrame."""
        return [session.summary() for session in self.sessions]

    def table(self) -> str:
        """A plain-text table with one line per session."""
        return _format_table(self.rows())

    def expectations_text(self) -> str:
        """Every expectation outcome, one per line: ``[PASS]`` / ``[FAIL]`` with details."""
        lines = []
        for session in self.sessions:
            for outcome in session.outcomes:
                mark = "PASS" if outcome.passed else "FAIL"
                detail = f" ({outcome.detail})" if outcome.detail else ""
                lines.append(f"[{mark}] session {session.index}: {outcome.description}{detail}")
        return "\n".join(lines)

    def __str__(self) -> str:
        total = sum(len(session.outcomes) for session in self.sessions)
        failed = len(self.failures)
        head = (
            f"Scenario {self.scenario!r} with model {self.model}: {len(self.sessions)} sessions, "
            f"{total - failed}/{total} expectations passed"
        )
        parts = [head, "", self.table()]
        expectations = self.expectations_text()
        if expectations:
            parts += ["", expectations]
        return "\n".join(parts)

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def to_dataframe(self) -> Any:
        """The summary rows as a ``pandas.DataFrame`` indexed by session number."""
        try:
            import pandas
        except ImportError as exc:
            raise ImportError(f"to_dataframe() needs pandas: {EVAL_INSTALL_HINT}") from exc
        return pandas.DataFrame(self.rows()).set_index("session")

    def plot(self) -> Any:
        """A matplotlib figure: prompt tokens (bars) and fact count (line) per session.

        The bars are the size of the prompt each session started from; the line is the number
        of facts (``count_facts``) in FACT.md when the session ended.
        """
        try:
            import matplotlib.pyplot as plt
            from matplotlib.ticker import MaxNLocator
        except ImportError as exc:
            raise ImportError(f"plot() needs matplotlib: {EVAL_INSTALL_HINT}") from exc
        # pyplot is used only to create the figure: importing it is what registers the inline
        # image display in a notebook. The figure is closed at once, so it is neither shown a
        # second time when the cell ends nor opened in a GUI window; displaying or saving the
        # returned Figure still works.
        figure, axes = plt.subplots(figsize=(7, 3.2), layout="constrained")
        plt.close(figure)
        indexes = [session.index for session in self.sessions]
        axes.bar(
            indexes,
            [session.prompt_tokens for session in self.sessions],
            color="#9ecae1",
            label="prompt tokens",
        )
        axes.set_xlabel("session")
        axes.set_ylabel("prompt tokens (approx.)")
        axes.set_xticks(indexes)
        facts_axes = axes.twinx()
        facts_axes.plot(
            indexes,
            [session.fact_count for session in self.sessions],
            color="#d62728",
            marker="o",
            label="facts",
        )
        facts_axes.set_ylabel("facts in FACT.md (end)")
        facts_axes.set_ylim(0, max([s.fact_count for s in self.sessions], default=0) + 1)
        facts_axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        handles = axes.get_legend_handles_labels()
        more = facts_axes.get_legend_handles_labels()
        figure.legend(
            handles[0] + more[0], handles[1] + more[1], loc="outside lower center", ncols=2
        )
        axes.set_title(f"{self.scenario}: prompt size and facts per session")
        return figure

    def _repr_html_(self) -> str:
        esc = html.escape
        total = sum(len(session.outcomes) for session in self.sessions)
        failed = len(self.failures)
        out = [
            '<div class="jp-AgentMemory-evaluation">',
            f"<p><b>Scenario {esc(self.scenario)}</b> with model <code>{esc(self.model)}</code>: "
            f"{len(self.sessions)} sessions, {total - failed}/{total} expectations passed</p>",
            "<table><thead><tr>",
            *(f"<th>{esc(title)}</th>" for _, title in _COLUMNS),
            "</tr></thead><tbody>",
        ]
        for row in self.rows():
            out.append("<tr>" + "".join(f"<td>{esc(str(row[k]))}</td>" for k, _ in _COLUMNS))
            out.append("</tr>")
        out.append("</tbody></table>")
        for session in self.sessions:
            out.append(_session_html(session))
        out.append("</div>")
        return "\n".join(out)


def _session_html(session: SessionRecord) -> str:
    esc = html.escape
    title = f"Session {session.index}" + (f": {session.name}" if session.name else "")
    status = "" if not session.outcomes else (" ✔" if session.passed else " ✘")
    out = [f"<details><summary><b>{esc(title)}</b>{status}</summary>"]
    sections = ", ".join(f"{name} {chars} chars" for name, chars, _ in session.prompt_sections)
    out.append(
        f"<p>System prompt: {session.prompt_chars} chars, ~{session.prompt_tokens} tokens"
        f"{' (bootstrap mode)' if session.bootstrap else ''}. {esc(sections)}</p>"
    )
    out.extend(f"<p><b>Warning:</b> {esc(warning)}</p>" for warning in session.prompt_warnings)
    out.append(
        "<details><summary>System prompt</summary>"
        f"<pre style='white-space: pre-wrap'>{esc(session.system_prompt)}</pre></details>"
    )
    out.append("<table><thead><tr><th>user</th><th>tool calls</th><th>reply</th></tr></thead>")
    out.append("<tbody>")
    for turn in session.turns:
        calls = "<br>".join(
            f"<code>{esc(call.name)}({esc(call.arguments_text())})</code> → "
            f"{'<b>error</b> ' if call.is_error else ''}<code>{esc(call.result)}</code>"
            for call in turn.tool_calls
        )
        reply = esc(turn.reply) + (f" <i>({esc(turn.note)})</i>" if turn.note else "")
        out.append(f"<tr><td>{esc(turn.user)}</td><td>{calls}</td><td>{reply}</td></tr>")
    out.append("</tbody></table>")
    diff = session.facts_diff or "(FACT.md unchanged)"
    out.append(f"<p>FACT.md diff:</p><pre style='white-space: pre-wrap'>{esc(diff)}</pre>")
    if session.new_entries:
        out.append("<p>New journal entries:</p><ul>")
        for entry in session.new_entries:
            tags = ", ".join(str(tag) for tag in entry.get("tags") or [])
            out.append(
                f"<li><code>{esc(str(entry.get('ts', '')))}</code> "
                f"{esc(str(entry.get('text', '')))}{f' [{esc(tags)}]' if tags else ''}</li>"
            )
        out.append("</ul>")
    if session.outcomes:
        out.append("<ul>")
        for outcome in session.outcomes:
            mark = "PASS" if outcome.passed else "FAIL"
            detail = f" ({esc(outcome.detail)})" if outcome.detail else ""
            out.append(f"<li><b>{mark}</b> {esc(outcome.description)}{detail}</li>")
        out.append("</ul>")
    out.append("</details>")
    return "\n".join(out)
