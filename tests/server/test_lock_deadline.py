"""REST writes to a locked agent fail after the lock timeout, however many are queued."""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent_memory import AgentMemory


@pytest.fixture
def agents_root(server_only_root: Path) -> Path:
    """The agents root, known to the server alone."""
    return server_only_root


@pytest.fixture
def mem(agents_root: Path) -> AgentMemory:
    """The ``demo`` agent, created through the engine."""
    return AgentMemory.open_id("demo", agents_root)


@pytest.mark.parametrize(
    "server_settings", [{"lock_timeout": 1.0, "worker_threads": 4}], indirect=True
)
async def test_queued_writes_to_a_locked_agent_all_fail_after_one_timeout(
    call: Any, mem: AgentMemory
) -> None:
    # One slot per agent (4 workers // 4): before, the 12 writes went through the slot one at
    # a time, each waiting its own second for the lock, and the last failed after 12 s.
    fd = os.open(mem.path / "memory" / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as another process's writer would
    try:
        started = time.monotonic()

        async def write(i: int) -> tuple[float, int, Any]:
            status, body = await call("POST", "agents", "demo", "journal", body={"text": f"w{i}"})
            return time.monotonic() - started, status, body

        results = await asyncio.gather(*(write(i) for i in range(12)))
    finally:
        os.close(fd)
    for _elapsed, status, body in results:
        assert status == 503
        assert body["message"].startswith("Timed out after 1 s waiting for the lock ")
        assert "nothing was written" in body["message"]
    # Each write waited its whole second (none gave up early) and none queued behind another
    # (queued, the last failed after 12 s): the deadline is one timeout from the request.
    fastest = min(elapsed for elapsed, _status, _body in results)
    slowest = max(elapsed for elapsed, _status, _body in results)
    assert fastest >= 1.0, f"a write failed after {fastest:.2f} s, before the lock timeout"
    # Queued, the last would fail after 12 s; 4 s leaves room for a loaded machine (2.504 s
    # was seen at load 12) and still fails when even four writes wait one after another.
    assert slowest < 4.0, f"the last write failed after {slowest:.1f} s"
    assert list(mem.entries()) == []
    status, _body = await call("POST", "agents", "demo", "journal", body={"text": "after"})
    assert status == 201
