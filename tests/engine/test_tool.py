"""The ``memory`` tool through ``call_tool`` (docs/formats.md): texts, errors, rules, format."""

from __future__ import annotations

import json
import re
import warnings
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent_memory import (
    MEMORY_TOOL,
    AgentMemory,
    CorruptJournalWarning,
    MemoryToolError,
)

TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
UNKNOWN = 'Unknown action "{}", expected update/append/search'
NEED_CONTENT = "'content' is required for update action"
NEED_TEXT = "'text' is required for append action"


def journal_path(mem: AgentMemory) -> Path:
    return mem.path / "memory" / "JOURNAL.jsonl"


def line(ts: str, text: str, tags: list[str] | None = None, **extra: Any) -> bytes:
    entry = {"ts": ts, "tags": tags or [], "text": text, **extra}
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def write_journal(mem: AgentMemory, *lines: bytes) -> None:
    journal_path(mem).write_bytes(b"".join(lines))


def tool_error(mem: AgentMemory, args: Any) -> MemoryToolError:
    with pytest.raises(MemoryToolError) as info:
        mem.call_tool(args)
    return info.value


def search(mem: AgentMemory, **args: Any) -> Any:
    """Run a search; parse the JSON result (texts are returned as they are)."""
    result = mem.call_tool({"action": "search", **args})
    return json.loads(result) if result.startswith("[") else result


# -- schema ------------------------------------------------------------------------------------


def test_tool_spec_names_and_schema() -> None:
    assert MEMORY_TOOL["name"] == "memory"
    schema = MEMORY_TOOL["input_schema"]
    assert schema["type"] == "object"
    assert schema["required"] == ["action"]
    props = schema["properties"]
    assert props["action"]["enum"] == ["update", "append", "search"]
    assert {k: v["type"] for k, v in props.items()} == {
        "action": "string",
        "content": "string",
        "text": "string",
        "tags": "array",
        "query": "string",
        "tag": "string",
        "limit": "integer",
        "since": "string",
        "until": "string",
    }
    assert props["tags"]["items"] == {"type": "string"}
    assert (
        "Before writing to FACT.md, ask: will this still matter in 6 months? "
        "If not, use append instead." in MEMORY_TOOL["description"]
    )


# -- results (4.1) -----------------------------------------------------------------------------


def test_update_result_and_file(mem: AgentMemory) -> None:
    assert mem.call_tool({"action": "update", "content": "- likes tea\n"}) == "Memory updated."
    assert (mem.path / "memory" / "FACT.md").read_bytes() == b"- likes tea\n"
    assert mem.facts == "- likes tea\n"


def test_update_keeps_text_byte_for_byte(mem: AgentMemory) -> None:
    content = "  é ✓ 🙂\r\nno trailing newline  "
    assert mem.call_tool({"action": "update", "content": content}) == "Memory updated."
    assert (mem.path / "memory" / "FACT.md").read_bytes() == content.encode("utf-8")


def test_append_result_names_the_stored_timestamp(mem: AgentMemory) -> None:
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    result = mem.call_tool({"action": "append", "text": "met Ada"})
    after = datetime.now(timezone.utc) + timedelta(seconds=1)
    match = re.fullmatch(r"Journal entry added at (\S+)\.", result)
    assert match is not None, result
    ts = match.group(1)
    assert TS.match(ts)
    assert before <= datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=timezone.utc
    ) <= after
    assert journal_path(mem).read_bytes() == line(ts, "met Ada")


def test_search_without_journal_file(mem: AgentMemory) -> None:
    assert not journal_path(mem).exists()
    assert mem.call_tool({"action": "search"}) == "No journal entries found."
    assert mem.call_tool({"action": "search", "query": "x"}) == "No journal entries found."
    assert not journal_path(mem).exists()


def test_search_empty_journal_file(mem: AgentMemory) -> None:
    write_journal(mem)
    assert mem.call_tool({"action": "search"}) == "No matching journal entries found."


def test_search_without_matches(mem: AgentMemory) -> None:
    mem.append("alpha")
    assert mem.call_tool({"action": "search", "query": "beta"}) == (
        "No matching journal entries found."
    )


def test_search_result_is_indented_json_newest_first_non_ascii_kept(mem: AgentMemory) -> None:
    first = mem.append("café ☕", ["Tag"])
    second = mem.append("second")
    result = mem.call_tool({"action": "search"})
    assert result == json.dumps([second, first], indent=2, ensure_ascii=False)
    assert "café ☕" in result
    assert result.startswith('[\n  {\n    "ts": ')


