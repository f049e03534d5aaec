"""Property tests: the fast journal search returns exactly what the plain algorithm returns.

Random journals mix entries written by us and by other tools (escaped characters, spaces,
ASCII-only JSON), odd fields (non-string text, non-list tags, bad or missing ``ts``, extra keys),
corrupted, blank and torn lines. Each search runs with tiny blocks, so that every path of the
block reader is crossed, and with a search plan drawn at random, so that every way of finding a
needle (lower-casing, memchr loops, regular expressions, whole-buffer fallbacks) is checked;
about half of the searches find their needles with the compiled line scanner instead (when it
is installed), reading blocks ahead from real files.
"""

from __future__ import annotations

import io
import json
import random
import re
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from jupyter_agent_memory.journal import encode_line, format_timestamp, parse_time
from jupyter_agent_memory.journal import plans as journal_plans
from jupyter_agent_memory.journal import scan as journal

# The compiled line scanner, when installed; each search draws whether to use it.
COMPILED = journal_plans.FIND_LINES
SCANNERS = [None] if COMPILED is None else [None, COMPILED]

# Property soaks of the journal format against a reference implementation.
pytestmark = pytest.mark.slow

# Characters chosen to hit every special case: ASCII case, the two non-ASCII characters that
# lower-case to ASCII, the context-dependent Greek sigma, characters JSON escapes, astral ones.
TEXT_ALPHABET = list("aAbBkKiIzZs ") + [
    "\u212a",  # KELVIN SIGN -> "k"
    "\u0130",  # LATIN CAPITAL LETTER I WITH DOT ABOVE -> "i̇"
    "\u0131",  # dotless i
    "\u03a3",  # capital sigma (lowers to σ or ς by context)
    "\u03c3",
    "\u03c2",
    "\u00e9",
    "\u00c9",
    "\u00df",
    "\u0301",  # combining acute: case-ignorable, matters for the final sigma
    '"',
    "\\",
    "/",
    "\n",
    "\t",
    "\x00",
    "\U0001f642",
    "'",
    "\ufffd",  # what invalid bytes and escaped lone surrogates read as
]
# Mostly ASCII, with every character JSON may escape: the needles most likely to be hidden.
PLANT_ALPHABET = list('aAkKiIsS"\\/\n\t\x00 ') + ["\u212a", "\u0130", "\u00e9", "\u03a3"]
TAG_ALPHABET = list("xXkK") + ["\u212a", "\u0130", "\u00e9", "\u00c9", '"', "\\", "\ufffd"]

BASE = datetime(2026, 1, 1, tzinfo=timezone.utc)
TIMES = [BASE + timedelta(minutes=7 * i) for i in range(6)]
# Entry times a millisecond either side of the bounds, which may carry microseconds.
TIMES_MS = [t + timedelta(milliseconds=d) for t in TIMES for d in (-1, 0, 1)]
BOUNDS = TIMES + [t + timedelta(microseconds=d) for t in TIMES for d in (-1500, -500, 500, 999)]

texts = st.text(alphabet=st.sampled_from(TEXT_ALPHABET), max_size=12)
tags = st.text(alphabet=st.sampled_from(TAG_ALPHABET), min_size=1, max_size=3)


def _ts_values() -> st.SearchStrategy[Any]:
    canonical = st.sampled_from(TIMES_MS).map(format_timestamp)
    other_forms = st.sampled_from(TIMES).map(
        lambda t: t.astimezone(timezone(timedelta(hours=2))).isoformat()
    )
    return st.one_of(
        canonical,
        canonical,
        other_forms,
        st.just("2026-01-01"),
        # 24 characters like ours, but not our layout: must not be compared as bytes
        st.sampled_from(TIMES).map(lambda t: format_timestamp(t).replace("T", " ")),
        st.sampled_from(TIMES).map(lambda t: format_timestamp(t).lower()),
        st.just("yesterday"),
        st.just("2026-13-01T00:00:00.000Z"),
        st.integers(-3, 3),
        st.none(),
    )


