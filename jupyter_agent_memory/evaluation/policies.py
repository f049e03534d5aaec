"""Two small memory policies written as deterministic, offline models: baselines for real
models, and reproducible tutorials and tests. A user turn ending in ``?`` is a question, any
other a statement. Neither sees what the assistant said; both answer the runner's closing turn
(``CLOSING_TURN``) with ``OK.`` and write nothing.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from typing import Any

from .models import CLOSING_TURN, ModelTurn, ToolCall, conversation, known_facts, offered_name

__all__ = ["FactsPolicy", "JournalPolicy", "keywords"]

_STOPWORD_TEXT = """a about after again all am an and any are as at be been before being but by
    can could did do does doing for from had has have having he her here hers him his how i if
    in into is it its just me more most my no nor not now of on once only or other our out over
    own same she should so some such than that the their them then there these they this those
    to too under until up very was we were what when where which while who whom why will with
    would you your yours"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_WORD = re.compile(r"[A-Za-z0-9']+")
_FIRST_PERSON = re.compile(r"\b(?:I|my|me|I'm|I've)\b", re.IGNORECASE)
_DATE_LINE = re.compile(r"^Current date: (\d{4}-\d{2}-\d{2})", re.MULTILINE)

ABSTAIN_REPLY = "I don't know: you never told me about that."


def keywords(text: str) -> list[str]:
    """The lower-cased words of ``text`` worth searching for (3+ letters, no stopwords)."""
    words = [word.lower().strip("'") for word in _WORD.findall(text)]
    return list(dict.fromkeys(w for w in words if len(w) >= 3 and w not in STOPWORDS))


def _hits(words: Sequence[str], text: str) -> int:
    lowered = text.lower()
    return sum(1 for word in words if word in lowered)


def _reply(text: str) -> ModelTurn:
    return ModelTurn(text=text, finish_reason="stop")


class FactsPolicy:
    """Keeps facts: writes every first-person statement to FACT.md as a list item (dated when
    the prompt gives the date) and answers with the line sharing most keywords with the
    question, the *oldest* on a tie (so an updated fact keeps winning until it is removed);
    says it does not know when no line shares one. Never uses the journal."""

    def __init__(self, name: str = "facts") -> None:
        self.name = name

    def spec(self) -> dict[str, Any]:
        """What ``model_from_spec`` rebuilds this policy from."""
        return {"kind": "facts-policy"}

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelTurn:
        """Answer the last user turn (see the class doc)."""
        user, system, _results, called = conversation(messages)
        user = user or ""
        if user == CLOSING_TURN:
            return _reply("OK.")
        if user.rstrip().endswith("?"):
            return _reply(self._answer(user, known_facts(system, messages)))
        if called or not _FIRST_PERSON.search(user):
            return _reply("Noted.")
        facts = known_facts(system, messages).rstrip("\n")
        date = _DATE_LINE.search(system)
        line = f"- ({date.group(1)}) {user.strip()}" if date else f"- {user.strip()}"
        content = f"{facts}\n{line}\n" if facts.strip() else f"{line}\n"
        call = ToolCall(offered_name("memory", tools), {"action": "update", "content": content})
        return ModelTurn(tool_calls=[call], finish_reason="tool_calls")

    @staticmethod
    def _answer(question: str, facts: str) -> str:
        hits = functools.partial(_hits, keywords(question))
        best = max(facts.splitlines(), key=hits, default="")  # the first, oldest, wins a tie
        if not hits(best):
            return ABSTAIN_REPLY
        return f"From my notes: {best.lstrip('-* ').strip()}"


class JournalPolicy:
    """Logs everything: appends every statement to the journal and answers by searching it
    once per keyword (a substring match), with the date and text of the entry matching most
    keywords, the newest on a tie."""

    def __init__(self, name: str = "journal", limit: int = 5) -> None:
        self.name = name
        self.limit = limit

    def spec(self) -> dict[str, Any]:
        """What ``model_from_spec`` rebuilds this policy from."""
        return {"kind": "journal-policy", "limit": self.limit}

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelTurn:
        """Answer the last user turn (see the class doc)."""
        user, _system, results, called = conversation(messages)
        user = user or ""
        if user == CLOSING_TURN:
            return _reply("OK.")
        tool = offered_name("memory", tools)
        question = user.rstrip().endswith("?")
        if called:
            return _reply(self._answer(user, results) if question else "Noted.")
        if not question:
            calls = [ToolCall(tool, {"action": "append", "text": user.strip(), "tags": ["chat"]})]
        elif words := keywords(user):
            calls = [ToolCall(tool, {"action": "search", "query": word, "limit": self.limit})
                     for word in words]
        else:
            return _reply(ABSTAIN_REPLY)
        return ModelTurn(tool_calls=calls, finish_reason="tool_calls")

    @staticmethod
    def _answer(question: str, results: Sequence[Any]) -> str:
        words = keywords(question)
        found: dict[str, dict[str, Any]] = {}
        for text in results:
            try:
                entries = json.loads(text) if isinstance(text, str) else []
            except ValueError:
                continue
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and isinstance(entry.get("text"), str):
                    found[json.dumps(entry, sort_keys=True)] = entry
        # More hits, then the newest; on a full tie the first found.
        best = max(found.values(), default=None,
                   key=lambda entry: (_hits(words, entry["text"]), str(entry.get("ts", ""))))
        if best is None:
            return ABSTAIN_REPLY
        return f"On {str(best.get('ts', ''))[:10]}: {best['text']}"
