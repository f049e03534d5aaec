"""The engine answers what surfaces would otherwise recompute: write results and real names."""

from __future__ import annotations

import hashlib
from pathlib import Path

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.engine.store import WriteResult


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_write_result_is_the_new_sha_and_knows_what_it_replaced(mem: AgentMemory) -> None:
    first = mem.update_facts("- one\n")
    assert isinstance(first, WriteResult) and isinstance(first, str)
    assert first == first.sha256 == sha("- one\n")
    assert first.previous_sha256 == sha("")
    assert first.path == mem.path / "memory" / "FACT.md"
    second = mem.update_facts("- two\n", expected_sha256=first)
    assert (second, second.previous_sha256) == (sha("- two\n"), sha("- one\n"))
    restored = mem.restore(first[:7])
    assert (restored, restored.previous_sha256) == (sha("- one\n"), sha("- two\n"))
    soul = mem.write_soul("I am Pip.\n")
    assert (soul, soul.previous_sha256, soul.path) == (
        sha("I am Pip.\n"), sha(""), mem.path / "SOUL.md"
    )


def test_file_path_gives_the_name_on_disk(mem: AgentMemory, tmp_path: Path) -> None:
    (mem.path / "memory" / "fact.md").write_text("- lower-case name\n")
    (mem.path / "USER.md").rename(mem.path / "user.MD")
    assert mem.file_path("FACT.md") == mem.path / "memory" / "fact.md"
    assert mem.file_path("USER.md") == mem.path / "user.MD"
    assert mem.file_path("JOURNAL.jsonl") == mem.path / "memory" / "JOURNAL.jsonl"
    assert mem.update_facts("- updated\n").path == mem.path / "memory" / "fact.md"
    assert (mem.path / "memory" / "fact.md").read_text() == "- updated\n"
    missing = AgentMemory(tmp_path / "nowhere")
    assert missing.file_path("FACT.md") == tmp_path / "nowhere" / "memory" / "FACT.md"
    assert not (tmp_path / "nowhere").exists()


def test_file_sizes_are_bytes_on_disk_even_for_non_utf8(mem: AgentMemory) -> None:
    (mem.path / "memory" / "fact.md").write_bytes(b"caf\xe9 \xff\n")  # latin-1, 7 bytes
    mem.append("one")
    journal = (mem.path / "memory" / "JOURNAL.jsonl").stat().st_size
    assert mem.file_sizes() == {
        "SOUL.md": 0, "USER.md": 0, "FACT.md": 7, "JOURNAL.jsonl": journal
    }
    assert len(mem.facts.encode()) != 7  # what re-encoding the decoded text would have said
    assert AgentMemory(mem.path.parent / "none").file_sizes() == dict.fromkeys(
        ["SOUL.md", "USER.md", "FACT.md", "JOURNAL.jsonl"], -1
    )
