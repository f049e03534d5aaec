"""The journal line format, time parsing and the search rules, on hand-written journals."""

from __future__ import annotations

import functools
import io
import json
import os
import sys
import tracemalloc
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jupyter_agent_memory.journal import (
    DEFAULT_BLOCK_SIZE,
    SearchResult,
    decode_line,
    encode_line,
    format_timestamp,
    iter_entries,
    parse_time,
    reference_search,
    search,
)

UTC = timezone.utc


def jf(*lines: bytes | dict[str, Any], end: bytes = b"\n") -> io.BytesIO:
    """A journal in memory: dicts are encoded, bytes are taken as they are."""
    raw = [encode_line(x)[:-1] if isinstance(x, dict) else x for x in lines]
    return io.BytesIO(b"\n".join(raw) + (end if raw else b""))


def e(text: Any, *tags: Any, ts: str = "2026-11-29T10:00:00.000Z", **extra: Any) -> dict:
    return {"ts": ts, "tags": list(tags), "text": text, **extra}


def both(f: io.BytesIO, **kwargs: Any) -> SearchResult:
    """search(), after checking that it agrees with reference_search() at several block
    sizes (tiny ones cross every path of the backward block reader)."""
    want = reference_search(f, **kwargs)
    for block_size in (1, 7, 64, DEFAULT_BLOCK_SIZE):
        assert search(f, block_size=block_size, **kwargs) == want, block_size
    return search(f, **kwargs)


def dense(*lines: bytes | dict[str, Any], needle: str) -> io.BytesIO:
    """A journal of ``lines`` after 40 lines holding ``needle`` in their tags, so that the
    lines are searched in their block's text view (the rest of a block in which 16 lines hold
    a query)."""
    padding = [e("filler", needle.upper()) for _ in range(40)]
    return jf(*padding, *lines)


# -- timestamps ---------------------------------------------------------------------------------


def test_format_timestamp_is_utc_with_milliseconds() -> None:
    moment = datetime(2026, 11, 29, 11, 4, 5, 678999, tzinfo=timezone(timedelta(hours=1)))
    assert format_timestamp(moment) == "2026-11-29T10:04:05.678Z"


