"""Which public methods of ``AgentMemory`` sit behind the engine boundary (OSError becomes
MemoryIOError), and which do not."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.errors import MemoryIOError

GUARDED = {
    "append", "build_index", "call_tool", "check_folder", "diff_sessions", "drop_index",
    "ensure_layout", "facts", "facts_sha256", "file_path", "file_sizes", "file_stats",
    "generation", "history", "history_text", "history_version", "index_files", "index_status",
    "open", "open_id", "read_facts", "read_soul", "read_user", "replace_if_stock", "restore",
    "search", "search_journal", "session_prompt", "sessions", "soul", "soul_sha256",
    "tag_counts", "template_info", "update_facts", "user", "user_sha256", "why", "write_soul",
    "write_template_record", "write_user",
}
UNGUARDED = {"now", "exists", "close", "entries"}


def _function(member: Any) -> Any:
    if isinstance(member, property):
        return member.fget
    return getattr(member, "__func__", member)


def test_every_public_method_but_a_few_is_behind_the_engine_boundary() -> None:
    public = {name: m for name, m in vars(AgentMemory).items() if not name.startswith("_")}
    guarded = {name for name, m in public.items() if hasattr(_function(m), "__wrapped__")}
    assert guarded == GUARDED
    assert set(public) - guarded == UNGUARDED


def test_docstrings_survive_the_boundary() -> None:
    for name in GUARDED:
        member = vars(AgentMemory)[name]
        assert _function(member).__doc__, name
        if isinstance(member, property):
            assert member.__doc__ == member.fget.__doc__, name


def test_guarded_method_turns_oserror_into_memory_io_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = AgentMemory.open(tmp_path / "agent")

    def failing(*_args: Any, **_kwargs: Any) -> Any:
        raise OSError(errno.EIO, "injected", "somewhere")

    monkeypatch.setattr("jupyter_agent_memory.engine.access.read_agent_bytes", failing)
    with pytest.raises(MemoryIOError) as caught:
        _ = mem.soul
    assert caught.value.errno == errno.EIO
    with pytest.raises(MemoryIOError):
        mem.read_user()
    monkeypatch.setattr(mem, "clock", failing)
    with pytest.raises(OSError) as raw:
        mem.now()
    assert not isinstance(raw.value, MemoryIOError)
