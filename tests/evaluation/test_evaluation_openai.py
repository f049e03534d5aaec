"""OpenAIChatModel with the real ``openai`` client against a local chat-completions server.

The server below speaks just enough of the Chat Completions protocol: it answers a user turn
with tool calls chosen by simple rules, and a tool result with a text reply quoting it. It
records every request so the tests can check what the client sent.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.engine.functions import openai_tools
from jupyter_agent_memory.evaluation import (
    FactContains,
    JournalContains,
    ModelResponseError,
    OpenAIChatModel,
    PromptContains,
    ReplyContains,
    Scenario,
    Session,
    run_scenario,
)

API_KEY = "sk-local-test"


def completion(message: dict, finish: str) -> dict:
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "local-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127},
    }


def tool_call(call_id: str, name: str, arguments: dict | str) -> dict:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def answer(request: dict) -> dict:
    """The fake model: rules on the last user turn, and a quote of the last tool result."""
    messages = request["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        return completion({"role": "assistant", "content": f"Tool said: {last['content']}"}, "stop")
    user = last["content"]
    name = re.search(r"my name is (\w+)", user)
    if name:
        facts = re.search(r"<facts>\n(.*?)\n</facts>", messages[0]["content"], re.DOTALL)
        known = facts.group(1) + "\n" if facts else ""
        calls = [
            tool_call(
                "call_a", "memory", {"action": "update", "content": f"{known}- Name: {name[1]}\n"}
            ),
            tool_call("call_b", "memory", {"action": "append", "text": "intro", "tags": ["hi"]}),
        ]
        return completion({"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls")
    if "broken" in user:
        calls = [tool_call("call_c", "memory", '{"action": "update", "content": ')]
        return completion({"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls")
    if "who am i" in user.lower():
        facts = re.search(r"- Name: (\w+)", messages[0]["content"])
        text = f"You are {facts[1]}." if facts else "No idea."
        return completion({"role": "assistant", "content": text}, "stop")
    return completion({"role": "assistant", "content": "Hello!"}, "stop")


MAX_REQUESTS = 100  # the fake server refuses more, so a runaway loop cannot spin forever
SLOW_SECONDS = 1.5  # how long a "slow" answer takes: more than the client's timeout below


def last_user(body: dict) -> str:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return str(users[-1].get("content") or "") if users else ""


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - the http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
        )
        if self.path != "/v1/chat/completions":
            self.send_error(404)
            return
        user = last_user(body)
        last_role = body["messages"][-1]["role"] if body.get("messages") else ""
        if len(self.server.requests) > MAX_REQUESTS:
            payload = json.dumps({"error": {"message": "too many requests", "type": "limit"}})
            status = 503
        elif body.get("model") == "missing-model":
            payload = json.dumps({"error": {"message": "model not found", "type": "invalid"}})
            status = 404
        elif user == "fail please" and last_role == "user":
            payload = json.dumps({"error": {"message": "upstream exploded", "type": "server"}})
            status = 500
        elif user == "no choices":
            reply = completion({"role": "assistant", "content": "x"}, "stop")
            reply["choices"] = []
            payload = json.dumps(reply)
            status = 200
        else:
            if user == "be slow":
                time.sleep(SLOW_SECONDS)
            payload = json.dumps(answer(body))
            status = 200
        data = payload.encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting (the timeout test): nothing left to answer

    def log_message(self, format, *args):  # keep test output clean
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.requests = []
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def base_url(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def test_complete_returns_tool_calls_and_usage(server):
    model = OpenAIChatModel(base_url(server), API_KEY, "local-model", temperature=0)
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "my name is Ada"},
    ]
    tools = openai_tools()
    turn = model.complete(messages, tools)
    assert turn.text is None
    assert [(c.id, c.name) for c in turn.tool_calls] == [("call_a", "memory"), ("call_b", "memory")]
    assert json.loads(turn.tool_calls[0].arguments) == {
        "action": "update",
        "content": "- Name: Ada\n",
    }
    assert turn.usage == {"prompt_tokens": 120, "completion_tokens": 7}
    request = server.requests[-1]
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == f"Bearer {API_KEY}"
    assert request["body"]["model"] == "local-model"
    assert request["body"]["messages"] == messages
    assert request["body"]["tools"] == tools
    assert request["body"]["temperature"] == 0
    assert model.name == "openai:local-model"
    assert repr(model) == f"OpenAIChatModel(base_url='{base_url(server)}/', model='local-model')"


def test_no_tools_are_sent_when_none_are_offered(server):
    model = OpenAIChatModel(base_url(server), API_KEY, "local-model")
    turn = model.complete([{"role": "user", "content": "hey"}], [])
    assert (turn.text, turn.tool_calls) == ("Hello!", [])
    assert "tools" not in server.requests[-1]["body"]


def test_api_errors_propagate_from_the_client(server):
    import openai

    model = OpenAIChatModel(base_url(server), API_KEY, "missing-model", max_retries=0)
    with pytest.raises(openai.NotFoundError):
        model.complete([{"role": "user", "content": "hey"}], [])


def test_scenario_over_the_openai_protocol(server, tmp_path):
    mem = AgentMemory.open(tmp_path / "agent")
    model = OpenAIChatModel(base_url(server), API_KEY, "local-model")
    scenario = Scenario(
        [
            Session(
                ["Hi, my name is Ada", "this call is broken"],
                expect=[
                    FactContains("Name: Ada"),
                    JournalContains(text="intro", tag="hi"),
                    PromptContains("- Name: Ada"),
                ],
            ),
            Session(["Who am I?"]),
        ],
        name="openai",
    )
    result = run_scenario(
        mem, model, scenario, workspace=tmp_path, config={"bootstrap_completed": True}
    )
    assert result.passed, str(result)
    assert result.model == "openai:local-model"
    first, second = result.sessions
    update, append, broken = first.tool_calls
    assert (update.result, update.is_error) == ("Memory updated.", False)
    assert re.fullmatch(r"Journal entry added at \S+Z\.", append.result)
    assert broken.is_error
    assert broken.result == (
        "Error: MCP error -32602: Tool arguments are not valid JSON: "
        "Expecting value at line 1 column 33"
    )
    assert first.turns[0].reply == f"Tool said: {append.result}"
    assert first.turns[1].reply == f"Tool said: {broken.result}"
    assert second.turns[0].reply == "You are Ada."
    assert mem.facts == "- Name: Ada\n"

    # What went over the wire: the tool results were sent back with their call ids, in the
    # order the calls were made, after an assistant message carrying the calls.
    bodies = [r["body"] for r in server.requests]
    assert len(bodies) == 5  # 2 per tool-calling turn, 1 for the final recall turn
    followup = bodies[1]["messages"]
    assert [m["role"] for m in followup] == ["system", "user", "assistant", "tool", "tool"]
    assert [c["id"] for c in followup[2]["tool_calls"]] == ["call_a", "call_b"]
    assert [(m["tool_call_id"], m["content"]) for m in followup[3:]] == [
        ("call_a", "Memory updated."),
        ("call_b", append.result),
    ]
    assert bodies[4]["messages"][0]["content"] == second.system_prompt
    assert "- Name: Ada" in second.system_prompt


def test_missing_openai_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ImportError, match=re.escape('pip install "jupyter-agent-memory[eval]"')):
        OpenAIChatModel("http://127.0.0.1:9/v1", API_KEY, "m")


def test_usage_and_finish_reasons_are_recorded_per_call(server, tmp_path):
    model = OpenAIChatModel(base_url(server), API_KEY, "local-model")
    scenario = Scenario([Session(["Hi, my name is Ada", "Who am I?"])])
    result = run_scenario(tmp_path / "agent", model, scenario, config={"bootstrap_completed": True})
    calls = result.sessions[0].model_calls
    assert [(c.input_tokens, c.output_tokens, c.estimated) for c in calls] == [(120, 7, False)] * 3
    assert [c.finish_reason for c in calls] == ["tool_calls", "stop", "stop"]
    assert all(c.latency_s > 0 for c in calls)
    cost = result.sessions[0].cost()
    assert (cost["input_tokens"], cost["output_tokens"], cost["model_calls"]) == (360, 21, 3)
    assert (cost["tool_rounds"], cost["tokens_estimated"], cost["finish_reason"]) == (
        1,
        False,
        "stop",
    )
    frame = result.to_dataframe()
    assert frame.loc[1, "input_tokens"] == 360 and frame.loc[1, "model_calls"] == 3


def test_empty_choices_is_a_clear_error(server):
    model = OpenAIChatModel(base_url(server), API_KEY, "local-model", max_retries=0)
    with pytest.raises(ModelResponseError, match="openai:local-model: the endpoint returned no"):
        model.complete([{"role": "user", "content": "no choices"}], [])


def test_api_errors_timeouts_and_bad_responses_do_not_lose_the_run(server, tmp_path):
    mem = AgentMemory.open(tmp_path / "agent")
    model = OpenAIChatModel(base_url(server), API_KEY, "local-model", timeout=0.4, max_retries=0)
    scenario = Scenario(
        [
            Session(["Hi, my name is Ada"], expect=[FactContains("Ada")]),
            Session(
                ["fail please", "no choices", "be slow", "Who am I?"],
                expect=[ReplyContains("You are Ada.")],
            ),
            Session(["Who am I?"], expect=[ReplyContains("Ada")]),
        ]
    )
    started = time.monotonic()
    result = run_scenario(mem, model, scenario, config={"bootstrap_completed": True})
    assert time.monotonic() - started < 10
    assert not result.stopped and len(result.sessions) == 3
    failing = result.sessions[1].turns
    assert "openai.InternalServerError: Error code: 500" in failing[0].error
    assert "upstream exploded" in failing[0].error
    assert "ModelResponseError: openai:local-model: the endpoint returned no choices" in (
        failing[1].error
    )
    assert "openai.APITimeoutError: Request timed out." in failing[2].error
    assert [t.reply for t in failing] == ["", "", "", "You are Ada."]
    assert result.sessions[1].passed and result.sessions[2].passed
    assert [index for index, _ in result.errors] == [2, 2, 2]
    # Sessions before the errors are kept, and so is what they wrote.
    assert result.sessions[0].facts_after == "- Name: Ada\n" == mem.facts

    stopped = run_scenario(
        tmp_path / "other", model, scenario, config={"bootstrap_completed": True}, on_error="stop"
    )
    assert stopped.stopped and [len(s.turns) for s in stopped.sessions] == [1, 1]
    assert stopped.sessions[0].facts_after == "- Name: Ada\n"
