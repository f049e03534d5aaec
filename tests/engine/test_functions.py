"""Function-calling specs and ``dispatch``: real engine, real files, exact texts."""

from __future__ import annotations

import json
import os
import re

import jsonschema
import pytest

from jupyter_agent_memory import MEMORY_TOOL, AgentMemory, provision
from jupyter_agent_memory.engine.functions import (
    PRODUCT_INFO_TOOL,
    anthropic_tools,
    available_tools,
    dispatch,
    error_text,
    openai_tools,
    run_tool,
)

TS = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z"

# The shapes the two APIs accept for one tool, written out from their documentation.
OPENAI_TOOL_SHAPE = {
    "type": "object",
    "required": ["type", "function"],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "required": ["name", "description", "parameters"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
                "description": {"type": "string", "minLength": 1},
                "parameters": {"type": "object"},
            },
        },
    },
}
ANTHROPIC_TOOL_SHAPE = {
    "type": "object",
    "required": ["name", "description", "input_schema"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
        "description": {"type": "string", "minLength": 1},
        "input_schema": {
            "type": "object",
            "required": ["type"],
            "properties": {"type": {"const": "object"}},
        },
    },
}


@pytest.fixture
def mem(tmp_path):
    return AgentMemory.open(tmp_path / "agent")


def test_openai_spec_has_the_tool_shape_and_the_engine_schema():
    spec = openai_tools()[0]
    jsonschema.validate(spec, OPENAI_TOOL_SHAPE)
    assert spec["function"]["name"] == "memory"
    assert spec["function"]["description"] == MEMORY_TOOL["description"]
    assert spec["function"]["parameters"] == MEMORY_TOOL["input_schema"]
    assert "will this still matter in 6 months?" in spec["function"]["description"]
    # The parameters are themselves a valid JSON schema.
    jsonschema.Draft202012Validator.check_schema(spec["function"]["parameters"])


def test_anthropic_spec_has_the_tool_shape_and_the_engine_schema():
    spec = anthropic_tools()[0]
    jsonschema.validate(spec, ANTHROPIC_TOOL_SHAPE)
    assert spec == {
        "name": "memory",
        "description": MEMORY_TOOL["description"],
        "input_schema": MEMORY_TOOL["input_schema"],
    }
    jsonschema.Draft202012Validator.check_schema(spec["input_schema"])


def test_specs_are_copies_so_callers_cannot_change_the_engine_schema():
    spec = openai_tools()[0]
    spec["function"]["parameters"]["required"].append("content")
    anthropic_tools()[0]["input_schema"]["properties"].clear()
    assert MEMORY_TOOL["input_schema"]["required"] == ["action"]
    assert "content" in MEMORY_TOOL["input_schema"]["properties"]


@pytest.mark.parametrize(
    "arguments",
    [
        {"action": "update", "content": "- a fact\n"},
        {"action": "append", "text": "x", "tags": ["a", "b"]},
        {"action": "search", "query": "x", "tag": "a", "limit": 5, "since": "2026-01-01"},
    ],
)
def test_valid_calls_validate_against_the_parameters_schema(arguments):
    jsonschema.validate(arguments, openai_tools()[0]["function"]["parameters"])


@pytest.mark.parametrize(
    "arguments", [{}, {"action": "delete"}, {"action": "append", "tags": "x"}, {"action": 1}]
)
def test_invalid_calls_fail_the_parameters_schema(arguments):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(arguments, anthropic_tools()[0]["input_schema"])


def test_product_info_spec_is_a_valid_schema_in_both_shapes():
    jsonschema.validate(openai_tools()[0], OPENAI_TOOL_SHAPE)
    from jupyter_agent_memory.engine.functions import to_anthropic, to_openai

    jsonschema.validate(to_openai(PRODUCT_INFO_TOOL), OPENAI_TOOL_SHAPE)
    jsonschema.validate(to_anthropic(PRODUCT_INFO_TOOL), ANTHROPIC_TOOL_SHAPE)
    schema = PRODUCT_INFO_TOOL["input_schema"]
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate({"source": "manifest", "section": "all"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"section": "all"}, schema)


def test_plain_agent_offers_only_memory(mem):
    assert [tool["name"] for tool in available_tools(mem)] == ["memory"]
    assert [tool["function"]["name"] for tool in openai_tools(mem)] == ["memory"]
    assert [tool["name"] for tool in anthropic_tools(mem)] == ["memory"]


def test_provisioned_guide_agent_offers_product_info(mem):
    provision("guide", mem)
    assert [tool["name"] for tool in anthropic_tools(mem)] == ["memory", "product_info"]
    overview = json.loads(dispatch(mem, "product_info", {"source": "manifest"}))
    assert set(overview) >= {"runtimeVersion", "manifestVersion", "sections"}
    from jupyter_agent_memory.__about__ import __version__

    assert overview["runtimeVersion"] == __version__


