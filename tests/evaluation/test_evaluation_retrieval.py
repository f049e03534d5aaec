"""Retrieval metrics on hand-made rankings, BM25, gold evidence, and scoring inside real runs."""

from __future__ import annotations

import math
import random
from datetime import datetime, timezone

import pytest

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.evaluation import (
    Evidence,
    Rule,
    Scenario,
    ScriptedModel,
    Session,
    bm25_rank,
    journal,
    mrr,
    ndcg,
    recall_all,
    recall_any,
    run_scenario,
    search,
    session_recall,
)
from jupyter_agent_memory.evaluation.retrieval import dcg, score_ranking, tokenize

DONE = {"bootstrap_completed": True}


# ------------------------------------------------------------------ metrics, exact values


def test_recall_any_and_all_on_a_hand_made_ranking():
    ranking = ["d3", "d1", "d5", "d2"]
    gold = {"d1", "d2"}
    assert recall_any(ranking, gold, 1) == 0.0
    assert recall_any(ranking, gold, 2) == 1.0
    assert recall_all(ranking, gold, 3) == 0.0
    assert recall_all(ranking, gold, 4) == 1.0
    assert recall_any([], gold, 5) == 0.0
    # LongMemEval's conventions for an empty gold set: any() is false, all() is true.
    assert recall_any(ranking, set(), 5) == 0.0
    assert recall_all(ranking, set(), 5) == 1.0


def test_ndcg_uses_longmemeval_discount():
    # DCG = r1 + sum_{i>=2} r_i / log2(i): ranks 1 and 2 both count fully.
    assert dcg([1, 1, 1], 3) == 1 + 1 + 1 / math.log2(3)
    assert dcg([], 3) == 0.0
    ranking = ["d3", "d1", "d5", "d2"]
    gold = {"d1", "d2"}
    # @3: relevances 0,1,0 -> DCG 1; ideal 1,1 -> 2.
    assert ndcg(ranking, gold, 3) == 0.5
    # @4: 0,1,0,1 -> 1 + 1/log2(4) = 1.5; ideal 2.
    assert ndcg(ranking, gold, 4) == 0.75
    # A gold item first and second is perfect.
    assert ndcg(["d1", "d2", "d9"], gold, 5) == 1.0
    # Three gold items in the corpus, two retrieved at ranks 1 and 3:
    # DCG = 1 + 1/log2(3); ideal = 1 + 1 + 1/log2(3).
    assert ndcg(["a", "x", "b"], {"a", "b", "c"}, 3) == pytest.approx(
        (1 + 1 / math.log2(3)) / (2 + 1 / math.log2(3)), abs=1e-15
    )
    assert ndcg(["a"], set(), 3) == 0.0


def test_mrr_and_session_recall():
    assert mrr(["d3", "d1", "d2"], {"d1", "d2"}) == 0.5
    assert mrr(["d1"], {"d1"}) == 1.0
    assert mrr(["d4", "d5", "d6", "d1"], {"d1"}) == 0.25
    assert mrr(["d4"], {"d1"}) == 0.0
    ranked = [{"s1"}, {"s3"}, {"s1", "s2"}]
    assert session_recall(ranked, {"s1", "s2"}, 1) == 0.5
    assert session_recall(ranked, {"s1", "s2"}, 3) == 1.0
    assert session_recall(ranked, {"s1", "s2", "s4", "s5"}, 3) == 0.5
    assert session_recall(ranked, set(), 3) == 0.0


def _longmemeval_formulas(rankings, correct_docs, corpus_ids, k):
    """LongMemEval's evaluate_retrieval, written out from its definition for this test:
    ``rankings`` index ``corpus_ids`` (a full permutation), gold given as corpus ids."""
    recalled = {corpus_ids[i] for i in rankings[:k]}
    any_ = float(any(doc in recalled for doc in correct_docs))
    all_ = float(all(doc in recalled for doc in correct_docs))
    relevance = [1.0 if doc in correct_docs else 0.0 for doc in corpus_ids]
    ranked = [relevance[i] for i in rankings[:k]]
    ideal = sorted(relevance, reverse=True)[:k]

    def gain(values):
        if not values:
            return 0.0
        return values[0] + sum(v / math.log2(i) for i, v in enumerate(values[1:], start=2))

    best = gain(ideal)
    return any_, all_, (gain(ranked) / best if best else 0.0)


