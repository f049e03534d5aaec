"""Expectations: what should be true once a session has ended.

Each expectation looks at a ``SessionState`` (FACT.md, the new journal entries, the next prompt,
and the whole session record: turns, replies, tool calls and their results) and says whether it
holds. Every one takes ``present=False`` to assert the opposite; text matching ignores case.

Memory files and prompt
    ``FactContains``, ``JournalContains``, ``PromptContains``.
What the agent said
    ``ReplyContains`` (a substring), ``ReplyMatches`` (a regular expression), ``ReplyAbstains``
    (the reply declines to answer), ``ReplyJudged`` (a judge decides: any model object or a
    function, for free-form answers). Reply checks look at the replies of the session's turns;
    ``turn=`` picks one (``-1`` is the last, the default), ``turn=None`` accepts any.
What the agent did
    ``ToolCalled`` (a call with a given tool name, action and arguments was made).
Anything else
    ``Check(function, description)`` calls ``function(state)``, which returns a bool or
    ``(bool, detail)``; or subclass ``Expectation``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .records import SearchRecord, ToolCallRecord, TurnRecord

__all__ = [
    "ABSTAIN_PATTERNS",
    "Check",
    "Expectation",
    "ExpectationOutcome",
    "FactContains",
    "JournalContains",
    "ModelJudge",
    "PromptContains",
    "ReplyAbstains",
    "ReplyContains",
    "ReplyJudged",
    "ReplyMatches",
    "SessionState",
    "ToolCalled",
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
    turns: Sequence[TurnRecord] = ()
    """Every turn of the session: user text, reply, tool calls with their results, errors."""
    searches: Sequence[SearchRecord] = ()
    """Every journal search the agent made in the session, with the entry ids it got back."""

    @property
    def replies(self) -> list[str]:
        """The agent's replies, one per turn (``''`` for a turn that failed)."""
        return [turn.reply for turn in self.turns]

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        """Every tool call of the session, in order."""
        return [call for turn in self.turns for call in turn.tool_calls]


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
    inverts the check. Write your own by subclassing (or use ``Check``) and pass instances in
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
        """Check the expectation (honouring ``present``) and return its outcome.

        An exception raised while checking (a judge whose endpoint is down, a bug in a custom
        check) makes the outcome a failure whose detail names the exception; it never ends
        the run.
        """
        try:
            found, detail = self.holds(state)
        except NoSuchTurn as exc:
            return ExpectationOutcome(self.describe(), False, str(exc))
        except Exception as exc:  # one broken check must not lose the session's record
            return ExpectationOutcome(
                self.describe(), False, f"check raised {type(exc).__name__}: {exc}"
            )
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


# ------------------------------------------------------------------------------ replies


class NoSuchTurn(Exception):
    """A reply check names a turn the session does not have: it fails whatever ``present``
    says, since "reply 9 does not contain X" is not true of a session with one reply."""


def _picked_replies(state: SessionState, turn: int | None) -> list[str]:
    """The replies a reply check looks at; raises ``NoSuchTurn`` when there are none."""
    replies = state.replies
    if turn is None:
        if not replies:
            raise NoSuchTurn("no such turn: the session has no replies")
        return replies
    try:
        return [replies[turn]]
    except IndexError:
        count = len(replies)
        raise NoSuchTurn(
            f"no such turn: the session has {count} repl{'y' if count == 1 else 'ies'}"
        ) from None


def _turn_label(turn: int | None) -> str:
    if turn is None:
        return "a reply"
    return "the last reply" if turn == -1 else f"reply {turn}"


