"""Every surface stays up on a journal another tool wrote badly.

A line with a lone-surrogate JSON escape (half an emoji) or an invalid UTF-8 byte is read back
with U+FFFD in place, kept, never dropped, so the text can always be encoded for a terminal,
a notebook, JSON over HTTP or a tool result. (The MCP server's own test drives it over stdio.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.engine.functions import dispatch

LINES = [
    b'{"ts":"2026-01-01T00:00:00.000Z","tags":["x"],"text":"half \\ud83d emoji"}\n',
    b'{"ts":"2026-01-01T00:00:01.000Z","tags":["x"],"text":"bad \xff byte"}\n',
    b'{"ts":"2026-01-01T00:00:02.000Z","tags":["x\\udc00"],"text":"odd tag"}\n',
]
TEXTS = ["odd tag", "bad \ufffd byte", "half \ufffd emoji"]  # newest first


@pytest.fixture
def hostile(mem: AgentMemory) -> AgentMemory:
    (mem.path / "memory" / "JOURNAL.jsonl").write_bytes(b"".join(LINES))
    return mem


def test_the_engine_reads_them_with_replacement_characters(hostile: AgentMemory) -> None:
    assert [e["text"] for e in hostile.search(tag="x")] == TEXTS[1:]
    assert [e["text"] for e in hostile.search()] == TEXTS
    assert hostile.search(tag="x\ufffd")[0]["text"] == "odd tag"
    for entry in hostile.entries():
        json.dumps(entry, ensure_ascii=False).encode("utf-8")  # never raises


def test_dispatch_returns_sendable_text(hostile: AgentMemory) -> None:
    text = dispatch(hostile, "memory", {"action": "search"})
    text.encode("utf-8")
    assert [e["text"] for e in json.loads(text)] == TEXTS


def test_the_cli_prints_them(hostile: AgentMemory, agents_root: Path) -> None:
    env = {**os.environ, "JUPYTER_AGENT_MEMORY_ROOT": str(agents_root), "PYTHONIOENCODING": ""}
    done = subprocess.run(
        [sys.executable, "-m", "jupyter_agent_memory", "journal", "search", "--agent", "t",
         "--json"],
        capture_output=True, env=env, timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, b"")
    assert [e["text"] for e in json.loads(done.stdout.decode("utf-8"))] == TEXTS
    done = subprocess.run(  # and the list for people
        [sys.executable, "-m", "jupyter_agent_memory", "journal", "search", "--agent", "t"],
        capture_output=True, env=env, timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, b"")
    assert "half \ufffd emoji" in done.stdout.decode("utf-8")


def test_the_journal_magic_shows_them(hostile: AgentMemory, ip: Any) -> None:
    from IPython.utils.capture import capture_output

    ip.run_line_magic("load_ext", "jupyter_agent_memory")
    try:
        with capture_output():
            result = ip.run_line_magic("journal", "search --agent t")
        assert [e["text"] for e in result] == TEXTS
        data, _ = ip.display_formatter.format(result)
        for value in data.values():
            str(value).encode("utf-8")
        assert "half \ufffd emoji" in data["text/plain"]
    finally:
        ip.run_line_magic("unload_ext", "jupyter_agent_memory")
