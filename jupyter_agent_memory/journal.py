"""The journal file format (``memory/JOURNAL.jsonl``) and its search.

Format
------
One compact JSON object per line, keys ``ts``, ``tags``, ``text`` first (then any extra keys
another tool wrote), separators ``(',', ':')``, non-ASCII kept raw, UTF-8, ending in ``\\n``.
``ts`` is UTC with milliseconds and ``Z``: ``2026-11-29T10:04:05.678Z``.

Every function here works on a binary file object that the caller has already opened (the
store opens files with ``O_NOFOLLOW`` and hands them in); nothing here opens a path by name.

Lines and entries
-----------------
The file is split on ``b"\\n"`` only. A final segment without ``\\n`` (a write torn by a crash)
is an ordinary line: it counts when it happens to be a complete JSON object.

- A *blank* line (only whitespace) is ignored: it is neither an entry nor corrupted.
- A line is an *entry* when it is valid UTF-8 holding one JSON object (``json.loads`` rules, so
  ``NaN`` and duplicate keys behave as in Python: the last duplicate wins).
- Any other line is *corrupted*: it is skipped, counted, and never fails a search.

Matching (the same function serves :func:`search` and :func:`reference_search`)
------------------------------------------------------------------------------
- ``query``: ``query.lower() in text.lower()``. An entry whose ``text`` is not a string never
  matches a non-empty query.
- ``tag``: some item of ``tags`` is a string equal to ``tag`` ignoring case (``str.lower``).
  When ``tags`` is not a list the entry has no tags, so it never matches a non-empty tag.
- ``since`` / ``until``: both inclusive, on ``ts`` parsed by :func:`parse_time`. When a window
  is given, an entry whose ``ts`` is missing, not a string or unparseable never matches.
- Empty ``query`` / ``tag`` and ``None`` bounds filter nothing, so every entry matches them,
  whatever its fields hold.
- Results are the last ``limit`` matches in file order, newest first, each entry exactly as
  parsed from the file (extra keys included).

Speed
-----
:func:`search` reads the file backwards in blocks (64 KiB growing to 1 MiB) and stops as soon
as ``limit`` matches are found, so memory does not depend on the journal's size and a search
for a frequent tag touches only the end of the file. With a ``query`` or ``tag`` it first looks
for the lower-cased needle in the lower-cased bytes of a whole block and only decodes the lines
that contain it; see :class:`_Needle` for why that prefilter never drops a matching line.

``SearchResult.skipped`` counts the corrupted lines the search had to decode; a line the
prefilter proves cannot match is never decoded, so its corruption is not noticed (and does not
matter). ``SearchResult.scanned`` counts the lines from the end of the file back to the oldest
line the search looked at (every line of the file when fewer than ``limit`` entries match).
"""

from __future__ import annotations

import heapq
import json
import os
import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any, BinaryIO

__all__ = [
    "SearchResult",
    "encode_line",
    "format_timestamp",
    "iter_entries",
    "now_timestamp",
    "parse_time",
    "reference_search",
    "search",
]

# The first backward block is small so that a search satisfied by the newest entries costs
# microseconds; later blocks grow so a full scan makes few, large reads.
_FIRST_BLOCK = 64 * 1024
_MAX_BLOCK = 1024 * 1024

_FIRST_KEYS = ("ts", "tags", "text")


class SearchResult(list):
    """Matching journal entries, newest first.

    Attributes: ``skipped`` — corrupted lines the search decoded and skipped; ``scanned`` —
    lines read (see the module docstring for both).
    """

    def __init__(self, entries: Any = (), *, skipped: int = 0, scanned: int = 0) -> None:
        super().__init__(entries)
        self.skipped = skipped
        self.scanned = scanned

    def __repr__(self) -> str:
        entries = list.__repr__(self)
        return f"SearchResult({entries}, skipped={self.skipped}, scanned={self.scanned})"


# -- timestamps --------------------------------------------------------------------------------


def format_timestamp(dt: datetime) -> str:
    """``dt`` in UTC with milliseconds and ``Z`` (a naive ``dt`` is taken to be UTC)."""
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc)
    return (
        f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:"
        f"{dt.second:02d}.{dt.microsecond // 1000:03d}Z"
    )


