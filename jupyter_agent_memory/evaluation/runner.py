"""Run a scenario: fresh prompt per session, a tool loop per user turn, records per session."""

from __future__ import annotations

import difflib
import itertools
import json
import os
import time
import traceback
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from .. import AgentMemory, Prompt, PromptBuilder, __version__
from ..engine.functions import MEMORY_TOOL_NAME, PROFILE_TOOL_NAME, Toolset
from ..engine.prompt import Section, approx_tokens
from ..engine.sessions import record as record_session
from ..journal import format_timestamp
from .models import ChatModel, call_model, model_name
from .progress import make_progress
from .records import SearchRecord, SessionRecord, ToolCallRecord, TurnRecord
from .results import EvaluationResult
from .retrieval import bm25_rank, score_ranking
from .scenario import CLOSING_TURN, Scenario, Session, SessionState, session_names

__all__ = ["BASELINES", "EvaluationRunner", "SimulatedClock", "run_scenario"]

CLIENT_NAME = "jupyter-agent-memory evaluation"
"""The client name in the receipt of every session the runner starts (``AgentMemory.sessions``)."""
BASELINES = ("tool", "bm25")
"""The retrieval baselines scored next to the agent's own searches (see ``retrieval``)."""
AGENT_ALIAS = "/agent"
WORKSPACE_ALIAS = "/workspace"


def default_toolset(tool_name: str = MEMORY_TOOL_NAME) -> Toolset:
    """The runner's default tools, ``memory`` and ``profile``, named alike (same prefix)."""
    prefix = tool_name[: -len(MEMORY_TOOL_NAME)] if tool_name.endswith(MEMORY_TOOL_NAME) else ""
    return Toolset(memory=tool_name, profile=prefix + PROFILE_TOOL_NAME)


class SimulatedClock:
    """A clock for ``AgentMemory(clock=...)`` that only moves when told (``set``), plus ``step``
    per reading, so entries written in one session keep distinct, ordered times."""

    def __init__(self, start: datetime, step: timedelta = timedelta(seconds=1)) -> None:
        self.current = start if start.tzinfo else start.replace(tzinfo=timezone.utc)
        self.step = step

    def __call__(self) -> datetime:
        moment = self.current
        self.current = moment + self.step
        return moment

    def set(self, moment: datetime) -> None:
        """Jump to ``moment`` (earlier or later)."""
        self.current = moment

    def peek(self) -> datetime:
        """The time the next reading returns, without moving the clock."""
        return self.current


def _entry_key(entry: Mapping[str, Any]) -> str:
    return json.dumps(entry, sort_keys=True, ensure_ascii=False)


class _Journal:
    """Every journal entry the run has seen, with its id (``j1``...) and the session that
    wrote it, so rankings can be expressed as ids and scored against evidence."""

    def __init__(self, memory: AgentMemory) -> None:
        self.memory = memory
        self.ids: list[str] = []
        self.entries: dict[str, tuple[dict[str, Any], str]] = {}
        self.spans: dict[str, tuple[str, int, int]] = {}
        self.step: tuple[str, int, int] | None = None  # session, first and last message shown
        self.sync("")

    def sync(self, origin: str) -> None:
        """Register entries added since the last sync as written by ``origin``."""
        new = itertools.islice(enumerate(self.memory.entries()), len(self.ids), None)
        for position, entry in new:
            entry_id = f"j{position + 1}"
            self.ids.append(entry_id)
            self.entries[entry_id] = (entry, origin)
            if origin and self.step is not None:
                self.spans[entry_id] = self.step

    def ids_of(self, returned: Sequence[Mapping[str, Any]]) -> list[str]:
        """Ids of entries a search returned (newest first): equal entries map to the newest
        id not yet used in this ranking."""
        by_key: dict[str, list[str]] = {}
        for entry_id in self.ids:
            by_key.setdefault(_entry_key(self.entries[entry_id][0]), []).append(entry_id)
        ranking = []
        for entry in returned:
            candidates = by_key.get(_entry_key(entry))
            if candidates:
                ranking.append(candidates.pop())
        return ranking