CASES = [str, str.upper, str.lower, str.swapcase, str.title, str.casefold]


def chance(draw: st.DrawFn, p: float) -> bool:
    """True with probability about ``p``.

    Hypothesis favours small integers strongly, so a coin drawn as ``integers(0, 99)`` would be
    lopsided; a seeded generator keeps the odds while staying reproducible.
    """
    return random.Random(draw(st.integers(0, 2**32 - 1))).random() < p


@st.composite
def planted_text(draw: st.DrawFn, plant: str) -> str:
    """Random text that often holds ``plant`` in some letter case."""
    if not plant or not chance(draw, 0.75):
        return draw(texts)
    return draw(texts) + draw(st.sampled_from(CASES))(plant) + draw(texts)


@st.composite
def entries(draw: st.DrawFn, plant: str = "", plant_tag: str = "") -> dict[str, Any]:
    """A decoded entry as another tool might have written it."""
    entry: dict[str, Any] = {}
    text_values = st.one_of(*[planted_text(plant)] * 6, st.integers(0, 5), st.lists(texts))
    tag_values = st.one_of(tags, tags, st.sampled_from(CASES).map(lambda case: case(plant_tag)))
    if chance(draw, 0.9):
        entry["ts"] = draw(_ts_values())
    tags_value = draw(
        st.one_of(
            st.lists(tag_values, max_size=3),
            st.lists(tag_values, max_size=3),
            st.lists(st.one_of(tag_values, st.integers(0, 2), st.none()), max_size=3),
            tag_values,
            st.none(),
        )
    )
    if chance(draw, 0.9):
        entry["tags"] = tags_value
    if chance(draw, 0.9):
        entry["text"] = draw(text_values)
    for key in draw(st.lists(st.sampled_from(["source", "text2", "ts_local", "Tags"]), max_size=2)):
        entry[key] = draw(st.one_of(texts, st.integers(), st.booleans()))
    return entry


def _escape_char(ch: str, rng: random.Random) -> str:
    """``ch`` as a JSON ``\\u`` escape (a surrogate pair for astral characters), random hex case."""
    code = ord(ch)
    if code > 0xFFFF:
        code -= 0x10000
        units = [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]
    else:
        units = [code]
    out = "".join(f"\\u{unit:04x}" for unit in units)
    return out.upper().replace("\\U", "\\u") if rng.random() < 0.5 else out


def _dump_string(s: str, rng: random.Random, rate: float) -> str:
    """A JSON string literal for ``s`` that escapes some characters it need not escape."""
    out = []
    for ch in s:
        plain = json.dumps(ch, ensure_ascii=False)[1:-1]
        if rng.random() < rate:
            out.append("\\/" if ch == "/" and rng.random() < 0.5 else _escape_char(ch, rng))
        else:
            out.append(plain)
    return '"' + "".join(out) + '"'


def _dump_value(value: Any, rng: random.Random, rate: float) -> str:
    if isinstance(value, str):
        return _dump_string(value, rng, rate)
    if isinstance(value, list):
        return "[" + ",".join(_dump_value(v, rng, rate) for v in value) + "]"
    return json.dumps(value)


