"""The journal kept open between searches: every swap of a folder or the file is noticed,
nothing is created by reading, no descriptor leaks; and the two shortcuts of the decoder (the
direct JSON scanner, the in-window match) agree with the plain rules."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from collections import OrderedDict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jupyter_agent_memory import AgentMemory, UnsafePathError, forget, journal
from jupyter_agent_memory.journal import CORRUPT, Matcher, decode_line
from jupyter_agent_memory.journal import reader as journal_reader

T0 = datetime(2026, 5, 1, 12, tzinfo=timezone.utc)


def _line(text: str, minutes: int = 0, tags: list[str] | None = None) -> bytes:
    ts = journal.format_timestamp(T0 + timedelta(minutes=minutes))
    return journal.encode_line({"ts": ts, "tags": tags or [], "text": text})


def _agent(tmp_path: Path, *lines: bytes) -> AgentMemory:
    mem = AgentMemory.open(tmp_path / "agent", journal_index=False)
    (mem.path / "memory" / "JOURNAL.jsonl").write_bytes(b"".join(lines))
    return mem


def _texts(mem: AgentMemory, **kwargs: object) -> list[str]:
    return [entry["text"] for entry in mem.search(**kwargs)]  # type: ignore[arg-type]


def _open_fds(under: Path | None = None) -> int:
    """Descriptors this process holds (with ``under``: only those of files below it)."""
    folder = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
    if under is None:
        return len(os.listdir(folder))
    held = 0
    for name in os.listdir(folder):
        with contextlib.suppress(OSError):
            held += os.readlink(os.path.join(folder, name)).startswith(str(under))
    return held


def test_a_journal_replaced_after_a_search_is_read_afresh(tmp_path: Path) -> None:
    mem = _agent(tmp_path, _line("old one"))
    assert _texts(mem) == ["old one"]
    journal_path = mem.path / "memory" / "JOURNAL.jsonl"
    replacement = journal_path.with_name("new.tmp")
    replacement.write_bytes(_line("new one") + _line("newer one", 1))
    os.replace(replacement, journal_path)  # what forgetting does: a new file, same name
    assert _texts(mem) == ["newer one", "new one"]


def test_a_swapped_agent_folder_is_followed_to_the_new_one(tmp_path: Path) -> None:
    mem = _agent(tmp_path, _line("first folder"))
    assert _texts(mem) == ["first folder"]
    os.rename(mem.path, tmp_path / "moved")
    again = AgentMemory.open(tmp_path / "agent", journal_index=False)
    (again.path / "memory" / "JOURNAL.jsonl").write_bytes(_line("second folder"))
    assert _texts(mem) == ["second folder"]


def test_memory_swapped_for_a_symlink_after_a_search_is_refused(tmp_path: Path) -> None:
    mem = _agent(tmp_path, _line("mine"))
    assert _texts(mem) == ["mine"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "JOURNAL.jsonl").write_bytes(_line("someone else's secret"))
    os.rename(mem.path / "memory", tmp_path / "old-memory")
    os.symlink(elsewhere, mem.path / "memory")
    with pytest.raises(UnsafePathError, match="memory"):
        mem.search()


def test_a_second_hard_link_made_after_a_search_is_refused(tmp_path: Path) -> None:
    mem = _agent(tmp_path, _line("mine"))
    assert _texts(mem) == ["mine"]
    os.link(mem.path / "memory" / "JOURNAL.jsonl", tmp_path / "outside.jsonl")
    with pytest.raises(UnsafePathError, match="hard links"):
        mem.search()


def test_the_exact_name_wins_over_a_case_variant_held_open(tmp_path: Path) -> None:
    mem = AgentMemory.open(tmp_path / "agent", journal_index=False)
    folder = mem.path / "memory"
    # (On a case-insensitive filesystem both names are one file, and the same holds.)
    (folder / "journal.jsonl").write_bytes(_line("case variant"))
    assert _texts(mem) == ["case variant"]
    (folder / "JOURNAL.jsonl").write_bytes(_line("exact name"))
    assert _texts(mem) == ["exact name"]


def test_reading_creates_nothing_and_notices_a_journal_that_appears(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    mem = AgentMemory.open(agent, journal_index=False)
    shutil.rmtree(agent / "memory")
    before = sorted(os.listdir(agent))
    assert _texts(mem) == []
    assert list(mem.entries()) == []
    assert sorted(os.listdir(agent)) == before  # no memory/, no lock file
    (agent / "memory").mkdir()
    (agent / "memory" / "JOURNAL.jsonl").write_bytes(_line("arrived"))
    assert _texts(mem) == ["arrived"]


def test_searches_do_not_leak_descriptors_and_closing_releases_them(tmp_path: Path) -> None:
    mem = _agent(tmp_path, *(_line(f"entry {i}", i) for i in range(50)))
    mem.search()
    held = _open_fds(tmp_path)
    for i in range(300):
        mem.search(query=f"entry {i % 50}")
        list(mem.entries())
    assert _open_fds(tmp_path) == held
    mem.close()
    assert _open_fds(tmp_path) == held - 3  # the agent folder, memory/ and the journal


def test_threads_searching_while_the_journal_is_replaced_see_whole_versions(
    tmp_path: Path,
) -> None:
    versions = [b"".join(_line(f"v{v} entry {i}", i) for i in range(30)) for v in range(2)]
    mem = _agent(tmp_path, versions[0])
    journal_path = mem.path / "memory" / "JOURNAL.jsonl"
    wanted = [
        [f"v{v} entry {i}" for i in range(29, 9, -1)] for v in range(2)
    ]  # the 20 newest of each version
    errors: list[BaseException] = []
    seen: list[list[str]] = []
    stop = threading.Event()

    def search() -> None:
        try:
            while not stop.is_set():
                seen.append(_texts(mem))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=search) for _ in range(4)]
    for thread in threads:
        thread.start()
    for round_ in range(200):
        temporary = journal_path.with_name(f"swap{round_}.tmp")
        temporary.write_bytes(versions[round_ % 2])
        os.replace(temporary, journal_path)
    stop.set()
    for thread in threads:
        thread.join()
    assert not errors
    assert seen and all(result in wanted for result in seen)


# -- the decoder's shortcuts -------------------------------------------------------------------

TRICKY = [
    '{"a":1}',
    ' {"a":1}',
    '{"a":1} ',
    '{"a":1}\r',
    '\ufeff{"a":1}',
    '{"a":1}{"b":2}',
    '{"a":1} x',
    '{"a":NaN,"b":-Infinity}',
    '{"a":1,"a":2}',
    '{"a":"\\ud83d"}',
    '[1,2]',
    "1 2",
    "",
    "   ",
    "{",
    '{"a":1,}',
    '{"a":1e999}',
    '{"a":"\x01"}',
    '"text"',
    "[" * 50 + "]" * 50,
]


def _plain_decode(text: str) -> object:
    """decode_line's rules written the slow way, with ``json.loads`` alone."""
    try:
        value = json.loads(text)
    except ValueError:
        return None if not text.strip() else CORRUPT
    if not isinstance(value, dict):
        return CORRUPT
    return {k: v.replace("\ud83d", "\ufffd") if isinstance(v, str) else v
            for k, v in value.items()}