class EvaluationRunner:
    """Replay scenarios against one agent folder with one model.

    Every session starts from a freshly built prompt, so only what the model wrote through
    ``tools`` (default ``memory`` and ``profile``; ``tool_name`` renames both) carries over;
    each user turn runs a tool loop of at most ``max_tool_rounds``. ``base_prompt``, ``config``
    and ``has_user_instructions`` shape the prompt, which names folders by ``path_aliases``. A
    transcript ending with the assistant gets ``closing_turn``; a dated scenario runs on a
    ``SimulatedClock``. Every session start is recorded in the agent's sessions log (client
    ``CLIENT_NAME``); an error in a turn is recorded, and ``on_error="stop"`` ends the run there.
    """

    def __init__(
        self, memory: AgentMemory | str | os.PathLike[str], model: ChatModel, *,
        tool_name: str | None = None, tools: Toolset | None = None,
        workspace: str | os.PathLike[str] | None = None, config: Mapping[str, Any] | None = None,
        has_user_instructions: bool = False, base_prompt: str | None = None,
        budget_tokens: int | None = None, max_tool_rounds: int = 8, on_error: str = "continue",
        retrieval_k: int = 5, baselines: Sequence[str] = BASELINES,
        clock_step: timedelta = timedelta(seconds=1), announce_date: bool = True,
        path_aliases: Mapping[str | os.PathLike[str], str] | None = None,
        closing_turn: str | None = CLOSING_TURN,
    ) -> None:
        if not isinstance(memory, AgentMemory):
            memory = AgentMemory.open(memory)
        if not callable(getattr(model, "complete", None)):
            raise TypeError(f"model must have a complete(messages, tools) method, got {model!r}")
        _check_count("max_tool_rounds", max_tool_rounds)
        _check_on_error(on_error)
        _check_count("retrieval_k", retrieval_k)
        if isinstance(baselines, str):  # one baseline, not one per character
            baselines = (baselines,)
        unknown = [name for name in baselines if name not in BASELINES]
        if unknown:
            raise ValueError(f"Unknown baselines {unknown}, expected some of {list(BASELINES)}")
        if tools is None:
            tools = default_toolset(tool_name or MEMORY_TOOL_NAME)
        elif not isinstance(tools, Toolset):
            raise TypeError(f"tools must be a Toolset, got {tools!r}")
        elif tool_name is not None and tool_name != tools.memory:
            raise ValueError(
                f"tool_name {tool_name!r} contradicts the toolset's memory tool "
                f"{tools.memory!r}: give one of them"
            )
        if closing_turn is not None and (not isinstance(closing_turn, str) or not closing_turn):
            raise ValueError(f"closing_turn must be a non-empty text or None, got {closing_turn!r}")
        self.memory = memory
        self.model = model
        self.tools = tools
        self.tool_name = tools.memory
        self.closing_turn = closing_turn
        # Fixed now, so every session reads the same system.md and shows the same alias.
        self.workspace = Path(os.path.realpath(workspace if workspace is not None else os.getcwd()))
        self.config = dict(config) if config is not None else None
        self.has_user_instructions = has_user_instructions
        self.base_prompt = base_prompt
        self.max_tool_rounds = max_tool_rounds
        self.on_error = on_error
        self.retrieval_k = retrieval_k
        self.baselines = tuple(baselines)
        self.clock_step = clock_step
        self.announce_date = announce_date
        if path_aliases is None:
            path_aliases = {self.workspace: WORKSPACE_ALIAS, memory.path: AGENT_ALIAS}
        self.path_aliases = dict(path_aliases)
        self.builder = PromptBuilder(tools=tools, budget_tokens=budget_tokens,
                                     path_aliases=self.path_aliases)
        self._clock: SimulatedClock | None = None
        self._journal: _Journal | None = None
        self._searches: list[SearchRecord] = []

    def _record_search(self, arguments: Any, text: str, origin: str) -> None:
        """Record the ranking of a successful memory tool call that was a search."""
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except ValueError:
                return
        if not isinstance(arguments, dict) or arguments.get("action") != "search":
            return
        assert self._journal is not None
        try:
            returned = json.loads(text) if text.startswith("[") else []
        except ValueError:
            returned = []
        self._journal.sync(origin)
        ranking = self._journal.ids_of([e for e in returned if isinstance(e, dict)])
        query = arguments.get("query")
        rest = {key: value for key, value in arguments.items() if key != "action"}
        self._searches.append(SearchRecord("agent", query if isinstance(query, str) else "",
                                           ranking, rest))

    def build_prompt(self) -> Prompt:
        """Build the prompt a session would start from now."""
        with warnings.catch_warnings():
            # Budget overruns are recorded per session; no need to also warn every build.
            warnings.simplefilter("ignore")
            if self.config is None and not self.has_user_instructions:
                # As every surface does: the agent's template supplies its settings.
                return self.builder.build_session(self.memory, workspace=self.workspace)
            return self.builder.build(self.memory, workspace=self.workspace, config=self.config,
                                      has_user_instructions=self.has_user_instructions)

    def _given(self, prompt: Prompt, dated: bool) -> Prompt:
        """``prompt`` as the model gets it: the stand-in base prompt and date line as sections."""
        sections = list(prompt.sections)
        base, context = prompt.base, prompt.context
        if base is None and self.base_prompt:
            base = self.base_prompt.strip()
            sections.insert(0, _builder_text("system", base))
        if dated and self.announce_date and self._clock is not None:
            moment = self._clock.peek()
            date = f"Current date: {moment:%Y-%m-%d %H:%M} UTC ({moment:%A})."
            context += f"\n\n{date}"
            sections.append(_builder_text("date", date))
        if len(sections) == len(prompt.sections):
            return prompt
        return replace(prompt, base=base, context=context, sections=tuple(sections))

    def _now_text(self) -> str:
        return format_timestamp(self._clock.peek() if self._clock else datetime.now(timezone.utc))

    def _run_turn(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], user: str,
                  origin: str, fixed_reply: str | None = None) -> TurnRecord:
        start = len(messages)
        messages.append({"role": "user", "content": user})
        record = TurnRecord(user=user, reply="", assistant=fixed_reply, at=self._now_text())
        try:
            self._tool_loop(messages, tools, record, origin)
        except Exception:
            record.error = traceback.format_exc()
        if fixed_reply is not None:
            # The conversation goes on with the transcript's reply, so a fixed history stays
            # fixed whatever the model said.
            last = messages[-1]
            if last.get("role") == "assistant" and not last.get("tool_calls"):
                last["content"] = fixed_reply
            else:
                messages.append({"role": "assistant", "content": fixed_reply})
        record.messages = json.loads(json.dumps(messages[start:]))  # a copy, as sent later
        assert self._journal is not None
        self._journal.sync(origin)
        return record

    def _tool_loop(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                   record: TurnRecord, origin: str) -> None:
        for _ in range(self.max_tool_rounds):
            turn = call_model(self.model, messages, tools, record.model_calls)
            if not turn.tool_calls:
                record.reply = turn.text or ""
                messages.append({"role": "assistant", "content": record.reply})
                return
            record.tool_rounds += 1
            for number, call in enumerate(turn.tool_calls, 1):
                call.id = call.id or f"call_{len(messages)}_{number}"
            calls = [{"id": call.id, "type": "function",
                      "function": {"name": call.name, "arguments": call.arguments_json()}}
                     for call in turn.tool_calls]
            # A string, never null: llama-cpp-python and others refuse a null content.
            messages.append({"role": "assistant", "content": turn.text or "", "tool_calls": calls})
            for call in turn.tool_calls:
                text, is_error = self.tools.run(self.memory, call.name, call.arguments)
                if call.name == self.tools.memory and not is_error:
                    self._record_search(call.arguments, text, origin)
                record.tool_calls.append(ToolCallRecord(call.name, call.arguments, text, is_error))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        record.note = f"stopped after {self.max_tool_rounds} tool rounds without a reply"

    def _conversation(self, session: Session) -> list[tuple[str | None, str | None, int]]:
        """``(user, fixed reply, position of the user message)``, 1-based in the transcript (or
        the turns); a transcript's leading assistant text has no user (position 0)."""
        if session.transcript is None:
            return [(user, None, n) for n, user in enumerate(session.turns, 1)]
        pairs: list[tuple[str | None, str | None, int]] = []
        for position, message in enumerate(session.transcript, 1):
            if message["role"] == "user":
                pairs.append((message["content"], None, position))
            elif pairs:
                user, reply, asked = pairs[-1]
                joined = message["content"] if reply is None else f"{reply}\n\n{message['content']}"
                pairs[-1] = (user, joined, asked)
            else:
                pairs.append((None, message["content"], 0))
        return pairs

    def _baseline_searches(self, session: Session) -> list[SearchRecord]:
        assert self._journal is not None
        query = session.question
        found = []
        for name in self.baselines:
            if name == "tool":
                returned = list(self.memory.search(query=query, limit=self.retrieval_k))
                ranking = self._journal.ids_of(returned)
            else:
                ids = list(self._journal.ids)
                texts = [str(self._journal.entries[i][0].get("text", "")) for i in ids]
                ranking = [ids[i] for i in bm25_rank(query, texts, limit=self.retrieval_k)]
            found.append(SearchRecord(name, query, ranking, {"limit": self.retrieval_k}))
        return found

    def _run_session(self, index: int, name: str, session: Session, dated: bool,
                     on_error: str) -> tuple[SessionRecord, bool]:
        """One session's record, and whether an error happened in it."""
        assert self._journal is not None
        if session.date is not None and self._clock is not None:
            assert isinstance(session.date, datetime)
            self._clock.set(session.date)
        started = time.perf_counter()
        self._searches = []
        record = SessionRecord(
            index=index, name=session.name, system_prompt="", prompt_chars=0, prompt_tokens=0,
            prompt_sections=[], prompt_warnings=[], bootstrap=False, turns=[], facts_before="",
            facts_after="", facts_diff="", new_entries=[], next_prompt="", outcomes=[],
            started=self._now_text(),
        )
        failed = False
        try:
            self._journal.sync("")
            known = len(self._journal.ids)
            gold_journal = dict(self._journal.entries)
            baselines = self._baseline_searches(session) if session.evidence else []
            prompt = self.build_prompt()
            given = self._given(prompt, dated)
            system = given.text
            # A simulated clock must not move for the receipt, or every later time would shift.
            moment = self._clock.peek() if self._clock is not None else None
            client = {"name": CLIENT_NAME, "version": __version__}
            try:
                record.session_id = record_session(self.memory, given, client=client)["session_id"]
            finally:
                if self._clock is not None and moment is not None:
                    self._clock.set(moment)
            record.system_prompt = system
            record.prompt_chars = len(system)
            record.prompt_tokens = prompt.tokens if system == prompt.text else approx_tokens(system)
            record.prompt_sections = [(s.name, s.chars, s.tokens) for s in prompt.sections]
            record.prompt_warnings = list(prompt.warnings)
            record.bootstrap = prompt.bootstrap
            record.facts_before = self.memory.facts
            tools = self.tools.openai(self.memory)
            messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
            shown = 0  # transcript messages the model has been shown so far
            for user, fixed, asked in self._conversation(session):
                if user is None:
                    messages.append({"role": "assistant", "content": fixed or ""})
                    continue
                self._journal.step = (name, shown + 1, asked)
                shown = asked
                turn = self._run_turn(messages, tools, user, name, fixed)
                record.turns.append(turn)
                if turn.error:
                    failed = True
                    if on_error == "stop":
                        break
            else:  # no stop: a transcript ending with the assistant gets the closing turn
                transcript = session.transcript or []
                ends_with_reply = bool(transcript) and transcript[-1]["role"] == "assistant"
                if self.closing_turn is not None and ends_with_reply:
                    self._journal.step = (name, shown + 1, len(transcript))
                    record.closing = self._run_turn(messages, tools, self.closing_turn, name)
                    failed = failed or bool(record.closing.error)
            self._journal.step = None
            record.facts_after = self.memory.facts
            self._journal.sync(name)
            # Turns and searches register entries as they appear: all since the start count.
            record.new_entry_ids = self._journal.ids[known:]
            record.new_entries = [self._journal.entries[i][0] for i in record.new_entry_ids]
            record.facts_diff = "".join(difflib.unified_diff(
                record.facts_before.splitlines(keepends=True),
                record.facts_after.splitlines(keepends=True), "FACT.md (before)", "FACT.md (after)",
            ))
            record.next_prompt = self._given(self.build_prompt(), False).text
            record.searches = [*self._searches, *baselines]
            if session.evidence is not None:
                agent = [eid for s in self._searches for eid in s.results]
                rankings = [("agent", agent)] + [(s.retriever, s.results) for s in baselines]
                record.retrieval = [
                    score_ranking(retriever, ranking, session.evidence, gold_journal,
                                  self.retrieval_k, self._journal.spans)
                    for retriever, ranking in rankings
                ]
        except Exception:
            record.error = traceback.format_exc()
            failed = True
        agent_searches = [s for s in record.searches if s.retriever == "agent"]
        state = SessionState(record.facts_after, record.new_entries, record.next_prompt,
                             record.turns, agent_searches, closing=record.closing)
        record.outcomes = [expectation.check(state) for expectation in session.expect]
        record.judge_calls = list(state.judge_calls)
        failed = failed or any(outcome.error for outcome in record.outcomes)
        record.elapsed_s = time.perf_counter() - started
        return record, failed

    def run(self, scenario: Scenario, *, on_error: str | None = None,
            progress: Any = None) -> EvaluationResult:
        """Run every session of ``scenario`` in order on the agent folder as it is. ``progress``
        is ``True`` for a one-line display, or a function ``progress(done, total, text)``."""
        if not isinstance(scenario, Scenario):
            raise TypeError(
                f"run takes a Scenario (Scenario.from_dict builds one from plain data), "
                f"got {type(scenario).__name__}"
            )
        if not scenario.sessions:
            raise ValueError(f"Scenario {scenario.name!r} has no sessions to run")
        on_error = self.on_error if on_error is None else on_error
        _check_on_error(on_error)
        previous_clock = self.memory.clock
        if scenario.dated:
            first = scenario.start or next(s.date for s in scenario.sessions if s.date)
            assert isinstance(first, datetime)
            self._clock = SimulatedClock(first, self.clock_step)
            self.memory.clock = self._clock
        names = session_names(scenario.sessions)
        display = make_progress(progress, len(scenario.sessions), scenario.name, "sessions")
        records: list[SessionRecord] = []
        stopped = False
        try:
            self._journal = _Journal(self.memory)
            for index, (name, session) in enumerate(zip(names, scenario.sessions, strict=True), 1):
                display.update(index - 1, name)
                record, failed = self._run_session(index, name, session, scenario.dated, on_error)
                records.append(record)
                if failed and on_error == "stop":
                    stopped = True
                    break
            display.update(len(records), "stopped on an error" if stopped else "done")
            display.close()
            journal = [
                {"id": entry_id, "session": origin, "entry": entry}
                for entry_id, (entry, origin) in self._journal.entries.items()
            ]
        finally:
            self.memory.clock = previous_clock
            self._clock = None
        return EvaluationResult(scenario.name, model_name(self.model), str(self.memory.path),
                                records, dict(scenario.labels), stopped, journal)


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number, at least 1, got {value!r}")


def _check_on_error(on_error: str) -> None:
    if on_error not in ("continue", "stop"):
        raise ValueError(f"on_error must be 'continue' or 'stop', got {on_error!r}")


def _builder_text(name: str, text: str) -> Section:
    return Section(name, None, len(text), approx_tokens(text), text=text)


def run_scenario(memory: AgentMemory | str | os.PathLike[str], model: ChatModel,
                 scenario: Scenario, *, progress: Any = None, **options: Any) -> EvaluationResult:
    """Shortcut for ``EvaluationRunner(memory, model, **options).run(scenario)``."""
    return EvaluationRunner(memory, model, **options).run(scenario, progress=progress)
