"""Models for the evaluation harness, and the small protocol any model can implement.

A model has ``complete(messages, tools) -> ModelTurn`` over the OpenAI chat format (messages,
tool calls and ``tool`` results; ``functions.to_openai`` tool dicts); an optional ``name``
labels it in results. The turn holds tool calls (the runner runs them and asks again) or a reply.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from ..engine.prompt import approx_tokens

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

__all__ = [
    "CachedModel", "ChatModel", "ModelCallRecord", "ModelResponseError", "ModelTurn",
    "OpenAIChatModel", "Rule", "ScriptContext", "ScriptedModel", "ToolCall", "call_model",
    "call_tool", "error_line", "journal", "known_facts", "recall", "remember", "search",
]

EVAL_INSTALL_HINT = 'pip install "jupyter-agent-memory[eval]"'


def import_extra(module: str, what: str, name: str = "", hint: str = EVAL_INSTALL_HINT) -> Any:
    """``module``, or an ImportError saying that ``what`` needs ``name`` and how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{what} needs {name or module.split('.')[0]}: {hint}") from exc


CLOSING_TURN = (
    "(The conversation is over and the user has left. If anything in it is worth "
    "remembering, save it now with your memory tools; then reply OK.)"
)
"""The runner's last turn after a transcript that ends with the assistant's reply."""


def arguments_text(arguments: dict[str, Any] | str) -> str:
    """Tool-call arguments as compact JSON; raw text (a model's unparsable JSON) unchanged."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


@dataclass
class ToolCall:
    """One tool call requested by a model: ``arguments`` is a dict or the model's raw JSON
    text (passed to ``dispatch`` as is); ``id`` is echoed in the tool result message."""

    name: str
    arguments: dict[str, Any] | str
    id: str = ""

    def arguments_json(self) -> str:
        """The arguments as JSON text (raw text is returned unchanged)."""
        return arguments_text(self.arguments)


@dataclass
class ModelTurn:
    """A model's answer to ``complete``: tool calls to run, or a final reply; ``usage`` as the
    API reported it, the attempts retried before it, whether it came from a ``CachedModel``."""

    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: dict[str, int] | None = None
    finish_reason: str = ""
    retries: int = 0
    retry_errors: list[str] = field(default_factory=list)
    cached: bool = False


class ModelResponseError(RuntimeError):
    """The endpoint answered, but not with something a turn can be made of (no choices, a
    body that is not a chat completion...)."""


@dataclass
class ModelCallRecord:
    """One call of a model's ``complete``, the agent's or a judge's (``role``), failed too;
    tokens as reported, else ``estimated``; ``latency_s`` includes retries and their waits."""

    input_tokens: int
    output_tokens: int
    estimated: bool
    latency_s: float
    finish_reason: str = ""
    error: str = ""
    retries: int = 0
    retry_errors: list[str] = field(default_factory=list)
    role: str = "agent"
    cached: bool = False


def error_line(error: BaseException) -> str:
    """``ClassName: message`` on one line, for records and tables."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _estimate_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    return approx_tokens(json.dumps(list(messages), ensure_ascii=False))


def model_name(model: Any) -> str:
    """The label of ``model`` in results: its ``name``, or its class name when it has none."""
    return str(getattr(model, "name", None) or type(model).__name__)


