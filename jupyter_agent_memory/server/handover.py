"""Agent folders a notebook's kernel hands over to the server, so the sidebar can follow them.

The REST API never takes a path from a request. ``POST handover {"kernel_id": ...}`` makes the
*server* ask that kernel (silently, as a user expression) where its active agent is; the caller
must be allowed to execute code in kernels. The reported folder must exist and is then known by
an opaque handle (``~`` and 16 hex digits) that every route accepts as an agent id.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from collections import OrderedDict
from pathlib import Path
from queue import Empty
from typing import Any

#: An agent id starting with this is a handle of a handed-over folder.
HANDOVER_PREFIX = "~"

#: What the server evaluates in the kernel (no output, no history, nothing opened or created).
KERNEL_EXPRESSION = (
    "__import__('jupyter_agent_memory.notebook.magics', fromlist=['active_agent_location'])"
    ".active_agent_location(get_ipython())"
)

#: Handed-over folders kept at once; the oldest handle is forgotten beyond this.
MAX_HANDOVERS = 256


class HandoverError(Exception):
    """A handover that cannot be done: ``status`` is the HTTP status, ``message`` the reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Handovers:
    """The folders kernels handed over, by handle (the same folder keeps its handle)."""

    def __init__(self) -> None:
        self._paths: OrderedDict[str, Path] = OrderedDict()
        self._handles: dict[Path, str] = {}

    def handle_for(self, folder: Path) -> str:
        """The handle of ``folder`` (an existing, resolved directory), made on first use."""
        handle = self._handles.get(folder)
        if handle is None:
            handle = f"{HANDOVER_PREFIX}{secrets.token_hex(8)}"
            self._paths[handle] = folder
            self._handles[folder] = handle
            while len(self._paths) > MAX_HANDOVERS:
                _old, gone = self._paths.popitem(last=False)
                del self._handles[gone]
        return handle

    def path_of(self, handle: str) -> Path:
        """The folder ``handle`` stands for; :class:`HandoverError` 404 if unknown or forgotten."""
        folder = self._paths.get(handle)
        if folder is None:
            raise HandoverError(404, f'No agent folder was handed over as "{handle}": a folder '
                                "outside the server's root is reachable only after its notebook's "
                                "kernel reports it (Show the Notebook's Agent Memory)")
        return folder


async def ask_kernel(kernel_manager: Any, kernel_id: str, timeout: float) -> dict[str, Any]:
    """What kernel ``kernel_id`` says about its active agent (``active_agent_location``)."""
    if kernel_id not in kernel_manager:
        raise HandoverError(404, f'No running kernel "{kernel_id}"')
    from jupyter_client.session import Session

    kernel = kernel_manager.get_kernel(kernel_id)
    # A session of our own: sharing the manager's would put every broadcast's signature in its
    # replay history, and the notebook's own connection would drop those as duplicates.
    shared = kernel.session
    client = kernel.client(session=Session(
        key=shared.key, signature_scheme=shared.signature_scheme, username="agent-memory"
    ))
    client.start_channels()
    try:
        msg_id = client.execute("", silent=True, store_history=False, allow_stdin=False,
                                user_expressions={"agent": KERNEL_EXPRESSION})
        deadline = time.monotonic() + timeout
        reply: dict[str, Any] = {}
        while reply.get("parent_header", {}).get("msg_id") != msg_id:
            left = deadline - time.monotonic()
            if left <= 0:
                raise HandoverError(504, f"The kernel did not answer within {timeout:g} s (is a "
                                    "cell still running?); try again when it is idle")
            with contextlib.suppress(Empty):  # the deadline check above reports it
                reply = await client.get_shell_msg(timeout=left)
    finally:
        client.stop_channels()
    result = (reply.get("content", {}).get("user_expressions") or {}).get("agent") or {}
    if result.get("status") != "ok":
        reason = result.get("evalue") or "no answer"
        raise HandoverError(409, f"The kernel could not tell where its agent is ({reason}); is "
                            "jupyter-agent-memory installed in the kernel's environment?")
    try:
        answer = json.loads(result["data"]["text/plain"])
    except (KeyError, TypeError, ValueError):
        answer = None
    if not isinstance(answer, dict):
        raise HandoverError(502, "The kernel's answer was not understood")
    return answer


def reported_folder(answer: dict[str, Any]) -> Path:
    """The existing folder a kernel's answer names; :class:`HandoverError` 409 otherwise."""
    if not answer.get("loaded"):
        raise HandoverError(
            409, "The notebook has not loaded the extension (%load_ext jupyter_agent_memory)"
        )
    if answer.get("error"):
        raise HandoverError(409, f"The notebook has no usable agent: {answer['error']}")
    path = answer.get("path")
    if not isinstance(path, str) or not os.path.isabs(path):
        raise HandoverError(502, "The kernel reported no absolute agent folder")
    if not os.path.isdir(path):
        raise HandoverError(409, f"The notebook's agent folder {path} does not exist yet: run a "
                            "memory magic (for example %fact) in the notebook first")
    return Path(os.path.realpath(path))


def agent_for(
    folder: Path, agent_id: str | None, agents_root: Path, workspace: Path, handovers: Handovers
) -> tuple[str, str]:
    """The id every route knows ``folder`` by, and how: its id (``agents-root``), ``@relative``
    below the server's root (``server-root``), else a handle (``handed-over``)."""
    if agent_id and folder == Path(os.path.realpath(agents_root)) / agent_id:
        return agent_id, "agents-root"
    workspace = Path(os.path.realpath(workspace))
    if folder != workspace and folder.is_relative_to(workspace):
        return f"@{folder.relative_to(workspace).as_posix()}", "server-root"
    return handovers.handle_for(folder), "handed-over"
