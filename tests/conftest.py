"""Shared fixtures: every test gets its own agents root and never touches the real home."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# "ci" (the default) runs the property suites in full; "dev" is the quick lane's few examples:
#   pytest -m "not slow" --hypothesis-profile=dev
settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=10, deadline=None)
settings.load_profile("ci")

# jp_fetch and friends for the REST API tests (tests/test_server_*.py). tests/browser overrides
# this plugin's autouse fixtures, which would otherwise hold an asyncio loop per test.
pytest_plugins = ("pytest_jupyter.jupyter_server",)


@pytest.fixture
def agents_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, not yet created agents root; the default-agent override is unset.

    The working directory becomes ``tmp_path`` too, so a relative folder path such as
    ``./demo-agent`` can never land in the repository.
    """
    root = tmp_path / "agents"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_ROOT", str(root))
    monkeypatch.delenv("JUPYTER_AGENT_MEMORY_AGENT", raising=False)
    return root


@pytest.fixture
def mem(agents_root: Path):  # noqa: ANN201 - AgentMemory, imported lazily
    """The agent ``t`` under :func:`agents_root`, layout created."""
    from jupyter_agent_memory import AgentMemory

    return AgentMemory.open("t")
