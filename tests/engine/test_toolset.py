"""One rule for every surface: the prompt describes exactly the tools the model is offered.

A :class:`Toolset` is what a surface offers; the prompt builder, the specs and the dispatcher
all take it, so a model is never told to call a tool it does not have. The specs are checked
against the ``openai`` SDK's own types and its strict-schema rules.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path

import pytest
from openai.lib._parsing._completions import validate_input_tools
from openai.lib._pydantic import _ensure_strict_json_schema
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter

from jupyter_agent_memory import (
    AgentMemory,
    MemoryConflictError,
    MemoryToolError,
    PromptBuilder,
    Toolset,
    provision,
)
from jupyter_agent_memory.engine.functions import dispatch, openai_tools

TOOLSETS = {
    "function calling": Toolset(),
    "with the profile tool": Toolset(profile="profile"),
    "an MCP host with file tools": Toolset(memory="mcp__agent-memory__memory", file_edits=True),
    "renamed, profile too": Toolset(memory="agent.memory", profile="agent.profile"),
}


@pytest.fixture
def agent(tmp_path: Path) -> AgentMemory:
    return AgentMemory.open(tmp_path / "agent")


def tools_named_in(prompt_text: str) -> set[str]:
    """Every tool the prompt tells the model to call: ``through `X```, ``with `X```."""
    return set(re.findall(r"(?:through|with) `([^`\s]+)`", prompt_text))


@pytest.mark.parametrize("tools", TOOLSETS.values(), ids=TOOLSETS.keys())
def test_the_prompt_names_only_offered_tools(agent: AgentMemory, tools: Toolset) -> None:
    prompt = PromptBuilder(tools=tools).build(agent)
    assert prompt.bootstrap  # a fresh agent: the bootstrap block is there too
    named = tools_named_in(prompt.text)
    assert tools.memory in named
    assert named <= set(tools.names(agent)), (named, tools.names(agent))
    # The specs and the dispatcher agree with the prompt on every name.
    assert [spec["function"]["name"] for spec in tools.openai(agent)] == tools.names(agent)
    for name in named:
        text = tools.dispatch(agent, name, {})
        assert "Unknown tool" not in text, (name, text)


def test_the_default_prompt_and_the_default_specs_agree(agent: AgentMemory) -> None:
    prompt = PromptBuilder().build(agent)
    assert [spec["function"]["name"] for spec in openai_tools(agent)] == ["memory"]
    assert tools_named_in(prompt.text) == {"memory"}
    assert "mcp__" not in prompt.text


def test_an_unknown_tool_lists_the_offered_names(agent: AgentMemory) -> None:
    assert dispatch(agent, "mcp__agent-memory__memory", {"action": "search"}) == (
        "Error: MCP error -32601: Unknown tool: mcp__agent-memory__memory; offered tools: memory"
    )
    provision("guide", agent)
    assert Toolset(profile="profile").dispatch(agent, "shell", {}) == (
        "Error: MCP error -32601: Unknown tool: shell; offered tools: memory, profile, "
        "product_info"
    )


def test_a_toolset_needs_two_distinct_valid_names() -> None:
    with pytest.raises(MemoryToolError, match="two different names"):
        Toolset(memory="memory", profile="memory")
    with pytest.raises(MemoryToolError, match="'profile tool name' must be one tool name"):
        Toolset(profile="pro file")
    with pytest.raises(MemoryToolError, match="'tool_name' must be one tool name"):
        Toolset(memory="memory`\n## Memories")
    with pytest.raises(MemoryToolError, match="contradicts the toolset"):
        PromptBuilder(tool_name="other", tools=Toolset())


# -- the profile tool ------------------------------------------------------------------------


def test_the_profile_tool_rewrites_soul_and_user_with_compare_and_swap(
    agent: AgentMemory,
) -> None:
    tools = Toolset(profile="profile")
    soul = "# Soul\n\nI am Pip, a patient research aide.\n"
    sha = hashlib.sha256(soul.encode()).hexdigest()
    text = tools.dispatch(agent, "profile", {"file": "soul", "content": soul})
    assert text == f"SOUL.md updated (sha256 {sha})."
    assert (agent.path / "SOUL.md").read_text() == soul
    user = "# User\n\nAda, Paris (Europe/Paris).\n"
    tools.dispatch(agent, "profile", json.dumps({"file": "user", "content": user}))
    assert agent.user == user
    # Compare-and-swap: the sha256 of the version being replaced, or nothing is written.
    stale = {"file": "soul", "content": "x\n", "expected_sha256": "0" * 64}
    with pytest.raises(MemoryConflictError):
        tools.call(agent, "profile", stale)
    assert agent.soul == soul
    again = tools.dispatch(
        agent, "profile", {"file": "soul", "content": soul + "More.\n", "expected_sha256": sha}
    )
    assert again.startswith("SOUL.md updated (sha256 ")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"content": "x"}, 'Unknown file "null", expected soul/user'),
        ({"file": "fact", "content": "x"}, 'Unknown file "fact", expected soul/user'),
        ({"file": "soul"}, "'content' is required for the profile tool"),
        ({"file": "soul", "content": ""}, "'content' is required for the profile tool"),
        ({"file": "user", "content": "x", "expected_sha256": 7}, "'expected_sha256' must be"),
        ({"file": "user", "content": "key sk-proj-" + "a1" * 24}, "credential"),
    ],
)
def test_bad_profile_calls_are_refused_and_write_nothing(
    agent: AgentMemory, arguments: dict[str, object], message: str
) -> None:
    before = (agent.soul, agent.user)
    text = Toolset(profile="profile").dispatch(agent, "profile", arguments)
    assert text.startswith("Error: MCP error -32602: ") and message in text, text
    assert (agent.soul, agent.user) == before


# -- OpenAI's strict mode and the Responses API ---------------------------------------------


def test_strict_specs_pass_the_openai_sdk_checks(agent: AgentMemory) -> None:
    provision("guide", agent)
    specs = Toolset(profile="profile", strict=True).openai(agent)
    assert [s["function"]["name"] for s in specs] == ["memory", "profile", "product_info"]
    adapter = TypeAdapter(ChatCompletionFunctionToolParam)
    for spec in specs:
        adapter.validate_python(spec)
        parameters = spec["function"]["parameters"]
        # The SDK's own strict transform has nothing left to change.
        strict = _ensure_strict_json_schema(copy.deepcopy(parameters), path=(), root={})
        assert strict == parameters
        assert parameters["additionalProperties"] is False
        assert parameters["required"] == list(parameters["properties"])
    validate_input_tools(specs)  # the SDK refuses any tool that is not strict
    with pytest.raises(ValueError, match="is not strict"):
        validate_input_tools(Toolset().openai(agent))


def test_responses_api_specs_have_the_sdk_shape(agent: AgentMemory) -> None:
    adapter = TypeAdapter(FunctionToolParam)
    for strict in (False, True):
        for spec in Toolset(profile="profile", strict=strict).responses(agent):
            adapter.validate_python(spec)
            assert spec["type"] == "function" and spec["strict"] is strict
            assert set(spec) == {"type", "name", "description", "parameters", "strict"}


def test_a_strict_model_fills_every_property_and_null_means_absent(agent: AgentMemory) -> None:
    tools = Toolset(strict=True)
    every = dict.fromkeys(tools.openai(agent)[0]["function"]["parameters"]["properties"])
    appended = tools.dispatch(agent, "memory", {**every, "action": "append", "text": "hello"})
    assert appended.startswith("Journal entry added at ")
    found = json.loads(tools.dispatch(agent, "memory", {**every, "action": "search"}))
    assert [entry["text"] for entry in found] == ["hello"]
    # A strict "update" fills "text" and "tags" with null too; only "content" counts.
    every_update = {**every, "action": "update", "content": "- a fact\n"}
    assert tools.dispatch(agent, "memory", every_update) == "Memory updated."