def read_json(path: Path) -> Any:
    """The JSON data of the file at ``path``; ``None`` when it is unreadable or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a temporary file, then a rename), so
    other processes never read half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.{id(text)}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def call_model(model: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
               calls: list[ModelCallRecord], *, role: str = "agent") -> ModelTurn:
    """``model.complete(messages, tools)``, with one ``ModelCallRecord`` appended to ``calls``
    whatever happens; a call that raises is recorded with its error and the exception's
    ``retries``/``retry_errors`` (set by ``OpenAIChatModel``), then propagates."""
    started = time.perf_counter()
    try:
        turn = model.complete(messages, tools)
        if not isinstance(turn, ModelTurn):
            raise TypeError(f"model.complete must return a ModelTurn, got {turn!r}")
    except Exception as exc:
        calls.append(ModelCallRecord(
            _estimate_tokens(messages), 0, True, time.perf_counter() - started,
            error=error_line(exc), retries=int(getattr(exc, "retries", 0) or 0),
            retry_errors=[str(line) for line in getattr(exc, "retry_errors", ()) or ()],
            role=role,
        ))
        raise
    usage = turn.usage or {}
    reported = isinstance(usage.get("prompt_tokens"), int)
    if reported:
        tokens = (usage["prompt_tokens"], int(usage.get("completion_tokens") or 0))
    else:
        reply = (turn.text or "") + "".join(c.name + c.arguments_json() for c in turn.tool_calls)
        tokens = (_estimate_tokens(messages), approx_tokens(reply))
    calls.append(ModelCallRecord(
        *tokens, estimated=not reported, latency_s=time.perf_counter() - started,
        finish_reason=turn.finish_reason or "",
        retries=turn.retries, retry_errors=list(turn.retry_errors), role=role, cached=turn.cached,
    ))
    return turn


@runtime_checkable
class ChatModel(Protocol):
    """What the runner needs from a model (see the module docstring for message shapes)."""

    def complete(self, messages: list[dict[str, Any]],
                 tools: list[dict[str, Any]]) -> ModelTurn:  # pragma: no cover - protocol
        """Answer the conversation ``messages``, optionally calling some of ``tools``."""
        ...


class CachedModel:
    """``model`` behind an on-disk cache of its answers, keyed by the SHA-256 of ``key``
    (default: the model's name), its spec, the messages and the tools; one file per answer
    under ``folder``, written whole or not at all, so processes may share the folder."""

    def __init__(self, model: Any, folder: str | Any, *, key: str = "") -> None:
        if not callable(getattr(model, "complete", None)):
            raise TypeError(f"CachedModel needs a model with complete(), got {model!r}")
        self.model = model
        self.folder = Path(folder)
        self.name = model_name(model)
        self.key = key or self.name
        self.hits = 0
        self.misses = 0

    def spec(self) -> dict[str, Any]:
        """The wrapped model's spec: caching does not change what a model is."""
        return {k: v for k, v in model_spec(self.model).items() if k not in ("name", "rebuild")}

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelTurn:
        """The cached answer to this request, or the model's (then cached)."""
        request = {"key": self.key, "model": model_spec(self.model), "messages": messages,
                   "tools": tools}
        text = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        path = self.folder / digest[:2] / f"{digest}.json"
        data = read_json(path)
        if isinstance(data, dict):
            self.hits += 1
            calls = [ToolCall(c["name"], c["arguments"], c["id"]) for c in data["calls"]]
            return ModelTurn(data["text"], calls, data["usage"], data["finish_reason"],
                             cached=True)
        self.misses += 1
        turn = self.model.complete(messages, tools)
        record = {"text": turn.text, "calls": [asdict(c) for c in turn.tool_calls],
                  "usage": turn.usage, "finish_reason": turn.finish_reason}
        write_whole(path, json.dumps(record, ensure_ascii=False))
        return turn


def model_spec(model: Any) -> dict[str, Any]:
    """A model as plain data, for exports: ``model.spec()`` when it has one, else its name and
    class, marked ``"rebuild": false`` (``rerun`` then needs the model given again)."""
    name = model_name(model)
    spec = getattr(model, "spec", None)
    if callable(spec):
        return {"name": name, **spec(), "rebuild": True}
    kind = f"{type(model).__module__}.{type(model).__qualname__}"
    return {"name": name, "kind": kind, "rebuild": False}


_FACTS_BLOCK = re.compile(r"<facts>\n(.*?)\n</facts>", re.DOTALL)


def known_facts(system: str, messages: Sequence[Mapping[str, Any]]) -> str:
    """FACT.md as a model in this conversation knows it: the content of its latest ``update``
    call in ``messages``, else the ``<facts>`` block of the system prompt, else ``''``."""
    for message in reversed(messages):
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            if not function.get("name", "").endswith("memory"):
                continue
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except json.JSONDecodeError:
                continue
            if (isinstance(arguments, dict) and arguments.get("action") == "update"
                    and isinstance(arguments.get("content"), str)):
                return arguments["content"]
    found = _FACTS_BLOCK.search(system)
    return found.group(1) if found else ""


@dataclass
class ScriptContext:
    """What a scripted rule sees: the ``user`` turn, the rule's ``match`` in it, the
    ``system`` prompt, the conversation's ``messages`` and this turn's tool ``results``."""

    user: str
    match: re.Match[str]
    system: str
    messages: list[dict[str, Any]]
    results: list[str]

    @property
    def facts(self) -> str:
        """FACT.md as this model knows it (see ``known_facts``)."""
        return known_facts(self.system, self.messages)

    def fill(self, template: str) -> str:
        """Fill ``template`` with ``str.format``: ``{0}`` is the whole match, ``{1}``... its
        groups, named groups by name, ``{result}`` the last tool result, ``{facts}`` FACT.md."""
        groups = [self.match.group(0), *(g or "" for g in self.match.groups())]
        named = {k: v or "" for k, v in self.match.groupdict().items()}
        result = self.results[-1] if self.results else ""
        return template.format(*groups, result=result, facts=self.facts, **named)

    def fill_value(self, value: Any) -> Any:
        """``fill`` applied to every string inside ``value`` (dicts and lists included)."""
        if isinstance(value, str):
            return self.fill(value)
        if isinstance(value, Mapping):
            return {key: self.fill_value(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.fill_value(item) for item in value]
        return value


CallSpec = Callable[[ScriptContext], ToolCall]
Reply = str | Callable[[ScriptContext], str]


def call_tool(name: str, **arguments: Any) -> CallSpec:
    """A call to ``name`` with ``arguments``, strings filled (``ScriptContext.fill``); ``memory``
    is sent under whatever name the runner offers the memory tool as."""

    def build(ctx: ScriptContext) -> ToolCall:
        return ToolCall(name, ctx.fill_value(arguments))

    return build


def remember(line: str, replaces: str | None = None) -> CallSpec:
    """An ``update`` call writing FACT.md as known so far plus ``line`` (filled); known lines
    matching the regular expression ``replaces`` (ignoring case) are dropped first."""
    pattern = re.compile(replaces, re.IGNORECASE) if replaces else None

    def build(ctx: ScriptContext) -> ToolCall:
        lines = ctx.facts.splitlines()
        if pattern is not None:
            lines = [known for known in lines if not pattern.search(known)]
        while lines and not lines[-1].strip():
            lines.pop()
        lines.append(ctx.fill(line))
        return ToolCall("memory", {"action": "update", "content": "\n".join(lines) + "\n"})

    return build


def journal(text: str, tags: Sequence[str] = ()) -> CallSpec:
    """An ``append`` call with ``text`` and ``tags`` (both filled)."""
    return call_tool("memory", action="append", text=text, tags=list(tags))


def search(query: str = "", tag: str = "", limit: int | None = None) -> CallSpec:
    """A ``search`` call (``query`` and ``tag`` filled; empty ones are left out)."""
    given = {"query": query, "tag": tag, "limit": limit}
    return call_tool("memory", action="search",
                     **{key: value for key, value in given.items() if value not in ("", None)})


def recall(pattern: str, found: str, missing: str) -> Callable[[ScriptContext], str]:
    """A reply that looks ``pattern`` up in what the model knows (tool results, facts, system
    prompt) and answers ``found`` filled with that match's groups, else ``missing``."""
    compiled = _compile("recall", pattern, re.IGNORECASE)

    def reply(ctx: ScriptContext) -> str:
        for source in (*reversed(ctx.results), ctx.facts, ctx.system):
            hit = compiled.search(source)
            if hit:
                return replace(ctx, match=hit).fill(found)
        return ctx.fill(missing)

    return reply


def _compile(what: str, pattern: str, flags: int) -> re.Pattern[str]:
    """``pattern`` compiled; a bad one is a ``ValueError`` naming it, as in the expectations."""
    if not isinstance(pattern, str):
        raise TypeError(f"{what}: the pattern must be a string, got {pattern!r}")
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise ValueError(f"{what}: invalid pattern {pattern!r}: {exc}") from None


@dataclass
class Rule:
    """Map user turns matching ``pattern`` (a regular expression, ignoring case) to ``calls``
    made in one round, then ``reply`` (a ``ScriptContext.fill`` template or a function)."""

    pattern: str
    reply: Reply = ""
    calls: Sequence[CallSpec] = ()

    def __post_init__(self) -> None:
        self._compiled = _compile("Rule", self.pattern, re.IGNORECASE | re.DOTALL)

    def match(self, text: str) -> re.Match[str] | None:
        """The match of ``pattern`` in ``text``, or ``None``."""
        return self._compiled.search(text)


def offered_name(logical: str, tools: list[dict[str, Any]]) -> str:
    """The offered tool name for a logical one (``memory`` may be offered with a prefix)."""
    names = [tool.get("function", tool).get("name", "") for tool in tools]
    if logical in names:
        return logical
    suffixed = [name for name in names if name.endswith("__" + logical)]
    return suffixed[0] if len(suffixed) == 1 else logical


def conversation(messages: Sequence[Mapping[str, Any]]) -> tuple[str | None, str, list[str], bool]:
    """``(last user turn, system prompt, tool results since that turn, whether tools were
    called since)``; the user turn is ``None`` when there is none."""
    system = next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last is None:
        return None, system, [], False
    since = messages[last + 1 :]
    results = [str(m.get("content") or "") for m in since if m.get("role") == "tool"]
    called = any(m.get("tool_calls") for m in since)
    return str(messages[last].get("content") or ""), system, results, called


class ScriptedModel:
    """A deterministic, offline model: the first ``Rule`` matching the user turn gives its calls
    (until a tool round happened for the turn), then its reply; no match gets ``default_reply``.
    ``calls`` holds every tool call made."""

    name = "scripted"

    def __init__(self, rules: Sequence[Rule], default_reply: str = "OK.") -> None:
        if isinstance(rules, (str, Rule)):
            raise TypeError("ScriptedModel takes a list of Rule objects")
        self.rules = list(rules)
        for rule in self.rules:
            if not isinstance(rule, Rule):
                raise TypeError(f"ScriptedModel rules must be Rule objects, got {rule!r}")
        self.default_reply = default_reply
        self.calls: list[ToolCall] = []

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelTurn:
        """Answer the last user turn of ``messages`` by the first matching rule."""
        user, system, results, called = conversation(messages)
        if user is None:
            return ModelTurn(text=self.default_reply, finish_reason="stop")
        for rule in self.rules:
            match = rule.match(user)
            if match is None:
                continue
            ctx = ScriptContext(user, match, system, messages, results)
            if not rule.calls or called:
                text = rule.reply(ctx) if callable(rule.reply) else ctx.fill(rule.reply)
                return ModelTurn(text=text, finish_reason="stop")
            calls = []
            for spec in rule.calls:
                call = spec(ctx)
                call.name = offered_name(call.name, tools)
                self.calls.append(call)
                call.id = f"call_{len(self.calls)}"
                calls.append(call)
            return ModelTurn(tool_calls=calls, finish_reason="tool_calls")
        return ModelTurn(text=self.default_reply, finish_reason="stop")


class OpenAIChatModel:
    """A model behind any OpenAI-compatible Chat Completions endpoint, via the ``openai`` client.

    Extra keyword arguments go to every ``chat.completions.create``; ``tool_choice`` is sent
    with the tools (local servers ignore tools without it). A connection error, a timeout, HTTP
    408, 409, 429 or 5xx is retried up to ``max_retries`` times, waiting ``retry_wait`` seconds,
    doubled each attempt, and recorded (``ModelTurn.retries``, or the error's attributes).
    """

    def __init__(self, base_url: str | None = None, api_key: str | None = None,
                 model: str = "gpt-4o-mini", *, timeout: float = 120.0, max_retries: int = 2,
                 retry_wait: float = 0.5, tool_choice: str | None = "auto",
                 **create_kwargs: Any) -> None:
        openai = import_extra("openai", "OpenAIChatModel", "the 'openai' package")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be a whole number, 0 or more, got {max_retries!r}")
        self.model = model
        self.name = f"openai:{model}"
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_wait = retry_wait
        self.tool_choice = tool_choice
        self.create_kwargs = create_kwargs
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout,
                                    max_retries=0)

    def spec(self) -> dict[str, Any]:
        """Everything needed to make this model again, except the API key (see ``rerun``)."""
        return {"kind": "openai", "base_url": str(self.client.base_url), "model": self.model,
                "timeout": self.timeout, "max_retries": self.max_retries,
                "retry_wait": self.retry_wait, "tool_choice": self.tool_choice,
                "create_kwargs": dict(self.create_kwargs)}

    def _create(self, kwargs: dict[str, Any]) -> Any:
        """One request; the parsed completion, or ``ModelResponseError`` quoting a body that is
        not JSON (a proxy's HTML error page, say)."""
        raw = self.client.chat.completions.with_raw_response.create(**kwargs)
        kind = raw.headers.get("content-type", "")
        if "json" not in kind.lower():
            body = " ".join(raw.text.split())
            raise ModelResponseError(
                f"{self.name}: the endpoint answered HTTP {raw.status_code} with "
                f"{kind or 'no content type'}, not a chat completion: {body[:200]!r}"
            )
        return raw.parse()

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelTurn:
        """Send the conversation to the endpoint and convert its first choice."""
        import openai

        kwargs = dict(self.create_kwargs)
        if tools:
            kwargs["tools"] = tools
            if self.tool_choice is not None:
                kwargs.setdefault("tool_choice", self.tool_choice)
        # Plain dicts in the Chat Completions shape; the SDK declares one TypedDict per role.
        kwargs.update(model=self.model, messages=cast("list[ChatCompletionMessageParam]", messages))
        retry_errors: list[str] = []
        while True:
            try:
                response = self._create(kwargs)
                break
            except (openai.APIConnectionError, openai.APIStatusError) as exc:
                status = getattr(exc, "status_code", None)
                retryable = status is None or status in (408, 409, 429) or status >= 500
                if not retryable or len(retry_errors) >= self.max_retries:
                    # Read by ``call_model``: the record says how often this call was tried.
                    setattr(exc, "retries", len(retry_errors))  # noqa: B010
                    setattr(exc, "retry_errors", retry_errors)  # noqa: B010
                    raise
                retry_errors.append(error_line(exc))
                time.sleep(self.retry_wait * 2 ** (len(retry_errors) - 1))
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ModelResponseError(
                f"{self.name}: the endpoint returned no choices (response id "
                f"{getattr(response, 'id', None)!r})"
            )
        message = choices[0].message
        if message is None:
            raise ModelResponseError(f"{self.name}: the endpoint's first choice has no message")
        calls = [
            ToolCall(call.function.name, call.function.arguments or "", call.id)
            for call in message.tool_calls or ()
            if getattr(call, "function", None) is not None
        ]
        usage = None
        reported = getattr(response, "usage", None)
        if reported is not None and reported.prompt_tokens is not None:
            usage = {"prompt_tokens": int(reported.prompt_tokens),
                     "completion_tokens": int(reported.completion_tokens or 0)}
        return ModelTurn(message.content, calls, usage, str(choices[0].finish_reason or ""),
                         len(retry_errors), retry_errors)

    def __repr__(self) -> str:
        return f"OpenAIChatModel(base_url={str(self.client.base_url)!r}, model={self.model!r})"
