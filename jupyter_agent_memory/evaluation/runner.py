"""Run a scenario: fresh prompt per session, a tool loop per user turn, records per session."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import functions
from .models import ChatModel, ModelTurn
from .results import EvaluationResult, SessionRecord, ToolCallRecord, TurnRecord
from .scenario import Scenario, SessionState

if TYPE_CHECKING:
    from .. import AgentMemory, Prompt

__all__ = ["EvaluationRunner", "run_scenario"]


def _journal_count(memory: AgentMemory) -> int:
    return sum(1 for _ in memory.entries())


class EvaluationRunner:
    """Replay scenarios against one agent folder with one model.

    Every session starts from a prompt freshly built by ``PromptBuilder(tool_name)`` from the
    agent folder (plus ``system.md`` in ``workspace``), so the only memory carried between
    sessions is what the model wrote through the tools. Each user turn runs a tool loop: the
    model's tool calls go through ``functions.run_tool`` (the same code path as
    ``dispatch``), results go back to the model, until it replies with text or
    ``max_tool_rounds`` rounds have passed.

    ``tool_name`` is the name the model sees for the memory tool, in the prompt and in the tool
    list (``memory`` for plain function calling; ``mcp__agent-memory__memory`` to mimic an MCP
    client). ``base_prompt`` stands in for the client's own base prompt when the workspace has no
    ``system.md``. ``config`` and ``has_user_instructions`` go to ``PromptBuilder.build``
    (``config={"bootstrap_completed": True}`` skips bootstrap mode).
    """

    def __init__(
        self,
        memory: AgentMemory | str | os.PathLike[str],
        model: ChatModel,
        *,
        tool_name: str = functions.MEMORY_TOOL_NAME,
        workspace: str | os.PathLike[str] | None = None,
        config: Mapping[str, Any] | None = None,
        has_user_instructions: bool = False,
        base_prompt: str | None = None,
        budget_tokens: int | None = None,
        max_tool_rounds: int = 8,
    ) -> None:
        from .. import AgentMemory, PromptBuilder

        if not isinstance(memory, AgentMemory):
            memory = AgentMemory.open(memory)
        if not callable(getattr(model, "complete", None)):
            raise TypeError(f"model must have a complete(messages, tools) method, got {model!r}")
        if max_tool_rounds < 1:
            raise ValueError("max_tool_rounds must be at least 1")
        self.memory = memory
        self.model = model
        self.tool_name = tool_name
        self.workspace = Path(workspace) if workspace is not None else None
        self.config = dict(config) if config is not None else None
        self.has_user_instructions = has_user_instructions
        self.base_prompt = base_prompt
        self.max_tool_rounds = max_tool_rounds
        self.builder = PromptBuilder(tool_name=tool_name, budget_tokens=budget_tokens)

    # The model sees the memory tool under ``tool_name``; the engine knows it as ``memory``.
    def _tools(self) -> list[dict[str, Any]]:
        tools = functions.openai_tools(self.memory)
        for tool in tools:
            if tool["function"]["name"] == functions.MEMORY_TOOL_NAME:
                tool["function"]["name"] = self.tool_name
        return tools

    def _call(self, name: str, arguments: Any) -> tuple[str, bool]:
        """Run one model tool call; ``(text, is_error)``."""
        if name == self.tool_name:
            return functions.run_tool(self.memory, functions.MEMORY_TOOL_NAME, arguments)
        if name == functions.MEMORY_TOOL_NAME:
            # The memory tool was offered under another name; calling it ``memory`` is the
            # model's mistake, reported like any unknown tool.
            offered = [tool["function"]["name"] for tool in self._tools()]
            return functions.error_text(functions.unknown_tool_error(name, offered)), True
        return functions.run_tool(self.memory, name, arguments)

    def build_prompt(self) -> Prompt:
        """Build the prompt a session would start from now."""
        import warnings

        with warnings.catch_warnings():
            # Budget overruns are recorded per session; no need to also warn every build.
            warnings.simplefilter("ignore")
            return self.builder.build(
                self.memory,
                workspace=self.workspace,
                config=self.config,
                has_user_instructions=self.has_user_instructions,
            )

    def _system_text(self, prompt: Prompt) -> str:
        if prompt.base is None and self.base_prompt:
            return f"{self.base_prompt.strip()}\n\n{prompt.text}"
        return prompt.text

    def _run_turn(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], user: str
    ) -> TurnRecord:
        messages.append({"role": "user", "content": user})
        record = TurnRecord(user=user, reply="")
        for _ in range(self.max_tool_rounds):
            turn: ModelTurn = self.model.complete(messages, tools)
            if not turn.tool_calls:
                record.reply = turn.text or ""
                messages.append({"role": "assistant", "content": record.reply})
                return record
            calls = []
            for number, call in enumerate(turn.tool_calls, 1):
                call.id = call.id or f"call_{len(messages)}_{number}"
                calls.append(
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments_json()},
                    }
                )
            messages.append({"role": "assistant", "content": turn.text, "tool_calls": calls})
            for call in turn.tool_calls:
                text, is_error = self._call(call.name, call.arguments)
                record.tool_calls.append(ToolCallRecord(call.name, call.arguments, text, is_error))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        record.note = f"stopped after {self.max_tool_rounds} tool rounds without a reply"
        return record

    def run(self, scenario: Scenario) -> EvaluationResult:
        """Run every session of ``scenario`` in order and return what happened.

        The agent folder is used as it is (run on a fresh folder for a clean experiment) and
        keeps everything the model wrote. An exception raised by the model (a network error,
        say) propagates and ends the run.
        """
        tools = self._tools()
        records = []
        prompt = self.build_prompt()
        for index, session in enumerate(scenario.sessions, 1):
            system = self._system_text(prompt)
            facts_before = self.memory.facts
            journal_before = _journal_count(self.memory)
            messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
            turns = [self._run_turn(messages, tools, user) for user in session.turns]
            facts_after = self.memory.facts
            new_entries = list(self.memory.entries())[journal_before:]
            next_prompt = self.build_prompt()
            state = SessionState(facts_after, new_entries, self._system_text(next_prompt))
            diff = "".join(
                difflib.unified_diff(
                    facts_before.splitlines(keepends=True),
                    facts_after.splitlines(keepends=True),
                    "FACT.md (before)",
                    "FACT.md (after)",
                )
            )
            records.append(
                SessionRecord(
                    index=index,
                    name=session.name,
                    system_prompt=system,
                    prompt_chars=len(system),
                    prompt_tokens=_approx_tokens(system, prompt),
                    prompt_sections=[(s.name, s.chars, s.tokens) for s in prompt.sections],
                    prompt_warnings=list(prompt.warnings),
                    bootstrap=prompt.bootstrap,
                    turns=turns,
                    facts_before=facts_before,
                    facts_after=facts_after,
                    facts_diff=diff,
                    new_entries=new_entries,
                    next_prompt=state.next_prompt,
                    outcomes=[expectation.check(state) for expectation in session.expect],
                )
            )
            prompt = next_prompt
            tools = self._tools()
        return EvaluationResult(
            scenario=scenario.name,
            model=str(getattr(self.model, "name", type(self.model).__name__)),
            agent_path=str(self.memory.path),
            sessions=records,
        )


def _approx_tokens(system: str, prompt: Prompt) -> int:
    if system == prompt.text:
        return prompt.tokens
    from ..prompt import approx_tokens

    return approx_tokens(system)


def run_scenario(
    memory: AgentMemory | str | os.PathLike[str],
    model: ChatModel,
    scenario: Scenario,
    **options: Any,
) -> EvaluationResult:
    """Shortcut for ``EvaluationRunner(memory, model, **options).run(scenario)``."""
    return EvaluationRunner(memory, model, **options).run(scenario)
