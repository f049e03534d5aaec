"""FACT.md history (design 4.5): kept versions, bound, order, restore by sha or prefix."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest

from jupyter_agent_memory import AgentMemory, MemoryToolError, PromptBuilder, VersionNotFoundError

HISTORY_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
BAD_REF = 'Invalid version "{}": give a sha256 or a prefix of at least 7 hex digits'
HISTORY_NAME = re.compile(r"^\d{8}T\d{6}\.\d{6}Z-[0-9a-f]{12}\.md$")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def history_dir(mem: AgentMemory) -> Path:
    return mem.path / "memory" / ".history"


def colliding_pair() -> tuple[str, str]:
    """Two different texts whose sha256 share their first 7 hex digits (birthday search)."""
    seen: dict[str, str] = {}
    i = 0
    while True:
        text = f"version {i}\n"
        prefix = sha(text)[:7]
        if prefix in seen:
            return seen[prefix], text
        seen[prefix] = text
        i += 1


def test_no_history_for_a_new_agent(mem: AgentMemory) -> None:
    assert mem.history() == []
    assert not history_dir(mem).exists()


def test_first_update_keeps_nothing_because_the_previous_file_was_empty(mem: AgentMemory) -> None:
    mem.update_facts("v1\n")
    assert mem.history() == []
    (mem.path / "memory" / "FACT.md").write_bytes(b"")
    mem.update_facts("v2\n")
    assert mem.history() == []


def test_previous_versions_are_kept_newest_first(mem: AgentMemory) -> None:
    for text in ("v1\n", "v2 longer\n", "v3\n"):
        mem.update_facts(text)
    versions = mem.history()
    assert [(v["sha256"], v["size"]) for v in versions] == [
        (sha("v2 longer\n"), 10),
        (sha("v1\n"), 3),
    ]
    assert all(list(v) == ["ts", "sha256", "size"] for v in versions)
    assert all(HISTORY_TS.match(v["ts"]) for v in versions)
    assert versions[0]["ts"] > versions[1]["ts"]
    names = sorted(os.listdir(history_dir(mem)))
    assert all(HISTORY_NAME.match(n) for n in names), names
    assert [n.split("-")[1] for n in names] == [
        sha("v1\n")[:12] + ".md",
        sha("v2 longer\n")[:12] + ".md",
    ]
    assert [(history_dir(mem) / n).read_text() for n in names] == ["v1\n", "v2 longer\n"]
    assert mem.facts == "v3\n"


def test_rewriting_the_same_content_adds_no_version(mem: AgentMemory) -> None:
    mem.update_facts("same\n")
    mem.update_facts("same\n")
    mem.call_tool({"action": "update", "content": "same\n"})
    assert mem.history() == []


def test_a_version_left_by_a_crash_is_not_kept_twice(mem: AgentMemory) -> None:
    mem.update_facts("one\n")
    mem.update_facts("two\n")
    history = mem.path / "memory" / ".history"
    # As if a process died after keeping "two" but before replacing FACT.md.
    short = hashlib.sha256(b"two\n").hexdigest()[:12]
    (history / f"29991231T235959.999999Z-{short}.md").write_bytes(b"two\n")
    mem.update_facts("three\n")
    shas = [v["sha256"] for v in mem.history()]
    assert shas == [hashlib.sha256(b"two\n").hexdigest(), hashlib.sha256(b"one\n").hexdigest()]


def test_history_is_bounded_dropping_the_oldest(agents_root: Path) -> None:
    mem = AgentMemory.open("bounded", history_limit=3)
    for i in range(7):
        mem.update_facts(f"v{i}\n")
    assert [v["sha256"] for v in mem.history()] == [sha("v5\n"), sha("v4\n"), sha("v3\n")]
    assert len(os.listdir(history_dir(mem))) == 3
    assert mem.facts == "v6\n"


def test_default_history_bound_is_one_hundred(mem: AgentMemory) -> None:
    assert mem.history_limit == 100


def test_unrelated_files_in_history_are_ignored(mem: AgentMemory) -> None:
    mem.update_facts("a\n")
    mem.update_facts("b\n")
    (history_dir(mem) / "README.txt").write_text("notes")
    (history_dir(mem) / "not-a-version.md").write_text("x")
    assert [v["sha256"] for v in mem.history()] == [sha("a\n")]


def test_history_text_by_full_sha_and_prefix(mem: AgentMemory) -> None:
    mem.update_facts("old facts\n")
    mem.update_facts("new facts\n")
    digest = sha("old facts\n")
    assert mem.history_text(digest) == "old facts\n"
    assert mem.history_text(digest[:7]) == "old facts\n"
    assert mem.history_text(digest[:7].upper()) == "old facts\n"
    assert mem.history_version(digest[:9]) == (digest, "old facts\n")


def test_only_an_unmatched_well_formed_id_is_version_not_found(mem: AgentMemory) -> None:
    mem.update_facts("v1\n")
    mem.update_facts("v2\n")
    with pytest.raises(VersionNotFoundError):
        mem.history_version("0000000")
    with pytest.raises(MemoryToolError) as info:
        mem.history_version("abcdef1\n")
    assert not isinstance(info.value, VersionNotFoundError)


def test_restore_by_full_sha_is_a_normal_update(mem: AgentMemory) -> None:
    mem.update_facts("v1\n")
    mem.update_facts("v2\n")
    assert mem.restore(sha("v1\n")) == sha("v1\n")
    assert mem.facts == "v1\n"
    # The replaced version went to history, so history stays linear.
    assert [v["sha256"] for v in mem.history()] == [sha("v2\n"), sha("v1\n")]


def test_restore_by_seven_digit_prefix(mem: AgentMemory) -> None:
    mem.update_facts("first\n")
    mem.update_facts("second\n")
    mem.update_facts("third\n")
    assert mem.restore(sha("first\n")[:7]) == sha("first\n")
    assert mem.facts == "first\n"
    assert [v["sha256"] for v in mem.history()] == [
        sha("third\n"), sha("second\n"), sha("first\n")
    ]
    assert mem.restore(sha("third\n")[:10]) == sha("third\n")
    assert mem.facts == "third\n"


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("abcdef", BAD_REF.format("abcdef")),
        ("", BAD_REF.format("")),
        ("zzzzzzz", BAD_REF.format("zzzzzzz")),
        ("abc def", BAD_REF.format("abc def")),
        ("0000000", 'No FACT.md version matches "0000000"'),
    ],
)
def test_bad_version_references(mem: AgentMemory, ref: str, message: str) -> None:
    mem.update_facts("v1\n")
    mem.update_facts("v2\n")
    for call in (mem.restore, mem.history_text):
        with pytest.raises(MemoryToolError) as info:
            call(ref)
        assert (info.value.code, info.value.message) == (-32602, message)
    assert mem.facts == "v2\n"
    assert len(mem.history()) == 1


def test_unknown_prefix_when_there_is_no_history(mem: AgentMemory) -> None:
    with pytest.raises(MemoryToolError, match='No FACT.md version matches "1234567"'):
        mem.restore("1234567")
    assert not (mem.path / "memory" / "FACT.md").exists()


def test_ambiguous_prefix(mem: AgentMemory) -> None:
    first, second = colliding_pair()
    prefix = sha(first)[:7]
    assert sha(second).startswith(prefix)
    mem.update_facts(first)
    mem.update_facts(second)
    mem.update_facts("current\n")
    with pytest.raises(MemoryToolError) as info:
        mem.restore(prefix)
    assert info.value.code == -32602
    assert info.value.message == (
        f'Version "{prefix}" is ambiguous: it matches 2 versions; give more digits'
    )
    assert mem.facts == "current\n"
    longer = sha(second)[:7]
    while sha(first).startswith(longer):
        longer = sha(second)[: len(longer) + 1]
    assert mem.restore(longer) == sha(second)
    assert mem.facts == second


def test_history_never_enters_the_prompt(mem: AgentMemory, tmp_path: Path) -> None:
    mem.update_facts("old secret fact\n")
    mem.update_facts("current fact\n")
    prompt = PromptBuilder().build(mem, workspace=tmp_path)
    assert "current fact" in prompt.text
    assert "old secret fact" not in prompt.text
    assert ".history" not in prompt.text