@st.composite
def lines(draw: st.DrawFn, plant: str = "", plant_tag: str = "") -> bytes:
    """One journal line (without its newline): an entry in some encoding, or junk."""
    # Escaped encodings first: Hypothesis favours the first choices.
    kind = draw(st.sampled_from([4, 0, 5, 1, 2, 3, 6, 7, 8, 9]))
    entry_strategy = entries(plant, plant_tag)
    if kind <= 2:
        return encode_line(draw(entry_strategy))[:-1]
    if kind == 3:
        return json.dumps(draw(entry_strategy)).encode("ascii")  # ASCII-only, spaces after : and ,
    if kind <= 5:
        entry = draw(entry_strategy)
        rng = random.Random(draw(st.integers(0, 2**32)))
        rate = draw(st.sampled_from([0.2, 0.6, 1.0]))
        body = ",".join(
            _dump_string(k, rng, rate) + ":" + _dump_value(v, rng, rate) for k, v in entry.items()
        )
        return ("{" + body + "}").encode("utf-8")
    if kind == 6:
        # Entries whose text carries a lone surrogate: escaped (valid) or raw (not UTF-8).
        text = draw(texts) + "\ud83d"
        if draw(st.booleans()):
            return encode_line({"ts": format_timestamp(TIMES[0]), "text": text})[
                :-1
            ]
        return json.dumps({"text": text}, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if kind == 7:
        good = encode_line(draw(entry_strategy))[:-1]
        return good[: draw(st.integers(0, max(len(good) - 1, 0)))]  # torn
    if kind == 8 and draw(st.booleans()):
        # The same key twice: JSON keeps the last one, whatever the first one says.
        first, last = draw(st.sampled_from(TIMES_MS)), draw(_ts_values())
        return (
            b'{"ts":"'
            + format_timestamp(first).encode()
            + b'","text":"dup",'
            + draw(st.sampled_from([b'"ts"', b'"t\\u0073"', b'"\\u0074s"', b'"\\u0074\\u0073"']))
            + b":"
            + json.dumps(last).encode()
            + b',"tags":["x"]}'
        )
    if kind == 8:
        return draw(
            st.sampled_from(
                [
                b"",
                b"   ",
                b"[1,2]",
                b'"text"',
                b"null",
                b"{",
                b"\xff\xfe{}",
                b'{"text":"\xe9"}',
                b'{"ts":"2026-01-01T00:00:00.000Z","tags":["\xffx"],"text":"a\xc3\xff\\ud800"}',
                b'{"text":"\\udfffK\\u212a","tags":["\\ud83dx"]}',
            ]
            )
        )
    return draw(st.binary(max_size=20)).replace(b"\n", b"")


@st.composite
def journals(draw: st.DrawFn, plant: str = "", plant_tag: str = "") -> bytes:
    """A whole journal file; its last line may lack the newline (a torn write)."""
    body = b"\n".join(draw(st.lists(lines(plant, plant_tag), min_size=1, max_size=25)))
    if body and draw(st.booleans()):
        body += b"\n"
    return body


def _needles_from(data: bytes) -> list[str]:
    """Substrings of the texts and tags present in ``data``, to make matches likely."""
    found = []
    for raw in data.split(b"\n"):
        try:
            entry = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):
            continue
        if isinstance(entry, dict):
            for value in (entry.get("text"), *(entry.get("tags") or [])):
                if isinstance(value, str) and value:
                    found.append(value)
    return found


@st.composite
def search_args(draw: st.DrawFn, data: bytes, plant: str, plant_tag: str) -> dict[str, Any]:
    """Search arguments, often what was planted or what the journal holds, in a changed case."""
    pool = _needles_from(data)
    case = st.sampled_from(CASES)

    def pick(alphabet: list[str], planted: str) -> str:
        if chance(draw, 0.67):
            return draw(case)(planted)
        if pool and draw(st.booleans()):
            source = draw(st.sampled_from(pool))
            start = draw(st.integers(0, len(source) - 1))
            end = draw(st.integers(start + 1, len(source)))
            return draw(case)(source[start:end])
        return draw(st.text(alphabet=st.sampled_from(alphabet), max_size=3))

    args: dict[str, Any] = {"limit": draw(st.sampled_from([1, 2, 3, 5, 1000]))}
    if chance(draw, 0.8):
        args["query"] = pick(TEXT_ALPHABET, plant)
    if not args.get("query") or chance(draw, 0.25):
        args["tag"] = pick(TAG_ALPHABET, plant_tag)
    bounds = st.one_of(*[st.none()] * 6, st.sampled_from(TIMES), st.sampled_from(TIMES).map(_naive))
    args["since"] = draw(bounds)
    args["until"] = draw(bounds)
    return args