def test_format_timestamp_takes_naive_as_utc_and_pads_years() -> None:
    assert format_timestamp(datetime(999, 1, 2, 3, 4, 5)) == "0999-01-02T03:04:05.000Z"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-29T10:04:05.678Z", datetime(2026, 11, 29, 10, 4, 5, 678000, tzinfo=UTC)),
        ("2026-11-29T10:04:05.678", datetime(2026, 11, 29, 10, 4, 5, 678000, tzinfo=UTC)),
        ("2026-11-29t10:04:05z", datetime(2026, 11, 29, 10, 4, 5, tzinfo=UTC)),
        ("2026-11-29 10:04", datetime(2026, 11, 29, 10, 4, tzinfo=UTC)),
        ("2026-11-29", datetime(2026, 11, 29, tzinfo=UTC)),
        (" 2026-11-29T10:04:05Z ", datetime(2026, 11, 29, 10, 4, 5, tzinfo=UTC)),
        ("2026-11-29T12:04:05+02:00", datetime(2026, 11, 29, 10, 4, 5, tzinfo=UTC)),
        ("2026-11-29T05:34:05-0430", datetime(2026, 11, 29, 10, 4, 5, tzinfo=UTC)),
        ("2026-11-29T15:04:05+05", datetime(2026, 11, 29, 10, 4, 5, tzinfo=UTC)),
        ("2026-11-29T10:04:05.1234567891Z", datetime(2026, 11, 29, 10, 4, 5, 123456, tzinfo=UTC)),
        ("2026-11-29T10:04:05,5Z", datetime(2026, 11, 29, 10, 4, 5, 500000, tzinfo=UTC)),
    ],
)
def test_parse_time_accepts(text: str, expected: datetime) -> None:
    parsed = parse_time(text)
    assert parsed == expected
    assert parsed.tzinfo is not None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not an ISO-8601 date or time: ''"),
        ("yesterday", "not an ISO-8601 date or time: 'yesterday'"),
        ("2026-11-29T10", "not an ISO-8601 date or time: '2026-11-29T10'"),
        ("2026-11-29Z", "not an ISO-8601 date or time: '2026-11-29Z'"),
        ("2026-1-29", "not an ISO-8601 date or time: '2026-1-29'"),
        ("２０２６-11-29", "not an ISO-8601 date or time: '２０２６-11-29'"),
        ("2026-13-01T00:00:00.000Z", "out of range): '2026-13-01T00:00:00.000Z'"),
        ("2026-02-30", "out of range): '2026-02-30'"),
        ("2026-11-29T24:00:00Z", "out of range): '2026-11-29T24:00:00Z'"),
        ("2026-11-29T10:00+24:00", "bad zone offset): '2026-11-29T10:00+24:00'"),
        ("2026-11-29T10:00+05:60", "bad zone offset): '2026-11-29T10:00+05:60'"),
    ],
)
def test_parse_time_rejects_with_the_value_named(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_time(text)
    assert str(info.value).endswith(message)


def test_parse_time_rejects_non_strings() -> None:
    with pytest.raises(ValueError, match="expected an ISO-8601 string, got int"):
        parse_time(20261129)  # type: ignore[arg-type]


# -- encoding -----------------------------------------------------------------------------------


def test_encode_line_exact_bytes() -> None:
    entry = {"text": 'Café "naïve"\nline\\2', "source": "x", "tags": ["a", "é"], "ts": "T"}
    assert (
        encode_line(entry)
        == (
            '{"ts":"T","tags":["a","é"],"text":"Café \\"naïve\\"\\nline\\\\2","source":"x"}\n'
        ).encode()
    )


def test_encode_line_keeps_missing_keys_missing() -> None:
    assert encode_line({"text": "x", "extra": [1, {"b": None}]}) == (
        b'{"text":"x","extra":[1,{"b":null}]}\n'
    )


def test_encode_line_escapes_lone_surrogates_so_the_line_is_utf8() -> None:
    line = encode_line(e("a\ud83db"))
    assert b"\\ud83d" in line
    line.decode("utf-8")  # strict: valid UTF-8
    assert json.loads(line)["text"] == "a\ud83db"
    # ...and readers never hand the lone surrogate back: it reads as U+FFFD
    assert decode_line(line[:-1])["text"] == "a\ufffdb"


def test_encode_line_control_and_separator_characters_stay_on_one_line() -> None:
    line = encode_line(e("a\rb\x00c\u2028d\x85e"))
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    assert json.loads(line)["text"] == "a\rb\x00c\u2028d\x85e"


def test_encode_line_errors() -> None:
    with pytest.raises(TypeError, match="a journal entry must be a dict, got list"):
        encode_line([1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Out of range float values"):
        encode_line(e("x", score=float("nan")))
    with pytest.raises(TypeError, match="not JSON serializable"):
        encode_line(e("x", when=datetime(2026, 1, 1)))


# -- search rules -------------------------------------------------------------------------------


def test_newest_first_last_limit_matches() -> None:
    f = jf(*(e(f"note {i}") for i in range(10)))
    got = both(f, query="note", limit=3)
    assert [x["text"] for x in got] == ["note 9", "note 8", "note 7"]
    assert got.scanned == 3 and got.skipped == 0


def test_query_is_a_case_insensitive_substring_of_the_text_only() -> None:
    f = jf(e("Deploy FAILED", "ops"), e("all good", "failed"), e("unrelated"), e("deploy failed"))
    assert [x["text"] for x in both(f, query="failed")] == ["deploy failed", "Deploy FAILED"]
    assert [x["text"] for x in both(f, query="É")] == []


def test_non_ascii_case_folding_in_queries() -> None:
    f = jf(e("CAFÉ au lait"), e("STRASSE"), e("Straße"), e("ΟΔΟΣ"), e("\u212aelvin"))
    assert [x["text"] for x in both(f, query="café")] == ["CAFÉ au lait"]
    assert [x["text"] for x in both(f, query="straße")] == ["Straße"]  # lower(), not casefold()
    # "ΟΔΟΣ".lower() ends in the final sigma: a query with the medial one does not match
    assert [x["text"] for x in both(f, query="\u03bf\u03b4\u03bf\u03c3")] == []
    assert [x["text"] for x in both(f, query="\u03bf\u03b4\u03bf\u03c2")] == ["ΟΔΟΣ"]
    assert [x["text"] for x in both(f, query="KELVIN")] == ["\u212aelvin"]


def test_tag_is_exact_ignoring_case() -> None:
    f = jf(e("a", "Bug"), e("b", "bugs"), e("c", "BUG", "x"), e("d"), e("e", "ug"))
    assert [x["text"] for x in both(f, tag="bug")] == ["c", "a"]
    assert [x["text"] for x in both(f, tag="bug", query="A")] == ["a"]


def test_since_and_until_are_inclusive_and_zone_aware() -> None:
    stamps = ["2026-11-29T10:00:00.000Z", "2026-11-29T11:00:00.000Z", "2026-11-29T12:00:00.000Z"]
    f = jf(*(e(str(i), ts=ts) for i, ts in enumerate(stamps)))
    window = {"since": parse_time(stamps[0]), "until": parse_time("2026-11-29T13:00+02:00")}
    assert [x["text"] for x in both(f, **window)] == ["1", "0"]
    naive = {"since": datetime(2026, 11, 29, 11), "until": None}
    assert [x["text"] for x in both(f, **naive)] == ["2", "1"]


def test_entries_with_odd_fields() -> None:
    """Non-string text never matches a query; non-list tags are no tags; bad ts is outside
    every window; with no filter all of them are entries."""
    odd = [
        {"ts": "2026-11-29T10:00:00.000Z", "tags": "bug", "text": 42},
        {"tags": ["bug", 3, None], "text": ["bug"]},
        {"ts": "soon", "tags": ["bug"], "text": "bug here"},
        {"ts": 17, "text": "bug"},
        {"source": "other-tool"},
    ]
    f = jf(*odd)
    assert both(f) == list(reversed(odd))
    assert both(f, query="bug") == [odd[3], odd[2]]
    assert both(f, tag="BUG") == [odd[2], odd[1]]
    window = {"since": datetime(2000, 1, 1, tzinfo=UTC)}
    assert both(f, **window) == [odd[0]]


def test_extra_keys_and_key_order_are_preserved() -> None:
    f = jf(b'{"text":"hello","mood":{"score":1},"tags":["x"],"ts":"2026-11-29T10:00:00.000Z"}')
    (entry,) = both(f, query="hell")
    assert entry == {"text": "hello", "mood": {"score": 1}, "tags": ["x"], "ts": entry["ts"]}
    assert list(entry) == ["text", "mood", "tags", "ts"]


def test_corrupted_lines_are_skipped_and_counted() -> None:
    f = jf(
        e("good one"),
        b"not json",
        b"[1, 2]",
        b"\xef\xbb\xbf" + encode_line(e("bom"))[:-1],
        b"   ",
        b"",
        b"[" * 100000,  # deeper than the parser's recursion limit
        e("good two"),
    )
    got = both(f)
    assert [x["text"] for x in got] == ["good two", "good one"]
    assert (got.skipped, got.scanned) == (4, 8)
    ref = reference_search(f, query="good")
    assert (ref.skipped, ref.scanned) == (4, 8)


def test_the_prefilter_never_decodes_lines_without_the_needle() -> None:
    f = jf(e("alpha"), b"corrupt", b"{also corrupt", e("beta"))
    got = search(f, query="alpha")
    assert [x["text"] for x in got] == ["alpha"]
    assert (got.scanned, got.skipped) == (1, 0)
    assert (reference_search(f, query="alpha").skipped, reference_search(f).scanned) == (2, 4)


def test_torn_last_line() -> None:
    torn = jf(e("first"), encode_line(e("second"))[:-9], end=b"")
    got = both(torn)
    assert [x["text"] for x in got] == ["first"] and got.skipped == 1
    complete_but_no_newline = jf(e("first"), e("second"), end=b"")
    assert [x["text"] for x in both(complete_but_no_newline)] == ["second", "first"]


def test_empty_and_blank_files() -> None:
    assert both(io.BytesIO(b"")) == [] and search(io.BytesIO(b"")).scanned == 0
    blank = both(io.BytesIO(b"\n\n  \n"))
    assert blank == [] and (blank.skipped, blank.scanned) == (0, 3)


# -- needles hidden by JSON escapes and Unicode case mapping (the prefilter's hard cases) -------


@pytest.mark.parametrize(
    ("raw_text", "query"),
    [
        ("\\u0041pple", "apple"),  # an escaped ASCII letter
        ("\\u0061\\u0070\\u0050\\u004c\\u0045", "APPLE"),  # every letter escaped, mixed case
        ('say \\"hi\\"', 'y "h'),  # escaped quotes
        ("back\\\\slash", "k\\s"),  # escaped backslash
        ("a\\/b", "a/b"),  # escaped solidus
        ("one\\ntwo", "e\ntw"),  # escaped newline
        ("tab\\there", "b\th"),
        ("nul\\u0000here", "l\x00h"),
        ("smile \\ud83d\\ude42!", "\U0001f642!"),  # astral character as a surrogate pair
        ("caf\\u00E9", "CAFÉ"),
        ("\\u212aelvin", "kel"),  # escaped KELVIN SIGN lowers to ASCII k
        ("\u212aelvin", "kel"),  # raw KELVIN SIGN
        ("\u0130stanbul", "i"),  # capital I with dot lowers to "i" + U+0307
        ("\\u0130", "i"),
        ("ΑΣ\\u0301Β", "ασ"),  # an escape changes the final-sigma context
        ("\\u03a3\\u03a3", "σς"),
    ],
)
def test_escaped_and_special_characters_are_found(raw_text: str, query: str) -> None:
    line = ('{"ts":"2026-11-29T10:00:00.000Z","tags":[],"text":"' + raw_text + '"}').encode()
    f = jf(e("zzz"), line, e("qqq"), e("vvv"))
    got = both(f, query=query)
    assert len(got) == 1 and got[0]["text"] == json.loads(line)["text"]
    # The same in a block's text view, where the line is found by other means.
    found = both(dense(line, e("vvv"), needle=query), query=query, limit=1000)
    assert got[0] in found


def test_escaped_tags_are_found() -> None:
    f = jf(
        b'{"ts":"2026-11-29T10:00:00.000Z","tags":["\\u0042ug","\\u212A"],"text":"t"}',
        e("u", 'say"hi'),
    )
    assert [x["text"] for x in both(f, tag="bug")] == ["t"]
    assert [x["text"] for x in both(f, tag="k")] == ["t"]
    assert [x["text"] for x in both(f, tag='SAY"HI')] == ["u"]


def test_every_character_that_lowers_to_ascii_is_found() -> None:
    """Lowering bytes misses what str.lower maps to ASCII; the search must not: each such
    character (today KELVIN SIGN and I WITH DOT ABOVE) is found, raw and escaped."""
    special = [
        chr(code)
        for code in range(0x80, sys.maxunicode + 1)
        if any(ord(c) < 0x80 for c in chr(code).lower())
    ]
    assert special == ["\u0130", "\u212a"]
    assert "\u0130".lower() == "i\u0307"  # so the dotted I can only end an ASCII match
    for char in special:
        query = "x" + "".join(c for c in char.lower() if ord(c) < 0x80)
        for text in (f"X{char}y", f"x{char}"):
            raw = e(text)
            escaped = json.dumps(e(text)).encode()  # ASCII-only: the character escaped
            for line in (raw, escaped):
                want = reference_search(jf(line), query=query)
                assert both(jf(e("zzz"), line), query=query) == want
                assert both(dense(line, needle=query), query=query) == want


def test_quote_is_neither_cased_nor_case_ignorable() -> None:
    """Lowering a whole line lowers each JSON string as if alone (the search's argument)."""
    assert 'ΑΣ"Β'.lower() == 'ας"β'
    assert "ΑΣ'Β".lower() == "ασ'β"  # an apostrophe, by contrast, is case-ignorable


# -- reading: long lines, block boundaries, real files, memory ---------------------------------


def test_lines_longer_than_blocks() -> None:
    big = "x" * 5000 + "NEEDLE" + "y" * 5000
    f = jf(e("a"), e(big, "t"), e("b"), e(big[::-1]))
    assert [len(x["text"]) for x in both(f, query="needle")] == [10006]
    assert [x["text"] for x in both(f, tag="t")] == [big]
    assert [x["text"][:1] for x in both(f)] == ["y", "b", "x", "a"]
    assert [x["text"] for x in iter_entries(f, block_size=32)] == ["a", big, "b", big[::-1]]


def test_search_on_a_real_file_uses_pread(tmp_path: Path) -> None:
    path = tmp_path / "JOURNAL.jsonl"
    path.write_bytes(
        b"".join(encode_line(e(f"entry {i}", "even" if i % 2 else "odd")) for i in range(500))
    )
    with path.open("rb") as f, mock.patch("os.pread", wraps=os.pread) as pread:
        got = search(f, tag="EVEN", limit=2)
        assert pread.called
    assert [x["text"] for x in got] == ["entry 499", "entry 497"]


def test_search_stops_early_and_reads_only_the_end(tmp_path: Path) -> None:
    path = tmp_path / "JOURNAL.jsonl"
    with path.open("wb") as out:
        for i in range(60000):
            out.write(encode_line(e(f"entry {i}", "frequent")))
    reads: list[int] = []
    real = os.pread
    with (
        path.open("rb") as f,
        mock.patch("os.pread", lambda fd, n, pos: reads.append(n) or real(fd, n, pos)),
    ):
        got = search(f, tag="frequent", limit=20)
    assert [x["text"] for x in got] == [f"entry {i}" for i in range(59999, 59979, -1)]
    assert sum(reads) <= 64 * 1024 and got.scanned == 20  # one small block from the end


def test_memory_does_not_grow_with_the_journal(tmp_path: Path) -> None:
    """A full scan (no match) of a ~16 MB journal peaks at a few MiB, not at the file size."""
    path = tmp_path / "JOURNAL.jsonl"
    line = encode_line(e("some ordinary text about kernels and notebooks", "note"))
    with path.open("wb") as out:
        out.write(line * 150000)
    size = path.stat().st_size
    with path.open("rb") as f:
        tracemalloc.start()
        try:
            got = search(f, query="zeppelin")
            got_tag = search(f, tag="absent-tag")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert got == [] and got_tag == [] and size > 15_000_000
    assert peak < 4 * DEFAULT_BLOCK_SIZE + 1_000_000, peak


# -- iter_entries ------------------------------------------------------------------------------


def test_iter_entries_oldest_first_and_reports_corruption() -> None:
    f = jf(e("one"), b"broken", b"", e("two"), b'{"text": 1', end=b"")
    seen: list[tuple[int, bytes]] = []
    got = list(iter_entries(f, on_corrupt=lambda n, raw: seen.append((n, raw))))
    assert [x["text"] for x in got] == ["one", "two"]
    assert seen == [(2, b"broken"), (5, b'{"text": 1')]


def test_iter_entries_without_callback_and_empty_file() -> None:
    assert list(iter_entries(io.BytesIO(b""))) == []
    assert [x["text"] for x in iter_entries(jf(b"x", e("ok")))] == ["ok"]


def test_search_result_repr_and_defaults() -> None:
    result = SearchResult([{"text": "a"}], skipped=1, scanned=3, indexed=True)
    assert repr(result) == "SearchResult([{'text': 'a'}], skipped=1, scanned=3, indexed=True)"
    assert (SearchResult().skipped, SearchResult().scanned, SearchResult().indexed) == (0, 0, False)


@given(
    st.text(max_size=30),
    st.lists(st.text(max_size=8), max_size=4),
    st.text(max_size=60),
)
def test_the_direct_line_writer_writes_what_the_json_encoder_writes(
    ts: str, tags: list[str], text: str
) -> None:
    got = encode_line({"text": text, "ts": ts, "tags": tags})
    general = json.dumps(
        {"ts": ts, "tags": tags, "text": text}, ensure_ascii=False, separators=(",", ":")
    )
    try:
        assert got == general.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # a lone surrogate: written as an escape, read back as U+FFFD
        assert got == (json.dumps(json.loads(general), separators=(",", ":")) + "\n").encode(
            "ascii"
        ) or isinstance(decode_line(got[:-1]), dict)


@functools.cache
def _plain_note_lines() -> tuple[bytes, ...]:
    """40,000 encoded "plain" notes three minutes apart from 2025-12-01, built once per run."""
    start = datetime(2025, 12, 1, tzinfo=timezone.utc)
    return tuple(
        encode_line(
            {
                "ts": format_timestamp(start + timedelta(minutes=3 * i)),
                "tags": ["note"],
                "text": "plain",
            }
        )
        for i in range(40000)
    )


@pytest.mark.parametrize("query", ["2025", "tag", "TEXT", "ts", '","', "note"])
def test_a_query_in_every_line_s_keys_decodes_only_lines_holding_it_in_their_text(
    query: str,
) -> None:
    # Every line holds the query in its keys, timestamp or tags; three hold it in the text.
    lines = list(_plain_note_lines())
    for i in (5, 20000, 39990):
        entry = json.loads(lines[i])
        lines[i] = encode_line({**entry, "text": f"released {query} edition"})
    data = b"".join(lines)
    assert data.count(b'"ts":"2025') > 10000
    f = io.BytesIO(data)
    got = search(f, query=query)
    assert got == reference_search(f, query=query)
    assert [e["text"] for e in got] == [f"released {query} edition"] * 3
    assert got.scanned < 200  # a few lines per block, not one per line
