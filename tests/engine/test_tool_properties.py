"""Fuzzing the ``memory`` tool: any JSON-ish arguments, in any order of calls.

Every call either returns the documented result text (checked against a model of FACT.md and
of the journal, and searches against the plain whole-file algorithm) or raises the documented
``MemoryToolError`` with the exact message; a refused call changes no file, and the files are
always valid: FACT.md is the last accepted content, the journal one whole entry per line.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from properties import examples

from jupyter_agent_memory import AgentMemory, MemoryToolError, journal
from jupyter_agent_memory.engine.store import normalize_limit

pytestmark = pytest.mark.slow

# Any JSON value (and Python's variants of them), strings with lone surrogates included.
ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=12)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    ANY_TEXT,
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=6,
)
TIMES = st.sampled_from(
    [
        "2020-01-01",
        "2020-01-01T00:00:00Z",
        "2999-12-31T23:59:59.999+02:00",
        "2026-11-29 10:04",
        "",
        "yesterday",
        "2026-13-01",
        " 2000-01-01T00:00 ",
    ]
)
WORDS = st.sampled_from(["alpha", "Beta", "GAMMA", "naïve", "café", "ß", '"q"', "a\\b", "\u212a"])


def _value_for(key: str) -> st.SearchStrategy[Any]:
    good = {
        "content": st.one_of(ANY_TEXT, WORDS),
        "text": st.one_of(WORDS.map(lambda w: f"a note on {w}"), WORDS, ANY_TEXT),
        "tags": st.lists(st.one_of(WORDS, SCALARS), max_size=4),
        "query": st.one_of(WORDS, WORDS.map(str.upper), st.just(""), st.just("NOTE"), ANY_TEXT),
        "tag": WORDS,
        "limit": st.one_of(st.integers(-3, 30), st.integers(-3, 30).map(str), st.just(" 7 ")),
        "since": TIMES,
        "until": TIMES,
    }.get(key, JSON_VALUES)
    return st.one_of(good, good, good, JSON_VALUES)


@st.composite
def tool_args(draw: st.DrawFn) -> Any:
    """One call's arguments: mostly a well-aimed action with odd fields, sometimes junk."""
    kind = draw(st.sampled_from(["append", "search", "update", "search", "append", "junk", "raw"]))
    if kind == "raw":
        return draw(JSON_VALUES)  # maybe not even an object
    args: dict[str, Any] = {}
    if kind == "junk":
        if draw(st.booleans()):
            args["action"] = draw(st.one_of(JSON_VALUES, st.sampled_from(["UPDATE", " append"])))
    else:
        args["action"] = kind
        # The field the action needs, most of the time (Hypothesis favours the first choice).
        main = {"append": "text", "update": "content", "search": "query"}[kind]
        if draw(st.sampled_from([True, True, False])):
            args[main] = draw(_value_for(main))
    keys = ["content", "text", "tags", "query", "tag", "limit", "since", "until", "extra"]
    for key in draw(st.lists(st.sampled_from(keys), unique=True, max_size=4)):
        args[key] = draw(_value_for(key))
    return args


def _time_error(field: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            journal.parse_time(value)
            return None
        except ValueError:
            pass
    shown = json.dumps(value, default=str)
    return f"Invalid '{field}': expected an ISO-8601 date or time, got {shown}"


def _surrogate_error(field: str, value: str) -> str | None:
    for position, char in enumerate(value):
        if 0xD800 <= ord(char) <= 0xDFFF:
            return (
                f"'{field}' is not valid Unicode text: lone surrogate "
                f"U+{ord(char):04X} at position {position}"
            )
    return None


def expected_error(args: Any) -> str | None:
    """The documented -32602 message for ``args``, or None when the call is valid."""
    if not isinstance(args, dict):
        return "Tool arguments must be a JSON object"
    action = args.get("action")
    if action == "update":
        content = args.get("content")
        if not isinstance(content, str) or not content:
            return "'content' is required for update action"
        return _surrogate_error("content", content)
    if action == "append":
        text = args.get("text")
        if not isinstance(text, str) or not text:
            return "'text' is required for append action"
        return None
    if action == "search":
        for field in ("query", "tag"):
            if args.get(field) is not None and not isinstance(args[field], str):
                return f"'{field}' must be a string"
        return _time_error("since", args.get("since")) or _time_error("until", args.get("until"))
    shown = action if isinstance(action, str) else ("" if action is None else json.dumps(action))
    return f'Unknown action "{shown}", expected update/append/search'


class Model:
    """What the files must hold after the accepted calls so far."""

    def __init__(self) -> None:
        self.facts = ""
        self.entries: list[dict[str, Any]] = []


def check_files(mem: AgentMemory, model: Model) -> tuple[bytes, bytes]:
    """Assert the files match the model; return their bytes."""
    memory = mem.path / "memory"
    fact = memory / "FACT.md"
    fact_bytes = fact.read_bytes() if fact.exists() else b""
    assert fact_bytes.decode("utf-8") == model.facts
    journal_path = memory / "JOURNAL.jsonl"
    raw = journal_path.read_bytes() if journal_path.exists() else b""
    assert raw == b"" or raw.endswith(b"\n")
    lines = raw.split(b"\n")[:-1]
    assert [json.loads(line.decode("utf-8")) for line in lines] == model.entries
    return fact_bytes, raw


@settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(calls=st.lists(tool_args(), min_size=1, max_size=8))
def test_tool_calls_give_documented_results_and_keep_files_valid(calls: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        mem = AgentMemory.open(Path(tmp) / "agent", fsync_appends=False)
        model = Model()
        for args in calls:
            before = check_files(mem, model)
            error = expected_error(args)
            try:
                result = mem.call_tool(args)
            except MemoryToolError as exc:
                event(f"refused: {(error or '')[:22]}")
                assert (exc.code, exc.message, str(exc)) == (-32602, error, error), args
                assert check_files(mem, model) == before  # a refused call writes nothing
                continue
            assert error is None, (args, result)
            event(f"{args['action']}: {result[:22]}")
            check_result(mem, model, args, result)
            check_files(mem, model)


def check_result(mem: AgentMemory, model: Model, args: dict[str, Any], result: str) -> None:
    """Assert an accepted call's result text, and update the model."""
    action = args["action"]
    if action == "update":
        assert result == "Memory updated."
        model.facts = args["content"]
        return
    if action == "append":
        match = re.fullmatch(r"Journal entry added at (\S+)\.", result)
        assert match is not None, result
        tags = args.get("tags")
        tags = [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []
        model.entries.append({"ts": match.group(1), "tags": tags, "text": args["text"]})
        assert journal.parse_time(match.group(1)).tzinfo is not None
        return
    # search: compare with the whole-file algorithm on the same file
    if not model.entries and not (mem.path / "memory" / "JOURNAL.jsonl").exists():
        assert result == "No journal entries found."
        return
    bounds = {
        field: journal.parse_time(args[field]) if args.get(field) else None
        for field in ("since", "until")
    }
    with (mem.path / "memory" / "JOURNAL.jsonl").open("rb") as f:
        want = journal.reference_search(
            f,
            query=args.get("query") or "",
            tag=args.get("tag") or "",
            limit=normalize_limit(args.get("limit")),
            **bounds,
        )
    if not want:
        assert result == "No matching journal entries found."
    else:
        assert result == json.dumps(list(want), indent=2, ensure_ascii=False)
        assert json.loads(result) == want