def _naive(t: datetime) -> datetime:
    return t.replace(tzinfo=None)


@st.composite
def plans(draw: st.DrawFn) -> Any:
    """A replacement for ``_Needle._choose_plan`` that picks any exact plan at random."""
    seed = draw(st.integers(0, 2**32 - 1))
    return lambda self, sample: _plan_from(self, random.Random(seed))


def _plan_from(needle: journal_plans._Needle, rng: random.Random) -> list[list[Any]]:
    """A random plan for ``needle``: text mode, lower mode, or an anchor offset with a random
    method (memchr loop or regex) per case variant; maybe the regex for lower mode too."""
    if rng.random() < 0.3:
        needle._lowered_regex = re.compile(re.escape(needle.needle))
    if not needle.quoted and rng.random() < 0.25:
        needle.text_only = True  # text mode: looks only where each line's text begins
        return []
    if rng.random() < 0.25:
        return []
    offset = rng.randrange(len(needle.needle))
    char = needle.needle[offset : offset + 1]
    return [
        [v, offset, needle._regex(v, offset) if rng.random() < 0.5 else None]
        for v in sorted({char, char.upper()})
    ]


SETTINGS = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(
    plant=st.one_of(
        st.text(alphabet=st.sampled_from(PLANT_ALPHABET), min_size=1, max_size=4),
        st.text(alphabet=st.sampled_from(TEXT_ALPHABET), min_size=1, max_size=4),
    ),
    plant_tag=tags,
    extra=st.data(),
    first_block=st.integers(1, 64),
    max_block=st.integers(1, 256),
    backslash_rarity=st.sampled_from([700, 1, 10**9]),
    min_budget=st.sampled_from([16, 0, 1]),
    plan=plans(),
    in_memory=st.booleans(),
    replan_min=st.sampled_from([64, 0]),
    scanner=st.sampled_from(SCANNERS),
)
def test_search_equals_reference(
    plant: str,
    plant_tag: str,
    extra: st.DataObject,
    first_block: int,
    max_block: int,
    backslash_rarity: int,
    min_budget: int,
    plan: Any,
    in_memory: bool,
    replan_min: int,
    scanner: Any,
) -> None:
    """Same entries, same order, as the whole-file algorithm; counters consistent."""
    data = extra.draw(journals(plant, plant_tag))
    args = extra.draw(search_args(data, plant, plant_tag))
    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(journal, "_FIRST_BLOCK", first_block))
        stack.enter_context(mock.patch.object(journal, "_MAX_BLOCK", max(max_block, first_block)))
        stack.enter_context(mock.patch.object(journal_plans, "_BACKSLASH_RARITY", backslash_rarity))
        stack.enter_context(mock.patch.object(journal_plans, "_MIN_BUDGET", min_budget))
        stack.enter_context(mock.patch.object(journal_plans, "_REPLAN_MIN_LINES", replan_min))
        stack.enter_context(mock.patch.object(journal_plans._Needle, "_choose_plan", plan))
        stack.enter_context(mock.patch.object(journal_plans, "FIND_LINES", scanner))
        f = io.BytesIO(data) if in_memory else stack.enter_context(_real_file(data))
        got = journal.search(f, **args)
        want = journal.reference_search(f, **args)
    event("matches" if want else "no match")
    query = args.get("query") or ""
    event("query: " + ("none" if not query else "ascii" if query.isascii() else "unicode"))
    event("stopped at limit" if len(want) == args["limit"] else "whole file")
    event("compiled scanner" if scanner is not None else "pure Python plans")
    assert got == want
    assert [type(e) for e in got] == [dict] * len(got)
    assert got.scanned >= len(got)
    assert 0 <= got.skipped <= want.skipped
    assert got.skipped <= got.scanned <= want.scanned
    if len(want) < args["limit"]:
        # Nothing stopped the search early: it went through the whole file.
        assert len(got) == len(want)


