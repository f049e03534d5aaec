"""Expectations: what should be true once a session has ended (``present=False``: the opposite;
text matching ignores case; reply checks take ``turn=``, ``-1`` the last, ``None`` any). A check
that cannot run (a judge outage, no verdict, a bug in a custom check) is an error of the run,
never a verdict: its outcome carries ``error`` and stays out of ``pass_rate``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from .models import ModelCallRecord, call_model, model_spec

if TYPE_CHECKING:
    from .records import SearchRecord, ToolCallRecord, TurnRecord

__all__ = [
    "ABSTAIN_PATTERNS", "Check", "Expectation", "ExpectationOutcome", "FactContains",
    "JournalContains", "JudgeError", "Judgement", "LONGMEMEVAL_JUDGE_PATH", "LongMemEvalJudge",
    "ModelJudge", "PromptContains", "ReplyAbstains", "ReplyAnswers", "ReplyContains",
    "ReplyJudged", "ReplyMatches", "SessionState", "ToolCalled",
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
    closing: TurnRecord | None = None
    """The closing turn of a transcript session, if any (not in ``replies``, in ``tool_calls``)."""
    judge_calls: list[ModelCallRecord] = field(default_factory=list, compare=False)
    """Where judges record the model calls they make while checking this session."""

    @property
    def replies(self) -> list[str]:
        """The agent's replies, one per turn (``''`` for a turn that failed)."""
        return [turn.reply for turn in self.turns]

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        """Every tool call of the session, in order (the closing turn's included)."""
        turns = [*self.turns, self.closing] if self.closing is not None else self.turns
        return [call for turn in turns for call in turn.tool_calls]


@dataclass(frozen=True)
class ExpectationOutcome:
    """The result of checking one expectation after one session."""

    description: str
    passed: bool
    detail: str = ""
    error: str = ""
    """Set when the check could not run (``passed`` is then False, and it is no verdict)."""
    scorer: str = ""
    """The rule that decided (``token-match``, ``judge``...; ``''`` for memory files, tools)."""
    judge: dict[str, Any] | None = None
    """For a judged reply: the judge, its model, the exact prompt, what it said, the rule."""


def _contains(haystack: str, needle: str) -> bool:
    return needle.casefold() in haystack.casefold()


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


