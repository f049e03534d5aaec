"""Property tests: the journal search returns exactly what the plain algorithm returns.

Random journals mix entries written by us and by other tools (escaped characters, spaces,
ASCII-only JSON), odd fields (non-string text, non-list tags, bad or missing ``ts``, extra keys),
corrupted, blank and torn lines, and often a run of lines that hold the query in their keys,
tags or text, so that blocks switch to their text view. Each search reads real files and
in-memory ones, with block sizes from one byte up, so every path of the block reader is
crossed. The hypothesis tests follow the active profile (``dev`` in the quick lane); the seeded
soak at the end is ``slow``.
"""

from __future__ import annotations

import io
import json
import random
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from jupyter_agent_memory import journal

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
PLANT_ALPHABET = list('aAkKiIsStT20"\\/\n\t\x00 :-') + ["\u212a", "\u0130", "\u00e9", "\u03a3"]
TAG_ALPHABET = list("xXkK") + ["\u212a", "\u0130", "\u00e9", "\u00c9", '"', "\\", "\ufffd"]

BASE = datetime(2026, 1, 1, tzinfo=timezone.utc)
TIMES = [BASE + timedelta(minutes=7 * i) for i in range(6)]
# Entry times a millisecond either side of the bounds, which may carry microseconds.
TIMES_MS = [t + timedelta(milliseconds=d) for t in TIMES for d in (-1, 0, 1)]
BOUNDS = TIMES + [t + timedelta(microseconds=d) for t in TIMES for d in (-1500, -500, 500, 999)]

texts = st.text(alphabet=st.sampled_from(TEXT_ALPHABET), max_size=12)
tags = st.text(alphabet=st.sampled_from(TAG_ALPHABET), min_size=1, max_size=3)


