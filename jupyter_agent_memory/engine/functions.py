"""Function calling: the ``memory`` tool for any chat API that takes JSON-schema tools.

The engine owns the tool (its schema, rules and result texts live in ``MEMORY_TOOL`` and
``AgentMemory.call_tool``); this module only reshapes the spec for the two common tool formats
and routes a model's tool call back to the engine::

    from jupyter_agent_memory import AgentMemory
    from jupyter_agent_memory.engine.functions import dispatch, openai_tools

    mem = AgentMemory.open("./demo-agent")
    response = client.chat.completions.create(model=..., messages=..., tools=openai_tools(mem))
    for call in response.choices[0].message.tool_calls or []:
        text = dispatch(mem, call.function.name, call.function.arguments)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": text})

``dispatch`` never raises for a bad call: an unknown tool, arguments that are not JSON or not a
JSON object, and every engine error come back as text of the form
``Error: MCP error <code>: <message>`` -- exactly what the MCP server returns for the same call --
so a tool loop can hand it to the model and carry on.

This module is light on purpose (standard library only): the MCP server and the evaluation
harness import it for the shared error formatting.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, MemoryToolError
from .templates import PRODUCT_INFO_TOOL

if TYPE_CHECKING:
    from .store import AgentMemory

__all__ = [
    "MEMORY_TOOL_NAME",
    "PRODUCT_INFO_TOOL",
    "PRODUCT_INFO_TOOL_NAME",
    "anthropic_tool",
    "anthropic_tools",
    "available_tools",
    "call",
    "dispatch",
    "error_text",
    "openai_tool",
    "openai_tools",
    "run_tool",
    "to_anthropic",
    "to_openai",
    "unknown_tool_error",
]

log = logging.getLogger(__name__)

MEMORY_TOOL_NAME = "memory"
PRODUCT_INFO_TOOL_NAME = PRODUCT_INFO_TOOL["name"]


def error_text(error: BaseException) -> str:
    """Format an error the way every tool surface reports it to a model.

    A ``MemoryToolError`` keeps its own code and message; any other exception is an internal
    error (``-32603``) carrying its message (or its class name when the message is empty).
    The result is ``Error: MCP error <code>: <message>``, the text the MCP server puts in an
    ``isError`` result, so a model sees the same words whichever way it reached the engine.
    """
    if isinstance(error, MemoryToolError):
        code, message = error.code, error.message
    else:
        code, message = INTERNAL_ERROR, str(error) or type(error).__name__
    return f"Error: MCP error {code}: {message}"


def _neutral_memory_tool() -> dict[str, Any]:
    from .tool import MEMORY_TOOL

    return MEMORY_TOOL


def to_openai(tool: dict[str, Any]) -> dict[str, Any]:
    """Reshape a neutral tool spec (``name``, ``description``, ``input_schema``) for OpenAI.

    Returns ``{"type": "function", "function": {"name", "description", "parameters"}}``, the
    shape the Chat Completions API (and every OpenAI-compatible server) takes in ``tools``.
    The schema is deep-copied so callers may modify the result freely.
    """
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool["description"],
            "parameters": copy.deepcopy(tool["input_schema"]),
        },
    }


def to_anthropic(tool: dict[str, Any]) -> dict[str, Any]:
    """Reshape a neutral tool spec for Anthropic's Messages API.

    Returns ``{"name", "description", "input_schema"}`` with the schema deep-copied.
    """
    return {
        "name": tool["name"],
        "description": tool["description"],
        "input_schema": copy.deepcopy(tool["input_schema"]),
    }


def openai_tool() -> dict[str, Any]:
    """The ``memory`` tool as an OpenAI ``{"type": "function", "function": {...}}`` dict."""
    return to_openai(_neutral_memory_tool())


def anthropic_tool() -> dict[str, Any]:
    """The ``memory`` tool as an Anthropic ``{"name", "description", "input_schema"}`` dict."""
    return to_anthropic(_neutral_memory_tool())


def _has_product_info(memory: AgentMemory) -> bool:
    from .templates import manifest_path_for

    return manifest_path_for(memory) is not None


def available_tools(memory: AgentMemory | None = None) -> list[dict[str, Any]]:
    """The neutral specs of the tools offered for ``memory``.

    Always ``memory``; ``product_info`` too when ``memory`` is given and its agent came from a
    template with a product manifest (checked on every call, so provisioning later is seen).
    """
    tools = [_neutral_memory_tool()]
    if memory is not None and _has_product_info(memory):
        tools.append(PRODUCT_INFO_TOOL)
    return tools


def openai_tools(memory: AgentMemory | None = None) -> list[dict[str, Any]]:
    """``available_tools(memory)`` in OpenAI's format, ready for the ``tools`` parameter."""
    return [to_openai(tool) for tool in available_tools(memory)]


