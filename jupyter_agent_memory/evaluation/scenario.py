"""Scenarios: sessions of user turns, and what should be true after each session.

A ``Scenario`` is a list of ``Session`` objects. Each session is a conversation that starts from
a fresh system prompt (so the only thing carried over from earlier sessions is what the agent
wrote to its memory) and may carry expectations checked when the session ends:

- ``FactContains(text)``: FACT.md contains ``text``;
- ``JournalContains(text=..., tag=...)``: an entry added during this session matches;
- ``PromptContains(text)``: the prompt the *next* session will start from contains ``text``.

Each takes ``present=False`` to assert the opposite. Text matching ignores case. Scenarios can
also be written as plain data (JSON, YAML) and loaded with ``Scenario.from_dict``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Expectation",
    "ExpectationOutcome",
    "FactContains",
    "JournalContains",
    "PromptContains",
    "Scenario",
    "Session",
    "SessionState",
]


@dataclass(frozen=True)
class SessionState:
    """What an expectation can look at once a session has ended."""

    facts: str
    """FACT.md after the session."""
    new_entries: Sequence[Mapping[str, Any]]
    """Journal entries added during the session, oldest first."""
    next_prompt: str
    """The system prompt the next session starts from."""


@dataclass(frozen=True)
class ExpectationOutcome:
    """The result of checking one expectation after one session."""

    description: str
    passed: bool
    detail: str = ""


def _contains(haystack: str, needle: str) -> bool:
    return needle.casefold() in haystack.casefold()


class Expectation:
    """Base class: something that should be true after a session.

    Subclasses implement ``describe()`` and ``holds(state) -> (bool, detail)``; ``present=False``
    inverts the check. Write your own by subclassing and passing instances in
    ``Session.expect``.
    """

    present: bool = True

    def describe(self) -> str:
        """A short human description, e.g. ``FACT.md contains 'Ada'``."""
        raise NotImplementedError

    def holds(self, state: SessionState) -> tuple[bool, str]:
        """Whether the positive form holds in ``state``, and a detail explaining why not."""
        raise NotImplementedError

    def check(self, state: SessionState) -> ExpectationOutcome:
        """Check the expectation (honouring ``present``) and return its outcome."""
        found, detail = self.holds(state)
        passed = found if self.present else not found
        if passed:
            detail = ""
        elif not self.present:
            detail = "found, but it should be absent"
        return ExpectationOutcome(self.describe(), passed, detail)


def _verb(present: bool, yes: str, no: str) -> str:
    return yes if present else no


@dataclass(frozen=True)
class FactContains(Expectation):
    """FACT.md, after the session, contains ``text`` (ignoring case)."""

    text: str
    present: bool = True

    def describe(self) -> str:
        """See ``Expectation.describe``."""
        return f"FACT.md {_verb(self.present, 'contains', 'does not contain')} {self.text!r}"

    def holds(self, state: SessionState) -> tuple[bool, str]:
        """See ``Expectation.holds``."""
        if _contains(state.facts, self.text):
            return True, ""
        return False, "FACT.md is empty" if not state.facts.strip() else "not in FACT.md"


@dataclass(frozen=True)
class JournalContains(Expectation):
    """A journal entry added during the session has ``text`` in its text and/or ``tag``.

    ``text`` is a case-insensitive substring; ``tag`` is compared ignoring case, exactly (the
    journal search rules). At least one of them must be given.
    """

    text: str | None = None
    tag: str | None = None
    present: bool = True

    def __post_init__(self) -> None:
        if self.text is None and self.tag is None:
            raise ValueError("JournalContains needs 'text', 'tag' or both")

    def describe(self) -> str:
        """See ``Expectation.describe``."""
        parts = []
        if self.text is not None:
            parts.append(f"text {self.text!r}")
        if self.tag is not None:
            parts.append(f"tag {self.tag!r}")
        verb = _verb(self.present, "a new journal entry with", "no new journal entry with")
        return f"{verb} {' and '.join(parts)}"

    def _matches(self, entry: Mapping[str, Any]) -> bool:
        text = entry.get("text")
        if self.text is not None and not (isinstance(text, str) and _contains(text, self.text)):
            return False
        if self.tag is None:
            return True
        tags = entry.get("tags")
        wanted = self.tag.casefold()
        return isinstance(tags, list) and any(
            isinstance(tag, str) and tag.casefold() == wanted for tag in tags
        )

    def holds(self, state: SessionState) -> tuple[bool, str]:
        """See ``Expectation.holds``."""
        if any(self._matches(entry) for entry in state.new_entries):
            return True, ""
        count = len(state.new_entries)
        return False, f"no match among {count} new entr{'y' if count == 1 else 'ies'}"


@dataclass(frozen=True)
class PromptContains(Expectation):
    """The prompt the next session starts from contains ``text`` (ignoring case)."""

    text: str
    present: bool = True

    def describe(self) -> str:
        """See ``Expectation.describe``."""
        verb = _verb(self.present, "contains", "does not contain")
        return f"next prompt {verb} {self.text!r}"

    def holds(self, state: SessionState) -> tuple[bool, str]:
        """See ``Expectation.holds``."""
        if _contains(state.next_prompt, self.text):
            return True, ""
        return False, "not in the next prompt"


@dataclass
class Session:
    """One conversation: the user's turns, in order, and what should hold when it ends."""

    turns: list[str]
    expect: list[Expectation] = field(default_factory=list)
    name: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.turns, str):
            # A bare string would otherwise be iterated character by character.
            self.turns = [self.turns]
        self.turns = list(self.turns)
        if not all(isinstance(turn, str) for turn in self.turns):
            raise TypeError("Session turns must be strings")
        self.expect = list(self.expect)
        for item in self.expect:
            if not isinstance(item, Expectation):
                raise TypeError(f"Session expectations must be Expectation objects, got {item!r}")


