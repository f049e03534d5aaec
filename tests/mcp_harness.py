"""Helpers shared by the MCP tests: isolated server processes and the outside (node) clients.

Servers always bind 127.0.0.1, every wait is bounded, and every process a helper starts is
stopped by the helper that started it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp import ClientSession, StdioServerParameters
    from mcp.types import InitializeResult

REPO = Path(__file__).resolve().parents[1]
CLIENTS = Path(__file__).resolve().parent / "mcp" / "clients"
TIMEOUT = 60
TS = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z"
START_LINE = re.compile(
    r"agent-memory: serving agent folder (?P<path>.+) over (?P<transport>stdio|streamable-http"
    r" at (?P<url>http://\S+)); tools: (?P<tools>[\w, ]+)(?P<rest>.*)"
)
#: The notification a client sends once the server has answered ``initialize``.
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def initialize_request(client: str, request_id: int = 1) -> dict[str, Any]:
    """A raw JSON-RPC ``initialize`` from a client calling itself ``client``."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": client, "version": "0"},
        },
    }


def tool_call_request(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A raw JSON-RPC ``tools/call`` of tool ``name`` with ``arguments``."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def child_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a server process: explicit, isolated from the user's folders."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(REPO),
        "JUPYTER_AGENT_MEMORY_ROOT": str(tmp_path / "root"),
        "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "HOME": str(tmp_path / "home"),
        "PYTHONIOENCODING": "utf-8",
        **extra,
    }


def server_command(agent: Path | str, *options: str) -> list[str]:
    """The command line an MCP host would run for ``agent``."""
    return [sys.executable, "-m", "jupyter_agent_memory", "mcp", "--agent", str(agent), *options]


def stdio_params(
    agent: Path | str, tmp_path: Path, *options: str, cwd: Path | None = None
) -> StdioServerParameters:
    """What the Python client needs to start :func:`server_command` in :func:`child_env`."""
    from mcp import StdioServerParameters  # the node-client tests run without the Python SDK

    command = server_command(agent, *options)
    return StdioServerParameters(
        command=command[0], args=command[1:], env=child_env(tmp_path), cwd=cwd
    )


@contextlib.asynccontextmanager
async def stdio_session(
    params: StdioServerParameters, **session_options: Any
) -> AsyncIterator[tuple[ClientSession, InitializeResult]]:
    """A Python-client session with the stdio server ``params`` start, already initialized.

    ``session_options`` go to ``ClientSession`` (``message_handler``, ``client_info``, ...);
    the caller bounds the wait.
    """
    from mcp import ClientSession, stdio_client

    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, **session_options) as session,
    ):
        yield session, await session.initialize()


def text_of(result: Any) -> str:
    """The single text block of a Python-client tool result."""
    assert len(result.content) == 1
    assert result.content[0].type == "text"
    return result.content[0].text


def raw_stdio_exchange(
    agent: Path | str, tmp_path: Path, lines: list[str], stderr: Path | None = None
) -> tuple[list[dict[str, Any]], str, int]:
    """Talk raw JSON-RPC to a stdio server, as a host does, one line at a time.

    ``lines`` are sent as written (so hand-made escapes reach the server untouched); after a
    request (a line with an ``"id"``) its reply is read before the next line goes out. Then
    stdin is closed. Returns the replies in order, whatever stdout still held after them, and
    the exit status; the server's stderr goes to the file ``stderr`` when given. A server
    that hangs is killed after ``TIMEOUT`` seconds.
    """
    errors = open(stderr, "w", encoding="utf-8") if stderr else subprocess.DEVNULL  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            server_command(agent),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            encoding="utf-8",
            env=child_env(tmp_path),
        )
    finally:
        if stderr:
            errors.close()
    assert proc.stdin is not None and proc.stdout is not None
    watchdog = threading.Timer(TIMEOUT, proc.kill)
    watchdog.start()
    replies = []
    try:
        for line in lines:
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            if '"id"' in line:
                replies.append(json.loads(proc.stdout.readline()))
        proc.stdin.close()
        rest = proc.stdout.read()
        status = proc.wait(timeout=TIMEOUT)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
    return replies, rest, status


