"""The REST API refuses anonymous callers, and every handler is declared authenticated.

Also checks the plain-data route table (``ROUTES``) against the handlers really registered,
and that importing the extension package stays light.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
import tornado.web
from jupyter_server.serverapp import _has_tornado_web_authenticated
from jupyter_server.utils import JupyterServerAuthWarning
from processes import run_python

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.server import API_PREFIX, ROUTES
from jupyter_agent_memory.server.handlers import HANDLERS, AgentMemoryHandler


@pytest.fixture
def agents_root(server_only_root: Path) -> Path:
    """The agents root, known to the server alone."""
    return server_only_root


def implemented_methods(handler: type[tornado.web.RequestHandler]) -> set[str]:
    """HTTP verbs our classes implement (not tornado's 405 stubs, not jupyter_server's own)."""
    ours = [cls for cls in handler.__mro__ if issubclass(cls, AgentMemoryHandler)]
    return {
        verb
        for verb in handler.SUPPORTED_METHODS
        if any(verb.lower() in vars(cls) for cls in ours)
    }


def route_url(pattern: str) -> str:
    """A concrete URL path (below the base URL) for a ROUTES pattern."""
    return (
        pattern.replace("{id}", "demo").replace("{sha}", "abcdef0")
        .replace("{sid}", "abcdef01").replace("{other}", "abcdef02").lstrip("/")
    )


def test_every_handler_verb_is_authenticated() -> None:
    missing = [
        f"{verb} of {handler.__name__}"
        for _pattern, handler in HANDLERS
        for verb in implemented_methods(handler)
        if not _has_tornado_web_authenticated(getattr(handler, verb.lower()))
    ]
    assert missing == []
    # Anything else answering is jupyter_server's explicitly allow-listed CORS preflight.
    for _pattern, handler in HANDLERS:
        for verb in set(handler.SUPPORTED_METHODS) - implemented_methods(handler):
            method = getattr(handler, verb.lower())
            if method is not tornado.web.RequestHandler._unimplemented_method:
                assert (verb, hasattr(method, "__allow_unauthenticated")) == ("OPTIONS", True)


def test_the_authentication_check_catches_a_bare_handler() -> None:
    # Guards the test above: a verb without the decorator must be detected.
    class Bare(AgentMemoryHandler):
        async def get(self) -> None:
            self.finish("{}")

    assert implemented_methods(Bare) == {"GET"}
    assert not _has_tornado_web_authenticated(Bare.get)


def test_server_start_emits_no_auth_warning_for_our_routes(jp_configurable_serverapp) -> None:
    # Recorded rather than raised: the server catches errors from extension loading.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        app = jp_configurable_serverapp()
    auth_warnings = [str(w.message) for w in caught if w.category is JupyterServerAuthWarning]
    assert auth_warnings == []
    # The extension really loaded (so its handlers went through the server's check).
    assert "agent_memory" in app.web_app.settings
    assert app.extension_manager.extensions["jupyter_agent_memory"].enabled


def test_routes_table_matches_handlers() -> None:
    assert len(ROUTES) == len(HANDLERS)
    for (methods, pattern, description), (regex, handler) in zip(ROUTES, HANDLERS, strict=True):
        assert pattern.startswith(API_PREFIX + "/")
        as_regex = pattern.replace("{id}", "(?P<agent>[^/]+)").replace("{sha}", "(?P<sha>[^/]+)")
        for name in ("sid", "other"):
            as_regex = as_regex.replace(f"{{{name}}}", f"(?P<{name}>[^/]+)")
        assert as_regex == regex
        assert re.fullmatch(regex, "/" + route_url(pattern))
        assert set(methods) == implemented_methods(handler), handler.__name__
        assert description.endswith(".") and len(description) < 120


def test_server_package_import_is_light() -> None:
    code = (
        "import sys, json, jupyter_agent_memory.server as s; "
        "print(json.dumps([sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tornado', 'jupyter_server')), len(s.ROUTES)]))"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[], len(ROUTES)]


@pytest.mark.parametrize(
    ("method", "pattern"),
    [(method, pattern) for methods, pattern, _ in ROUTES for method in methods],
)
async def test_anonymous_requests_are_403(
    http_server_client, jp_base_url, agents_root: Path, method: str, pattern: str
) -> None:
    mem = AgentMemory.open_id("demo", agents_root)
    mem.update_facts("- secret\n")
    mem.update_facts("- newer secret\n")
    before = sorted(p.relative_to(agents_root) for p in agents_root.rglob("*"))
    body = (
        json.dumps({"id": "new", "content": "pwned", "text": "pwned", "expected_sha256": None})
        if method in ("POST", "PUT")
        else None
    )
    response = await http_server_client.fetch(
        jp_base_url + route_url(pattern), method=method, body=body, raise_error=False
    )
    assert response.code == 403
    assert b"secret" not in response.body
    assert mem.facts == "- newer secret\n"
    assert list(mem.entries()) == []
    assert sorted(p.relative_to(agents_root) for p in agents_root.rglob("*")) == before


async def test_wrong_token_is_403(http_server_client, jp_base_url, agents_root: Path) -> None:
    AgentMemory.open_id("demo", agents_root)
    response = await http_server_client.fetch(
        jp_base_url + "agent-memory/api/agents/demo/facts",
        headers={"Authorization": "token not-the-token"},
        raise_error=False,
    )
    assert response.code == 403
