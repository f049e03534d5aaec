"""The tools a surface offers a model, and the one way their calls reach the engine.

A :class:`Toolset` (``memory``, opt-in ``profile``, ``product_info`` when the template ships a
manifest, host file edits) is what the prompt describes, the specs offered and the router of
calls, so the prompt never names a tool the model lacks. ``dispatch`` never raises: a failure
is ``Error: MCP error <code>: <message>``, as MCP returns it. Module helpers use ``Toolset()``."""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, MemoryToolError
from .templates import PRODUCT_INFO_TOOL, manifest_path_for, product_info
from .tool import MEMORY_TOOL, PROFILE_TOOL, call_profile_tool

if TYPE_CHECKING:
    from .store import AgentMemory

__all__ = [
    "MEMORY_TOOL_NAME", "PRODUCT_INFO_TOOL", "PRODUCT_INFO_TOOL_NAME", "PROFILE_TOOL_NAME",
    "Toolset", "anthropic_tools", "available_tools", "call", "dispatch", "error_text",
    "openai_tools", "run_tool", "to_anthropic", "to_openai", "unknown_tool_error",
]

log = logging.getLogger(__name__)

MEMORY_TOOL_NAME = MEMORY_TOOL["name"]
PROFILE_TOOL_NAME = PROFILE_TOOL["name"]
PRODUCT_INFO_TOOL_NAME = PRODUCT_INFO_TOOL["name"]


def error_text(error: BaseException) -> str:
    """``Error: MCP error <code>: <message>``, as every tool surface reports an error to a model
    (any exception but a ``MemoryToolError`` is an internal error, -32603)."""
    if isinstance(error, MemoryToolError):
        code, message = error.code, error.message
    else:
        code, message = INTERNAL_ERROR, str(error) or type(error).__name__
    return f"Error: MCP error {code}: {message}"


def to_openai(tool: dict[str, Any], *, strict: bool = False) -> dict[str, Any]:
    """Reshape a neutral tool spec (``name``, ``description``, ``input_schema``) for OpenAI's
    Chat Completions; ``strict``: under :func:`strict_schema`, with ``"strict": true``."""
    schema = tool["input_schema"]
    parameters = strict_schema(schema) if strict else copy.deepcopy(schema)
    function = {"name": tool["name"], "description": tool["description"], "parameters": parameters}
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def to_responses(tool: dict[str, Any], *, strict: bool = False) -> dict[str, Any]:
    """Reshape a neutral tool spec for OpenAI's Responses API (a flat function tool):
    ``{"type": "function", "name", "description", "parameters", "strict"}``."""
    return {"type": "function", **to_openai(tool, strict=strict)["function"], "strict": strict}


