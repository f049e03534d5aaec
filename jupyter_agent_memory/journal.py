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
for a frequent tag touches only the end of the file. With a ``query`` or ``tag`` it looks for
the lower-cased needle in the bytes of a whole block at once (``bytes.lower`` + ``rfind``, or a
memchr-driven search for the needle's rarest byte) and decodes only the lines that contain it;
see :class:`_Needle` for why that prefilter never drops a matching line. With ``since`` /
``until``, lines in our own layout whose timestamp lies outside the window are skipped without
decoding (:class:`_Window`).

Counters: ``SearchResult.scanned`` counts the lines the search actually read one by one, that
is decoded (every line for :func:`reference_search`; for :func:`search`, the lines from the end
back to where it stopped that the prefilter let through), and ``SearchResult.skipped`` the
corrupted lines among them. A line the prefilter proves cannot match is never decoded, so its
corruption goes unnoticed, which is harmless: it could not have matched.
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

    Attributes: ``scanned`` — lines the search read (decoded) one by one; ``skipped`` — the
    corrupted lines among them (see the module docstring for both).
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
_CANONICAL_TS = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")


def parse_time(value: str) -> datetime:
    """Parse an ISO-8601 date or date-time into an aware ``datetime``.

    Accepts ``YYYY-MM-DD`` and ``YYYY-MM-DD[T ]HH:MM[:SS[.fraction]][zone]`` where zone is
    ``Z`` or ``±HH[:MM]``; no zone means UTC; a date alone means midnight UTC; fractions beyond
    microseconds are truncated. Anything else raises ``ValueError`` naming the value.
    """
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO-8601 string, got {type(value).__name__}")
    if _CANONICAL_TS.fullmatch(value):
        # Fast path for the journal's own format (same result as the general path below; a
        # time-window search parses one ts per entry). fromisoformat validates every range.
        try:
            return datetime.fromisoformat(value[:-1]).replace(tzinfo=timezone.utc)
        except ValueError:
            raise ValueError(f"not an ISO-8601 date or time (out of range): {value!r}") from None
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

# JSON's two-character escapes: the byte after the backslash -> the character it stands for.
_SIMPLE_ESCAPES = {
    ord('"'): '"',
    ord("\\"): "\\",
    ord("/"): "/",
    ord("b"): "\b",
    ord("f"): "\f",
    ord("n"): "\n",
    ord("r"): "\r",
    ord("t"): "\t",
}
_U = ord("u")
_U_ESCAPE = re.compile(rb"\\u[0-9a-fA-F]{4}")

# The only non-ASCII characters whose str.lower() contains an ASCII character (a unit test
# recomputes this from the Unicode tables): KELVIN SIGN -> "k", and I WITH DOT ABOVE -> "i"
# followed by U+0307, so the latter can only end an ASCII match.
_KELVIN = "\u212a"
_DOTTED_I = "\u0130"

# Rough costs in nanoseconds, used only to pick the cheapest exact way to find a needle in a
# block (measured on CPython 3.11; only their ratios matter): lower-casing a block and searching
# it, per byte; a memchr-driven Python loop, per byte scanned and per hit; a regular expression
# with a one-byte literal prefix, per byte scanned and per occurrence of that byte.
_COST_LOWER_PER_BYTE = 0.75
_COST_MEMCHR_PER_BYTE = 0.05
_COST_MEMCHR_PER_HIT = 220.0
_COST_REGEX_PER_BYTE = 0.28
_COST_REGEX_PER_HIT = 15.0
_COST_LOOKBEHIND_PER_HIT = 20.0
# The escape scan walks backslashes one by one while they are at most this dense, then switches
# to whole-block regular-expression searches for the rest of the block.
_BACKSLASH_RARITY = 700
# Every such loop may run at least this many times before it gives up on a block.
_MIN_BUDGET = 16


class _Needle:
    """A lower-cased string that a matching line must contain, and how to look for it in bytes.

    Why the prefilter is exact. Take an entry whose ``text.lower()`` contains ``s`` (or a tag
    item equal to ``s`` ignoring case; the needle is then ``"s"`` with its JSON quotes). Inside
    a JSON string every character appears raw except where the line uses an escape (``\\"``,
    ``\\n``, ``\\u00e9``…). ``str.lower`` maps characters one by one, except the Greek final
    sigma, which looks at neighbouring letters; a JSON string is delimited by ``"``, which is
    neither cased nor case-ignorable, so lowering the whole line lowers each string exactly as
    lowering it alone would. Hence, when no escape is involved, the lower-cased line contains
    the needle. A matching line can only lack the needle when

    1. an escape stands for a character whose lower case shares a character with ``s``: lines
       holding such an escape are candidates too (for an ASCII ``s``; a non-ASCII ``s`` makes
       every line with a backslash a candidate, which also covers escaped surrogate pairs and
       the sigma rule);
    2. ``s`` is ASCII, the bytes are lower-cased ASCII-only (``bytes.lower``, or a regular
       expression's ASCII ``IGNORECASE``) and the text holds one of the two non-ASCII
       characters whose lower case contains ASCII: lines holding a relevant one are candidates.

    Finding an ASCII needle in a block. *Lower mode*: ``bytes.lower`` the block and ``rfind``
    from its end, lazily, so a frequent needle costs a few lookups; the first block of every
    search uses it. Later blocks may use *anchor mode*: every case-insensitive occurrence holds
    ``s[k]`` or ``s[k].upper()`` at offset ``k``, so for a well-chosen ``k`` each of those (at
    most two) bytes is looked up on its own, either with a memchr-driven ``find`` loop (when the
    byte is rare) or with a regular expression whose literal prefix is that byte and which
    checks the rest case-insensitively (look-behind for ``s[:k]``). Byte counts from the first
    block and the cost table above choose ``k`` and each method, or keep lower mode.

    Candidate lines are then decoded and matched for real, so extra candidates cost time only.
    """

    def __init__(self, s: str, *, quoted: bool) -> None:
        self.s = s
        self.chars = frozenset(s)
        self.ascii = s.isascii()
        self.text = f'"{s}"' if quoted else s
        # None: not chosen yet; [] : lower mode; else one (byte, offset, regex | None) per case
        # variant of the anchor byte (regex None: memchr loop).
        self.plan: list[list[Any]] | None = None
        self._sample = b""
        if self.ascii:
            self.needle = self.text.encode("ascii")
            self.simple = frozenset(b for b, ch in _SIMPLE_ESCAPES.items() if ch in self.chars)
            specials = [_KELVIN] if "k" in self.chars else []
            if not quoted and s.endswith("i"):
                specials.append(_DOTTED_I)
            self.specials = [ch.encode("utf-8") for ch in specials]
            # Lower mode after the first block: the regex engine scans for a literal faster
            # than bytes.find when its first byte is rare, slower when it is common.
            self._lowered_regex: re.Pattern[bytes] | None = None
        self._u_cache: dict[bytes, bool] = {}

    # escapes and special characters (cases 1 and 2 above, ASCII needles)

    def _dangerous_u(self, escape: bytes) -> bool:
        """Whether a ``\\uXXXX`` escape stands for a character that may be part of a match."""
        verdict = self._u_cache.get(escape)
        if verdict is None:
            verdict = bool(self.chars & set(chr(int(escape[2:], 16)).lower()))
            self._u_cache[escape] = verdict
        return verdict

    def _extra_hits(self, buf: bytes, lo: int = 0) -> list[int]:
        """Offsets (from ``lo``, a line start) of escapes and special characters that make a
        line a candidate."""
        hits: list[int] = []
        find = buf.find
        simple = self.simple
        pos = find(b"\\", lo)
        # This loop runs once per backslash, so it is kept lean; past the budget, backslashes
        # are dense and whole-buffer searches are cheaper.
        try:
            for _ in range((len(buf) - lo) // _BACKSLASH_RARITY + _MIN_BUDGET):
                if pos < 0:
                    break
                after = buf[pos + 1]
                if after == _U:
                    match = _U_ESCAPE.match(buf, pos)
                    if match is not None and self._dangerous_u(match.group()):
                        hits.append(pos)
                elif after in simple:
                    hits.append(pos)
                pos = find(b"\\", pos + 2)  # skip the escaped byte: "\\\\" pairs stay aligned
            else:
                if pos >= 0:
                    self._bulk_escape_hits(buf, pos, hits)
        except IndexError:
            pass  # a backslash as the very last byte (a torn line) escapes nothing
        if self.specials and not buf.isascii():
            for pattern in self.specials:
                hits.extend(_find_all(buf, pattern, lo))
        return hits

    def _bulk_escape_hits(self, buf: bytes, pos: int, hits: list[int]) -> None:
        """The escape scan from ``pos`` on, with whole-buffer searches (backslashes are dense).

        These searches may also report a backslash that is itself escaped; that only adds a
        candidate, it never drops one.
        """
        hits.extend(
            m.start() for m in _U_ESCAPE.finditer(buf, pos) if self._dangerous_u(m.group())
        )
        for after in self.simple:
            pattern = bytes((0x5C, after))
            hit = buf.find(pattern, pos)
            while hit >= 0:
                hits.append(hit)
                hit = buf.find(pattern, hit + 1)

    # finding the needle

    def _regex(self, byte: bytes, offset: int) -> re.Pattern[bytes]:
        """A pattern matching the needle case-insensitively, starting at its byte ``offset``,
        which must be ``byte`` exactly (so the engine can scan for that literal byte)."""
        needle = self.needle
        pattern = re.escape(byte)
        if offset:
            # Fixed-width look-behind over the bytes before the anchor and the anchor itself.
            pattern += b"(?<=(?i:" + re.escape(needle[: offset + 1]) + b"))"
        if offset + 1 < len(needle):
            pattern += b"(?i:" + re.escape(needle[offset + 1 :]) + b")"
        return re.compile(pattern)

    def _choose_plan(self, sample: bytes) -> list[list[Any]]:
        """The cheapest exact way to find the needle, judged on ``sample``; [] = lower mode."""
        size = max(len(sample), 1)
        best_cost = _COST_LOWER_PER_BYTE * size
        best: list[list[Any]] = []
        counts: dict[bytes, int] = {}
        for offset, byte in enumerate(self.needle):
            char = bytes((byte,))
            variants = {char, char.upper()}
            plan, cost = [], 0.0
            for variant in sorted(variants):
                if variant not in counts:
                    counts[variant] = sample.count(variant)
                hits = counts[variant]
                memchr = _COST_MEMCHR_PER_BYTE * size + _COST_MEMCHR_PER_HIT * hits
                per_hit = _COST_REGEX_PER_HIT + (_COST_LOOKBEHIND_PER_HIT if offset else 0.0)
                regex = _COST_REGEX_PER_BYTE * size + per_hit * hits
                plan.append([variant, offset, None if memchr <= regex else True])
                cost += min(memchr, regex)
            if cost < best_cost:
                best_cost, best = cost, plan
        first = self.needle[:1]
        if (sample.count(first) + sample.count(first.upper())) * 200 < size:
            self._lowered_regex = re.compile(re.escape(self.needle))
        for step in best:
            if step[2] is not None:
                step[2] = self._regex(step[0], step[1])
        return best

    def _anchor_spans(self, buf: bytes, lo: int) -> list[tuple[int, int]]:
        """Spans of the lines of ``buf[lo:]`` containing the needle, found from the anchor."""
        needle = self.needle
        size = len(needle)
        spans = set()
        # Past this many hits a byte is denser than the sample suggested.
        max_hits = (len(buf) - lo) * _COST_REGEX_PER_BYTE // _COST_MEMCHR_PER_HIT + _MIN_BUDGET
        for step in self.plan or ():
            variant, offset, regex = step
            if regex is None:
                budget = max_hits
                hit = buf.find(variant, lo + offset)
                while hit >= 0:
                    budget -= 1
                    if budget < 0:  # let the regex engine do this byte from now on
                        step[2] = regex = self._regex(variant, offset)
                        break
                    start = hit - offset
                    if buf[start : start + size].lower() == needle:
                        spans.add(_line_span(buf, start))
                    hit = buf.find(variant, hit + 1)
                else:
                    continue
                lo_regex = hit
            else:
                lo_regex = lo + offset
            # finditer skips occurrences that overlap a match; such an occurrence lies on the
            # match's line (a raw line holds no newline), so its line is found all the same.
            for match in regex.finditer(buf, lo_regex):
                spans.add(_line_span(buf, match.start()))
        return sorted(spans, reverse=True)

    def candidates(self, buf: bytes, lo: int) -> Iterator[tuple[int, bytes]]:
        """``(start, line)`` for each line of ``buf[lo:]`` that may match, last line first."""
        if not self.ascii:
            yield from self._candidates_unicode(buf, lo)
            return
        if self.plan is None and self._sample:
            # Chosen on the second block only, so a search that ends early never pays for it.
            self.plan = self._choose_plan(self._sample)
            self._sample = b""
        spans: Any
        if self.plan:
            spans = self._anchor_spans(buf, lo)
        elif self.plan is None:
            # First block: lazily from the end, a frequent needle stops the search early.
            self._sample = buf[lo:]
            spans = _rfind_lines(buf.lower(), self.needle, lo)
        else:
            # Later blocks: every hit is needed, so search forwards at full speed.
            lowered = buf.lower()
            if self._lowered_regex is not None:
                hits = [m.start() for m in self._lowered_regex.finditer(lowered, lo)]
            else:
                hits = _find_all_plain(lowered, self.needle, lo)
            spans = sorted({_line_span(lowered, hit) for hit in hits}, reverse=True)
        hits = self._extra_hits(buf, lo)
        if hits:
            extra = sorted({_line_span(buf, hit) for hit in hits}, reverse=True)
            spans = _dedupe(heapq.merge(spans, extra, reverse=True))
        for start, end in spans:
            yield start, buf[start:end]

    def _candidates_unicode(self, buf: bytes, lo: int) -> Iterator[tuple[int, bytes]]:
        """The same for a non-ASCII needle: lower-case the decoded block (``str.lower``)."""
        block = buf[lo:]
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
            return self.needle in line.lower() or bool(self._extra_hits(line))
        return self.text in line.decode("utf-8", "surrogateescape").lower() or b"\\" in line


def _find_all(buf: bytes, pattern: bytes, lo: int) -> list[int]:
    """Offsets of ``pattern`` in ``buf[lo:]``: a memchr loop on its first byte while hits are
    rare, then the regex engine for the rest of ``buf``."""
    hits = []
    first = pattern[:1]
    hit = buf.find(first, lo)
    for _ in range((len(buf) - lo) // _BACKSLASH_RARITY + _MIN_BUDGET):
        if hit < 0:
            return hits
        if buf.startswith(pattern, hit):
            hits.append(hit)
        hit = buf.find(first, hit + 1)
    if hit >= 0:
        hits.extend(m.start() for m in re.compile(re.escape(pattern)).finditer(buf, hit))
    return hits


def _find_all_plain(buf: bytes, pattern: bytes, lo: int) -> list[int]:
    """Offsets of ``pattern`` in ``buf[lo:]`` by repeated ``bytes.find``."""
    hits = []
    hit = buf.find(pattern, lo)
    while hit >= 0:
        hits.append(hit)
        hit = buf.find(pattern, hit + 1)
    return hits


def _line_span(buf: bytes, pos: int) -> tuple[int, int]:
    """``(start, end)`` of the line of ``buf`` holding offset ``pos`` (end excludes the newline)."""
    stop = buf.find(b"\n", pos)
    return buf.rfind(b"\n", 0, pos) + 1, (len(buf) if stop < 0 else stop)


def _rfind_lines(buf: bytes, pattern: bytes, lo: int = 0) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each line of ``buf[lo:]`` containing ``pattern``, last line first."""
    end = len(buf)
    while True:
        hit = buf.rfind(pattern, lo, end)
        if hit < 0:
            return
        span = _line_span(buf, hit)
        yield span
        end = span[0]


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


def _reader(f: BinaryIO) -> Callable[[int, int], bytes]:
    """A ``read(pos, size)`` for ``f``: ``os.pread`` when it has a descriptor, else seek+read."""
    try:
        fd = f.fileno()
        os.fstat(fd)
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        fd = -1

    def read(pos: int, size: int) -> bytes:
        parts = []
        while size > 0:
            if fd >= 0:
                part = os.pread(fd, size, pos)
            else:
                f.seek(pos)
                part = f.read(size)
            if not part:
                break
            parts.append(part)
            pos += len(part)
            size -= len(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    return read


def _backward_blocks(f: BinaryIO) -> Iterator[tuple[bytes, int]]:
    """The file as ``(buf, lo)`` pairs, last part of the file first, where ``buf[lo:]`` is a run
    of whole lines and ``buf[:lo]`` the tail of a line that the next pair holds whole.

    Reads only up to the size the file had when the search began, so concurrent appends do not
    shift the blocks. Blocks grow from 64 KiB to 1 MiB; a longer line is read whole.
    """
    read = _reader(f)
    end = f.seek(0, os.SEEK_END)
    step = _FIRST_BLOCK
    while end > 0:
        start = max(0, end - step)
        buf = read(start, end - start)
        if not buf:  # the file shrank under us: nothing more to read
            return
        if start == 0:
            yield buf, 0
            return
        lo = buf.find(b"\n") + 1
        if 0 < lo < len(buf):
            yield buf, lo
            end = start + lo
            step = max(step, min(step * 2, _MAX_BLOCK))
        else:
            step *= 2  # no whole line in this read: a long line, read more at once


# -- the time-window prefilter -----------------------------------------------------------------

_CANONICAL_TS_BYTES = re.compile(_CANONICAL_TS.pattern.encode("ascii"))
_TS_PREFIX = b'{"ts":"'


class _Window:
    """Rejects, without decoding, lines whose ``ts`` lies outside ``[since, until]``.

    Only lines in our own layout qualify: ``{"ts":"`` then a canonical timestamp and its
    closing quote, and no other ``"ts"`` token in the line (JSON keeps the last duplicate key;
    inside a string a quote is always escaped, so a raw ``"ts"`` is a key or a whole value).
    Canonical timestamps are fixed-width UTC, so comparing them as bytes compares the times;
    the bounds are rounded inwards to the millisecond, the journal's precision. A rejected line
    would fail the window check after decoding too; every other line is decoded as usual.
    """

    def __init__(self, since: datetime | None, until: datetime | None) -> None:
        self.low = self._key(since, up=True) if since is not None else None
        self.high = self._key(until, up=False) if until is not None else None

    @staticmethod
    def _key(bound: datetime, *, up: bool) -> bytes:
        utc = bound.astimezone(timezone.utc)  # OverflowError at the ends of time: caller
        whole = utc.replace(microsecond=utc.microsecond // 1000 * 1000)
        if up and whole != utc:
            whole += timedelta(milliseconds=1)
        return format_timestamp(whole).encode("ascii")

    def rejects(self, line: bytes) -> bool:
        """Whether ``line`` surely holds an entry outside the window."""
        if (
            line.startswith(_TS_PREFIX)
            and line[31:32] == b'"'
            and _CANONICAL_TS_BYTES.fullmatch(line, 7, 31)
            and line.count(b'"ts"') == 1
        ):
            key = line[7:31]
            return (self.low is not None and key < self.low) or (
                self.high is not None and key > self.high
            )
        return False


def _window(matcher: _Matcher) -> _Window | None:
    """The window prefilter for ``matcher``, when it has bounds that can be rounded."""
    if matcher.since is None and matcher.until is None:
        return None
    try:
        return _Window(matcher.since, matcher.until)
    except (OverflowError, ValueError):  # a bound at the very ends of time: decode everything
        return None


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

    window = _window(matcher)

    result = SearchResult()
    for buf, lo in _backward_blocks(f):
        lines = primary.candidates(buf, lo) if primary else _reversed_lines(buf[lo:])
        for _start, line in lines:
            if secondary is not None and not secondary.may_match(line):
                continue
            if window is not None and window.rejects(line):
                continue
            result.scanned += 1
            entry = _decode(line)
            if entry is _CORRUPT:
                result.skipped += 1
            elif entry is not None and matcher.matches(entry):
                result.append(entry)
                if len(result) >= limit:
                    return result
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
