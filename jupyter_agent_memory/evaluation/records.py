"""What a run records per model call, tool call, search, turn and session: plain dataclasses
of JSON-friendly values, so a run exports to JSON and loads back equal."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

from .expectations import ExpectationOutcome
from .models import ModelCallRecord, arguments_text

__all__ = [
    "ModelCallRecord", "RetrievalScore", "SearchRecord", "SessionRecord", "ToolCallRecord",
    "TurnRecord", "count_facts",
]

_LIST_ITEM = ("- ", "* ", "+ ")
_T = TypeVar("_T")


def fact_lines(text: str) -> list[str]:
    """The lines of a FACT.md text that ``count_facts`` counts as facts, in file order."""
    lines = [line for line in text.splitlines() if line.strip()]
    items = [line for line in lines if line.strip().startswith(_LIST_ITEM)
             or (line.strip().split(".", 1)[0].isdigit() and ". " in line)]
    return items or [line for line in lines if not line.strip().startswith("#")]


def count_facts(text: str) -> int:
    """Count the facts in a FACT.md text: its list items, else its lines that are not headings."""
    return len(fact_lines(text))


@dataclass
class ToolCallRecord:
    """One tool call made during a session and what it returned."""

    name: str
    arguments: dict[str, Any] | str
    result: str
    is_error: bool

    def arguments_text(self) -> str:
        """The arguments as compact JSON (raw text when the model sent unparsable text)."""
        return arguments_text(self.arguments)


@dataclass
class TurnRecord:
    """One user turn: the tool calls it caused and the final reply; ``note`` or ``error`` say
    why it ended abnormally, ``assistant`` is a fixed transcript's reply that followed it, and
    ``messages`` every message it added to the conversation, as the model was sent it later."""

    user: str
    reply: str
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    note: str = ""
    error: str = ""
    assistant: str | None = None
    model_calls: list[ModelCallRecord] = field(default_factory=list)
    tool_rounds: int = 0
    at: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class SearchRecord:
    """One ranking of journal entries: a search the agent made (``retriever`` ``agent``) or a
    baseline's; ``results`` are entry ids, best first; ``arguments`` the full search's."""

    retriever: str
    query: str
    results: list[str]
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class RetrievalScore:
    """Retrieval metrics of one retriever in one session, against the session's evidence
    (see ``retrieval``; ``None`` where the journal held nothing gold to find); ``gold`` and
    ``returned`` count the gold entries and the entries returned."""

    retriever: str
    k: int
    recall_any: float | None
    recall_all: float | None
    ndcg: float | None
    mrr: float | None
    session_recall: float | None
    gold: int = 0
    returned: int = 0
    turn_recall: float | None = None

    def metrics(self) -> dict[str, float | None]:
        """``{"recall_any@5": ..., ...}`` as used in the tidy tables."""
        k = self.k
        return {f"recall_any@{k}": self.recall_any, f"recall_all@{k}": self.recall_all,
                f"ndcg@{k}": self.ndcg, "mrr": self.mrr,
                f"session_recall@{k}": self.session_recall, f"turn_recall@{k}": self.turn_recall}


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
    prompt_sections: list[tuple[str, int, int]]
    """(name, chars, tokens) per prompt section."""
    prompt_warnings: list[str]
    bootstrap: bool
    turns: list[TurnRecord]
    facts_before: str
    facts_after: str
    facts_diff: str
    """Unified diff of FACT.md over the session ('' when unchanged)."""
    new_entries: list[dict[str, Any]]
    next_prompt: str
    """The system prompt built right after the session (what the next session sees)."""
    outcomes: list[ExpectationOutcome]
    started: str = ""
    session_id: str = ""
    """Id of the session's receipt in the agent's sessions log (``AgentMemory.sessions``)."""
    new_entry_ids: list[str] = field(default_factory=list)
    searches: list[SearchRecord] = field(default_factory=list)
    """The agent's searches, then the baselines' rankings (sessions with evidence only)."""
    retrieval: list[RetrievalScore] = field(default_factory=list)
    error: str = ""
    """Traceback text of an error that ended this session early ('' when none)."""
    elapsed_s: float = 0.0
    closing: TurnRecord | None = None
    """The closing turn of a transcript that ends with the assistant."""
    judge_calls: list[ModelCallRecord] = field(default_factory=list)
    """Every call a judge made to grade this session's answers (failed ones too)."""

    @property
    def all_turns(self) -> list[TurnRecord]:
        """The turns, then the closing turn when there is one."""
        return [*self.turns, self.closing] if self.closing is not None else list(self.turns)

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        """Every tool call of the session, in order (the closing turn's included)."""
        return [call for turn in self.all_turns for call in turn.tool_calls]

    @property
    def model_calls(self) -> list[ModelCallRecord]:
        """Every call of the evaluated model in the session, in order, failed ones too."""
        return [call for turn in self.all_turns for call in turn.model_calls]

    @property
    def verdicts(self) -> list[ExpectationOutcome]:
        """The outcomes that are verdicts: every one but those whose check failed to run."""
        return [outcome for outcome in self.outcomes if not outcome.error]

    @property
    def fact_count(self) -> int:
        """``count_facts`` of FACT.md after the session."""
        return count_facts(self.facts_after)

    @property
    def passed(self) -> bool:
        """Whether every expectation of the session held; a check that could not run is not."""
        return all(outcome.passed and not outcome.error for outcome in self.outcomes)

    @property
    def errors(self) -> list[str]:
        """Every error text of the session: its turns', its checks that could not run, its own."""
        found = [turn.error for turn in self.all_turns if turn.error]
        found += [
            f"{outcome.description}: {outcome.error}" for outcome in self.outcomes if outcome.error
        ]
        return [*found, self.error] if self.error else found

    def cost(self) -> dict[str, Any]:
        """Tokens, calls, tool rounds, latency and the last finish reason; totals include the
        judge's calls (never understated), the ``judge_`` keys give its share."""
        agent, judge = self.model_calls, self.judge_calls
        calls = [*agent, *judge]
        return {
            "input_tokens": sum(call.input_tokens for call in calls),
            "output_tokens": sum(call.output_tokens for call in calls),
            "tokens_estimated": any(call.estimated for call in calls),
            "model_calls": len(calls),
            "failed_calls": sum(1 for call in calls if call.error),
            "retries": sum(call.retries for call in calls),
            "tool_rounds": sum(turn.tool_rounds for turn in self.all_turns),
            "latency_s": round(sum(call.latency_s for call in calls), 6),
            "judge_calls": len(judge),
            "judge_input_tokens": sum(call.input_tokens for call in judge),
            "judge_output_tokens": sum(call.output_tokens for call in judge),
            "judge_latency_s": round(sum(call.latency_s for call in judge), 6),
            "finish_reason": agent[-1].finish_reason if agent else "",
        }

    def summary(self) -> dict[str, Any]:
        """One row of the results table; ``passed``, ``failed`` and ``pass_rate`` count
        verdicts only (a check that could not run is in ``errors``)."""
        added, removed = _diff_counts(self.facts_diff)
        verdicts = self.verdicts
        passed = sum(outcome.passed for outcome in verdicts)
        total = len(verdicts)
        return {
            "session": self.index, "name": self.name, "started": self.started,
            "turns": len(self.turns), "tool_calls": len(self.tool_calls),
            "tool_errors": sum(1 for call in self.tool_calls if call.is_error),
            "prompt_chars": self.prompt_chars, "prompt_tokens": self.prompt_tokens,
            "facts": self.fact_count, "facts_added": added, "facts_removed": removed,
            "new_entries": len(self.new_entries),
            "searches": sum(1 for s in self.searches if s.retriever == "agent"),
            "expectations": f"{passed}/{total}", "passed": passed, "failed": total - passed,
            "pass_rate": passed / total if total else None, "errors": len(self.errors),
            **self.cost(),
        }

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (tuples as lists, as JSON has them)."""
        return json.loads(json.dumps(asdict(self)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionRecord:
        """The inverse of ``to_dict``."""
        values = dict(data)
        values["prompt_sections"] = [tuple(item) for item in values.get("prompt_sections", [])]
        values["turns"] = [_turn_from_dict(turn) for turn in values.get("turns", [])]
        if values.get("closing") is not None:
            values["closing"] = _turn_from_dict(values["closing"])
        values["judge_calls"] = [_load(ModelCallRecord, c) for c in values.get("judge_calls", [])]
        values["outcomes"] = [_load(ExpectationOutcome, o) for o in values.get("outcomes", [])]
        values["searches"] = [SearchRecord(**s) for s in values.get("searches", [])]
        values["retrieval"] = [RetrievalScore(**r) for r in values.get("retrieval", [])]
        return _load(cls, values)


def _load(cls: type[_T], values: dict[str, Any]) -> _T:
    """``cls`` from only the keys it has: an export from a newer version still loads."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{key: value for key, value in values.items() if key in names})


def _turn_from_dict(data: dict[str, Any]) -> TurnRecord:
    values = dict(data)
    values["tool_calls"] = [ToolCallRecord(**c) for c in values.get("tool_calls", [])]
    values["model_calls"] = [_load(ModelCallRecord, c) for c in values.get("model_calls", [])]
    return _load(TurnRecord, values)


def _diff_counts(diff: str) -> tuple[int, int]:
    """Lines added and removed by a unified diff, after its two header lines (a line of the
    file may itself start with ``++`` or ``--``)."""
    lines = diff.splitlines()[2:]
    return sum(line.startswith("+") for line in lines), sum(line.startswith("-") for line in lines)