def _quote(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


@dataclass(frozen=True)
class ReplyContains(Expectation):
    """A reply of the session contains ``text`` (ignoring case).

    ``turn`` picks the turn (``-1``, the default, is the last; ``None`` means any turn).
    """

    text: str
    turn: int | None = -1
    present: bool = True

    def describe(self) -> str:
        """See ``Expectation.describe``."""
        verb = _verb(self.present, "contains", "does not contain")
        return f"{_turn_label(self.turn)} {verb} {self.text!r}"

    def holds(self, state: SessionState) -> tuple[bool, str]:
        """See ``Expectation.holds``."""
        replies = _picked_replies(state, self.turn)
        if any(_contains(reply, self.text) for reply in replies):
            return True, ""
        return False, f"reply was {_quote(replies[-1])}"


@dataclass(frozen=True)
class ReplyMatches(Expectation):
    """A reply of the session matches the regular expression ``pattern`` (searched, ignoring
    case). ``turn`` as for ``ReplyContains``."""

    pattern: str
    turn: int | None = -1
    present: bool = True

    def __post_init__(self) -> None:
        try:
            re.compile(self.pattern)
        except re.error as exc:
            raise ValueError(f"ReplyMatches: invalid pattern {self.pattern!r}: {exc}") from None

    def describe(self) -> str:
        """See ``Expectation.describe``."""
        verb = _verb(self.present, "matches", "does not match")
        return f"{_turn_label(self.turn)} {verb} /{self.pattern}/"

    def holds(self, state: SessionState) -> tuple[bool, str]:
        """See ``Expectation.holds``."""
        replies = _picked_replies(state, self.turn)
        compiled = re.compile(self.pattern, re.IGNORECASE)
        if any(compiled.search(reply) for reply in replies):
            return True, ""
        return False, f"reply was {_quote(replies[-1])}"


ABSTAIN_PATTERNS: tuple[str, ...] = (
    r"\bI (?:do not|don't|don’t) (?:know|have|recall|remember)\b",
    r"\bI(?:'m| am) not sure\b",
    r"\b(?:no|not enough) (?:information|record|mention|memory)\b",
    r"\bnever (?:told|mentioned|said)\b",
    r"\b(?:cannot|can't|can’t|unable to) (?:tell|answer|find|recall|say)\b",
    r"\bhaven't (?:told|mentioned|said)\b",
)
"""What ``ReplyAbstains`` counts as declining to answer (regular expressions, ignoring case)."""


@dataclass(frozen=True)
class ReplyAbstains(Expectation):
    """The reply declines to answer (``I don't know``, ``you never told me``...).

    For questions whose answer was never given (LongMemEval's abstention questions): a memory
    that invents an answer fails. ``patterns`` replaces ``ABSTAIN_PATTERNS``.
    """

    turn: int | None = -1
    patterns: tuple[str, ...] = ABSTAIN_PATTERNS
    present: bool = True

    def describe(self) -> str:
        """See ``Expectation.describe``."""
        return f"{_turn_label(self.turn)} {_verb(self.present, 'abstains', 'gives an answer')}"

    def holds(self, state: SessionState) -> tuple[bool, str]:
        """See ``Expectation.holds``."""
        replies = _picked_replies(state, self.turn)
        compiled = [re.compile(pattern, re.IGNORECASE) for pattern in self.patterns]
        if any(p.search(reply) for reply in replies for p in compiled):
            return True, ""
        return False, f"reply was {_quote(replies[-1])}"


# ------------------------------------------------------------------------------- judges

JUDGE_PROMPT = (
    "You grade answers of a chat assistant with long-term memory. Compare the assistant's "
    "reply to the expected answer. Say yes when the reply gives the expected answer (or an "
    "equivalent one, or a superset of it without contradicting it); say no when it is wrong, "
    "incomplete or declines to answer.\n\n"
    "Question: {question}\nExpected answer: {answer}\nAssistant's reply: {reply}\n\n"
    "Is the reply correct? Answer yes or no only."
)
"""The instruction ``ModelJudge`` sends (``str.format`` with question, answer, reply)."""


class ModelJudge:
    """A judge backed by any model object (``complete(messages, tools) -> ModelTurn``).

    ``judge(question, answer, reply)`` returns ``(verdict, explanation)``: it sends
    ``prompt`` (default ``JUDGE_PROMPT``) as one user message with no tools and reads
    ``yes``/``no`` from the start of the model's text. Anything else counts as a failed
    verdict whose explanation quotes what the judge said.
    """

    def __init__(self, model: Any, prompt: str = JUDGE_PROMPT) -> None:
        if not callable(getattr(model, "complete", None)):
            raise TypeError(f"a judge model must have complete(messages, tools), got {model!r}")
        self.model = model
        self.prompt = prompt
        self.name = str(getattr(model, "name", type(model).__name__))

    def __call__(self, question: str, answer: str, reply: str) -> tuple[bool, str]:
        """Ask the judge model; see the class docstring."""
        content = self.prompt.format(question=question, answer=answer, reply=reply)
        turn = self.model.complete([{"role": "user", "content": content}], [])
        said = (turn.text or "").strip()
        verdict = re.match(r"\W*(yes|no)\b", said, re.IGNORECASE)
        if verdict is None:
            return False, f"judge gave no verdict: {_quote(said)}"
        return verdict.group(1).lower() == "yes", f"judge said {_quote(said)}"


Judge = Callable[[str, str, str], "bool | tuple[bool, str]"]


@dataclass(frozen=True)
class ReplyJudged(Expectation):
    """A judge decides whether the reply answers ``question`` with ``answer``.

    ``judge`` is a ``ModelJudge``, a model object (wrapped in ``ModelJudge``), or any function
    ``judge(question, answer, reply)`` returning a bool or ``(bool, explanation)``. ``question``
    defaults to the user text of the judged turn.
    """

    answer: str
    judge: Any
    question: str | None = None
    turn: int = -1
    present: bool = True
    _judge: Any = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        judge = self.judge
        if callable(getattr(judge, "complete", None)):
            judge = ModelJudge(judge)
        elif not callable(judge):
            raise TypeError(f"judge must be a model object or a function, got {judge!r}")
        object.__setattr__(self, "_judge", judge)

    def describe(self) -> str:
        """See ``Expectation.describe``."""
        verb = _verb(self.present, "is judged to answer", "is judged not to answer")
        return f"{_turn_label(self.turn)} {verb} {self.answer!r}"

    def holds(self, state: SessionState) -> tuple[bool, str]:
        """See ``Expectation.holds``."""
        try:
            turn = state.turns[self.turn]
        except IndexError:
            count = len(state.turns)
            raise NoSuchTurn(
                f"no such turn: the session has {count} turn{'' if count == 1 else 's'}"
            ) from None
        question = self.question if self.question is not None else turn.user
        verdict = self._judge(question, self.answer, turn.reply)
        if isinstance(verdict, tuple):
            passed, explanation = bool(verdict[0]), str(verdict[1])
        else:
            passed, explanation = bool(verdict), ""
        if passed:
            return True, ""
        return False, explanation or f"reply was {_quote(turn.reply)}"


# --------------------------------------------------------------------------- tool calls


def _call_arguments(call: ToolCallRecord) -> dict[str, Any] | None:
    """The call's arguments as a dict; None when the model sent text that is not a JSON object."""
    arguments = call.arguments
    if isinstance(arguments, str):
        import json

        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    return arguments if isinstance(arguments, dict) else None


@dataclass(frozen=True)
class ToolCalled(Expectation):
    """The agent made a tool call with this ``name`` (the name it used; any when ``None``),
    ``action`` and ``arguments`` (each given key equal; strings compared ignoring case).

    ``ok=True`` only counts calls that succeeded, ``ok=False`` only failed ones.
    """

    name: str | None = None
    action: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    ok: bool | None = None
    present: bool = True

    def describe(self) -> str:
        """See ``Expectation.describe``."""
        parts = [f"tool {self.name!r}" if self.name else "a tool"]
        if self.action:
            parts.append(f"action {self.action!r}")
        parts.extend(f"{key}={value!r}" for key, value in self.arguments.items())
        if self.ok is not None:
            parts.append("succeeding" if self.ok else "failing")
        return f"{_verb(self.present, 'a call to', 'no call to')} {' '.join(parts)}"

    def _matches(self, call: ToolCallRecord) -> bool:
        wanted = (self.name or "").casefold()
        used = call.name.casefold()
        # ``memory`` also matches the tool offered under a prefix (MCP style).
        if wanted and used != wanted and not used.endswith("__" + wanted):
            return False
        if self.ok is not None and call.is_error == self.ok:
            return False
        arguments = _call_arguments(call)
        if self.action is not None:
            action = None if arguments is None else arguments.get("action")
            if not isinstance(action, str) or action.casefold() != self.action.casefold():
                return False
        if self.arguments:
            if arguments is None:
                return False
            for key, wanted in self.arguments.items():
                value = arguments.get(key)
                if isinstance(wanted, str) and isinstance(value, str):
                    if wanted.casefold() != value.casefold():
                        return False
                elif value != wanted:
                    return False
        return True

    def holds(self, state: SessionState) -> tuple[bool, str]:
        """See ``Expectation.holds``."""
        calls = state.tool_calls
        if any(self._matches(call) for call in calls):
            return True, ""
        return False, f"no match among {len(calls)} tool call{'' if len(calls) == 1 else 's'}"


@dataclass(frozen=True)
class Check(Expectation):
    """A custom expectation: ``function(state)`` returns a bool or ``(bool, detail)``.

    ``state`` is the whole ``SessionState`` (FACT.md, journal entries, next prompt, turns with
    replies, tool calls and results, searches).
    """

    function: Callable[[SessionState], Any]
    description: str
    present: bool = True

    def describe(self) -> str:
        """See ``Expectation.describe``."""
        return self.description if self.present else f"not: {self.description}"

    def holds(self, state: SessionState) -> tuple[bool, str]:
        """See ``Expectation.holds``."""
        verdict = self.function(state)
        if isinstance(verdict, tuple):
            return bool(verdict[0]), str(verdict[1])
        return bool(verdict), ""