def _ts_values() -> st.SearchStrategy[Any]:
    canonical = st.sampled_from(TIMES_MS).map(journal.format_timestamp)
    other_forms = st.sampled_from(TIMES).map(
        lambda t: t.astimezone(timezone(timedelta(hours=2))).isoformat()
    )
    return st.one_of(
        canonical,
        canonical,
        other_forms,
        st.just("2026-01-01"),
        # 24 characters like ours, but not our layout: must not be compared as bytes
        st.sampled_from(TIMES).map(lambda t: journal.format_timestamp(t).replace("T", " ")),
        st.sampled_from(TIMES).map(lambda t: journal.format_timestamp(t).lower()),
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
        return journal.encode_line(draw(entry_strategy))[:-1]
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
            return journal.encode_line({"ts": journal.format_timestamp(TIMES[0]), "text": text})[
                :-1
            ]
        return json.dumps({"text": text}, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if kind == 7:
        good = journal.encode_line(draw(entry_strategy))[:-1]
        return good[: draw(st.integers(0, max(len(good) - 1, 0)))]  # torn
    if kind == 8 and draw(st.booleans()):
        # The same key twice: JSON keeps the last one, whatever the first one says.
        first, last = draw(st.sampled_from(TIMES_MS)), draw(_ts_values())
        return (
            b'{"ts":"'
            + journal.format_timestamp(first).encode()
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


def dense_line(rng: random.Random, plant: str, index: int) -> bytes:
    """A line that holds ``plant`` (in some case) where a whole-line search sees it but the
    text may not: in our tags or timestamp, in another tool's key, in the text, or behind an
    escape; runs of these make a block search its text view."""
    variant = rng.choice(CASES)(plant) or "x"
    ts = journal.format_timestamp(TIMES_MS[index % len(TIMES_MS)])
    kind = rng.randrange(8)
    if kind == 0:
        return journal.encode_line({"ts": ts, "tags": [variant], "text": "filler"})
    if kind == 1:  # foreign layout: the plant in a key before the text
        return json.dumps({"note": variant, "text": "filler", "ts": ts}).encode() + b"\n"
    if kind == 2:
        return journal.encode_line({"ts": ts, "tags": ["x"], "text": f"with {variant} inside"})
    if kind == 3:  # our layout, but a tag that holds "]" or an escape: kept whole
        return journal.encode_line({"ts": ts, "tags": [f"]{variant}", 'q"'], "text": "filler"})
    if kind == 4:  # ASCII-only JSON: every non-ASCII character escaped
        return json.dumps({"ts": ts, "tags": [], "text": f"esc {variant}"}).encode() + b"\n"
    if kind == 5:
        return journal.encode_line({"ts": f"{ts[:-1]}{variant}", "tags": [], "text": "filler"})
    if kind == 6:  # a timestamp that starts with the plant: only counted, never decoded
        return journal.encode_line({"ts": variant + ts, "tags": [], "text": "filler"})
    return journal.encode_line({"ts": ts, "tags": [], "text": "filler"})  # keys only


@st.composite
def journals(draw: st.DrawFn, plant: str = "", plant_tag: str = "") -> bytes:
    """A whole journal file; its last line may lack the newline (a torn write); often with a
    run of lines holding the plant (:func:`dense_line`)."""
    lines_ = draw(st.lists(lines(plant, plant_tag), min_size=1, max_size=25))
    if plant and draw(st.booleans()):
        rng = random.Random(draw(st.integers(0, 2**32 - 1)))
        at = rng.randint(0, len(lines_))
        run = [dense_line(rng, plant, i)[:-1] for i in range(rng.randint(16, 60))]
        lines_[at:at] = run
    body = b"\n".join(lines_)
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


# Only what the data needs; the number of examples is the profile's.
SETTINGS = settings(
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
BLOCK_SIZES = st.one_of(st.integers(1, 64), st.integers(65, 4096), st.just(1024 * 1024))


@SETTINGS
@given(
    plant=st.one_of(
        st.text(alphabet=st.sampled_from(PLANT_ALPHABET), min_size=1, max_size=4),
        st.text(alphabet=st.sampled_from(TEXT_ALPHABET), min_size=1, max_size=4),
    ),
    plant_tag=tags,
    extra=st.data(),
    block_size=BLOCK_SIZES,
    in_memory=st.booleans(),
)
def test_search_equals_reference(
    plant: str,
    plant_tag: str,
    extra: st.DataObject,
    block_size: int,
    in_memory: bool,
) -> None:
    """Same entries, same order, as the whole-file algorithm; counters consistent."""
    data = extra.draw(journals(plant, plant_tag))
    args = extra.draw(search_args(data, plant, plant_tag))
    with ExitStack() as stack:
        f = io.BytesIO(data) if in_memory else stack.enter_context(_real_file(data))
        got = journal.search(f, block_size=block_size, **args)
        want = journal.reference_search(f, **args)
    event("matches" if want else "no match")
    query = args.get("query") or ""
    event("query: " + ("none" if not query else "ascii" if query.isascii() else "unicode"))
    event("stopped at limit" if len(want) == args["limit"] else "whole file")
    assert_consistent(got, want)


def assert_consistent(got: Any, want: Any) -> None:
    """``got`` (from search) is ``want`` (from reference_search), with sensible counters."""
    assert got == want
    assert [type(e) for e in got] == [dict] * len(got)
    assert got.scanned >= len(got)
    assert 0 <= got.skipped <= want.skipped
    assert got.skipped <= got.scanned <= want.scanned
    assert got.indexed is False


@contextmanager
def _real_file(data: bytes) -> Iterator[Any]:
    """A temporary real file holding ``data`` (so the pread path runs), open for reading."""
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        yield f


@SETTINGS
@given(data=journals(), block_size=BLOCK_SIZES)
def test_iter_entries_equals_reference(data: bytes, block_size: int) -> None:
    """iter_entries yields every entry reference_search finds, oldest first."""
    corrupt: list[int] = []
    got = list(
        journal.iter_entries(
            io.BytesIO(data),
            on_corrupt=lambda n, _line: corrupt.append(n),
            block_size=block_size,
        )
    )
    want = journal.reference_search(io.BytesIO(data), limit=10**9)
    assert got == list(reversed(want))
    assert len(corrupt) == want.skipped
    assert corrupt == sorted(set(corrupt))


@SETTINGS
@given(entry=entries())
def test_encode_line_round_trips(entry: dict[str, Any]) -> None:
    """A line written by encode_line decodes to the same entry, ts/tags/text first, one line."""
    line = journal.encode_line(entry)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    decoded = json.loads(line.decode("utf-8"))
    assert decoded == entry
    expected_order = [k for k in ("ts", "tags", "text") if k in entry]
    assert list(decoded)[: len(expected_order)] == expected_order
    assert b", " not in line.split(b'"')[0]  # compact separators outside strings


@SETTINGS
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
    text = journal.format_timestamp(aware)
    assert len(text) == 24 and text.endswith("Z") and text[10] == "T"
    parsed = journal.parse_time(text)
    assert parsed == utc.replace(microsecond=utc.microsecond // 1000 * 1000)
    assert journal.parse_time(aware.isoformat()) == aware


# -- a seeded soak test: thousands of uniformly random journals, no shrinking, every path ------


def _random_text(rng: random.Random, alphabet: list[str], size: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, size)))


def _random_case(rng: random.Random, s: str) -> str:
    return rng.choice(CASES)(s)


def _random_entry(rng: random.Random, plant: str, plant_tag: str) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if rng.random() < 0.9:
        canonical = journal.format_timestamp(rng.choice(TIMES_MS))
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
        return journal.encode_line(entry)[:-1]
    if roll < 0.45:
        return json.dumps(entry).encode("ascii")
    if roll < 0.8:
        rate = rng.choice([0.1, 0.5, 1.0])
        body = ",".join(
            _dump_string(k, rng, rate) + ":" + _dump_value(v, rng, rate) for k, v in entry.items()
        )
        return ("{" + body + "}").encode("utf-8")
    if roll < 0.87:
        good = journal.encode_line(entry)[:-1]
        return good[: rng.randint(0, len(good))]
    if roll < 0.9:
        line = journal.encode_line(entry)[:-1]
        return (
            line[:-1]
            + b","
            + rng.choice([b'"ts"', b'"t\\u0073"', b'"\\u0074\\u0073"'])
            + b":"
            + json.dumps(
                rng.choice([None, "x", journal.format_timestamp(rng.choice(TIMES_MS))])
            ).encode()
            + b"}"
        )
    return rng.choice(
        [b"", b" ", b"[]", b"{", b"\xff", bytes(rng.randrange(256) for _ in range(5))]
    )


@pytest.mark.slow
def test_search_equals_reference_soak() -> None:
    """3,000 seeded random journals and searches, with runs of lines holding the query and
    block sizes from one byte up, on real files: all identical to the plain algorithm."""
    rng = random.Random(20261129)
    compared = matched = 0
    for _ in range(3000):
        plant = _random_text(rng, rng.choice([PLANT_ALPHABET, TEXT_ALPHABET]), 4) or "a"
        plant_tag = _random_text(rng, TAG_ALPHABET, 2) or "x"
        lines_ = [_random_line(rng, plant, plant_tag) for _ in range(rng.randint(1, 30))]
        if rng.random() < 0.4:
            at = rng.randint(0, len(lines_))
            lines_[at:at] = [dense_line(rng, plant, i)[:-1] for i in range(rng.randint(16, 50))]
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
        block_size = rng.choice([rng.randint(1, 40), rng.randint(40, 2000), 1024 * 1024])
        with _real_file(data) as f:
            got = journal.search(f, block_size=block_size, **args)
            want = journal.reference_search(f, **args)
        assert got == want, (data, args, block_size)
        assert_consistent(got, want)
        compared += 1
        matched += bool(want)
    assert compared == 3000 and matched > 1000  # the generator really produces matches