def test_search_returns_the_last_limit_matches_reversed(mem: AgentMemory) -> None:
    write_journal(
        mem,
        *(line(f"2026-01-01T00:00:{i:02d}.000Z", f"entry {i}", ["even" if i % 2 == 0 else "odd"])
          for i in range(10)),
    )
    assert [e["text"] for e in search(mem, limit=3)] == ["entry 9", "entry 8", "entry 7"]
    assert [e["text"] for e in search(mem, tag="even", limit=2)] == ["entry 8", "entry 6"]
    assert [e["text"] for e in search(mem, query="entry 1")] == ["entry 1"]


def test_python_search_is_newest_first_with_counters(mem: AgentMemory) -> None:
    for i in range(5):
        mem.append(f"n{i}", ["x"])
    result = mem.search(limit=2)
    assert [e["text"] for e in result] == ["n4", "n3"]
    assert result.skipped == 0
    assert [e["text"] for e in mem.entries()] == ["n0", "n1", "n2", "n3", "n4"]
    assert mem.search(query="nothing") == []
    assert mem.tag_counts() == {"x": 5}


def test_tag_counts_group_tags_the_way_a_tag_search_matches(mem: AgentMemory) -> None:
    for tags in (["Work"], ["work", "STRASSE"], ["straße"], ["WORK"], [3, "x"]):
        mem.append("e", tags)
    counts = mem.tag_counts()
    assert counts == {"Work": 3, "STRASSE": 1, "straße": 1, "x": 1}
    for tag, count in counts.items():
        assert len(mem.search(tag=tag)) == count


# -- errors (4.2) ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        ({"action": "delete"}, "delete"),
        ({"action": "UPDATE", "content": "x"}, "UPDATE"),
        ({}, ""),
        ({"action": None}, ""),
        ({"action": ""}, ""),
        ({"action": 5}, "5"),
        ({"action": ["update"]}, '["update"]'),
    ],
)
def test_unknown_or_missing_action(mem: AgentMemory, args: dict[str, Any], shown: str) -> None:
    error = tool_error(mem, args)
    assert (error.code, error.message, str(error)) == (
        -32602, UNKNOWN.format(shown), UNKNOWN.format(shown)
    )


def test_arguments_must_be_an_object(mem: AgentMemory) -> None:
    error = tool_error(mem, ["update"])
    assert (error.code, error.message) == (-32602, "Tool arguments must be a JSON object")


@pytest.mark.parametrize("content", [None, "", 5, ["a"], {"a": 1}, b"bytes"])
def test_update_requires_non_empty_string_content(mem: AgentMemory, content: Any) -> None:
    mem.update_facts("kept\n")
    args = {"action": "update"} if content is None else {"action": "update", "content": content}
    error = tool_error(mem, args)
    assert (error.code, error.message) == (-32602, NEED_CONTENT)
    assert mem.facts == "kept\n"
    assert mem.history() == []


@pytest.mark.parametrize("text", [None, "", 0, ["a"], False])
def test_append_requires_non_empty_string_text(mem: AgentMemory, text: Any) -> None:
    args = {"action": "append"} if text is None else {"action": "append", "text": text}
    error = tool_error(mem, args)
    assert (error.code, error.message) == (-32602, NEED_TEXT)
    assert not journal_path(mem).exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"action": "update", "content": ""}, NEED_CONTENT),
        ({"action": "append", "text": ""}, NEED_TEXT),
        ({"action": "nope"}, UNKNOWN.format("nope")),
        (
            {"action": "search", "since": "yesterday"},
            "Invalid 'since': expected an ISO-8601 date or time, got \"yesterday\"",
        ),
        (
            {"action": "search", "until": "2026-13-01"},
            "Invalid 'until': expected an ISO-8601 date or time, got \"2026-13-01\"",
        ),
    ],
)
def test_arguments_are_checked_before_any_file_is_touched(
    agents_root: Path, args: dict[str, Any], message: str
) -> None:
    mem = AgentMemory(agents_root / "ghost")
    error = tool_error(mem, args)
    assert (error.code, error.message) == (-32602, message)
    assert not agents_root.exists()


