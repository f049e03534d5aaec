"""Retrieval measured: gold evidence, ranking metrics, and baselines on the same journal.

The runner names journal entries by position, oldest first (``j1``, ``j2``..., entries from
before the run included) and remembers which session wrote each; a ranking is a list of ids,
best first. An entry is gold (``Evidence``) when its id is listed, its text contains one of
``texts`` (ignoring case), or it was written during (or is tagged with the name of) one of
``sessions``. It is turn-level gold when it was written in the model step that first showed
the model one of the ``turns`` (``<session>#<position>``, 1-based): a user message's own step,
the step after an assistant message, the closing turn for the last one.

The metrics use the formulas of LongMemEval's ``evaluate_retrieval`` (see each function).
Baselines rank the journal as it stood when the session started, with the session's question:
``tool`` (the memory tool's own search: a case-insensitive substring, newest first) and
``bm25`` (``bm25_rank``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .records import RetrievalScore

__all__ = [
    "Evidence", "bm25_rank", "dcg", "mrr", "ndcg", "recall_all", "recall_any", "score_ranking",
    "session_recall", "tokenize", "turn_recall",
]

_EVIDENCE_KINDS = ("entries", "texts", "sessions", "turns")


@dataclass(frozen=True)
class Evidence:
    """Which journal entries hold the answer to a session's question (see the module doc)."""

    entries: tuple[str, ...] = ()
    """Entry ids (``j1``...)."""
    texts: tuple[str, ...] = ()
    """Substrings of gold entry texts (ignoring case)."""
    sessions: tuple[str, ...] = ()
    """Names of the sessions whose entries are gold (written then, or tagged with the name)."""
    turns: tuple[str, ...] = ()
    """Evidence messages, ``<session>#<position>`` (see the module doc)."""

    def __post_init__(self) -> None:
        for name in _EVIDENCE_KINDS:
            value = getattr(self, name)
            value = (value,) if isinstance(value, str) else tuple(value)
            if not all(isinstance(item, str) for item in value):
                raise TypeError(f"Evidence {name} must be strings")
            object.__setattr__(self, name, value)
        if not (self.entries or self.texts or self.sessions or self.turns):
            raise ValueError("Evidence needs entries, texts, sessions or turns")
        for turn in self.turns:
            name, _, position = turn.rpartition("#")
            if not name or not position.isdigit() or int(position) < 1:
                raise ValueError(f"Evidence turns are '<session>#<position>' (1-based), "
                                 f"got {turn!r}")

    def is_gold(self, entry_id: str, entry: Mapping[str, Any], origin: str) -> bool:
        """Whether the entry ``entry_id`` (written during session ``origin``) is gold."""
        if entry_id in self.entries:
            return True
        text = entry.get("text")
        if isinstance(text, str) and any(t.casefold() in text.casefold() for t in self.texts):
            return True
        return bool(self.sessions) and bool(set(self.sessions) & _entry_sessions(entry, origin))

    def to_dict(self) -> dict[str, list[str]]:
        """A JSON-ready dict (``Evidence(**data)`` loads it back)."""
        return {name: list(getattr(self, name)) for name in _EVIDENCE_KINDS}


def _entry_sessions(entry: Mapping[str, Any], origin: str) -> set[str]:
    tags = entry.get("tags")
    found = {tag for tag in tags if isinstance(tag, str)} if isinstance(tags, list) else set()
    if origin:
        found.add(origin)
    return found