def to_anthropic(tool: dict[str, Any]) -> dict[str, Any]:
    """Reshape a neutral tool spec for Anthropic's Messages API (the schema deep-copied)."""
    schema = copy.deepcopy(tool["input_schema"])
    return {"name": tool["name"], "description": tool["description"], "input_schema": schema}


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` under OpenAI's strict rules: every property required, optional ones nullable
    (a strict toolset drops ``null`` arguments), ``additionalProperties: false``, no minimum."""
    required = set(schema.get("required", ()))
    properties = {}
    for name, spec in schema["properties"].items():
        spec = {k: copy.deepcopy(v) for k, v in spec.items() if k != "minimum"}
        if name not in required:
            spec["type"] = [spec["type"], "null"]
            if "enum" in spec:
                spec["enum"] = [*spec["enum"], None]
        properties[name] = spec
    return {
        "type": "object", "properties": properties, "required": list(properties),
        "additionalProperties": False,
    }


#: A tool name as APIs and MCP clients spell them (``mcp__agent-memory__memory``): it is placed
#: in the prompt builder's own text, outside every guarded block, so it is one name and no more.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,127}")


def check_tool_name(value: object, role: str = "memory") -> str:
    """``value`` when it is one tool name as APIs spell them, else -32602 naming ``role``."""
    if not isinstance(value, str) or not _TOOL_NAME.fullmatch(value):
        field = "tool_name" if role == "memory" else f"{role} tool name"
        raise MemoryToolError(
            f"'{field}' must be one tool name (letters, digits, '_', '-', '.', ':', '/'; "
            f"at most 128 characters), got {value!r}"
        )
    return value


@dataclass(frozen=True)
class Toolset:
    """The tools one surface offers a model, by the names it sees: ``profile`` (None: not
    offered) where it has no file tools; ``file_edits``: its host's tools edit SOUL.md and
    USER.md; ``strict``: OpenAI's strict specs. A product manifest adds ``product_info``."""

    memory: str = MEMORY_TOOL_NAME
    profile: str | None = None
    file_edits: bool = False
    strict: bool = False

    def __post_init__(self) -> None:
        check_tool_name(self.memory, "memory")
        if self.profile is not None:
            check_tool_name(self.profile, "profile")
            if self.profile == self.memory:
                raise MemoryToolError(
                    "The memory and profile tools need two different names", INVALID_PARAMS
                )

    @property
    def can_write_persona(self) -> bool:
        """Whether a model on this surface can write SOUL.md and USER.md at all."""
        return self.file_edits or self.profile is not None

    def specs(self, memory: AgentMemory | None = None) -> list[dict[str, Any]]:
        """The neutral specs offered for ``memory``, named as the model sees them."""
        tools = [{**MEMORY_TOOL, "name": self.memory}]
        if self.profile is not None:
            tools.append({**PROFILE_TOOL, "name": self.profile})
        if memory is not None and manifest_path_for(memory) is not None:
            tools.append(PRODUCT_INFO_TOOL)
        return tools

    def names(self, memory: AgentMemory | None = None) -> list[str]:
        """The names of the offered tools."""
        return [tool["name"] for tool in self.specs(memory)]

    def openai(self, memory: AgentMemory | None = None) -> list[dict[str, Any]]:
        """The offered tools for the Chat Completions API's ``tools`` parameter."""
        return [to_openai(tool, strict=self.strict) for tool in self.specs(memory)]

    def responses(self, memory: AgentMemory | None = None) -> list[dict[str, Any]]:
        """The offered tools for the Responses API's ``tools`` parameter."""
        return [to_responses(tool, strict=self.strict) for tool in self.specs(memory)]

    def anthropic(self, memory: AgentMemory | None = None) -> list[dict[str, Any]]:
        """The offered tools for Anthropic's Messages API."""
        return [to_anthropic(tool) for tool in self.specs(memory)]

    def call(self, memory: AgentMemory, name: str, arguments: dict[str, Any]) -> str:
        """Run one call of an offered tool; errors are raised (see :func:`run_tool`)."""
        if self.strict:
            arguments = {k: v for k, v in arguments.items() if v is not None}
        if name == self.memory:
            return memory.call_tool(arguments)
        if name == self.profile:
            return call_profile_tool(memory, arguments)
        if name == PRODUCT_INFO_TOOL_NAME and manifest_path_for(memory) is not None:
            return product_info(memory, arguments)
        raise unknown_tool_error(name, self.names(memory))

    def run(self, memory: AgentMemory, name: str, arguments: Any) -> tuple[str, bool]:
        """Run one call; ``(text, is_error)``, a failure as ``error_text(error)``, never raised."""
        try:
            return self.call(memory, name, _parse_arguments(arguments)), False
        except Exception as exc:  # the loop goes on
            if not isinstance(exc, MemoryToolError):  # a bug: I/O failures are MemoryToolErrors
                log.warning("tool %r failed unexpectedly", name, exc_info=True)
            return error_text(exc), True

    def dispatch(self, memory: AgentMemory, name: str, arguments: Any) -> str:
        """Run a model's tool call and return the text to send back to it; never raises.
        ``arguments`` is a dict or a JSON string; ``None`` or an empty string mean none."""
        return self.run(memory, name, arguments)[0]


#: What ``PromptBuilder()`` describes and the module-level helpers below offer.
FUNCTION_CALLING = Toolset()


def available_tools(memory: AgentMemory | None = None) -> list[dict[str, Any]]:
    """The neutral specs of the default toolset's tools for ``memory``."""
    return FUNCTION_CALLING.specs(memory)


def openai_tools(memory: AgentMemory | None = None) -> list[dict[str, Any]]:
    """The default toolset in OpenAI's format, ready for the ``tools`` parameter."""
    return FUNCTION_CALLING.openai(memory)


def anthropic_tools(memory: AgentMemory | None = None) -> list[dict[str, Any]]:
    """The default toolset in Anthropic's format, ready for the ``tools`` parameter."""
    return FUNCTION_CALLING.anthropic(memory)


# JSON's name for a Python value's type; bool before int, as a bool is an int.
_JSON_TYPES = (
    (bool, "a boolean"), ((int, float), "a number"), (str, "a string"),
    ((list, tuple), "an array"), (type(None), "null"),
)


def _parse_arguments(arguments: Any) -> dict[str, Any]:
    """Turn a model's arguments into a dict, or raise ``MemoryToolError`` (-32602) saying why."""
    if arguments is None:  # some APIs send none for a call without parameters
        return {}
    if isinstance(arguments, (str, bytes, bytearray)):
        text = arguments.decode("utf-8", "replace") if not isinstance(arguments, str) else arguments
        if not text.strip():
            return {}
        try:
            arguments = json.loads(text)
        except json.JSONDecodeError as exc:
            # json's "Invalid control character at" names the place only in str(exc).
            reason = exc.msg.removesuffix(" at")
            hint = ""
            if "control character" in reason:
                hint = "; a raw newline or tab inside a string must be escaped (\\n, \\t)"
            raise MemoryToolError(
                f"Tool arguments are not valid JSON: {reason} at line {exc.lineno} "
                f"column {exc.colno}{hint}"
            ) from None
    if not isinstance(arguments, dict):
        found = (name for kind, name in _JSON_TYPES if isinstance(arguments, kind))
        shown = next(found, type(arguments).__name__)
        raise MemoryToolError(f"Tool arguments must be a JSON object, got {shown}")
    return arguments


def unknown_tool_error(name: object, offered: Sequence[str] = ()) -> MemoryToolError:
    """``Unknown tool: <name>`` (-32601, "method not found"), then the offered names if given."""
    listed = f"; offered tools: {', '.join(offered)}" if offered else ""
    return MemoryToolError(f"Unknown tool: {name}{listed}", METHOD_NOT_FOUND)


def call(memory: AgentMemory, name: str, arguments: dict[str, Any]) -> str:
    """Run one call of the default toolset against the engine; errors are raised."""
    return FUNCTION_CALLING.call(memory, name, arguments)


def run_tool(memory: AgentMemory, name: str, arguments: Any) -> tuple[str, bool]:
    """Run one call of the default toolset and return ``(text, is_error)``; never raises."""
    return FUNCTION_CALLING.run(memory, name, arguments)


def dispatch(memory: AgentMemory, name: str, arguments: dict[str, Any] | str | None) -> str:
    """Run a model's call of the default toolset and return the text for it; never raises."""
    return FUNCTION_CALLING.dispatch(memory, name, arguments)