def test_bad_time_window_is_reported_even_when_the_journal_is_missing(mem: AgentMemory) -> None:
    error = tool_error(mem, {"action": "search", "since": "soon"})
    assert error.code == -32602
    assert error.message == "Invalid 'since': expected an ISO-8601 date or time, got \"soon\""


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("since", "not a date", '"not a date"'),
        ("until", "2026-02-30", '"2026-02-30"'),
        ("since", 5, "5"),
        ("until", ["2026-01-01"], '["2026-01-01"]'),
        ("since", "2026-01-01T10:00:00+25:00", '"2026-01-01T10:00:00+25:00"'),
    ],
)
def test_bad_since_until_names_the_field(
    mem: AgentMemory, field: str, value: Any, shown: str
) -> None:
    mem.append("x")
    error = tool_error(mem, {"action": "search", field: value})
    assert error.code == -32602
    assert error.message == f"Invalid '{field}': expected an ISO-8601 date or time, got {shown}"


@pytest.mark.parametrize("field", ["query", "tag"])
def test_non_string_query_or_tag_is_invalid(mem: AgentMemory, field: str) -> None:
    error = tool_error(mem, {"action": "search", field: 3})
    assert (error.code, error.message) == (-32602, f"'{field}' must be a string")


# -- tags --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tags", "stored"),
    [
        (["b", "a", "b"], ["b", "a", "b"]),
        (["x", 1, None, "y", {"k": "v"}, ["z"], True, "w"], ["x", "y", "w"]),
        ("single", []),
        ({"a": 1}, []),
        (7, []),
        (None, []),
        ([], []),
    ],
)
def test_tags_rules(mem: AgentMemory, tags: Any, stored: list[str]) -> None:
    args: dict[str, Any] = {"action": "append", "text": "t"}
    if tags is not None:
        args["tags"] = tags
    mem.call_tool(args)
    (entry,) = mem.entries()
    assert entry["tags"] == stored
    raw = journal_path(mem).read_bytes()
    assert b'"tags":' + json.dumps(stored, separators=(",", ":")).encode() + b',"text"' in raw


def test_tag_search_is_exact_but_ignores_case(mem: AgentMemory) -> None:
    mem.call_tool({"action": "append", "text": "one", "tags": ["Work"]})
    mem.call_tool({"action": "append", "text": "two", "tags": ["workshop"]})
    mem.call_tool({"action": "append", "text": "three", "tags": ["home", "WORK"]})
    mem.call_tool({"action": "append", "text": "work in text only"})
    assert [e["text"] for e in search(mem, tag="work")] == ["three", "one"]
    assert [e["text"] for e in search(mem, tag="wORk")] == ["three", "one"]
    assert search(mem, tag="wor") == "No matching journal entries found."
    assert [e["text"] for e in search(mem, tag="WORKSHOP")] == ["two"]


def test_query_is_a_case_insensitive_substring(mem: AgentMemory) -> None:
    mem.append("Hello World")
    mem.append("say hello")
    mem.append("goodbye")
    assert [e["text"] for e in search(mem, query="HELLO")] == ["say hello", "Hello World"]
    assert [e["text"] for e in search(mem, query="lo wo")] == ["Hello World"]
    assert [e["text"] for e in search(mem, query="")] == ["goodbye", "say hello", "Hello World"]


def test_query_and_tag_combine(mem: AgentMemory) -> None:
    mem.append("deploy ok", ["ops"])
    mem.append("deploy failed", ["ops"])
    mem.append("deploy notes", ["docs"])
    assert [e["text"] for e in search(mem, query="DEPLOY", tag="Ops")] == [
        "deploy failed", "deploy ok"
    ]


# -- limit -------------------------------------------------------------------------------------


@pytest.fixture
def thirty(mem: AgentMemory) -> AgentMemory:
    write_journal(mem, *(line(f"2026-01-01T00:00:{i:02d}.000Z", f"e{i}") for i in range(30)))
    return mem


@pytest.mark.parametrize(
    ("limit", "count"),
    [
        (5, 5),
        ("5", 5),
        (" 7 ", 7),
        (0, 1),
        ("0", 1),
        (-3, 1),
        ("-3", 1),
        (1, 1),
        (25, 25),
        (100, 30),
        ("abc", 20),
        ("", 20),
        ("2.5", 20),
        (2.5, 20),
        (None, 20),
        (True, 20),
        ([3], 20),
    ],
)
def test_limit_rules(thirty: AgentMemory, limit: Any, count: int) -> None:
    args: dict[str, Any] = {"action": "search"}
    if limit is not None:
        args["limit"] = limit
    found = search(thirty, **args)
    assert [e["text"] for e in found] == [f"e{i}" for i in range(29, 29 - count, -1)]