def now_timestamp() -> str:
    """The current time as a journal ``ts``."""
    return format_timestamp(datetime.now(timezone.utc))


# A strict, version-independent ISO-8601 subset (``datetime.fromisoformat`` accepts different
# forms on different Python versions): a date, optionally followed by ``T`` or a space and a
# time with optional seconds, fraction and zone.
_ISO_TIME = re.compile(
    r"""
    (?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})
    (?:
        [Tt\ ]
        (?P<hour>[0-9]{2}):(?P<minute>[0-9]{2})
        (?::(?P<second>[0-9]{2})(?:[.,](?P<fraction>[0-9]+))?)?
        (?P<zone>[Zz]|[+-][0-9]{2}(?::?[0-9]{2})?)?
    )?
    """,
    re.VERBOSE,
)


def parse_time(value: str) -> datetime:
    """Parse an ISO-8601 date or date-time into an aware ``datetime``.

    Accepts ``YYYY-MM-DD`` and ``YYYY-MM-DD[T ]HH:MM[:SS[.fraction]][zone]`` where zone is
    ``Z`` or ``±HH[:MM]``; no zone means UTC; a date alone means midnight UTC; fractions beyond
    microseconds are truncated. Anything else raises ``ValueError`` naming the value.
    """
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO-8601 string, got {type(value).__name__}")
    match = _ISO_TIME.fullmatch(value.strip())
    if match is None:
        raise ValueError(f"not an ISO-8601 date or time: {value!r}")
    parts = match.groupdict()
    zone = parts["zone"]
    if zone is None or zone in "Zz":
        tz = timezone.utc
    else:
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
        if offset >= timedelta(hours=24) or int(digits[2:] or 0) >= 60:
            raise ValueError(f"not an ISO-8601 date or time (bad zone offset): {value!r}")
        tz = timezone(-offset if zone[0] == "-" else offset)
    fraction = (parts["fraction"] or "")[:6].ljust(6, "0")
    try:
        return datetime(
            int(parts["year"]),
            int(parts["month"]),
            int(parts["day"]),
            int(parts["hour"] or 0),
            int(parts["minute"] or 0),
            int(parts["second"] or 0),
            int(fraction),
            tzinfo=tz,
        )
    except ValueError:
        raise ValueError(f"not an ISO-8601 date or time (out of range): {value!r}") from None


def _aware(dt: datetime | None) -> datetime | None:
    """``dt`` with UTC attached when it has no zone."""
    if dt is not None and dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    return dt