@contextmanager
def _real_file(data: bytes) -> Iterator[Any]:
    """A temporary real file holding ``data`` (so the pread path runs), open for reading."""
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        yield f


@SETTINGS
@given(data=journals(), max_block=st.integers(1, 64))
def test_iter_entries_equals_reference(data: bytes, max_block: int) -> None:
    """iter_entries yields every entry the reference finds, oldest first."""
    corrupt: list[int] = []
    with mock.patch.object(journal, "_MAX_BLOCK", max_block):
        got = list(
            journal.iter_entries(io.BytesIO(data), on_corrupt=lambda n, _line: corrupt.append(n))
        )
    want = journal.reference_search(io.BytesIO(data), limit=10**9)
    assert got == list(reversed(want))
    assert len(corrupt) == want.skipped
    assert corrupt == sorted(set(corrupt))


@settings(max_examples=300, deadline=None)
@given(entry=entries())
def test_encode_line_round_trips(entry: dict[str, Any]) -> None:
    """A line written by encode_line decodes to the same entry, ts/tags/text first, one line."""
    line = encode_line(entry)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    decoded = json.loads(line.decode("utf-8"))
    assert decoded == entry
    expected_order = [k for k in ("ts", "tags", "text") if k in entry]
    assert list(decoded)[: len(expected_order)] == expected_order
    assert b", " not in line.split(b'"')[0]  # compact separators outside strings


@settings(max_examples=300, deadline=None)
@given(
    moment=st.datetimes(
        min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(None)
    ),
    offset_minutes=st.integers(-23 * 60, 23 * 60),
)
def test_timestamps_round_trip(moment: datetime, offset_minutes: int) -> None:
    """format_timestamp gives the canonical form; parse_time reads it back (to the millisecond)."""
    zone = timezone(timedelta(minutes=offset_minutes))
    aware = moment.replace(tzinfo=zone)
    try:
        utc = aware.astimezone(timezone.utc)
    except OverflowError:
        return  # outside datetime's range once converted to UTC
    text = format_timestamp(aware)
    assert len(text) == 24 and text.endswith("Z") and text[10] == "T"
    parsed = parse_time(text)
    assert parsed == utc.replace(microsecond=utc.microsecond // 1000 * 1000)
    assert parse_time(aware.isoformat()) == aware


# -- a seeded soak test: thousands of uniformly random journals, no shrinking, every path ------


def _random_text(rng: random.Random, alphabet: list[str], size: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, size)))


def _random_case(rng: random.Random, s: str) -> str:
    return rng.choice(CASES)(s)