def test_missing_limit_means_twenty(thirty: AgentMemory) -> None:
    assert len(search(thirty)) == 20


# -- since / until -----------------------------------------------------------------------------


@pytest.fixture
def timeline(mem: AgentMemory) -> AgentMemory:
    write_journal(
        mem,
        line("2026-01-01T09:59:59.999Z", "before"),
        line("2026-01-01T10:00:00.000Z", "ten"),
        line("2026-01-01T11:00:00.000Z", "eleven"),
        line("2026-01-01T12:00:00.000Z", "noon"),
        line("2026-01-02T00:00:00.000Z", "next day"),
    )
    return mem


@pytest.mark.parametrize(
    ("window", "texts"),
    [
        ({"since": "2026-01-01T10:00:00Z"}, ["next day", "noon", "eleven", "ten"]),
        ({"since": "2026-01-01T10:00:00"}, ["next day", "noon", "eleven", "ten"]),
        ({"since": "2026-01-01T11:00:00+01:00"}, ["next day", "noon", "eleven", "ten"]),
        ({"since": "2026-01-01T05:00:00-05:00"}, ["next day", "noon", "eleven", "ten"]),
        ({"since": "2026-01-01T10:00:00.001Z"}, ["next day", "noon", "eleven"]),
        ({"until": "2026-01-01T12:00:00.000Z"}, ["noon", "eleven", "ten", "before"]),
        ({"until": "2026-01-01T13:00+01:00"}, ["noon", "eleven", "ten", "before"]),
        ({"until": "2026-01-01T11:59:59.999"}, ["eleven", "ten", "before"]),
        (
            {"since": "2026-01-01T10:00:00Z", "until": "2026-01-01T12:00:00Z"},
            ["noon", "eleven", "ten"],
        ),
        ({"since": "2026-01-02"}, ["next day"]),
        ({"until": "2026-01-01"}, "No matching journal entries found."),
        ({"since": "2026-01-01 11:00"}, ["next day", "noon", "eleven"]),
        ({"since": "", "until": ""}, ["next day", "noon", "eleven", "ten", "before"]),
    ],
)
def test_time_window_is_inclusive_and_zone_aware(
    timeline: AgentMemory, window: dict[str, str], texts: Any
) -> None:
    found = search(timeline, **window)
    assert found == texts if isinstance(texts, str) else [e["text"] for e in found] == texts


def test_time_window_combines_with_limit_and_query(timeline: AgentMemory) -> None:
    found = search(timeline, since="2026-01-01T10:00:00Z", query="N", limit=2)
    assert [e["text"] for e in found] == ["next day", "noon"]


def test_python_search_accepts_datetimes(timeline: AgentMemory) -> None:
    naive = datetime(2026, 1, 1, 11, 0, 0)
    aware = datetime(2026, 1, 1, 13, 0, 0, tzinfo=timezone(timedelta(hours=1)))
    assert [e["text"] for e in timeline.search(since=naive, until=aware)] == ["noon", "eleven"]


def test_time_window_skips_entries_without_a_usable_ts(mem: AgentMemory) -> None:
    write_journal(
        mem,
        b'{"tags":[],"text":"no ts"}\n',
        b'{"ts":"garbage","tags":[],"text":"bad ts"}\n',
        line("2026-03-01T00:00:00.000Z", "good"),
    )
    assert [e["text"] for e in search(mem, since="2026-01-01")] == ["good"]
    assert [e["text"] for e in search(mem)] == ["good", "bad ts", "no ts"]


# -- the journal line format (4.3) -------------------------------------------------------------


def test_line_format_is_exact(mem: AgentMemory) -> None:
    entry = mem.append('héllo "world" ✓\nsecond line', ["b", "ä"])
    assert list(entry) == ["ts", "tags", "text"]
    assert TS.match(entry["ts"])
    expected = (
        '{"ts":"' + entry["ts"] + '","tags":["b","ä"],"text":"héllo \\"world\\" ✓\\nsecond line"}\n'
    ).encode("utf-8")
    assert journal_path(mem).read_bytes() == expected