class Expectation:
    """Base class: something that should be true after a session. Subclasses implement
    ``describe()`` and ``holds(state) -> (bool, detail)``; ``present=False`` inverts the check."""

    present: bool = True
    scorer: ClassVar[str] = ""
    """The rule's name, copied into every outcome (``ExpectationOutcome.scorer``)."""

    def describe(self) -> str:
        """A short human description, e.g. ``FACT.md contains 'Ada'``."""
        raise NotImplementedError

    def holds(self, state: SessionState) -> tuple[bool, str]:
        """Whether the positive form holds in ``state``, and a detail explaining why not."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """This expectation as plain data (``Scenario.from_dict``'s keys); ``{"custom": ...}``
        for one that is code (a custom check, a judge function)."""
        return {"custom": self.describe()}

    def _with_flags(self, data: dict[str, Any]) -> dict[str, Any]:
        if not self.present:
            data["present"] = False
        turn = getattr(self, "turn", -1)
        if turn != -1:
            data["turn"] = turn
        return data

    def check(self, state: SessionState) -> ExpectationOutcome:
        """Check the expectation (honouring ``present``) and return its outcome; an exception
        raised while checking makes it an error naming the exception, never a verdict."""
        return self._outcome(state, self.holds, self.scorer)

    def _outcome(self, state: SessionState, holds: Callable[[SessionState], tuple[bool, str]],
                 scorer: str) -> ExpectationOutcome:
        try:
            found, detail = holds(state)
        except NoSuchTurn as exc:
            return ExpectationOutcome(self.describe(), False, str(exc), scorer=scorer)
        except Exception as exc:  # one broken check must not lose the session's record
            error = f"check raised {type(exc).__name__}: {exc}"
            return ExpectationOutcome(self.describe(), False, error=error, scorer=scorer)
        passed = found if self.present else not found
        if passed:
            detail = ""
        elif not self.present:
            detail = "found, but it should be absent"
        return ExpectationOutcome(self.describe(), passed, detail, scorer=scorer)


def _verb(present: bool, yes: str, no: str) -> str:
    return yes if present else no


@dataclass(frozen=True)
class FactContains(Expectation):
    """FACT.md, after the session, contains ``text`` (ignoring case)."""

    text: str
    present: bool = True

    def to_dict(self) -> dict[str, Any]:
        return self._with_flags({"fact": self.text})

    def describe(self) -> str:
        return f"FACT.md {_verb(self.present, 'contains', 'does not contain')} {self.text!r}"

    def holds(self, state: SessionState) -> tuple[bool, str]:
        if _contains(state.facts, self.text):
            return True, ""
        return False, "FACT.md is empty" if not state.facts.strip() else "not in FACT.md"


@dataclass(frozen=True)
class JournalContains(Expectation):
    """A journal entry added during the session has ``text`` in its text (a substring) and/or
    ``tag`` (exactly), ignoring case as the journal search does. One of them is required."""

    text: str | None = None
    tag: str | None = None
    present: bool = True

    def __post_init__(self) -> None:
        if self.text is None and self.tag is None:
            raise ValueError("JournalContains needs 'text', 'tag' or both")

    def to_dict(self) -> dict[str, Any]:
        given = (("journal", self.text), ("tag", self.tag))
        return self._with_flags({key: value for key, value in given if value is not None})

    def describe(self) -> str:
        given = (("text", self.text), ("tag", self.tag))
        parts = [f"{name} {value!r}" for name, value in given if value is not None]
        verb = _verb(self.present, "a new journal entry with", "no new journal entry with")
        return f"{verb} {' and '.join(parts)}"

    def _matches(self, entry: Mapping[str, Any]) -> bool:
        text, tags = entry.get("text"), entry.get("tags")
        if self.text is not None and not (isinstance(text, str) and _contains(text, self.text)):
            return False
        return self.tag is None or (isinstance(tags, list) and any(
            isinstance(tag, str) and tag.casefold() == self.tag.casefold() for tag in tags))

    def holds(self, state: SessionState) -> tuple[bool, str]:
        if any(self._matches(entry) for entry in state.new_entries):
            return True, ""
        count = _plural(len(state.new_entries), "new entry", "new entries")
        return False, f"no match among {count}"


@dataclass(frozen=True)
class PromptContains(Expectation):
    """The prompt the next session starts from contains ``text`` (ignoring case)."""

    text: str
    present: bool = True

    def to_dict(self) -> dict[str, Any]:
        return self._with_flags({"prompt": self.text})

    def describe(self) -> str:
        return f"next prompt {_verb(self.present, 'contains', 'does not contain')} {self.text!r}"

    def holds(self, state: SessionState) -> tuple[bool, str]:
        if _contains(state.next_prompt, self.text):
            return True, ""
        return False, "not in the next prompt"


class NoSuchTurn(Exception):
    """A check names a turn the session does not have: it fails whatever ``present`` says."""


def _pick(items: Sequence[Any], turn: int, one: str, many: str) -> Any:
    try:
        return items[turn]
    except IndexError:
        count = _plural(len(items), one, many)
        raise NoSuchTurn(f"no such turn: the session has {count}") from None


def _turn_label(turn: int | None) -> str:
    if turn is None:
        return "a reply"
    return "the last reply" if turn == -1 else f"reply {turn}"


def _quote(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


class _ReplyCheck(Expectation):
    """A check of the replies ``turn`` picks: it holds when ``_matches`` holds for one."""

    turn: int | None = -1

    def _matches(self, reply: str) -> bool:
        raise NotImplementedError

    def holds(self, state: SessionState) -> tuple[bool, str]:
        replies = state.replies
        if self.turn is None and not replies:
            raise NoSuchTurn("no such turn: the session has no replies")
        picked = replies if self.turn is None else [_pick(replies, self.turn, "reply", "replies")]
        if any(self._matches(reply) for reply in picked):
            return True, ""
        return False, f"reply was {_quote(picked[-1])}"


@dataclass(frozen=True)
class ReplyContains(_ReplyCheck):
    """A reply contains ``text`` (ignoring case); ``turn``: ``-1`` the last, ``None`` any."""

    text: str
    turn: int | None = -1
    present: bool = True
    scorer: ClassVar[str] = "substring"

    def to_dict(self) -> dict[str, Any]:
        return self._with_flags({"reply": self.text})

    def describe(self) -> str:
        verb = _verb(self.present, "contains", "does not contain")
        return f"{_turn_label(self.turn)} {verb} {self.text!r}"

    def _matches(self, reply: str) -> bool:
        return _contains(reply, self.text)


@dataclass(frozen=True)
class ReplyMatches(_ReplyCheck):
    """A reply matches the regular expression ``pattern`` (searched, ignoring case)."""

    pattern: str
    turn: int | None = -1
    present: bool = True
    scorer: ClassVar[str] = "regex"

    def __post_init__(self) -> None:
        try:
            re.compile(self.pattern)
        except re.error as exc:
            raise ValueError(f"ReplyMatches: invalid pattern {self.pattern!r}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        return self._with_flags({"reply_matches": self.pattern})

    def describe(self) -> str:
        verb = _verb(self.present, "matches", "does not match")
        return f"{_turn_label(self.turn)} {verb} /{self.pattern}/"

    def _matches(self, reply: str) -> bool:
        return re.search(self.pattern, reply, re.IGNORECASE) is not None


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
class ReplyAbstains(_ReplyCheck):
    """The reply declines to answer (``I don't know``...); ``patterns`` replaces the default."""

    turn: int | None = -1
    patterns: tuple[str, ...] = ABSTAIN_PATTERNS
    present: bool = True
    scorer: ClassVar[str] = "abstain-patterns"

    def to_dict(self) -> dict[str, Any]:
        if self.patterns != ABSTAIN_PATTERNS:
            return {"custom": self.describe()}
        return self._with_flags({"abstains": True})

    def describe(self) -> str:
        return f"{_turn_label(self.turn)} {_verb(self.present, 'abstains', 'gives an answer')}"

    def _matches(self, reply: str) -> bool:
        compiled = [re.compile(pattern, re.IGNORECASE) for pattern in self.patterns]
        return any(pattern.search(reply) for pattern in compiled)


_UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
          "fifteen sixteen seventeen eighteen nineteen twenty")
_TENS = "thirty forty fifty sixty seventy eighty ninety"
_NUMBER_WORDS = {word: str(value) for value, word in enumerate(_UNITS.split())}
_NUMBER_WORDS.update(zip(_TENS.split(), map(str, range(30, 100, 10)), strict=True))
_NUMBER_WORDS.update({"hundred": "100", "thousand": "1000", "once": "1", "twice": "2"})
_ARTICLES = frozenset(("a", "an", "the"))
# A number (thousands commas, decimals, an ordinal suffix) or a run of letters.
_TOKEN = re.compile(r"(\d+(?:,\d{3})*(?:\.\d+)?)(?:st|nd|rd|th)?|[^\W\d_]+")


def answer_tokens(text: str) -> list[str]:
    """``text`` as the tokens ``ReplyAnswers`` compares, in one pass: case-folded words but
    articles, numbers by value (``1,000``, ``3.50``, ``03``, ``21st``, ``three``)."""
    tokens = []
    for found in _TOKEN.finditer(text.casefold()):
        number = found.group(1)
        if number is not None:
            value = number.replace(",", "")
            if "." in value:
                value = value.rstrip("0").rstrip(".")
            tokens.append(value.lstrip("0") or "0")
        elif (word := found.group(0)) not in _ARTICLES:
            tokens.append(_NUMBER_WORDS.get(word, word))
    return tokens


@dataclass(frozen=True)
class ReplyAnswers(_ReplyCheck):
    """A reply gives ``answer``: its tokens (``answer_tokens``) appear in it as a run of whole
    tokens (so ``3`` passes ``three cats`` but not ``since 2023``). The check without a judge."""

    answer: str
    turn: int | None = -1
    present: bool = True
    scorer: ClassVar[str] = "token-match"

    def __post_init__(self) -> None:
        if not isinstance(self.answer, str):
            raise TypeError(f"ReplyAnswers: the answer must be a string, got {self.answer!r}")
        if not answer_tokens(self.answer):
            raise ValueError(f"ReplyAnswers: the answer {self.answer!r} has no word or number "
                             "to match")

    def to_dict(self) -> dict[str, Any]:
        return self._with_flags({"answers": self.answer})

    def describe(self) -> str:
        verb = _verb(self.present, "gives", "does not give")
        return f"{_turn_label(self.turn)} {verb} the answer {self.answer!r} (token match)"

    def _matches(self, reply: str) -> bool:
        # Joined with spaces on both ends, a token sequence is a substring exactly when it
        # is a run of whole tokens; ``in`` is linear in the reply's length.
        needle = " " + " ".join(answer_tokens(self.answer)) + " "
        return needle in " " + " ".join(answer_tokens(reply)) + " "


class JudgeError(RuntimeError):
    """A judge could not give a verdict (no text, or text that is neither yes nor no)."""


@dataclass(frozen=True)
class Judgement:
    """One verdict of a model judge, with everything needed to audit it."""

    passed: bool
    explanation: str
    record: dict[str, Any]
    """``judge``, ``model``, ``prompt`` (the exact text sent), ``said`` and ``rule``."""


JUDGE_PROMPT = (
    "You grade answers of a chat assistant with long-term memory. Compare the assistant's "
    "reply to the expected answer. Say yes when the reply gives the expected answer (or an "
    "equivalent one, or a superset of it without contradicting it); say no when it is wrong, "
    "incomplete or declines to answer.\n\n"
    "Question: {question}\nExpected answer: {answer}\nAssistant's reply: {reply}\n\n"
    "Is the reply correct? Answer yes or no only."
)
"""The instruction ``ModelJudge`` sends (``str.format`` with question, answer, reply)."""

ABSTENTION_JUDGE_PROMPT = (
    "You grade answers of a chat assistant with long-term memory. The question cannot be "
    "answered from what the user ever said; the explanation says why. Say yes when the "
    "reply declines to answer or says the information is missing or incomplete; say no "
    "when it gives an answer anyway.\n\n"
    "Question: {question}\nExplanation: {answer}\nAssistant's reply: {reply}\n\n"
    "Does the reply recognise that the question cannot be answered? Answer yes or no only."
)
"""``ModelJudge``'s instruction for abstention questions."""


class ModelJudge:
    """A judge backed by a model object: it sends ``prompt`` (``abstention_prompt`` for an
    unanswerable question) as one user message, no tools, and reads ``yes``/``no`` from the start
    of the reply (else ``JudgeError``). Calling it gives ``(verdict, explanation)``."""

    kind = "judge"
    rule = "the reply starts with yes or no (ignoring case and leading punctuation)"

    def __init__(self, model: Any, prompt: str = JUDGE_PROMPT,
                 abstention_prompt: str = ABSTENTION_JUDGE_PROMPT) -> None:
        if not callable(getattr(model, "complete", None)):
            raise TypeError(f"a judge model must have complete(messages, tools), got {model!r}")
        self.model = model
        self.prompt = prompt
        self.abstention_prompt = abstention_prompt
        self.name = str(getattr(model, "name", type(model).__name__))

    def prompt_for(self, question: str, answer: str, reply: str, question_type: str | None,
                   abstention: bool) -> str:
        """The exact text sent to the judge model."""
        template = self.abstention_prompt if abstention else self.prompt
        return template.format(question=question, answer=answer, reply=reply)

    def verdict(self, said: str) -> bool:
        """Read the verdict from the judge's stripped reply; ``JudgeError`` when there is none."""
        found = re.match(r"\W*(yes|no)\b", said, re.IGNORECASE)
        if found is None:
            raise JudgeError(f"judge gave no verdict: {_quote(said)}")
        return found.group(1).lower() == "yes"

    def judgement(
        self, question: str, answer: str, reply: str, *, question_type: str | None = None,
        abstention: bool = False, calls: list[ModelCallRecord] | None = None,
    ) -> Judgement:
        """Ask the judge model; its call (failed or not) is appended to ``calls``."""
        content = self.prompt_for(question, answer, reply, question_type, abstention)
        messages = [{"role": "user", "content": content}]
        turn = call_model(self.model, messages, [], [] if calls is None else calls, role="judge")
        if turn.text is None:
            raise JudgeError("judge returned no text")
        said = turn.text.strip()
        record = {"judge": self.kind, "model": self.name, "prompt": content, "said": said,
                  "rule": self.rule}
        return Judgement(self.verdict(said), f"judge said {_quote(said)}", record)

    def __call__(self, question: str, answer: str, reply: str) -> tuple[bool, str]:
        """``(verdict, explanation)`` for a question with an answer (see the class doc)."""
        found = self.judgement(question, answer, reply)
        return found.passed, found.explanation


LONGMEMEVAL_JUDGE_PATH = Path(__file__).with_name("data") / "longmemeval_judge_prompts.json"
"""LongMemEval's answer-check prompts, byte for byte (MIT; the file names source and licence)."""


def longmemeval_templates() -> dict[str, str]:
    """LongMemEval's prompt templates by question type, plus ``abstention``."""
    return dict(json.loads(LONGMEMEVAL_JUDGE_PATH.read_text(encoding="utf-8"))["templates"])


class LongMemEvalJudge(ModelJudge):
    """LongMemEval's own answer check, run by ``model``: the benchmark's template for the
    question type (or abstention), filled as it fills it, and its verdict rule (``'yes'`` in the
    lower-cased reply); a type with no template is a ``JudgeError``."""

    kind = "longmemeval-judge"
    rule = "'yes' in the judge's reply, stripped and lower-cased (LongMemEval's evaluate_qa.py)"

    def __init__(self, model: Any) -> None:
        super().__init__(model)
        self.templates = longmemeval_templates()

    def prompt_for(self, question: str, answer: str, reply: str, question_type: str | None,
                   abstention: bool) -> str:
        """The benchmark's template for ``question_type`` (or abstention), filled."""
        key = "abstention" if abstention else question_type
        template = self.templates.get(key or "")
        if template is None:
            known = sorted(name for name in self.templates if name != "abstention")
            raise JudgeError(f"LongMemEval has no answer-check prompt for question type "
                             f"{question_type!r} (known: {', '.join(known)})")
        return template.format(question, answer, reply)

    def verdict(self, said: str) -> bool:
        """LongMemEval's rule: ``'yes'`` anywhere in the lower-cased reply."""
        return "yes" in said.lower()


def judge_spec(judge: Any) -> dict[str, Any]:
    """A judge as plain data: its kind and its model's spec; a function judge by name only."""
    if isinstance(judge, LongMemEvalJudge):
        return {"kind": judge.kind, "model": model_spec(judge.model)}
    if isinstance(judge, ModelJudge):
        return {"kind": judge.kind, "model": model_spec(judge.model), "prompt": judge.prompt,
                "abstention_prompt": judge.abstention_prompt}
    return {"kind": "function", "name": str(getattr(judge, "__name__", type(judge).__name__))}


def _verdict(value: Any) -> tuple[bool, str]:
    """A function's answer, a bool or ``(bool, detail)``, as ``(bool, detail)``."""
    if isinstance(value, tuple):
        return bool(value[0]), str(value[1])
    return bool(value), ""


@dataclass(frozen=True)
class ReplyJudged(Expectation):
    """A judge decides whether the reply answers ``question`` (default: the turn's user text)
    with ``answer``: a ``ModelJudge``, a model object (wrapped in one) or a function ``judge(
    question, answer, reply)`` giving a bool or ``(bool, explanation)``. ``question_type`` picks a
    typed judge's prompt; ``abstention`` asks whether the reply abstains (``answer`` says why)."""

    answer: str
    judge: Any
    question: str | None = None
    turn: int = -1
    present: bool = True
    question_type: str | None = None
    abstention: bool = False
    _judge: Any = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        judge = self.judge
        if callable(getattr(judge, "complete", None)):
            judge = ModelJudge(judge)
        elif not callable(judge):
            raise TypeError(f"judge must be a model object or a function, got {judge!r}")
        object.__setattr__(self, "_judge", judge)

    def to_dict(self) -> dict[str, Any]:
        """See ``Expectation.to_dict``: the judge as its spec (``judge_spec``)."""
        data: dict[str, Any] = {"judged": self.answer, "judge": judge_spec(self._judge)}
        given = {"question": self.question, "question_type": self.question_type}
        data.update({key: value for key, value in given.items() if value is not None})
        if self.abstention:
            data["abstention"] = True
        return self._with_flags(data)

    def describe(self) -> str:
        if self.abstention:
            verb = _verb(self.present, "is judged to abstain", "is judged not to abstain")
            return f"{_turn_label(self.turn)} {verb}"
        verb = _verb(self.present, "is judged to answer", "is judged not to answer")
        return f"{_turn_label(self.turn)} {verb} {self.answer!r}"

    def check(self, state: SessionState) -> ExpectationOutcome:
        """See ``Expectation.check``; the outcome names the judge and carries its record."""
        found: dict[str, Any] = {}

        def holds(state: SessionState) -> tuple[bool, str]:
            turn: TurnRecord = _pick(state.turns, self.turn, "turn", "turns")
            question = self.question if self.question is not None else turn.user
            judge = self._judge
            if isinstance(judge, ModelJudge):
                judgement = judge.judgement(
                    question, self.answer, turn.reply, question_type=self.question_type,
                    abstention=self.abstention, calls=state.judge_calls,
                )
                found["record"] = judgement.record
                passed, explanation = judgement.passed, judgement.explanation
            else:
                passed, explanation = _verdict(judge(question, self.answer, turn.reply))
            if passed:
                return True, ""
            return False, explanation or f"reply was {_quote(turn.reply)}"

        kind = getattr(self._judge, "kind", "judge")
        outcome = self._outcome(state, holds, kind)
        return replace(outcome, judge=found["record"]) if found else outcome

    def holds(self, state: SessionState) -> tuple[bool, str]:
        """See ``Expectation.holds`` (``check`` also records the judge's call)."""
        outcome = self.check(state)
        if outcome.error:
            raise JudgeError(outcome.error)
        return outcome.passed == self.present, outcome.detail


def _same(wanted: Any, value: Any) -> bool:
    """Equal, strings ignoring case."""
    if isinstance(wanted, str) and isinstance(value, str):
        return wanted.casefold() == value.casefold()
    return bool(value == wanted)


@dataclass(frozen=True)
class ToolCalled(Expectation):
    """The agent made a tool call with this ``name`` (``None``: any), ``action`` and ``arguments``
    (each given key equal, strings ignoring case), succeeding (``ok=True``) or failing (False)."""

    name: str | None = None
    action: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    ok: bool | None = None
    present: bool = True

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"tool": self.name, "action": self.action}
        if self.arguments:
            data["arguments"] = dict(self.arguments)
        if self.ok is not None:
            data["ok"] = self.ok
        return self._with_flags(data)

    def describe(self) -> str:
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
        expected = [("action", self.action)] if self.action is not None else []
        expected += self.arguments.items()
        arguments: Any = call.arguments
        if isinstance(arguments, str):  # the model's text: usable when it is a JSON object
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = None
        return not expected or (isinstance(arguments, dict) and all(
            _same(wanted, arguments.get(key)) for key, wanted in expected
        ))

    def holds(self, state: SessionState) -> tuple[bool, str]:
        calls = state.tool_calls
        if any(self._matches(call) for call in calls):
            return True, ""
        return False, f"no match among {_plural(len(calls), 'tool call', 'tool calls')}"


@dataclass(frozen=True)
class Check(Expectation):
    """A custom expectation: ``function(state)`` returns a bool or ``(bool, detail)``."""

    function: Callable[[SessionState], Any]
    description: str
    present: bool = True

    def describe(self) -> str:
        return self.description if self.present else f"not: {self.description}"

    def holds(self, state: SessionState) -> tuple[bool, str]:
        return _verdict(self.function(state))