# -- encoding ----------------------------------------------------------------------------------

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encode_line(entry: dict[str, Any]) -> bytes:
    """One journal line for ``entry``: compact JSON, ``ts``/``tags``/``text`` first, ``\\n``-ended.

    Non-ASCII text stays raw UTF-8. A lone surrogate (which UTF-8 cannot carry) is written as a
    ``\\uXXXX`` escape so the entry still round-trips. Raises ``TypeError`` for a non-dict or an
    unserialisable value and ``ValueError`` for NaN/infinity.
    """
    if not isinstance(entry, dict):
        raise TypeError(f"a journal entry must be a dict, got {type(entry).__name__}")
    ordered = {key: entry[key] for key in _FIRST_KEYS if key in entry}
    for key, value in entry.items():
        ordered.setdefault(key, value)
    text = json.dumps(ordered, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        # Surrogates only occur inside JSON strings, where an escape is equally valid.
        data = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")
    # json.dumps escapes every control character, so the line cannot contain a raw newline.
    return data + b"\n"


# -- decoding and matching ---------------------------------------------------------------------

_CORRUPT = object()


def _decode(line: bytes) -> Any:
    """The entry on ``line``; ``None`` for a blank line; ``_CORRUPT`` for anything else."""
    try:
        entry = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return _CORRUPT if line.strip() else None
    return entry if isinstance(entry, dict) else _CORRUPT


class _Matcher:
    """The filters of one search, applied to a decoded entry (the single source of truth)."""

    def __init__(
        self, query: str, tag: str, since: datetime | None, until: datetime | None
    ) -> None:
        self.query = (query or "").lower()
        self.tag = (tag or "").lower()
        self.since = _aware(since)
        self.until = _aware(until)

    def matches(self, entry: dict[str, Any]) -> bool:
        """Whether ``entry`` passes every filter (module docstring, "Matching")."""
        if self.query:
            text = entry.get("text")
            if not isinstance(text, str) or self.query not in text.lower():
                return False
        if self.tag:
            tags = entry.get("tags")
            if not isinstance(tags, list):
                return False
            tag = self.tag
            if not any(isinstance(item, str) and item.lower() == tag for item in tags):
                return False
        if self.since is not None or self.until is not None:
            ts = entry.get("ts")
            if not isinstance(ts, str):
                return False
            try:
                when = parse_time(ts)
            except ValueError:
                return False
            if self.since is not None and when < self.since:
                return False
            if self.until is not None and when > self.until:
                return False
        return True


# -- the byte-level prefilter ------------------------------------------------------------------

# JSON's two-character escapes and the character each stands for.
_SIMPLE_ESCAPES = {
    b'\\"': '"',
    b"\\\\": "\\",
    b"\\/": "/",
    b"\\b": "\b",
    b"\\f": "\f",
    b"\\n": "\n",
    b"\\r": "\r",
    b"\\t": "\t",
}
_U_ESCAPE = re.compile(rb"\\u[0-9a-fA-F]{4}")

# The only non-ASCII characters whose str.lower() contains an ASCII character (U+0130 -> "i̇",
# U+212A KELVIN SIGN -> "k"); a unit test recomputes this from the Unicode tables.
_ASCII_LOWERING = ("\u0130", "\u212a")


class _Needle:
    """A lower-cased string that a matching line must contain, and how to look for it in bytes.

    Why the prefilter is exact. Take an entry whose ``text.lower()`` contains ``s`` (or a tag
    item equal to ``s`` ignoring case; the needle is then ``"s"`` with its JSON quotes). Inside
    a JSON string every character appears raw except where the line uses an escape (``\\"``,
    ``\\n``, ``\\u00e9``…). ``str.lower`` maps characters one by one, except the Greek final
    sigma, which looks at neighbouring letters; a JSON string is delimited by ``"``, which is
    neither cased nor case-ignorable, so lowering the whole line lowers each string exactly as
    lowering it alone would. Hence, when no escape is involved, the lower-cased line contains
    the needle. A line can therefore only be missed when

    1. an escape stands for a character whose lower case shares a character with ``s`` (or is
       a surrogate, half of an escaped astral character): such lines are candidates too;
    2. ``s`` is ASCII, the block is lower-cased with ``bytes.lower`` (ASCII only) and the text
       holds one of the two non-ASCII characters whose lower case contains ASCII
       (``_ASCII_LOWERING``): lines holding those (relevant) characters are candidates too;
    3. ``s`` contains a sigma and an escape changes a sigma's neighbourhood: for a non-ASCII
       ``s`` every line containing a backslash is a candidate.

    Candidate lines are then decoded and matched for real, so extra candidates cost time only.
    """

    def __init__(self, s: str, *, quoted: bool) -> None:
        self.s = s
        self.chars = frozenset(s)
        self.ascii = s.isascii()
        text = f'"{s}"' if quoted else s
        if self.ascii:
            self.needle = text.encode("ascii")
            self.simple = [esc for esc, ch in _SIMPLE_ESCAPES.items() if ch in self.chars]
            self.specials = [
                ch.encode("utf-8") for ch in _ASCII_LOWERING if self.chars & set(ch.lower())
            ]
        else:
            self.text = text
        self._u_cache: dict[bytes, bool] = {}

    def _dangerous_u(self, escape: bytes) -> bool:
        """Whether a ``\\uXXXX`` escape can hide part of a match (case 1 above)."""
        verdict = self._u_cache.get(escape)
        if verdict is None:
            code = int(escape[2:], 16)
            verdict = 0xD800 <= code <= 0xDFFF or bool(self.chars & set(chr(code).lower()))
            self._u_cache[escape] = verdict
        return verdict

    def _extra_patterns(self, block: bytes) -> list[bytes]:
        """Byte patterns (present in ``block``) that make a line a candidate on their own."""
        patterns: list[bytes] = []
        if b"\\" in block:
            patterns.extend(esc for esc in self.simple if esc in block)
            if b"\\u" in block:
                patterns.extend(
                    esc for esc in set(_U_ESCAPE.findall(block)) if self._dangerous_u(esc)
                )
        if self.specials and not block.isascii():
            patterns.extend(p for p in self.specials if p in block)
        return patterns

    def candidates(self, block: bytes) -> Iterator[tuple[int, bytes]]:
        """``(start, line)`` for each line of ``block`` that may match, newest (last) first."""
        if not self.ascii:
            yield from self._candidates_unicode(block)
            return
        streams = [_rfind_lines(block.lower(), self.needle)]
        streams.extend(_rfind_lines(block, p) for p in self._extra_patterns(block))
        spans = streams[0] if len(streams) == 1 else _dedupe(heapq.merge(*streams, reverse=True))
        for start, end in spans:
            yield start, block[start:end]

    def _candidates_unicode(self, block: bytes) -> Iterator[tuple[int, bytes]]:
        """The same for a non-ASCII needle: lower-case the decoded block (``str.lower``)."""
        # surrogateescape keeps undecodable bytes as lone surrogates, so the decoded block has
        # exactly the same newlines (a newline byte never belongs to a multi-byte sequence).
        lowered = block.decode("utf-8", "surrogateescape").lower().split("\n")
        text = self.text
        for start, line, low in _reversed_lines(block, lowered):
            if text in low or b"\\" in line:
                yield start, line

    def may_match(self, line: bytes) -> bool:
        """The same test for one line (used for the second of two filters)."""
        if self.ascii:
            if self.needle in line.lower():
                return True
            return any(p in line for p in self._extra_patterns(line))
        return self.text in line.decode("utf-8", "surrogateescape").lower() or b"\\" in line


def _rfind_lines(buf: bytes, pattern: bytes) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each line of ``buf`` containing ``pattern``, last line first."""
    end = len(buf)
    while True:
        hit = buf.rfind(pattern, 0, end)
        if hit < 0:
            return
        start = buf.rfind(b"\n", 0, hit) + 1
        stop = buf.find(b"\n", hit)
        yield start, (len(buf) if stop < 0 else stop)
        end = start


def _dedupe(spans: Iterator[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """Drop repeats of the same line from a merged, descending stream of spans."""
    last = -1
    for span in spans:
        if span[0] != last:
            last = span[0]
            yield span


def _reversed_lines(block: bytes, extra: list[Any] | None = None) -> Iterator[Any]:
    """``(start, line[, extra_item])`` for every line of ``block``, last line first."""
    lines = block.split(b"\n")
    if block.endswith(b"\n"):
        lines.pop()
        if extra is not None:
            extra.pop()
    end = len(block) - (1 if block.endswith(b"\n") else 0)
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        start = end - len(line)
        yield (start, line) if extra is None else (start, line, extra[i])
        end = start - 1


# -- reading the file --------------------------------------------------------------------------


def _read_at(f: BinaryIO, pos: int, size: int) -> bytes:
    """Up to ``size`` bytes at ``pos`` (fewer only if the file shrank meanwhile)."""
    f.seek(pos)
    parts = []
    while size > 0:
        part = f.read(size)
        if not part:
            break
        parts.append(part)
        size -= len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _backward_blocks(f: BinaryIO) -> Iterator[bytes]:
    """The file as blocks of whole lines, the last block first.

    Reads only up to the size the file had when the search began, so concurrent appends do not
    shift the blocks. A line longer than a block is gathered across reads.
    """
    pos = f.seek(0, os.SEEK_END)
    pending: list[bytes] = []  # the start of a line that continues into later data, newest last
    size = _FIRST_BLOCK
    while pos > 0:
        step = min(size, pos)
        pos -= step
        chunk = _read_at(f, pos, step)
        if pos == 0:
            block = b"".join([chunk, *reversed(pending)])
            if block:
                yield block
            return
        newline = chunk.find(b"\n")
        if newline < 0:
            pending.append(chunk)
        else:
            block = b"".join([chunk[newline + 1 :], *reversed(pending)])
            pending = [chunk[: newline + 1]]
            if block:
                yield block
        size = min(size * 2, _MAX_BLOCK)


def _line_count(block: bytes, start: int = 0) -> int:
    """Number of lines of ``block`` from offset ``start`` (a line start) to its end."""
    return block.count(b"\n", start) + (0 if block.endswith(b"\n") else 1)


# -- public search -----------------------------------------------------------------------------


def search(
    f: BinaryIO,
    *,
    query: str = "",
    tag: str = "",
    limit: int = 20,
    since: datetime | None = None,
    until: datetime | None = None,
) -> SearchResult:
    """The last ``limit`` entries matching every filter, newest first.

    Reads ``f`` backwards in blocks and stops at the ``limit``-th match; results are identical
    to :func:`reference_search`. See the module docstring for matching rules and counters.
    """
    matcher = _Matcher(query, tag, since, until)
    limit = max(1, int(limit))
    needles = []
    if matcher.query:
        needles.append(_Needle(matcher.query, quoted=False))
    if matcher.tag:
        needles.append(_Needle(matcher.tag, quoted=True))
    primary = needles[0] if needles else None
    secondary = needles[1] if len(needles) > 1 else None

    result = SearchResult()
    for block in _backward_blocks(f):
        lines = primary.candidates(block) if primary else _reversed_lines(block)
        for start, line in lines:
            if secondary is not None and not secondary.may_match(line):
                continue
            entry = _decode(line)
            if entry is None:
                continue
            if entry is _CORRUPT:
                result.skipped += 1
            elif matcher.matches(entry):
                result.append(entry)
                if len(result) >= limit:
                    result.scanned += _line_count(block, start)
                    return result
        result.scanned += _line_count(block)
    return result


def reference_search(
    f: BinaryIO,
    *,
    query: str = "",
    tag: str = "",
    limit: int = 20,
    since: datetime | None = None,
    until: datetime | None = None,
) -> SearchResult:
    """The plain algorithm :func:`search` must agree with (kept for tests and benchmarks).

    Reads the whole file, decodes every line, filters, takes the last ``limit`` matches in file
    order and reverses them. ``skipped`` counts every corrupted line of the file.
    """
    matcher = _Matcher(query, tag, since, until)
    limit = max(1, int(limit))
    f.seek(0)
    data = f.read()
    lines = data.split(b"\n")
    if data.endswith(b"\n") or not data:
        lines.pop()
    matches = []
    skipped = 0
    for line in lines:
        entry = _decode(line)
        if entry is _CORRUPT:
            skipped += 1
        elif entry is not None and matcher.matches(entry):
            matches.append(entry)
    return SearchResult(reversed(matches[-limit:]), skipped=skipped, scanned=len(lines))


def iter_entries(
    f: BinaryIO, *, on_corrupt: Callable[[int, bytes], None] | None = None
) -> Iterator[dict[str, Any]]:
    """Every entry of ``f``, oldest first; corrupted lines are skipped.

    ``on_corrupt(line_number, raw_line)`` (1-based) is called for each corrupted line, for
    callers that want to warn. Reads in 1 MiB blocks, so memory does not depend on file size.
    """
    f.seek(0)
    pending: list[bytes] = []
    number = 0

    def emit(line: bytes) -> Iterator[dict[str, Any]]:
        entry = _decode(line)
        if entry is _CORRUPT:
            if on_corrupt is not None:
                on_corrupt(number, line)
        elif entry is not None:
            yield entry

    while True:
        chunk = f.read(_MAX_BLOCK)
        if not chunk:
            break
        newline = chunk.rfind(b"\n")
        if newline < 0:
            pending.append(chunk)
            continue
        data = b"".join([*pending, chunk[: newline + 1]])
        pending = [chunk[newline + 1 :]] if newline + 1 < len(chunk) else []
        lines = data.split(b"\n")
        lines.pop()  # data ends with a newline
        for line in lines:
            number += 1
            yield from emit(line)
    if pending:
        number += 1
        yield from emit(b"".join(pending))