def test_each_append_is_one_line(mem: AgentMemory) -> None:
    entries = [mem.append(f"entry {i}", [str(i)]) for i in range(3)]
    raw = journal_path(mem).read_bytes()
    assert raw.count(b"\n") == 3
    assert raw.endswith(b"\n")
    assert [json.loads(x) for x in raw.splitlines()] == entries
    stamps = [e["ts"] for e in entries]
    assert stamps == sorted(stamps)


def test_extra_keys_are_preserved_and_returned(mem: AgentMemory) -> None:
    foreign = b'{"ts":"2026-01-01T00:00:00.000Z","tags":["x"],"text":"foreign","source":"other",' \
              b'"meta":{"n":1}}\n'
    write_journal(mem, foreign)
    mem.append("ours")
    assert journal_path(mem).read_bytes().startswith(foreign)
    found = search(mem, tag="x")
    assert found == [
        {
            "ts": "2026-01-01T00:00:00.000Z",
            "tags": ["x"],
            "text": "foreign",
            "source": "other",
            "meta": {"n": 1},
        }
    ]
    assert list(mem.entries())[0]["source"] == "other"


def test_corrupted_lines_are_skipped_with_a_warning_and_counted(mem: AgentMemory) -> None:
    write_journal(
        mem,
        line("2026-01-01T00:00:00.000Z", "first"),
        b"{not json\n",
        b"[1, 2]\n",
        b"\xff\xfe garbage\n",
        b"   \n",
        line("2026-01-01T00:00:01.000Z", "second"),
    )
    with pytest.warns(CorruptJournalWarning) as caught:
        result = mem.search()
    assert [e["text"] for e in result] == ["second", "first"]
    assert result.skipped == 3
    assert result.scanned == 6
    message = str(caught[0].message)
    assert message == (
        f"Skipped 3 corrupted line(s) of 6 read in {mem.path / 'memory' / 'JOURNAL.jsonl'}"
    )
    with pytest.warns(CorruptJournalWarning):
        text = mem.call_tool({"action": "search"})
    assert [e["text"] for e in json.loads(text)] == ["second", "first"]
    assert [e["text"] for e in mem.entries()] == ["first", "second"]


def test_clean_search_does_not_warn(mem: AgentMemory) -> None:
    mem.append("fine")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [e["text"] for e in mem.search()] == ["fine"]


def test_torn_last_line_next_append_starts_on_a_new_line(mem: AgentMemory) -> None:
    torn = b'{"ts":"2026-01-01T00:00:00.000Z","tags":[],"text":"cut sh'
    write_journal(mem, line("2026-01-01T00:00:00.000Z", "whole"), torn)
    entry = mem.append("after the crash")
    raw = journal_path(mem).read_bytes()
    assert raw == line("2026-01-01T00:00:00.000Z", "whole") + torn + b"\n" + line(
        entry["ts"], "after the crash"
    )
    with pytest.warns(CorruptJournalWarning):
        result = mem.search()
    assert [e["text"] for e in result] == ["after the crash", "whole"]
    assert result.skipped == 1


def test_append_to_file_ending_in_newline_adds_no_blank_line(mem: AgentMemory) -> None:
    write_journal(mem, line("2026-01-01T00:00:00.000Z", "a"))
    entry = mem.append("b")
    assert journal_path(mem).read_bytes() == line("2026-01-01T00:00:00.000Z", "a") + line(
        entry["ts"], "b"
    )


def test_lone_surrogate_in_append_is_a_clear_tool_error(mem: AgentMemory) -> None:
    # JSON lets a model send "\ud800"; no wire format could carry it back, so it is refused.
    args = json.loads('{"action": "append", "text": "half \\ud83d pair"}')
    error = tool_error(mem, args)
    assert (error.code, error.message) == (
        -32602,
        "'text' is not valid Unicode text: lone surrogate U+D83D at position 5",
    )
    assert not journal_path(mem).exists()


def test_lone_surrogate_in_update_is_a_clear_tool_error(mem: AgentMemory) -> None:
    mem.update_facts("kept\n")
    args = json.loads('{"action": "update", "content": "half \\ud83d pair"}')
    error = tool_error(mem, args)
    assert error.code == -32602
    assert "'content'" in error.message
    assert mem.facts == "kept\n"
    assert mem.history() == []
