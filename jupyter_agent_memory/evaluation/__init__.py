"""Evaluate memory behaviour: replay multi-session scenarios and see what the agent learned.

Each session of a ``Scenario`` starts from a fresh prompt and runs a tool loop with a model;
the result records per session the prompt, replies, tool calls, FACT.md diff, new journal
entries, searches, tokens, latency, errors and expectation outcomes::

    from jupyter_agent_memory.evaluation import (
        FactContains, ReplyContains, Rule, Scenario, ScriptedModel, Session, recall, remember,
        run_scenario)

    model = ScriptedModel([
        Rule(r"my name is (\\w+)", calls=[remember("- The user's name is {1}.")], reply="Hi!"),
        Rule(r"what's my name", reply=recall(r"user's name is (\\w+)", "You are {1}.", "?")),
    ])
    scenario = Scenario([Session(["Hi, my name is Ada."], expect=[FactContains("Ada")]),
                         Session(["What's my name?"], expect=[ReplyContains("Ada")])])
    result = run_scenario("./eval-agent", model, scenario)  # then result.plot(), .save(path)

``load_longmemeval`` reads benchmark items, ``run_matrix`` runs models x scenarios x seeds into
one table, ``leave_one_fact_out`` shows which FACT.md lines help. Models implement ``complete(
messages, tools) -> ModelTurn``; ``OpenAIChatModel`` needs ``"jupyter-agent-memory[eval]"``.
"""

from __future__ import annotations

from .ablation import FactAblation, leave_one_fact_out, run_scores
from .expectations import (
    ABSTAIN_PATTERNS,
    Check,
    Expectation,
    ExpectationOutcome,
    FactContains,
    JournalContains,
    JudgeError,
    Judgement,
    LongMemEvalJudge,
    ModelJudge,
    PromptContains,
    ReplyAbstains,
    ReplyAnswers,
    ReplyContains,
    ReplyJudged,
    ReplyMatches,
    SessionState,
    ToolCalled,
)
from .longmemeval import (
    JUDGE_ONLY_TYPES,
    SAMPLE_PATH,
    load_longmemeval,
    load_longmemeval_sample,
    longmemeval_scenario,
)
from .matrix import MatrixResult, MatrixRun, rerun, run_matrix
from .models import (
    CachedModel,
    ChatModel,
    ModelCallRecord,
    ModelResponseError,
    ModelTurn,
    OpenAIChatModel,
    Rule,
    ScriptContext,
    ScriptedModel,
    ToolCall,
    call_tool,
    journal,
    recall,
    remember,
    search,
)
from .policies import FactsPolicy, JournalPolicy
from .progress import Progress
from .records import (
    RetrievalScore,
    SearchRecord,
    SessionRecord,
    ToolCallRecord,
    TurnRecord,
    count_facts,
)
from .results import EvaluationResult
from .retrieval import Evidence, bm25_rank, mrr, ndcg, recall_all, recall_any, session_recall
from .runner import BASELINES, EvaluationRunner, SimulatedClock, default_toolset, run_scenario
from .scenario import CLOSING_TURN, Scenario, Session, parse_date
from .stats import Comparison, Interval, bootstrap_interval, paired_comparison

__all__ = [
    "ABSTAIN_PATTERNS", "BASELINES", "CLOSING_TURN", "CachedModel", "JUDGE_ONLY_TYPES",
    "ChatModel", "Check", "Comparison", "EvaluationResult", "EvaluationRunner", "Evidence",
    "Expectation", "ExpectationOutcome", "FactAblation", "FactContains", "FactsPolicy", "Interval",
    "JournalContains", "JournalPolicy", "JudgeError", "Judgement", "LongMemEvalJudge",
    "MatrixResult", "MatrixRun", "ModelCallRecord", "ModelJudge", "ModelResponseError",
    "ModelTurn", "OpenAIChatModel", "Progress", "PromptContains", "ReplyAbstains", "ReplyAnswers",
    "ReplyContains", "ReplyJudged", "ReplyMatches", "RetrievalScore", "Rule", "SAMPLE_PATH",
    "Scenario", "ScriptContext", "ScriptedModel", "SearchRecord", "Session", "SessionRecord",
    "SessionState", "SimulatedClock", "ToolCall", "ToolCallRecord", "ToolCalled", "TurnRecord",
    "bm25_rank", "bootstrap_interval", "call_tool", "count_facts", "default_toolset", "journal",
    "leave_one_fact_out", "load_longmemeval", "load_longmemeval_sample", "longmemeval_scenario",
    "mrr", "ndcg", "paired_comparison", "parse_date", "recall", "recall_all", "recall_any",
    "remember", "rerun", "run_matrix", "run_scenario", "run_scores", "search", "session_recall",
]
