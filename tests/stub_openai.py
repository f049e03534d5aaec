"""A small OpenAI-compatible chat server for tests, as strict as the local servers people use.

Local servers (llama-cpp-python, Ollama, vLLM) accept less than OpenAI does, and a tool loop
that only ever met OpenAI breaks on them. :class:`StubServer` speaks the Chat Completions
protocol on 127.0.0.1 and enforces what they enforce, so the wire path is tested in CI in well
under a second:

- an assistant message must carry ``content`` as a string, also next to ``tool_calls``
  (``null`` or a missing ``content`` is answered with HTTP 500, "Input should be a valid
  string", as llama-cpp-python answers it);
- tools are only used when the request also sets ``tool_choice`` (without it the model never
  sees them and answers in text), with ``require_tool_choice``;
- ``drop_tool_results``: the chat format silently drops ``tool`` messages, so the model never
  sees what its tools returned;
- ``escape_html``: the chat template HTML-escapes every message, so the model reads
  ``&lt;facts&gt;`` where the prompt said ``<facts>``.

The model behind it is a *brain*: a function ``brain(messages, tools) -> reply`` that sees the
conversation after the server's own transformations (and ``tools`` only when the model would
see them). A reply is an assistant message dict (``{"content": ..., "tool_calls": [...]}``,
built with :func:`text` and :func:`calls`), or a :class:`Fail` for an error response
(any status, body and content type: an HTML error page, say). :class:`MemoryBrain` is a
ready-made brain that saves ``remember ...`` requests to FACT.md and answers questions from
the prompt's ``<facts>`` block, enough for a two-session learning loop.

::

    with StubServer(MemoryBrain()) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        ...
        server.requests   # every request body, as sent
        server.seen       # every conversation, as the brain saw it
"""

from __future__ import annotations

import html
import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Fail", "MemoryBrain", "StubServer", "calls", "text", "tool_call"]


@dataclass
class Fail:
    """An error response: ``status``, a ``body`` and its ``content_type``."""

    status: int
    body: str = '{"error": {"message": "stub failure", "type": "server_error"}}'
    content_type: str = "application/json"


def text(content: str) -> dict[str, Any]:
    """An assistant message with text only."""
    return {"role": "assistant", "content": content}


