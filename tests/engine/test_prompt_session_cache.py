"""``build_session`` caches the agent's template but never misses a change to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jupyter_agent_memory import AgentMemory, PromptBuilder, provision
from jupyter_agent_memory.engine import templates as templates_module


def make_template(folder: Path, spec: dict) -> Path:
    folder.mkdir()
    (folder / "agent.json").write_text(json.dumps(spec))
    return folder


def test_an_unchanged_session_build_does_not_reload_the_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = make_template(tmp_path / "tpl", {"name": "T", "instructions": "Be a tutor."})
    mem = AgentMemory.open(tmp_path / "agent")
    provision(template, mem)
    builder = PromptBuilder()
    first = builder.build_session(mem, workspace=tmp_path)
    builder.build_session(mem, workspace=tmp_path)

    def no_loading(*args: object, **kwargs: object) -> None:
        raise AssertionError("an unchanged session build must not reload the template")

    monkeypatch.setattr(templates_module, "template_for", no_loading)
    assert builder.build_session(mem, workspace=tmp_path) is first


def test_template_edits_and_a_new_record_are_seen(tmp_path: Path) -> None:
    template = make_template(tmp_path / "tpl", {"name": "T"})
    mem = AgentMemory.open(tmp_path / "agent")
    provision(template, mem)
    builder = PromptBuilder()
    assert builder.build_session(mem, workspace=tmp_path).bootstrap is True
    # Instructions added to agent.json (same size or not): no bootstrap any more.
    (template / "agent.json").write_text(json.dumps({"name": "T", "instructions": "Tutor."}))
    assert builder.build_session(mem, workspace=tmp_path).bootstrap is False
    # A budget appears in the configuration.
    (template / "agent.json").write_text(
        json.dumps({"name": "T", "instructions": "Tutor.", "configuration": {"budget_tokens": 7}})
    )
    with pytest.warns(UserWarning, match="over the budget of 7"):
        assert builder.build_session(mem, workspace=tmp_path).budget_tokens == 7
    # The agent is provisioned again from another template: the record changes.
    other = make_template(tmp_path / "other", {"name": "O"})
    provision(other, mem)
    prompt = builder.build_session(mem, workspace=tmp_path)
    assert prompt.budget_tokens is None and prompt.bootstrap is True
    # The template disappears: defaults, and it is looked up again when it comes back.
    (other / "agent.json").unlink()
    assert builder.build_session(mem, workspace=tmp_path).bootstrap is True
    (other / "agent.json").write_text(json.dumps({"name": "O", "instructions": "Back."}))
    assert builder.build_session(mem, workspace=tmp_path).bootstrap is False
