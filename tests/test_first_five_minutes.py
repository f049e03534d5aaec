"""A newcomer's first five minutes, literally: README command 1 in a fresh copy of the
repository with only ``python3`` on PATH, then each next step the demo prints, pasted as is.

The demo's steps are read from its own output, so a step that stops working, or a printed
command that cannot be pasted, fails here. Slow: it installs the project and its Jupyter
stack into a new virtual environment (pip's download cache is reused).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import anyio
import nbformat
import pytest
from checkouts import clean_checkout, clean_env, run
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = pytest.mark.slow

TOKEN = "first-five-minutes"
#: The shell a newcomer pastes into (the clean PATH holds only python3).
SHELL = shutil.which("bash") or "/bin/bash"


def readme_commands(checkout: Path) -> list[str]:
    """The two commands of the README's first code block."""
    readme = (checkout / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)\n```", readme, re.S)
    assert block is not None, "README.md starts with a bash block"
    return block.group(1).splitlines()


def next_steps(out: str) -> list[tuple[str, list[str]]]:
    """The demo's "Next:" list: each step's description and the lines to paste."""
    steps: list[tuple[str, list[str]]] = []
    for line in out.split("\nNext:\n", 1)[1].splitlines():
        if re.match(r"  \d+\. ", line):
            steps.append((line.strip(), []))
        elif line.startswith("       "):
            steps[-1][1].append(line.strip())
    return steps


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_readme_command_one_then_every_printed_step(tmp_path: Path) -> None:
    checkout = clean_checkout(tmp_path / "clone")
    env = clean_env(tmp_path)
    install, test_command = readme_commands(checkout)
    assert test_command == "bash .ci/run"
    code, out = run([SHELL, "-c", install], cwd=checkout, env=env, timeout=1800)
    assert code == 0, out[-4000:]
    steps = next_steps(out)
    assert [what.split(" ", 1)[1][:10] for what, _ in steps] == [
        "JupyterLab", "In a noteb", "An MCP cli"
    ]

    # 1. JupyterLab as printed (the page stays closed: no browser here), on a free port.
    (lab_command,) = steps[0][1]
    assert lab_command.startswith(".venv/bin/jupyter lab ")
    config = tmp_path / "jupyter-config"
    config.mkdir()
    port = free_port()
    (config / "jupyter_server_config.json").write_text(
        json.dumps(
            {
                "ServerApp": {"open_browser": False, "port": port, "port_retries": 0,
                              "allow_root": True},
                "IdentityProvider": {"token": TOKEN},
            }
        )
    )
    lab = subprocess.Popen(
        shlex.split(lab_command),
        cwd=checkout,
        env={**env, "JUPYTER_CONFIG_DIR": str(config)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        agents = _get_json(f"http://127.0.0.1:{port}/agent-memory/api/agents", lab)
        assert agents["default_agent"] == "demo"  # the sidebar opens on the demo's agent
        assert agents["agents"] == ["demo"]
        page = urllib.request.urlopen(
            f"http://127.0.0.1:{port}/lab/tree/notebooks/01-quickstart.ipynb?token={TOKEN}",
            timeout=30,
        )
        assert page.status == 200
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        lab.wait(30)

    # 2. The two notebook lines, in a notebook run by the environment's own kernel.
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("\n".join(steps[1][1]))]
    path = tmp_path / "steps.ipynb"
    nbformat.write(notebook, path)
    code, out = run(
        [".venv/bin/jupyter", "nbconvert", "--to", "notebook", "--execute", "--stdout",
         str(path)],
        cwd=checkout,
        env=env,
        timeout=300,
    )
    assert code == 0, out[-4000:]
    assert "Error" not in out and "demo" in out

    # 3. The MCP step: the install line (when printed) as is, then the client's command.
    *install_mcp, client = steps[2][1]
    for line in install_mcp:
        code, out = run([SHELL, "-c", line], cwd=checkout, env=env, timeout=900)
        assert code == 0, out[-4000:]
    spec = json.loads(client)
    assert Path(spec["command"]).is_absolute()  # desktop apps start it without a PATH
    params = StdioServerParameters(command=spec["command"], args=spec["args"], env=env)

    async def initialize() -> str:
        with anyio.fail_after(60):
            async with (
                stdio_client(params) as (read, write),
                ClientSession(read, write) as session,
            ):
                result = await session.initialize()
                return result.instructions or ""

    assert "## Memories" in anyio.run(initialize)


def _get_json(url: str, server: subprocess.Popen[bytes]) -> dict:
    """GET ``url`` with the token once the server answers (it takes a few seconds to start)."""
    deadline = time.monotonic() + 120
    while True:
        try:
            request = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}"})
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.load(response)
        except OSError:
            if server.poll() is not None:
                raise AssertionError(server.stderr.read().decode()[-4000:]) from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