def _expectation_from_dict(data: Mapping[str, Any]) -> Expectation:
    present = bool(data.get("present", True))
    if "fact" in data:
        return FactContains(str(data["fact"]), present=present)
    if "prompt" in data:
        return PromptContains(str(data["prompt"]), present=present)
    if "journal" in data or "tag" in data:
        text = data.get("journal")
        tag = data.get("tag")
        return JournalContains(
            None if text is None else str(text), None if tag is None else str(tag), present
        )
    raise ValueError(
        f"Unknown expectation {dict(data)!r}: expected a 'fact', 'journal' (with optional "
        "'tag'), 'tag' or 'prompt' key"
    )


@dataclass
class Scenario:
    """A named list of sessions, run in order against one agent folder."""

    sessions: list[Session]
    name: str = "scenario"

    def __post_init__(self) -> None:
        self.sessions = list(self.sessions)
        for session in self.sessions:
            if not isinstance(session, Session):
                raise TypeError(f"Scenario sessions must be Session objects, got {session!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        """Build a scenario from plain data, e.g. parsed JSON or YAML::

        {"name": "onboarding",
         "sessions": [
           {"name": "intro", "turns": ["Hi, I'm Ada."],
            "expect": [{"fact": "Ada"}, {"journal": "met", "tag": "intro"},
                       {"prompt": "Ada"}, {"fact": "password", "present": false}]}]}
        """
        sessions_data = data.get("sessions")
        if not isinstance(sessions_data, list):
            raise ValueError("A scenario needs a 'sessions' list")
        sessions = []
        for index, item in enumerate(sessions_data, 1):
            if not isinstance(item, Mapping) or not isinstance(item.get("turns"), list):
                raise ValueError(f"Session {index} needs a 'turns' list")
            expect: Iterable[Mapping[str, Any]] = item.get("expect") or []
            sessions.append(
                Session(
                    turns=[str(turn) for turn in item["turns"]],
                    expect=[_expectation_from_dict(e) for e in expect],
                    name=str(item.get("name") or ""),
                )
            )
        return cls(sessions=sessions, name=str(data.get("name") or "scenario"))