def tool_call(name: str, arguments: dict[str, Any] | str, call_id: str = "") -> dict[str, Any]:
    """One tool call; ``arguments`` as a dict, or as raw (possibly invalid) JSON text."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": call_id or "call_stub",
        "type": "function",
        "function": {"name": name, "arguments": raw},
    }


def calls(*made: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    """An assistant message with tool calls (``content`` is ``null`` unless given, as many
    servers send it); ids are numbered when the calls have none of their own."""
    numbered = [
        {**call, "id": call["id"] if call["id"] != "call_stub" else f"call_{n}"}
        for n, call in enumerate(made, 1)
    ]
    return {"role": "assistant", "content": content, "tool_calls": numbered}


Brain = Callable[[list[dict[str, Any]], list[dict[str, Any]]], "dict[str, Any] | Fail"]


def _completion(message: dict[str, Any], model: str) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


def _invalid_content(messages: Sequence[dict[str, Any]]) -> str | None:
    """llama-cpp-python's validation error for the first assistant message whose content
    is not a string, or None when every one is."""
    for index, message in enumerate(messages):
        if message.get("role") == "assistant" and not isinstance(message.get("content"), str):
            return (
                f"1 validation error: messages.{index}.content: Input should be a valid string "
                f"[type=string_type, input_value={message.get('content')!r}]"
            )
    return None


class StubServer:
    """An OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 (see the module doc)."""

    def __init__(
        self,
        brain: Brain | None = None,
        *,
        require_string_content: bool = True,
        require_tool_choice: bool = True,
        drop_tool_results: bool = False,
        escape_html: bool = False,
        max_requests: int = 200,
    ) -> None:
        self.brain: Brain = brain if brain is not None else MemoryBrain()
        self.require_string_content = require_string_content
        self.require_tool_choice = require_tool_choice
        self.drop_tool_results = drop_tool_results
        self.escape_html = escape_html
        self.max_requests = max_requests
        self.requests: list[dict[str, Any]] = []
        self.seen: list[list[dict[str, Any]]] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, what an OpenAI client takes as ``base_url``."""
        assert self._httpd is not None, "the stub server is not running"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> StubServer:
        """Listen on a free port, answering from a daemon thread."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                length = int(self.headers.get("Content-Length") or 0)
                status, body, kind = server.answer(self.path, self.rfile.read(length))
                data = body.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop listening and wait for the thread."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._httpd = self._thread = None

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _error(self, status: int, message: str) -> tuple[int, str, str]:
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}})
        return status, body, "application/json"

    def answer(self, path: str, raw: bytes) -> tuple[int, str, str]:
        """``(status, body, content type)`` for one request (public for direct tests)."""
        if path.rstrip("/") != "/v1/chat/completions":
            return self._error(404, f"no route {path}")
        try:
            body = json.loads(raw)
        except ValueError:
            return self._error(400, "the request body is not JSON")
        self.requests.append(body)
        if len(self.requests) > self.max_requests:
            return self._error(503, "too many requests for one test")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return self._error(400, "'messages' must be a non-empty list")
        if self.require_string_content:
            invalid = _invalid_content(messages)
            if invalid is not None:
                return self._error(500, invalid)
        tools = body.get("tools") or []
        if self.require_tool_choice and not body.get("tool_choice"):
            tools = []
        shown = [dict(message) for message in messages]
        if self.drop_tool_results:
            shown = [message for message in shown if message.get("role") != "tool"]
        if self.escape_html:
            for message in shown:
                if isinstance(message.get("content"), str):
                    message["content"] = html.escape(message["content"], quote=False)
        self.seen.append(shown)
        reply = self.brain(shown, tools)
        if isinstance(reply, Fail):
            return reply.status, reply.body, reply.content_type
        return 200, json.dumps(_completion(reply, str(body.get("model", "stub")))), (
            "application/json"
        )


_FACTS = re.compile(r"(?:<|&lt;)facts(?:>|&gt;)\n(.*?)\n(?:<|&lt;)/facts(?:>|&gt;)", re.DOTALL)
_REMEMBER = re.compile(r"\bremember(?: that)? (.+?)[.!]?$", re.IGNORECASE | re.DOTALL)
_QUESTION = re.compile(r"\bwhat(?:'s| is) my (.+?)\?", re.IGNORECASE)


class MemoryBrain:
    """A scripted model with a memory: enough for a two-session learning loop.

    - ``... remember (that) <fact>``: with tools, one ``update`` call of the offered memory
      tool writing FACT.md as the prompt shows it plus ``- <fact>``; then, once the result
      comes back, ``Saved.``. Without tools (no ``tool_choice``): ``I cannot save anything.``
    - ``what is my <thing>?``: the FACT.md line of the prompt that mentions ``<thing>``, as
      ``From memory: <line>``, else ``I don't know.``
    - anything else: ``OK.``

    It reads the prompt as the server shows it (HTML-escaped or not); ``tool_name`` is the
    memory tool's name when several are offered.
    """

    def __init__(self, tool_name: str = "memory") -> None:
        self.tool_name = tool_name

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        system = next((m["content"] for m in messages if m.get("role") == "system"), "")
        facts = _FACTS.search(system or "")
        known = html.unescape(facts.group(1)) if facts else ""
        last = messages[-1]
        if last.get("role") == "tool":
            return text("Saved.")
        user = html.unescape(str(last.get("content") or ""))
        wanted = _REMEMBER.search(user)
        if wanted:
            names = [tool["function"]["name"] for tool in tools]
            if self.tool_name not in names:
                return text("I cannot save anything.")
            content = (known + "\n" if known else "") + f"- {wanted.group(1).strip()}\n"
            return calls(tool_call(self.tool_name, {"action": "update", "content": content}))
        asked = _QUESTION.search(user)
        if asked:
            thing = asked.group(1).casefold()
            for line in known.splitlines():
                if thing in line.casefold():
                    return text(f"From memory: {line.lstrip('- ').strip()}")
            return text("I don't know.")
        return text("OK.")