def recall_any(ranking: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1.0 if any gold id is among the first ``k`` of ``ranking``, else 0.0."""
    return float(not set(ranking[:k]).isdisjoint(gold))


def recall_all(ranking: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1.0 if every gold id is among the first ``k`` of ``ranking``, else 0.0."""
    return float(set(ranking[:k]).issuperset(gold))


def dcg(relevances: Sequence[float], k: int) -> float:
    """LongMemEval's DCG@k: ``r1 + sum(r_i / log2(i) for i in 2..k)``."""
    values = list(relevances)[:k]
    if not values:
        return 0.0
    return values[0] + sum(value / math.log2(rank) for rank, value in enumerate(values[1:], 2))


def ndcg(ranking: Sequence[str], gold: Iterable[str], k: int,
         corpus_gold: int | None = None) -> float:
    """NDCG@k of ``ranking``: DCG(ranking) / DCG(ideal), the ideal ranking having ``corpus_gold``
    gold ids first (default: the number of gold ids). 0.0 when there is no gold id at all."""
    wanted = set(gold)
    ideal = dcg([1.0] * (len(wanted) if corpus_gold is None else corpus_gold), k)
    if ideal == 0:
        return 0.0
    return dcg([1.0 if item in wanted else 0.0 for item in ranking], k) / ideal


def mrr(ranking: Sequence[str], gold: Iterable[str]) -> float:
    """1 / (1-based rank of the first gold id in ``ranking``); 0.0 when there is none."""
    wanted = set(gold)
    return next((1.0 / rank for rank, item in enumerate(ranking, 1) if item in wanted), 0.0)


def session_recall(ranked_sessions: Sequence[Iterable[str]], gold: Iterable[str], k: int) -> float:
    """Share of ``gold`` sessions among the sessions of the first ``k`` ranked entries
    (``ranked_sessions[i]``: the sessions entry ``i`` belongs to)."""
    wanted = set(gold)
    if not wanted:
        return 0.0
    seen = set().union(*ranked_sessions[:k])
    return len(wanted & seen) / len(wanted)


def turn_recall(ranked_spans: Sequence[tuple[str, int, int] | None], gold: Iterable[str],
                k: int) -> float:
    """Share of ``gold`` turns (``<session>#<position>``) covered by the first ``k`` entries;
    ``ranked_spans[i]`` is ``(session, first, last)``, the messages the step that wrote entry
    ``i`` first showed the model (``None`` for an entry from before the run)."""
    wanted = set(gold)
    if not wanted:
        return 0.0
    shown: dict[str, list[tuple[int, int]]] = {}
    for span in ranked_spans[:k]:
        if span is not None:
            shown.setdefault(span[0], []).append((span[1], span[2]))
    covered = 0
    for turn in wanted:
        name, _, position = turn.rpartition("#")
        covered += any(first <= int(position) <= last for first, last in shown.get(name, ()))
    return covered / len(wanted)


def score_ranking(
    retriever: str, ranking: Sequence[str], evidence: Evidence,
    journal: Mapping[str, tuple[Mapping[str, Any], str]], k: int,
    spans: Mapping[str, tuple[str, int, int]] | None = None,
) -> RetrievalScore:
    """Score one ranking against ``evidence``. ``journal`` maps every entry id to ``(entry,
    origin session name)`` (so a gold entry never returned counts as missed); ``spans`` maps
    ids to the messages first shown by the step that wrote them (``turn_recall``)."""
    gold = [eid for eid, (entry, origin) in journal.items() if evidence.is_gold(eid, entry, origin)]
    ranking = list(dict.fromkeys(ranking))  # a repeated entry counts once, at its best rank
    scores: dict[str, float | None] = dict.fromkeys(("recall_any", "recall_all", "ndcg", "mrr"))
    if gold:
        scores.update(recall_any=recall_any(ranking, gold, k), ndcg=ndcg(ranking, gold, k),
                      recall_all=recall_all(ranking, gold, k), mrr=mrr(ranking, gold))
    seen = [_entry_sessions(*journal[eid]) if eid in journal else set() for eid in ranking]
    shown = [(spans or {}).get(eid) for eid in ranking]
    return RetrievalScore(
        retriever=retriever, k=k, gold=len(gold), returned=len(ranking), **scores,
        session_recall=session_recall(seen, evidence.sessions, k) if evidence.sessions else None,
        turn_recall=turn_recall(shown, evidence.turns, k) if evidence.turns else None,
    )


_WORD = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (``\\w+`` after ``casefold``)."""
    return _WORD.findall(text.casefold())


def bm25_rank(query: str, documents: Sequence[str], *, k1: float = 1.5, b: float = 0.75,
              limit: int | None = None) -> list[int]:
    """Indexes of ``documents`` ranked by Okapi BM25 for ``query``, best first: score(D, Q) = sum
    over distinct query terms t of IDF(t) * f(t, D) * (k1 + 1) / (f(t, D) + k1 * (1 - b + b *
    |D| / avgdl)), IDF(t) = ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5)) (f: count of t in D, |D|: its
    tokens, avgdl: their mean, N: documents, n(t): those containing t). Documents scoring 0 are
    left out; ties go to the later document (the newer entry), as the tool's own search orders.
    """
    docs = [Counter(tokenize(text)) for text in documents]
    if not docs:
        return []
    lengths = [sum(doc.values()) for doc in docs]
    average = sum(lengths) / len(docs) or 1.0
    idf = {}
    for term in dict.fromkeys(tokenize(query)):
        n = sum(1 for doc in docs if term in doc)
        idf[term] = math.log(1 + (len(docs) - n + 0.5) / (n + 0.5))
    scored = []
    for position, (doc, length) in enumerate(zip(docs, lengths, strict=True)):
        norm = k1 * (1 - b + b * length / average)
        score = sum(weight * doc[term] * (k1 + 1) / (doc[term] + norm)
                    for term, weight in idf.items() if term in doc)
        if score > 0:
            scored.append((score, position))
    scored.sort(key=lambda item: (-item[0], -item[1]))
    ranked = [position for _, position in scored]
    return ranked if limit is None else ranked[:limit]