def _outcome(value: object) -> object:
    return value if value is CORRUPT or value is None else repr(value)


@pytest.mark.parametrize("text", TRICKY)
def test_the_decoder_gives_what_json_loads_gives(text: str) -> None:
    assert _outcome(decode_line(text.encode())) == _outcome(_plain_decode(text))


@given(st.recursive(st.none() | st.booleans() | st.floats() | st.text(), lambda inner: (
    st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
), max_leaves=8), st.sampled_from(["", " ", "\t", "x", "}"]), st.booleans())
def test_the_decoder_agrees_with_json_loads_on_any_value(
    value: object, noise: str, before: bool
) -> None:
    text = json.dumps({"v": value})
    text = noise + text if before else text + noise
    assert _outcome(decode_line(text.encode())) == _outcome(_plain_decode(text))


def test_an_impossible_timestamp_inside_the_window_never_matches(tmp_path: Path) -> None:
    # Byte for byte these sort between the bounds, but they are not real times.
    lines = [
        _line("before", 0),
        b'{"ts":"2026-05-01T12:30:61.000Z","tags":[],"text":"second 61"}\n',
        b'{"ts":"2026-05-01T12:45:00.000Z","tags":[],"text":"real"}\n',
        b'{"ts":"2026-05-01T12:59:99.999Z","tags":[],"text":"second 99"}\n',
        _line("after", 90),
    ]
    mem = _agent(tmp_path, *lines)
    window = {"since": T0 + timedelta(minutes=10), "until": T0 + timedelta(minutes=70)}
    assert _texts(mem, **window) == ["real"]
    with (mem.path / "memory" / "JOURNAL.jsonl").open("rb") as f:
        assert journal.search(f, **window) == journal.reference_search(f, **window)


def test_the_in_window_check_is_the_window_check_for_our_timestamps() -> None:
    matcher = Matcher("", "", T0, T0 + timedelta(hours=1))
    for ts, real in [
        ("2026-05-01T12:30:00.000Z", True),
        ("2026-05-01T12:30:60.000Z", False),
        ("2026-02-30T12:30:00.000Z", False),
        ("2026-05-01T24:00:00.000Z", False),
    ]:
        entry = {"ts": ts, "tags": [], "text": ""}
        assert matcher.matches_inside_window(entry) is real
    assert matcher.matches_inside_window({"tags": [], "text": ""}) is False


def test_only_so_many_readers_hold_files_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_reader, "MAX_HELD_READERS", 3)
    monkeypatch.setattr(journal_reader, "_held", OrderedDict())  # no other test's readers
    agents = [_agent(tmp_path / f"a{i}", _line(f"agent {i}")) for i in range(6)]
    baseline = _open_fds(tmp_path)
    for i, mem in enumerate(agents):
        assert _texts(mem) == [f"agent {i}"]
        assert _open_fds(tmp_path) - baseline <= 3 * 3
    assert _open_fds(tmp_path) - baseline == 3 * 3  # the three most recent readers
    assert _texts(agents[0]) == ["agent 0"]  # an evicted reader opens again on its next use
    assert _open_fds(tmp_path) - baseline == 3 * 3


def test_forgetting_lets_go_of_the_replaced_journal(tmp_path: Path) -> None:
    mem = _agent(tmp_path, _line("the code word is marmalade"), _line("keep this", 1))
    mem.append("a fresh entry")  # the appender holds the journal open too
    assert _texts(mem, query="marmalade") == ["the code word is marmalade"]
    old_inode = (mem.path / "memory" / "JOURNAL.jsonl").stat().st_ino
    receipt = forget(mem, text="marmalade")
    assert receipt["verified"] is True
    held = [
        os.fstat(int(fd)).st_ino
        for fd in os.listdir("/proc/self/fd")
        if os.path.exists(f"/proc/self/fd/{fd}")
    ] if os.path.isdir("/proc/self/fd") else []
    assert old_inode not in held
    assert _texts(mem, query="marmalade") == []
    assert _texts(mem)[:2] == ["a fresh entry", "keep this"]
