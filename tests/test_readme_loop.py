"""The README's function-calling loop, as printed, against a server as strict as local ones."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from stub_openai import MemoryBrain, StubServer

from jupyter_agent_memory import AgentMemory

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_loop() -> str:
    """The first Python block of the README's "Function calling" section."""
    section = README.read_text(encoding="utf-8").split("\n## Function calling\n", 1)[1]
    block = re.search(r"```python\n(.*?)\n```", section, re.S)
    assert block is not None
    return block.group(1)


def test_the_readme_loop_learns_a_fact_and_leaves_a_receipt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the loop's ./demo-agent
    with StubServer(MemoryBrain()) as server:
        # The loop runs exactly as printed: the OpenAI client reads where to go from here.
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "unused")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(readme_loop(), "README.md", "exec"), {})
        requests = server.requests
    assert printed.getvalue() == "Saved.\n"
    mem = AgentMemory.open(tmp_path / "demo-agent", create=False)
    assert mem.facts == "- I prefer metric units\n"
    (receipt,) = mem.sessions()
    assert receipt["client"]["name"] == "my-loop"
    # Two requests: the tool call, then the answer after the tool's result; the assistant's
    # tool-call turn went back with string content, and every request asked for tools.
    assert len(requests) == 2
    assert all(body["tool_choice"] == "auto" for body in requests)
    assert [t["function"]["name"] for t in requests[0]["tools"]] == ["memory", "profile"]
    (assistant,) = [m for m in requests[1]["messages"] if m["role"] == "assistant"]
    assert assistant["content"] == "" and assistant["tool_calls"]
    tool_result = requests[1]["messages"][-1]
    assert (tool_result["role"], tool_result["content"]) == ("tool", "Memory updated.")


def test_the_readme_loop_is_bounded() -> None:
    code = readme_loop()
    assert "while True" not in code
    assert re.search(r"^for _ in range\(\d+\):", code, re.M)