def test_dispatch_update_append_search_with_dicts_and_json_text(mem):
    assert dispatch(mem, "memory", {"action": "update", "content": "- likes tea\n"}) == (
        "Memory updated."
    )
    assert (mem.path / "memory" / "FACT.md").read_text() == "- likes tea\n"
    appended = dispatch(mem, "memory", '{"action": "append", "text": "met Ada", "tags": ["x"]}')
    assert re.fullmatch(rf"Journal entry added at {TS}\.", appended)
    found = json.loads(dispatch(mem, "memory", '{"action": "search", "query": "ADA"}'))
    assert [(e["text"], e["tags"]) for e in found] == [("met Ada", ["x"])]
    assert dispatch(mem, "memory", {"action": "search", "query": "nobody"}) == (
        "No matching journal entries found."
    )


def test_dispatch_search_without_journal(mem):
    assert dispatch(mem, "memory", b'{"action": "search"}') == "No journal entries found."


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        (
            "memory",
            {"action": "delete"},
            'Error: MCP error -32602: Unknown action "delete", expected update/append/search',
        ),
        (
            "memory",
            {},
            'Error: MCP error -32602: Unknown action "", expected update/append/search',
        ),
        (
            "memory",
            {"action": "update", "content": ""},
            "Error: MCP error -32602: 'content' is required for update action",
        ),
        (
            "memory",
            '{"action": "append"}',
            "Error: MCP error -32602: 'text' is required for append action",
        ),
        (
            "memory",
            '{"action": "append", "text": ',
            "Error: MCP error -32602: Tool arguments are not valid JSON: "
            "Expecting value at line 1 column 30",
        ),
        (
            "memory",
            "[1, 2]",
            "Error: MCP error -32602: Tool arguments must be a JSON object, got an array",
        ),
        (
            "memory",
            42,
            "Error: MCP error -32602: Tool arguments must be a JSON object, got a number",
        ),
        # Cherry Studio: the agent-memory MCP server answers an unknown tool with -32601.
        (
            "shell",
            {"cmd": "ls"},
            "Error: MCP error -32601: Unknown tool: shell; offered tools: memory",
        ),
        (
            "product_info",
            {"source": "manifest"},
            "Error: MCP error -32601: Unknown tool: product_info; offered tools: memory",
        ),
    ],
)
def test_dispatch_bad_calls_return_error_text_and_write_nothing(mem, name, arguments, expected):
    assert dispatch(mem, name, arguments) == expected
    assert run_tool(mem, name, arguments) == (expected, True)
    assert not (mem.path / "memory" / "FACT.md").exists()
    assert not (mem.path / "memory" / "JOURNAL.jsonl").exists()


def test_dispatch_empty_arguments_mean_no_arguments(mem):
    expected = 'Error: MCP error -32602: Unknown action "", expected update/append/search'
    assert dispatch(mem, "memory", None) == expected
    assert dispatch(mem, "memory", "  ") == expected


def test_dispatch_reports_a_symlinked_fact_file(mem, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("keep me\n")
    os.symlink(outside, mem.path / "memory" / "FACT.md")
    text = dispatch(mem, "memory", {"action": "update", "content": "- new\n"})
    assert text.startswith("Error: MCP error -32603: ")
    assert "FACT.md" in text
    assert outside.read_text() == "keep me\n"


def test_dispatch_turns_unexpected_exceptions_into_internal_errors(mem, monkeypatch):
    def broken(args):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(mem, "call_tool", broken)
    assert dispatch(mem, "memory", {"action": "search"}) == (
        "Error: MCP error -32603: disk on fire"
    )


def test_error_text_formats():
    from jupyter_agent_memory import MemoryConflictError, MemoryToolError

    assert error_text(MemoryToolError("bad", -32602)) == "Error: MCP error -32602: bad"
    conflict = MemoryConflictError("FACT.md", "a" * 64, "b" * 64)
    assert error_text(conflict) == f"Error: MCP error -32603: {conflict.message}"
    assert error_text(KeyError()) == "Error: MCP error -32603: KeyError"
    assert error_text(ValueError("nope")) == "Error: MCP error -32603: nope"


def test_dispatch_stays_up_on_hostile_text(mem) -> None:
    half_emoji = {"action": "append", "text": "half \ud83d emoji"}
    text = dispatch(mem, "memory", half_emoji)
    assert text.startswith("Error: MCP error -32602: 'text' is not valid Unicode text")
    text = dispatch(mem, "memory", '{"action": "update", "content": "x\\udc00"}')
    assert text == (
        "Error: MCP error -32602: 'content' is not valid Unicode text: lone surrogate "
        "U+DC00 at position 1"
    )
    big = {"action": "update", "content": "y" * (1024 * 1024 + 1)}
    assert dispatch(mem, "memory", big) == (
        "Error: MCP error -32602: 'content' is too large: 1048577 bytes, the limit is "
        "1048576 bytes"
    )
    assert dispatch(mem, "memory", {"action": "append", "text": "still fine"}).startswith(
        "Journal entry added at "
    )
    assert not (mem.path / "memory" / "FACT.md").exists()