def _random_entry(rng: random.Random, plant: str, plant_tag: str) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if rng.random() < 0.9:
        canonical = format_timestamp(rng.choice(TIMES_MS))
        entry["ts"] = rng.choice(
            [canonical] * 4
            + [canonical.replace("T", " "), rng.choice(TIMES).isoformat(), "2026-01-01", 7, None]
        )
    if rng.random() < 0.9:
        pool = [_random_text(rng, TAG_ALPHABET, 3) or "x", _random_case(rng, plant_tag)]
        items: list[Any] = [rng.choice(pool) for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.1:
            items.append(rng.choice([1, None, ["x"]]))
        entry["tags"] = items if rng.random() < 0.9 else rng.choice(pool)
    if rng.random() < 0.9:
        text = _random_text(rng, TEXT_ALPHABET, 6)
        if rng.random() < 0.7:
            text += _random_case(rng, plant) + _random_text(rng, TEXT_ALPHABET, 6)
        entry["text"] = text if rng.random() < 0.95 else rng.choice([3, [text], None])
    if rng.random() < 0.2:
        entry["source"] = _random_text(rng, TEXT_ALPHABET, 5)
    return entry


def _random_line(rng: random.Random, plant: str, plant_tag: str) -> bytes:
    entry = _random_entry(rng, plant, plant_tag)
    roll = rng.random()
    if roll < 0.35:
        return encode_line(entry)[:-1]
    if roll < 0.45:
        return json.dumps(entry).encode("ascii")
    if roll < 0.8:
        rate = rng.choice([0.1, 0.5, 1.0])
        body = ",".join(
            _dump_string(k, rng, rate) + ":" + _dump_value(v, rng, rate) for k, v in entry.items()
        )
        return ("{" + body + "}").encode("utf-8")
    if roll < 0.87:
        good = encode_line(entry)[:-1]
        return good[: rng.randint(0, len(good))]
    if roll < 0.9:
        line = encode_line(entry)[:-1]
        return (
            line[:-1]
            + b","
            + rng.choice([b'"ts"', b'"t\\u0073"', b'"\\u0074\\u0073"'])
            + b":"
            + json.dumps(
                rng.choice([None, "x", format_timestamp(rng.choice(TIMES_MS))])
            ).encode()
            + b"}"
        )
    return rng.choice(
        [b"", b" ", b"[]", b"{", b"\xff", bytes(rng.randrange(256) for _ in range(5))]
    )


def test_search_equals_reference_soak() -> None:
    """3,000 seeded random journals and searches, tiny blocks, random plans: all identical."""
    rng = random.Random(20261129)
    compared = matched = 0
    for _ in range(3000):
        plant = _random_text(rng, rng.choice([PLANT_ALPHABET, TEXT_ALPHABET]), 4) or "a"
        plant_tag = _random_text(rng, TAG_ALPHABET, 2) or "x"
        lines_ = [_random_line(rng, plant, plant_tag) for _ in range(rng.randint(1, 30))]
        data = b"\n".join(lines_) + (b"\n" if rng.random() < 0.7 else b"")
        args: dict[str, Any] = {"limit": rng.choice([1, 2, 5, 1000])}
        if rng.random() < 0.85:
            args["query"] = _random_case(rng, plant)
            if rng.random() < 0.5 and len(args["query"]) > 1:
                cut = rng.randrange(1, len(args["query"]))
                args["query"] = rng.choice([args["query"][:cut], args["query"][cut:]])
        if "query" not in args or rng.random() < 0.2:
            args["tag"] = _random_case(rng, plant_tag)
        if rng.random() < 0.2:
            args["since"] = rng.choice(BOUNDS)
        if rng.random() < 0.2:
            args["until"] = rng.choice(BOUNDS)
        seed = rng.randrange(2**32)
        with ExitStack() as stack:
            stack.enter_context(mock.patch.object(journal, "_FIRST_BLOCK", rng.randint(1, 40)))
            stack.enter_context(mock.patch.object(journal, "_MAX_BLOCK", rng.randint(40, 200)))
            stack.enter_context(
                mock.patch.object(journal_plans, "_BACKSLASH_RARITY", rng.choice([700, 1, 10**9]))
            )
            stack.enter_context(
                mock.patch.object(journal_plans, "_MIN_BUDGET", rng.choice([16, 0]))
            )
            stack.enter_context(
                mock.patch.object(
                    journal_plans._Needle,
                    "_choose_plan",
                    lambda self, sample, seed=seed: _plan_from(self, random.Random(seed)),
                )
            )
            scanner = rng.choice(SCANNERS)
            stack.enter_context(mock.patch.object(journal_plans, "FIND_LINES", scanner))
            f = io.BytesIO(data)
            got = journal.search(f, **args)
            want = journal.reference_search(f, **args)
        assert got == want, (data, args)
        compared += 1
        matched += bool(want)
    assert compared == 3000 and matched > 1000  # the generator really produces matches
