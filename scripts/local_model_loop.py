"""Does a model learn across sessions? The two-session loop against any OpenAI-compatible server.

Session 1 tells the model a fact and asks it to remember it; session 2 starts from a fresh
prompt built from the agent folder and asks for the fact. The script prints what the model
wrote (tool calls and their results, the FACT.md diff, journal entries), session 2's reply,
every model call (time, errors, retries) and whether session 2 recalled the fact. It exits
with 0 when it did, 1 when it did not, 2 when a model call failed.

    python scripts/local_model_loop.py --base-url http://127.0.0.1:8000/v1 --model local

llama-cpp-python serves on port 8000 (``python -m llama_cpp.server --model M.gguf``), Ollama
on 11434 (``--base-url http://127.0.0.1:11434/v1 --model llama3.2``), vLLM on 8000. A CPU
server is slow: the defaults here are one attempt (``--max-retries 0``: a retry of a timed-out
request sends it again) and a ten-minute timeout. A tiny model passing is a smoke test of the
wire path and the tools, not evidence about memory. Needs ``pip install
"jupyter-agent-memory[eval]"``; nothing here is part of the test suite's network use (its
tests drive it against a local stub server).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from jupyter_agent_memory.evaluation import (
    EvaluationResult,
    OpenAIChatModel,
    ReplyAnswers,
    Scenario,
    Session,
    run_scenario,
)

FACT = "my favourite colour is teal"
QUESTION = "What is my favourite colour?"
ANSWER = "teal"


def loop_scenario(fact: str = FACT, question: str = QUESTION, answer: str = ANSWER) -> Scenario:
    """The two sessions: tell and ask to remember, then ask in a fresh session."""
    return Scenario(
        [
            Session([f"Please remember that {fact}."], name="tell"),
            Session([question], expect=[ReplyAnswers(answer)], name="ask"),
        ],
        name="two-session loop",
    )


def run_loop(
    model: Any,
    folder: str | Path,
    *,
    fact: str = FACT,
    question: str = QUESTION,
    answer: str = ANSWER,
    bootstrap: bool = False,
) -> EvaluationResult:
    """Run the loop on the agent folder ``folder`` (fresh or not) and return the result.

    Without ``bootstrap`` the prompt skips bootstrap mode, so a small model is not asked to
    set up a persona before it gets to the fact.
    """
    config = None if bootstrap else {"bootstrap_completed": True}
    return run_scenario(
        folder, model, loop_scenario(fact, question, answer), config=config, workspace=folder
    )


def report(result: EvaluationResult, out: TextIO) -> int:
    """Print what happened; the exit code (0 recalled, 1 not recalled, 2 a call failed)."""
    tell, ask = result.sessions
    print(f"Model: {result.model}", file=out)
    print("\n== Session 1: what the model wrote", file=out)
    for turn in tell.all_turns:
        print(f"user: {turn.user}", file=out)
        for call in turn.tool_calls:
            status = "error" if call.is_error else "ok"
            print(f"  tool {call.name}({call.arguments_text()}) -> [{status}] {call.result}",
                  file=out)
        print(f"model: {turn.reply}", file=out)
    print(tell.facts_diff or "(FACT.md unchanged)", file=out)
    for entry in tell.new_entries:
        print(f"journal: {entry.get('text')!r} tags {entry.get('tags')}", file=out)
    print("\n== Session 2: recall from a fresh prompt", file=out)
    turn = ask.turns[0]
    print(f"user: {turn.user}\nmodel: {turn.reply}", file=out)
    print("\n== Model calls", file=out)
    failed = False
    for session in result.sessions:
        for call in session.model_calls:
            line = (
                f"session {session.index}: {call.latency_s:.2f} s, "
                f"{call.input_tokens} in / {call.output_tokens} out"
                f"{' (estimated)' if call.estimated else ''}, finish {call.finish_reason or '-'}"
            )
            if call.retries:
                line += f", {call.retries} retr{'y' if call.retries == 1 else 'ies'}"
            if call.error:
                failed = True
                line += f", FAILED: {call.error}"
            print(line, file=out)
    recalled = ask.passed and not result.errors
    print(f"\nRecalled: {'yes' if recalled else 'no'}", file=out)
    if failed:
        return 2
    return 0 if recalled else 1


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", required=True, help="the model name the server expects")
    parser.add_argument("--api-key", default="unused", help="local servers ignore it")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    parser.add_argument("--max-retries", type=int, default=0, help="attempts after the first")
    parser.add_argument("--folder", help="agent folder (default: a new temporary one)")
    parser.add_argument("--fact", default=FACT, help=f"what to remember (default: {FACT!r})")
    parser.add_argument("--question", default=QUESTION, help="what session 2 asks")
    parser.add_argument("--answer", default=ANSWER, help="what session 2 must answer")
    parser.add_argument("--bootstrap", action="store_true", help="keep bootstrap mode on")
    args = parser.parse_args(argv)
    folder = Path(args.folder or tempfile.mkdtemp(prefix="agent-memory-loop-")) / "agent"
    model = OpenAIChatModel(
        args.base_url,
        args.api_key,
        args.model,
        timeout=args.timeout,
        max_retries=args.max_retries,
        temperature=0,
    )
    result = run_loop(
        model,
        folder,
        fact=args.fact,
        question=args.question,
        answer=args.answer,
        bootstrap=args.bootstrap,
    )
    stream = out or sys.stdout
    code = report(result, stream)
    print(f"Agent folder: {folder}", file=stream)
    return code


if __name__ == "__main__":
    sys.exit(main())