def stop(proc: subprocess.Popen) -> None:
    """Stop a process this module started: SIGTERM, then SIGKILL after a bounded wait."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@contextlib.contextmanager
def http_server(
    agent: Path, tmp_path: Path, *options: str, env: dict[str, str] | None = None
) -> Iterator[dict[str, Any]]:
    """Run ``mcp --transport streamable-http --port 0`` and yield its start-up line's parts.

    The server picks a free port and names it in the start-up line on stderr, which is read
    here (bounded by ``TIMEOUT``); the rest of stderr is drained in a thread so the server
    never blocks on a full pipe. Yields ``{"url", "path", "tools", "line", "stderr",
    "process"}``, where ``stderr`` is a list that fills as the server logs.
    """
    cmd = server_command(agent, "--transport", "streamable-http", "--port", "0", *options)
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or child_env(tmp_path),
        cwd=tmp_path,
    )
    lines: list[str] = []
    found: dict[str, str] = {}
    ready = threading.Event()

    def drain() -> None:
        for line in proc.stderr:
            lines.append(line)
            match = START_LINE.match(line.strip())
            if match and not found:
                found.update(match.groupdict(), line=line.strip())
                ready.set()
        ready.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        assert ready.wait(TIMEOUT), "the HTTP server did not start in time"
        assert found, f"no start-up line; stderr: {''.join(lines)!r}"
        yield {**found, "stderr": lines, "process": proc}
    finally:
        stop(proc)
        reader.join(timeout=15)
        proc.stdout.close()
        proc.stderr.close()


# ------------------------------------------------------------------------ node clients


def node_clients() -> Path:
    """``tests/mcp/clients`` with its pinned packages installed (``npm ci`` when missing).

    The lockfile pins the MCP Inspector and the TypeScript SDK; ``npm ci`` installs exactly
    those versions. A file lock keeps two test processes from installing at once.
    """
    modules = CLIENTS / "node_modules"
    marker = modules / ".package-lock.json"
    if (
        marker.exists()
        and marker.stat().st_mtime >= (CLIENTS / "package-lock.json").stat().st_mtime
    ):
        return CLIENTS
    npm = shutil.which("npm")
    assert npm, "npm is needed for the outside-client tests (Node 20 or later)"
    with open(CLIENTS / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (
            not marker.exists()
            or marker.stat().st_mtime < (CLIENTS / "package-lock.json").stat().st_mtime
        ):
            subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=CLIENTS,
                check=True,
                timeout=600,
                stdout=subprocess.DEVNULL,
            )
    return CLIENTS


def inspector(
    tmp_path: Path,
    target: list[str],
    *args: str,
    env: dict[str, str] | None = None,
    codes: tuple[int, ...] = (0,),
) -> dict[str, Any]:
    """Run the MCP Inspector CLI once: ``{"rc", "out", "err"}`` (``out`` parsed from JSON).

    ``target`` is a server command line (stdio) or ``[url]`` (HTTP). For stdio the server
    gets the variables of ``env`` through the Inspector's ``-e`` flags, which is how a user
    passes them. ``codes`` are the exit statuses expected (the CLI exits 5 when a tool result
    has ``isError``, 1 when a request fails, and then prints its error on stderr).
    """
    clients = node_clients()
    cmd = [str(clients / "node_modules" / ".bin" / "mcp-inspector"), "--cli"]
    if len(target) > 1:
        for key, value in (env or child_env(tmp_path)).items():
            cmd += ["-e", f"{key}={value}"]
    cmd += [*target, *args]
    out = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=tmp_path,
        env={
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp_path / "home"),
            "MCP_CATALOG_PATH": str(tmp_path / "inspector-catalog.json"),
        },
    )
    assert out.returncode in codes, (cmd, out.returncode, out.stdout, out.stderr)
    return {
        "rc": out.returncode,
        "out": json.loads(out.stdout) if out.stdout.strip() else None,
        "err": out.stderr,
    }


def sdk_client(plan: dict[str, Any], tmp_path: Path) -> list[Any]:
    """Run ``sdk_client.mjs`` (the TypeScript SDK's client) on ``plan``; its step results."""
    clients = node_clients()
    node = shutil.which("node")
    assert node, "node is needed for the outside-client tests"
    out = subprocess.run(
        [node, str(clients / "sdk_client.mjs")],
        input=json.dumps(plan),
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "home")},
    )
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    report = json.loads(out.stdout)
    return report


def host_prompt(mem: Any, workspace: Any) -> Any:
    """The session prompt the MCP server gives for ``mem``: the MCP host's toolset."""
    from jupyter_agent_memory import PromptBuilder
    from jupyter_agent_memory.mcp_server.service import host_tools

    return PromptBuilder(tools=host_tools()).build_session(mem, workspace)
