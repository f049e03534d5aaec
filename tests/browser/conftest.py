"""Browser tests: a real JupyterLab server and Debian's Chromium driven by Playwright (sync).

Run them on their own: ``pytest tests/browser`` (a separate invocation from the rest of the
suite). pytest-jupyter's autouse fixtures keep an asyncio loop per test, which the sync
Playwright API refuses to share, so they are replaced by no-ops here.

No browser is downloaded: Chromium comes from the system (``apt-get install chromium``), path
overridable with ``$CHROMIUM``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pages import LAUNCHER_HAS_FOCUS, PATIENCE_MS
from playwright.sync_api import expect

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(autouse=True)
def jp_server_cleanup() -> None:
    """No-op override of pytest-jupyter's autouse fixture (it needs an asyncio loop)."""


@pytest.fixture
def jp_asyncio_loop() -> None:
    """No-op override: the sync Playwright API must not run inside an asyncio loop."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Lab:
    """A running JupyterLab: where it listens and where its agents live."""

    url: str
    token: str
    agents_root: Path
    workspace: Path
    log: Path

    def lab_url(self, path: str = "") -> str:
        """The URL that opens a fresh JupyterLab layout (on ``path`` if given), token included."""
        where = f"lab/tree/{path}" if path else "lab"
        return f"{self.url}{where}?reset&token={self.token}"


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """Start ``jupyter lab`` once for the session, isolated from the user's settings.

    ``$AGENT_MEMORY_LAB_BASE`` names the (new, empty) folder to run it in instead of a temp
    one: the README's pictures are made with a neutral one, so they show no machine's paths.
    """
    chosen = os.environ.get("AGENT_MEMORY_LAB_BASE")
    base = Path(chosen) if chosen else tmp_path_factory.mktemp("lab")
    base.mkdir(parents=True, exist_ok=True)
    workspace, agents, settings = base / "workspace", base / "agents", base / "settings"
    workspace.mkdir()
    # No news or update toasts on top of the page.
    notification = settings / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    (notification / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(base / "config"),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
        "IPYTHONDIR": str(base / "ipython"),
        "JUPYTER_AGENT_MEMORY_ROOT": str(agents),
    }
    env.pop("JUPYTER_AGENT_MEMORY_AGENT", None)
    port, token = _free_port(), "browser-test-token"
    log = base / "lab.log"
    command = [
        sys.executable, "-m", "jupyterlab",
        "--no-browser",
        "--allow-root",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={workspace}",
        "--LabApp.expose_app_in_browser=True",
        "--JupyterNotebookApp.expose_app_in_browser=True",
        "--ServerApp.allow_unauthenticated_access=False",
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_until_up(url, token, process, log)
        yield Lab(url=url, token=token, agents_root=agents, workspace=workspace, log=log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_up(url: str, token: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited early:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}api/status?token={token}", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"jupyter lab did not start within 60 s:\n{log.read_text()}")


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium, headless, shared by the session."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: install Debian's chromium package")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def agents_root(lab: Lab) -> Path:
    """The server's agents root, emptied before each test."""
    shutil.rmtree(lab.agents_root, ignore_errors=True)
    return lab.agents_root


@dataclass
class Watch:
    """What a page did that a test may need to rule out: dialogs, requests, script errors."""

    dialogs: list[str]
    requests: list[str]
    errors: list[str]


_WATCHES: dict[int, Watch] = {}


@pytest.fixture
def new_page(browser):
    """A factory of fresh pages (1400x900) whose dialogs, requests and errors are recorded.

    Dialogs are dismissed, so a payload that calls ``alert`` cannot block the test.
    """
    contexts = []

    def make():
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(20_000)
        watch = Watch(dialogs=[], requests=[], errors=[])
        _WATCHES[id(page)] = watch

        def on_dialog(dialog) -> None:
            watch.dialogs.append(f"{dialog.type}: {dialog.message}")
            dialog.dismiss()

        page.on("dialog", on_dialog)
        context.on("request", lambda request: watch.requests.append(request.url))
        page.on("pageerror", lambda error: watch.errors.append(f"{error}\n{error.stack}"))
        return page

    yield make
    for context in contexts:
        context.close()


def watch_of(page) -> Watch:
    """The :class:`Watch` of a page made by :func:`new_page` (or :func:`page`)."""
    return _WATCHES[id(page)]


@pytest.fixture
def page(new_page, lab: Lab, agents_root: Path):
    """A fresh browser page with JupyterLab loaded (reset layout) and started."""
    page = new_page()
    page.goto(lab.lab_url())
    page.wait_for_function("() => window.jupyterapp !== undefined")
    page.evaluate(
        "async () => { await window.jupyterapp.started; await window.jupyterapp.restored; }"
    )
    # A reset layout opens the Launcher only after `restored`, and it takes the focus when it
    # comes: wait for it, or it closes a command palette (or steals a click) opened before.
    page.wait_for_function(LAUNCHER_HAS_FOCUS, timeout=PATIENCE_MS)
    return page


@pytest.fixture(autouse=True)
def patient_expect() -> Iterator[None]:
    """Let every ``expect`` of the browser tests wait up to ``pages.PATIENCE_MS`` for its
    state (Playwright's 5 s is too short on a busy 2-core machine; a state that comes sooner
    costs nothing more)."""
    expect.set_options(timeout=PATIENCE_MS)
    yield
    expect.set_options(timeout=5_000)
