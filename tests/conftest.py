"""Shared fixtures: every test gets its own agents root and never touches the real home."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

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

API = ("agent-memory", "api")


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


@pytest.fixture(scope="session")
def ip(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - InteractiveShell, lazily
    """The process's one IPython shell, its IPython directory in a temp folder.

    ``InteractiveShell.instance()`` is a singleton: whichever module asks first creates it, so
    every module that needs a real shell takes it from here.
    """
    from IPython.core.interactiveshell import InteractiveShell

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IPYTHONDIR", str(tmp_path_factory.mktemp("ipython")))
        return InteractiveShell.instance()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace folder (where a prompt looks for ``system.md``)."""
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder


# -- the REST API on pytest-jupyter's server -------------------------------------------------


@pytest.fixture
def server_only_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tmp_path / "agents"``, known to the server alone: both memory variables are unset.

    A module that tests the server on its own binds its ``agents_root`` to this, so a handler
    that took its root or default agent from the environment instead of its settings fails.
    """
    monkeypatch.delenv("JUPYTER_AGENT_MEMORY_ROOT", raising=False)
    monkeypatch.delenv("JUPYTER_AGENT_MEMORY_AGENT", raising=False)
    return tmp_path / "agents"


@pytest.fixture
def server_root(agents_root: Path) -> Path:
    """The agents root the server is configured with: the other surfaces' unless overridden."""
    return agents_root


@pytest.fixture
def server_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    """More ``AgentMemoryServer`` settings: override in a module or parametrize indirectly."""
    return getattr(request, "param", {})


@pytest.fixture
def jp_server_config(server_root: Path, server_settings: dict[str, Any]) -> dict[str, Any]:
    """pytest-jupyter's server: only our extension, and anonymous callers refused.

    Terminals are off because their websocket has its own authentication story.
    """
    return {
        "ServerApp": {
            "jpserver_extensions": {
                "jupyter_agent_memory": True,
                "jupyter_server_terminals": False,
            },
            "allow_unauthenticated_access": False,
        },
        "AgentMemoryServer": {"root": str(server_root), **server_settings},
    }


@pytest.fixture
def call(jp_fetch: Any) -> Callable[..., Awaitable[tuple[int, Any]]]:
    """``await call(method, *path, body=..., raw=..., params=...)`` -> (status, parsed JSON).

    ``path`` is below the API prefix; ``body`` is sent as JSON, ``raw`` as given, and a POST or
    PUT with neither sends an empty body. Errors come back as their status, never raised.
    """

    async def _call(
        method: str, *parts: str, body: Any = None, raw: bytes | None = None, **kwargs: Any
    ) -> tuple[int, Any]:
        if raw is None and body is not None:
            raw = json.dumps(body).encode()
        if raw is None and method in ("POST", "PUT"):
            raw = b""
        response = await jp_fetch(
            *API, *parts, method=method, body=raw, raise_error=False, **kwargs
        )
        text = response.body.decode() if response.body else ""
        return response.code, json.loads(text) if text else None

    return _call
