"""Scenarios: sessions of user turns (or fixed transcripts), dates, evidence and expectations.

Each session starts from a fresh system prompt (only what the agent wrote carries over); in a
``transcript`` the recorded assistant turn, not the model's, continues the conversation. Dated
sessions run on a simulated clock (journal entries, FACT.md history, ``since``/``until``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .expectations import (
    Expectation,
    FactContains,
    JournalContains,
    PromptContains,
    ReplyAbstains,
    ReplyAnswers,
    ReplyContains,
    ReplyJudged,
    ReplyMatches,
    SessionState,
    ToolCalled,
)
from .models import CLOSING_TURN
from .retrieval import Evidence

__all__ = ["CLOSING_TURN", "Scenario", "Session", "SessionState", "parse_date", "session_names"]

_LONGMEMEVAL_DATE = re.compile(
    r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\([A-Za-z]+\))?(?:\s+(\d{1,2}):(\d{2}))?\s*$"
)


def parse_date(value: datetime | str) -> datetime:
    """An aware UTC ``datetime`` from a ``datetime`` (naive means UTC), an ISO-8601 text, or
    LongMemEval's ``YYYY/MM/DD (Day) HH:MM``. Anything else raises ``ValueError``."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if not isinstance(value, str):
        raise TypeError(f"a session date must be a datetime or a string, got {value!r}")
    found = _LONGMEMEVAL_DATE.match(value)
    if found:
        year, month, day, hour, minute = found.groups()
        try:
            numbers = (int(year), int(month), int(day), int(hour or 0), int(minute or 0))
            return datetime(*numbers, tzinfo=timezone.utc)
        except ValueError as exc:
            raise ValueError(f"Invalid session date {value!r}: {exc}") from None
    from ..journal import parse_time

    try:
        return parse_time(value)
    except ValueError:
        raise ValueError(f"Invalid session date {value!r}: expected ISO-8601 "
                         "(2023-05-20T02:21) or LongMemEval's 2023/05/20 (Sat) 02:21") from None


def _transcript(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    result = []
    for number, message in enumerate(messages, 1):
        if not isinstance(message, Mapping):
            raise TypeError(f"Transcript message {number} must be a dict with role and content")
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant"):
            raise ValueError(f"Transcript message {number} has role {role!r}, "
                             "expected 'user' or 'assistant'")
        if not isinstance(content, str):
            raise TypeError(f"Transcript message {number} content must be a string")
        # Turn-level evidence (LongMemEval's mark): kept for scoring, never sent.
        mark = {"has_answer": True} if message.get("has_answer") is True else {}
        result.append({"role": role, "content": content, **mark})
    if not any(message["role"] == "user" for message in result):
        raise ValueError("A transcript needs at least one user message")
    return result


@dataclass
class Session:
    """One conversation: user ``turns`` or a ``transcript`` (role/content dicts), its ``date``
    (see ``parse_date``), the expectations checked when it ends, and the ``evidence``
    (``retrieval``) answering its question, ``query`` (default: the last user turn)."""

    turns: list[str] = field(default_factory=list)
    expect: list[Expectation] = field(default_factory=list)
    name: str = ""
    transcript: list[dict[str, Any]] | None = None
    date: datetime | str | None = None
    evidence: Evidence | None = None
    query: str | None = None

    def __post_init__(self) -> None:
        # A bare string is one turn, not one per character.
        self.turns = [self.turns] if isinstance(self.turns, str) else list(self.turns)
        if self.transcript is not None:
            if self.turns:
                raise ValueError("A session takes 'turns' or a 'transcript', not both")
            self.transcript = _transcript(self.transcript)
            self.turns = [m["content"] for m in self.transcript if m["role"] == "user"]
        if not all(isinstance(turn, str) for turn in self.turns):
            raise TypeError("Session turns must be strings")
        self.expect = list(self.expect)
        for item in self.expect:
            if not isinstance(item, Expectation):
                raise TypeError(f"Session expectations must be Expectation objects, got {item!r}")
        if self.date is not None:
            self.date = parse_date(self.date)
        if self.evidence is not None and not isinstance(self.evidence, Evidence):
            raise TypeError(f"Session evidence must be an Evidence object, got {self.evidence!r}")

    def to_dict(self) -> dict[str, Any]:
        """This session as plain data (``Scenario.from_dict`` reads it back)."""
        data: dict[str, Any] = {"name": self.name}
        if self.transcript is not None:
            data["transcript"] = [dict(message) for message in self.transcript]
        else:
            data["turns"] = list(self.turns)
        if self.date is not None:
            assert isinstance(self.date, datetime)
            data["date"] = self.date.isoformat()
        if self.query is not None:
            data["query"] = self.query
        if self.evidence is not None:
            data["evidence"] = {k: v for k, v in self.evidence.to_dict().items() if v}
        data["expect"] = [expectation.to_dict() for expectation in self.expect]
        return data

    @property
    def question(self) -> str:
        """What baselines search with: ``query``, else the last user turn (``''`` if none)."""
        if self.query is not None:
            return self.query
        return self.turns[-1] if self.turns else ""


def _flag(data: Mapping[str, Any], key: str, default: bool | None) -> bool | None:
    """A true/false key: JSON booleans only (``bool("false")`` is true, and would invert it)."""
    value = data.get(key, default)
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"Expectation {dict(data)!r}: {key!r} must be true or false")
    return value