def test_scores_match_longmemeval_formulas_on_random_rankings():
    rng = random.Random(7)
    for _ in range(300):
        size = rng.randint(1, 12)
        corpus = [f"s{i}" for i in range(size)]
        gold = rng.sample(corpus, rng.randint(1, size))
        order = list(range(size))
        rng.shuffle(order)
        k = rng.randint(1, 12)
        ranking = [corpus[i] for i in order]
        expected = _longmemeval_formulas(order, gold, corpus, k)
        ours = (recall_any(ranking, gold, k), recall_all(ranking, gold, k), ndcg(ranking, gold, k))
        assert ours[:2] == expected[:2]
        assert ours[2] == pytest.approx(expected[2], abs=1e-12)


# ---------------------------------------------------------------------------------- BM25


def test_tokenize_and_bm25_ranking():
    assert tokenize("Renewed my PASSPORT, at the town-hall!") == [
        "renewed",
        "my",
        "passport",
        "at",
        "the",
        "town",
        "hall",
    ]
    docs = [
        "passport passport",
        "passport and a much longer sentence about several other things entirely",
        "nothing relevant here",
    ]
    # Same term frequency matters more than length; a document without the term is left out.
    assert bm25_rank("passport", docs) == [0, 1]
    # Ties go to the later (newer) document.
    assert bm25_rank("cat", ["a cat", "a cat"]) == [1, 0]
    assert bm25_rank("anything", []) == []
    assert bm25_rank("passport", docs, limit=1) == [0]
    # A rarer term outweighs a common one (IDF).
    docs = ["the town hall", "the passport office", "the town square", "the town park"]
    assert bm25_rank("town passport", docs)[0] == 1


def test_bm25_score_value_by_formula():
    # One document containing the term once, in a corpus of two equal-length documents:
    # idf = ln(1 + (2 - 1 + 0.5) / (1 + 0.5)) = ln 2; tf part = 1 * 2.5 / (1 + 1.5) = 1.
    # So the first document scores ln 2 > 0 and the second 0 (left out).
    assert bm25_rank("alpha", ["alpha beta", "gamma delta"]) == [0]


# ------------------------------------------------------------------------------- evidence


def test_evidence_rules():
    with pytest.raises(ValueError, match="needs entries, texts, sessions or turns"):
        Evidence()
    with pytest.raises(TypeError, match="must be strings"):
        Evidence(entries=(1,))
    assert Evidence(sessions="s1").sessions == ("s1",)
    entry = {"ts": "t", "tags": ["Trip"], "text": "Renewed my passport"}
    assert Evidence(entries=("j3",)).is_gold("j3", entry, "")
    assert not Evidence(entries=("j3",)).is_gold("j4", entry, "")
    assert Evidence(texts=("PASSPORT",)).is_gold("j4", entry, "")
    assert Evidence(sessions=("chat",)).is_gold("j4", entry, "chat")
    assert Evidence(sessions=("Trip",)).is_gold("j4", entry, "other")
    assert not Evidence(sessions=("chat",)).is_gold("j4", entry, "other")


def test_score_ranking_counts_missed_gold_and_dedupes():
    journal_map = {
        "j1": ({"text": "renewed my passport"}, "s1"),
        "j2": ({"text": "bought bread"}, "s2"),
        "j3": ({"text": "passport photo taken"}, "s1"),
    }
    score = score_ranking("agent", ["j2", "j2", "j3"], Evidence(sessions=("s1",)), journal_map, 5)
    assert (score.gold, score.returned) == (2, 2)
    assert (score.recall_any, score.recall_all, score.mrr) == (1.0, 0.0, 0.5)
    assert score.ndcg == pytest.approx(1 / 2)  # 0 + 1/log2(2) over the ideal 1 + 1
    assert score.session_recall == 1.0
    assert score.metrics() == {
        "recall_any@5": 1.0,
        "recall_all@5": 0.0,
        "ndcg@5": 0.5,
        "mrr": 0.5,
        "session_recall@5": 1.0,
        "turn_recall@5": None,
    }
    # No gold entry in the journal: entry metrics are undefined, session recall is 0.
    empty = score_ranking("agent", [], Evidence(sessions=("s9",)), journal_map, 5)
    assert (empty.recall_any, empty.ndcg, empty.mrr, empty.session_recall) == (
        None,
        None,
        None,
        0.0,
    )


# ------------------------------------------------------------------------ inside a run


def passport_model() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(r"^note: (.*)", calls=[journal("{1}", ["log"])], reply="Logged."),
            Rule(r"renew my passport", calls=[search(query="passport")], reply="{result}"),
        ]
    )


