"""The wire path against a server as strict as the local ones (tests/stub_openai.py).

llama-cpp-python refuses ``"content": null`` on a tool-call turn and ignores tools without
``tool_choice``; some chat formats drop tool results or HTML-escape the prompt. Each rule is
enforced by the stub, so these tests fail if the runner or ``OpenAIChatModel`` breaks one.
"""

from __future__ import annotations

import importlib.util
import io
import json
import re
from pathlib import Path

import pytest
from stub_openai import Fail, MemoryBrain, StubServer, calls, text, tool_call

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.evaluation import (
    FactContains,
    ModelResponseError,
    OpenAIChatModel,
    ReplyAnswers,
    Scenario,
    Session,
    run_scenario,
)

DONE = {"bootstrap_completed": True}
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "local_model_loop.py"


def loop() -> Scenario:
    return Scenario(
        [
            Session(["Please remember that my cat's name is Miso."], expect=[FactContains("Miso")]),
            Session(["What is my cat's name?"], expect=[ReplyAnswers("Miso")]),
        ]
    )


def model(server: StubServer, **options) -> OpenAIChatModel:
    options.setdefault("max_retries", 0)
    return OpenAIChatModel(server.base_url, "unused", "stub", **options)


def test_a_tool_calling_turn_round_trips_on_a_strict_server(tmp_path):
    with StubServer() as server:
        result = run_scenario(tmp_path / "agent", model(server), loop(), config=DONE)
    assert result.passed, str(result)
    assert not result.errors
    assert result.sessions[1].turns[0].reply == "From memory: my cat's name is Miso"
    first = server.requests[0]
    assert first["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in first["tools"]] == ["memory", "profile"]
    # The follow-up carries the assistant's tool calls with a string content, which the
    # server insists on (it answered 500 to the runner's former null).
    follow_up = server.requests[1]["messages"]
    assert [m["role"] for m in follow_up] == ["system", "user", "assistant", "tool"]
    assert follow_up[2]["content"] == ""
    assert follow_up[3]["content"] == "Memory updated."
    # Every message of the turn is on record, as sent afterwards.
    logged = result.sessions[0].turns[0].messages
    assert logged == follow_up[1:] + [{"role": "assistant", "content": "Saved."}]


def test_the_server_refuses_null_and_missing_content_as_llama_cpp_does():
    import openai

    with StubServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        call = tool_call("memory", {"action": "search"}, "call_1")
        for assistant in ({"role": "assistant", "tool_calls": [call]},
                          {"role": "assistant", "content": None, "tool_calls": [call]}):
            messages = [
                {"role": "user", "content": "hi"},
                assistant,
                {"role": "tool", "tool_call_id": "call_1", "content": "[]"},
            ]
            with pytest.raises(openai.InternalServerError, match="Input should be a valid string"):
                client.chat.completions.create(model="stub", messages=messages)


def test_without_tool_choice_the_model_never_sees_the_tools(tmp_path):
    with StubServer() as server:
        result = run_scenario(
            tmp_path / "agent", model(server, tool_choice=None), loop(), config=DONE
        )
    assert "tool_choice" not in server.requests[0]
    assert result.sessions[0].turns[0].reply == "I cannot save anything."
    assert [o.passed for s in result.sessions for o in s.outcomes] == [False, False]


def test_escaped_prompts_and_dropped_tool_results(tmp_path):
    with StubServer(escape_html=True) as server:
        result = run_scenario(tmp_path / "escaped", model(server), loop(), config=DONE)
    assert result.passed, str(result)
    system = server.seen[-1][0]["content"]
    assert "&lt;facts&gt;" in system and "<facts>" not in system

    with StubServer(drop_tool_results=True) as server:
        result = run_scenario(tmp_path / "dropped", model(server), loop(), config=DONE)
    # The write happened; the model just never saw its result, and the loop still ended.
    assert result.sessions[0].facts_after == "- my cat's name is Miso\n"
    assert [m["role"] for m in server.seen[1]] == ["system", "user", "assistant"]
    assert result.sessions[0].turns[0].reply == "OK."
    assert result.sessions[1].passed


def test_the_model_reads_a_clear_error_for_a_raw_newline_in_its_arguments(tmp_path):
    broken = '{"action": "append", "text": "line one\nline two"}'

    def brain(messages, tools):
        if messages[-1]["role"] == "tool":
            return text("I will escape it.")
        return calls(tool_call("memory", broken))

    with StubServer(brain) as server:
        result = run_scenario(tmp_path / "agent", model(server), Scenario([Session(["go"])]),
                              config=DONE)
    (call,) = result.sessions[0].tool_calls
    expected = (
        "Error: MCP error -32602: Tool arguments are not valid JSON: Invalid control character "
        "at line 1 column 39; a raw newline or tab inside a string must be escaped (\\n, \\t)"
    )
    assert (call.result, call.is_error) == (expected, True)
    assert server.seen[-1][-1] == {"role": "tool", "tool_call_id": "call_1", "content": expected}


class Flaky:
    """Fails ``failures`` times with HTTP 500, then answers."""

    def __init__(self, failures: int) -> None:
        self.failures = failures

    def __call__(self, messages, tools):
        if self.failures:
            self.failures -= 1
            return Fail(500, '{"error": {"message": "model is loading"}}')
        return text("Hello.")


def test_retries_and_failed_calls_are_recorded(tmp_path):
    with StubServer(Flaky(2)) as server:
        retried = run_scenario(
            tmp_path / "a", model(server, max_retries=2, retry_wait=0), Scenario([Session(["hi"])])
        )
    (call,) = retried.sessions[0].model_calls
    assert (call.error, call.retries, retried.sessions[0].turns[0].reply) == ("", 2, "Hello.")
    assert call.retry_errors == [
        "InternalServerError: Error code: 500 - model is loading"
    ] * 2
    assert len(server.requests) == 3

    with StubServer(Flaky(5)) as server:
        failed = run_scenario(
            tmp_path / "b", model(server, max_retries=1, retry_wait=0),
            Scenario([Session(["hi", "again"])]),
        )
    session = failed.sessions[0]
    first, second = session.model_calls
    assert first.error == (
        "InternalServerError: Error code: 500 - model is loading"
    )
    assert (first.retries, first.output_tokens, first.estimated) == (1, 0, True)
    assert first.latency_s > 0
    assert second.error and second.retries == 1
    cost = session.cost()
    assert (cost["model_calls"], cost["failed_calls"], cost["retries"]) == (2, 2, 2)
    assert len(failed.errors) == 2 and len(server.requests) == 4


def test_an_html_body_is_named_not_reported_as_no_choices():
    page = "<html><body><h1>502 Bad Gateway</h1></body></html>"
    with (
        StubServer(lambda messages, tools: Fail(200, page, "text/html")) as server,
        pytest.raises(ModelResponseError) as info,
    ):
        model(server).complete([{"role": "user", "content": "hi"}], [])
    assert str(info.value) == (
        "openai:stub: the endpoint answered HTTP 200 with text/html, not a chat completion: "
        f"{page!r}"
    )


def load_script():
    spec = importlib.util.spec_from_file_location("local_model_loop", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_local_model_loop_script_reports_what_was_written_and_recalled(tmp_path):
    script = load_script()
    with StubServer() as server:
        out = io.StringIO()
        code = script.main(
            ["--base-url", server.base_url, "--model", "stub", "--folder", str(tmp_path)], out
        )
        printed = out.getvalue()
    assert code == 0, printed
    assert (
        '  tool memory({"action": "update", "content": "- my favourite colour is teal\\n"}) '
        "-> [ok] Memory updated."
    ) in printed.splitlines()
    assert "+- my favourite colour is teal" in printed
    assert "model: From memory: my favourite colour is teal" in printed
    assert printed.splitlines()[-2:] == ["Recalled: yes", f"Agent folder: {tmp_path / 'agent'}"]
    assert server.requests[0]["temperature"] == 0
    assert AgentMemory.open(tmp_path / "agent").facts == "- my favourite colour is teal\n"

    # A server that ignores the tools (no tool_choice honoured, as if never sent): no recall.
    def deaf(messages, tools):
        return MemoryBrain()(messages, [])

    with StubServer(deaf) as server:
        out = io.StringIO()
        code = script.main(["--base-url", server.base_url, "--model", "stub",
                            "--folder", str(tmp_path / "deaf")], out)
    assert code == 1
    assert "model: I cannot save anything." in out.getvalue()
    assert out.getvalue().splitlines()[-2] == "Recalled: no"

    # A server that fails: exit code 2, and the failed call is shown with its error.
    with StubServer(lambda messages, tools: Fail(503)) as server:
        out = io.StringIO()
        code = script.main(["--base-url", server.base_url, "--model", "stub",
                            "--folder", str(tmp_path / "down")], out)
    assert code == 2
    assert re.search(r"session 1: \d+\.\d\d s, \d+ in / 0 out \(estimated\), finish -, "
                     r"FAILED: InternalServerError: Error code: 503", out.getvalue())


def test_json_of_a_result_keeps_the_call_records(tmp_path):
    with StubServer(Flaky(1)) as server:
        result = run_scenario(tmp_path / "agent", model(server, max_retries=1, retry_wait=0),
                              Scenario([Session(["hi"])]))
    loaded = type(result).from_json(result.to_json())
    assert loaded.sessions[0].model_calls == result.sessions[0].model_calls
    assert json.loads(result.to_json())["sessions"][0]["turns"][0]["model_calls"][0]["retries"] == 1