def _text(data: Mapping[str, Any], key: str) -> str | None:
    """``data[key]`` as text; ``None`` when missing or null (never the text "None")."""
    return None if data.get(key) is None else str(data[key])


def _expectation_from_dict(data: Any, judges: Mapping[str, Any] | None = None) -> Expectation:
    if not isinstance(data, Mapping):
        raise ValueError(f"Each expectation must be an object, got {data!r}")
    if "custom" in data:
        raise ValueError(f"The expectation {data['custom']!r} is code, not data: "
                         "give the scenarios again")
    present = bool(_flag(data, "present", True))
    turn = data.get("turn", -1)
    if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int)):
        raise ValueError(f"Expectation {dict(data)!r}: 'turn' must be a turn index "
                         "(an integer) or null")
    if "fact" in data:
        return FactContains(str(data["fact"]), present=present)
    if "prompt" in data:
        return PromptContains(str(data["prompt"]), present=present)
    if "reply" in data:
        return ReplyContains(str(data["reply"]), turn=turn, present=present)
    if "answers" in data:
        return ReplyAnswers(str(data["answers"]), turn=turn, present=present)
    if "judged" in data:
        from .specs import judge_from_spec

        spec = data.get("judge")
        if not isinstance(spec, Mapping):
            raise ValueError(f"Expectation {dict(data)!r}: 'judge' must be a judge's spec")
        return ReplyJudged(
            str(data["judged"]), judge_from_spec(dict(spec), judges),
            question=_text(data, "question"), turn=-1 if turn is None else turn, present=present,
            question_type=_text(data, "question_type"),
            abstention=bool(_flag(data, "abstention", False)),
        )
    if "reply_matches" in data:
        return ReplyMatches(str(data["reply_matches"]), turn=turn, present=present)
    if "abstains" in data:
        return ReplyAbstains(turn=turn, present=present and bool(_flag(data, "abstains", None)))
    if "tool" in data or "action" in data:
        arguments = data.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise ValueError(f"Expectation {dict(data)!r}: 'arguments' must be an object")
        return ToolCalled(name=_text(data, "tool"), action=_text(data, "action"),
                          arguments=dict(arguments), ok=_flag(data, "ok", None), present=present)
    if "journal" in data or "tag" in data:
        return JournalContains(_text(data, "journal"), _text(data, "tag"), present)
    raise ValueError(
        f"Unknown expectation {dict(data)!r}: expected a 'fact', 'journal' (with optional "
        "'tag'), 'tag', 'prompt', 'reply', 'reply_matches', 'abstains' or 'tool'/'action' key"
    )