def passport_scenario() -> Scenario:
    return Scenario(
        [
            Session(
                ["note: Renewed my passport at the town hall"],
                name="errands",
                date="2026-03-02T10:00",
            ),
            Session(
                ["note: Bought bread", "note: Passport photos are in the drawer"],
                name="chores",
                date="2026-03-05T18:00",
            ),
            Session(
                ["When did I renew my passport?"],
                name="question",
                date="2026-03-09T09:00",
                evidence=Evidence(texts=("renewed my passport",), sessions=("errands",)),
            ),
        ],
        name="passport",
    )


def test_runs_record_searches_and_score_agent_and_baselines(tmp_path):
    result = run_scenario(tmp_path / "agent", passport_model(), passport_scenario(), config=DONE)
    assert [item["id"] for item in result.journal] == ["j1", "j2", "j3"]
    assert [item["session"] for item in result.journal] == ["errands", "chores", "chores"]
    assert result.sessions[1].new_entry_ids == ["j2", "j3"]
    question = result.sessions[2]
    agent, tool, bm25 = question.searches
    assert (agent.retriever, agent.query, agent.results) == ("agent", "passport", ["j3", "j1"])
    assert agent.arguments == {"query": "passport"}
    assert (tool.retriever, tool.query, tool.results) == (
        "tool",
        "When did I renew my passport?",
        [],
    )
    assert bm25.retriever == "bm25" and bm25.results[0] == "j1"
    assert set(bm25.results) == {"j1", "j3"}  # "bread" shares no word with the question
    scores = {score.retriever: score for score in question.retrieval}
    assert scores["agent"].metrics() == {
        "recall_any@5": 1.0,
        "recall_all@5": 1.0,
        "ndcg@5": 1.0,  # gold j1 at rank 2: 1/log2(2) = 1, ideal 1
        "mrr": 0.5,
        "session_recall@5": 1.0,
        "turn_recall@5": None,
    }
    assert scores["tool"].metrics() == {
        "recall_any@5": 0.0,
        "recall_all@5": 0.0,
        "ndcg@5": 0.0,
        "mrr": 0.0,
        "session_recall@5": 0.0,
        "turn_recall@5": None,
    }
    assert (scores["bm25"].mrr, scores["bm25"].session_recall) == (1.0, 1.0)
    # Sessions without evidence are not scored, and baselines only run where there is some.
    assert result.sessions[0].retrieval == [] and result.sessions[0].searches == []
    assert result.retrieval_summary()["agent"]["mrr"] == 0.5
    frame = result.retrieval_dataframe()
    assert list(frame["retriever"]) == ["agent", "tool", "bm25"]
    assert list(frame["mrr"]) == [0.5, 0.0, 1.0]
    tidy = result.tidy()
    row = tidy[(tidy.session == 3) & (tidy.metric == "agent.mrr")]
    assert list(row.value) == [0.5]


def test_baselines_and_k_are_configurable(tmp_path):
    result = run_scenario(
        tmp_path / "agent",
        passport_model(),
        passport_scenario(),
        config=DONE,
        baselines=["bm25"],
        retrieval_k=1,
    )
    question = result.sessions[2]
    assert [s.retriever for s in question.searches] == ["agent", "bm25"]
    agent = question.retrieval[0]
    assert agent.k == 1
    assert agent.metrics()["recall_any@1"] == 0.0  # the newest match (j3) is not gold
    with pytest.raises(ValueError, match="Unknown baselines"):
        run_scenario(tmp_path / "b", passport_model(), passport_scenario(), baselines=["dense"])
    with pytest.raises(ValueError, match="retrieval_k"):
        run_scenario(tmp_path / "b", passport_model(), passport_scenario(), retrieval_k=0)


def test_entries_present_before_the_run_get_ids_and_no_session(tmp_path):
    mem = AgentMemory.open(tmp_path / "agent")
    mem.append("Renewed my passport last year", ["old"])
    scenario = Scenario(
        [Session(["When did I renew my passport?"], evidence=Evidence(sessions=("old",)))],
        start=datetime(2026, 1, 1, tzinfo=timezone.utc),
    )
    result = run_scenario(mem, passport_model(), scenario, config=DONE)
    assert result.journal[0]["id"] == "j1" and result.journal[0]["session"] == ""
    # Tagged with the gold session's name, so it is gold.
    assert result.sessions[0].retrieval[0].gold == 1
    assert result.sessions[0].retrieval[0].recall_all == 1.0