def anthropic_tools(memory: AgentMemory | None = None) -> list[dict[str, Any]]:
    """``available_tools(memory)`` in Anthropic's format, ready for the ``tools`` parameter."""
    return [to_anthropic(tool) for tool in available_tools(memory)]


def _parse_arguments(arguments: Any) -> dict[str, Any]:
    """Turn a model's arguments into a dict, or raise ``MemoryToolError`` (-32602) saying why."""
    if arguments is None:
        # Some APIs send no arguments at all for a call without parameters.
        return {}
    if isinstance(arguments, (str, bytes, bytearray)):
        text = arguments.decode("utf-8", "replace") if not isinstance(arguments, str) else arguments
        if not text.strip():
            return {}
        try:
            arguments = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MemoryToolError(
                f"Tool arguments are not valid JSON: {exc.msg} at line {exc.lineno} "
                f"column {exc.colno}",
                INVALID_PARAMS,
            ) from None
    if not isinstance(arguments, dict):
        raise MemoryToolError(
            f"Tool arguments must be a JSON object, got {_json_type(arguments)}", INVALID_PARAMS
        )
    return arguments


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if value is None:
        return "null"
    return type(value).__name__


def unknown_tool_error(name: object, offered: Sequence[str] = ()) -> MemoryToolError:
    """The error for a call to a tool that is not offered (shared by MCP and ``dispatch``).

    The reference's text and JSON-RPC's "method not found" code: ``-32601``
    ``Unknown tool: <name>``. ``offered`` is accepted for callers that list the tools.
    """
    return MemoryToolError(f"Unknown tool: {name}", METHOD_NOT_FOUND)


def call(memory: AgentMemory, name: str, arguments: dict[str, Any]) -> str:
    """Run one tool call against the engine and return its text; errors are raised.

    ``arguments`` go to the engine unchanged. Raises ``MemoryToolError`` for an unknown tool
    (or ``product_info`` on an agent without a manifest) and whatever the engine raises.
    Both the MCP server and ``dispatch`` route calls through here.
    """
    if name == MEMORY_TOOL_NAME:
        return memory.call_tool(arguments)
    if name == PRODUCT_INFO_TOOL_NAME and _has_product_info(memory):
        from .templates import product_info

        return product_info(memory, arguments)
    raise unknown_tool_error(name, [tool["name"] for tool in available_tools(memory)])


def run_tool(memory: AgentMemory, name: str, arguments: Any) -> tuple[str, bool]:
    """Run one tool call and return ``(text, is_error)``; never raises.

    The one place where a tool call becomes the text a model sees: the engine's result as is,
    or ``error_text(error)`` for any failure (unknown tool, arguments that are not a JSON object
    or a JSON text of one, engine errors, unexpected exceptions). The MCP server and
    ``dispatch`` both use it, so both report identical texts.
    """
    try:
        return call(memory, name, _parse_arguments(arguments)), False
    except MemoryToolError as exc:  # the engine's one error family, I/O failures included
        return error_text(exc), True
    except Exception as exc:  # a bug, not an engine error: logged, and the tool loop goes on
        log.warning("tool %r failed unexpectedly", name, exc_info=True)
        return error_text(exc), True


def dispatch(memory: AgentMemory, name: str, arguments: dict[str, Any] | str | None) -> str:
    """Run a model's tool call and return the text to send back to the model. Never raises.

    ``name`` is the tool name the model used (``memory``, or ``product_info`` when the agent has
    a product manifest). ``arguments`` is a dict or the JSON string most APIs deliver; ``None``
    or an empty string mean no arguments. The engine's result text is returned as is; any
    failure -- an unknown tool, arguments that are not JSON or not an object, an engine error,
    an unexpected exception -- is returned as ``Error: MCP error <code>: <message>``
    (see ``error_text``), so a tool loop can pass it to the model instead of crashing.
    Use ``run_tool`` to also learn whether the call failed.
    """
    return run_tool(memory, name, arguments)[0]