def _evidence_from_dict(data: Any) -> Evidence:
    if not isinstance(data, Mapping):
        raise ValueError("'evidence' must be an object")
    unknown = set(data) - {"entries", "texts", "sessions", "turns"}
    if unknown:
        raise ValueError(f"unknown evidence keys {sorted(unknown)}")
    for key, value in data.items():
        # tuple("chat") would be the sessions 'c', 'h', 'a', 't'.
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"evidence {key!r} must be a list of strings, got {value!r}")
    return Evidence(**{key: tuple(value) for key, value in data.items()})


@dataclass
class Scenario:
    """A named list of sessions, run in order against one agent folder. ``labels`` are columns
    carried into every results table; ``start`` starts the simulated clock for sessions that
    come before the first dated one."""

    sessions: list[Session]
    name: str = "scenario"
    labels: dict[str, Any] = field(default_factory=dict)
    start: datetime | str | None = None

    def __post_init__(self) -> None:
        self.sessions = list(self.sessions)
        for session in self.sessions:
            if not isinstance(session, Session):
                raise TypeError(f"Scenario sessions must be Session objects, got {session!r}")
        self.labels = dict(self.labels)
        if self.start is not None:
            self.start = parse_date(self.start)

    @property
    def dated(self) -> bool:
        """Whether the scenario runs on a simulated clock (a start or a session date)."""
        return self.start is not None or any(s.date is not None for s in self.sessions)

    def to_dict(self) -> dict[str, Any]:
        """This scenario as plain data: ``from_dict(to_dict())`` is an equal scenario, unless
        an expectation is code (``Expectation.to_dict``)."""
        data: dict[str, Any] = {"name": self.name, "labels": dict(self.labels)}
        if self.start is not None:
            assert isinstance(self.start, datetime)
            data["start"] = self.start.isoformat()
        data["sessions"] = [session.to_dict() for session in self.sessions]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *,
                  judges: Mapping[str, Any] | None = None) -> Scenario:
        """A scenario from plain data (parsed JSON or YAML), as ``to_dict`` writes it: ``name``,
        ``labels``, ``start``, ``sessions`` (keys: ``turns`` or ``transcript``, ``name``,
        ``date``, ``query``, ``evidence``, ``expect``). ``judges`` maps names to judge models or
        functions that cannot be rebuilt from their spec."""
        if not isinstance(data, Mapping):
            raise ValueError(f"A scenario must be an object, got {type(data).__name__}")
        sessions_data = data.get("sessions")
        if not isinstance(sessions_data, list):
            raise ValueError("A scenario needs a 'sessions' list")
        sessions = []
        for index, item in enumerate(sessions_data, 1):
            if not isinstance(item, Mapping):
                raise ValueError(f"Session {index} must be an object")
            has_turns = isinstance(item.get("turns"), list)
            has_transcript = isinstance(item.get("transcript"), list)
            if not (has_turns or has_transcript):
                raise ValueError(f"Session {index} needs a 'turns' or 'transcript' list")
            expect = [] if item.get("expect") is None else item["expect"]
            if not isinstance(expect, list):
                raise ValueError(f"Session {index}: 'expect' must be a list of objects")
            evidence = item.get("evidence")
            try:
                sessions.append(Session(
                    # Turns as given: a null must not become the text "None".
                    turns=list(item["turns"]) if has_turns else [],
                    transcript=item["transcript"] if has_transcript else None,
                    expect=[_expectation_from_dict(e, judges) for e in expect],
                    name=str(item.get("name") or ""), date=item.get("date"),
                    evidence=None if evidence is None else _evidence_from_dict(evidence),
                    query=_text(item, "query"),
                ))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"Session {index}: {exc}") from None
        labels = {} if data.get("labels") is None else data["labels"]
        if not isinstance(labels, Mapping):
            raise ValueError("A scenario's 'labels' must be an object")
        return cls(sessions, str(data.get("name") or "scenario"), dict(labels), data.get("start"))


def session_names(sessions: Sequence[Session]) -> list[str]:
    """Each session's name, or ``session <n>`` when it has none (1-based)."""
    return [session.name or f"session {n}" for n, session in enumerate(sessions, 1)]
