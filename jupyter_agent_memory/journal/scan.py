"""Searching the journal (a binary file object the caller opened), newest first.

Lines are split on ``b"\\n"`` only; a blank one is ignored, one holding a JSON object is an
entry, any other is corrupted: skipped and counted. Matching (one ``Matcher`` for all):
``query``: ``query.lower() in text.lower()`` (a non-string ``text`` never matches); ``tag``:
some string item of a ``tags`` list equals ``tag`` ignoring case (``str.lower``); ``since`` /
``until``: inclusive, on ``ts`` parsed by ``parse_time`` (with a window, an entry without a
parseable ``ts`` never matches); empty filters filter nothing. Results are the last ``limit``
matches in file order, newest first, each entry as parsed.

:func:`search` reads backwards in blocks of whole lines, stops at the ``limit``-th match and
decodes only *candidate* lines, every other line proven unable to match (:class:`_Needle` for
a query or tag, :class:`_Window` for a window, else the lines an ``index`` names; any index
failure means a plain search). ``scanned`` counts the lines decoded (every line for
:func:`reference_search`), ``skipped`` the corrupted ones among them, ``indexed`` whether the
index narrowed the search.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any, BinaryIO

from .format import _CANONICAL_TS, CORRUPT, Matcher, decode_line, format_timestamp
from .reader import file_reader

#: The largest block :func:`search` and :func:`iter_entries` read at once, by default.
DEFAULT_BLOCK_SIZE = 1024 * 1024
# Small first blocks, so a search the newest entries answer costs microseconds.
_FIRST_BLOCK = 64 * 1024
_WINDOW_FIRST_BLOCK = 8 * 1024
# Candidate lines of one block found by ``rfind`` before the rest goes to the text view.
_DENSE_LINES = 16
# Index-named lines read one by one (a read each) before scanning the rest is cheaper.
_CANDIDATE_BUDGET = 4096


class SearchResult(list):
    """Matching journal entries, newest first, with the counters ``scanned``, ``skipped`` and
    ``indexed`` (see the module docstring)."""

    def __init__(
        self, entries: Any = (), *, skipped: int = 0, scanned: int = 0, indexed: bool = False
    ) -> None:
        super().__init__(entries)
        self.skipped = skipped
        self.scanned = scanned
        self.indexed = indexed

    def __repr__(self) -> str:
        return (
            f"SearchResult({list.__repr__(self)}, skipped={self.skipped}, "
            f"scanned={self.scanned}, indexed={self.indexed})"
        )


def _backward_blocks(
    read: Callable[[int, int], bytes], floor: int, end: int, first: int, largest: int
) -> Iterator[tuple[bytes, int]]:
    """``[floor, end)`` (``floor`` a line start) as ``(buf, lo)`` pairs, last part first:
    ``buf[lo:]`` is whole lines. Blocks grow from ``first`` to ``largest`` bytes."""
    step = first
    while end > floor:
        start = max(floor, end - step)
        buf = read(start, end - start)
        if not buf:  # the file shrank under us: nothing more to read
            return
        if start == floor:
            yield buf, 0
            return
        lo = buf.find(b"\n") + 1
        if 0 < lo < len(buf):
            end = start + lo
            step = max(step, min(step * 2, largest))
            yield buf, lo
        else:
            step *= 2  # no whole line in this read: a long line, read more at once


def _line_at(read: Callable[[int, int], bytes], offset: int, end: int) -> bytes:
    """The line starting at ``offset`` (without its newline), reading no further than ``end``."""
    size = 4096
    while True:
        buf = read(offset, min(size, end - offset))
        stop = buf.find(b"\n")
        if stop >= 0:
            return buf[:stop]
        if len(buf) >= end - offset or not buf:
            return buf
        size *= 4


def _line(buf: bytes, start: int) -> bytes:
    """The line of ``buf`` that starts at ``start``, without its newline."""
    stop = buf.find(b"\n", start)
    return buf[start:] if stop < 0 else buf[start:stop]


def _lines(block: bytes) -> list[bytes]:
    """Every line of ``block`` (whole lines), first line first."""
    lines = block.split(b"\n")
    if block.endswith(b"\n"):
        lines.pop()
    return lines


def _find_all(data: Any, pattern: Any, lo: int = 0) -> list[int]:
    """Offsets of ``pattern`` in ``data[lo:]`` (bytes or str), ascending."""
    hits = []
    hit = data.find(pattern, lo)
    while hit >= 0:
        hits.append(hit)
        hit = data.find(pattern, hit + 1)
    return hits


def _line_numbers(data: Any, offsets: Iterable[int], lo: int = 0) -> set[int]:
    """The (0-based) numbers of the lines of ``data[lo:]`` holding the ascending ``offsets``."""
    numbers = set()
    newline = "\n" if isinstance(data, str) else b"\n"
    line, prev = 0, lo
    for offset in offsets:
        line += data.count(newline, prev, offset)
        prev = offset
        numbers.add(line)
    return numbers


# JSON's two-character escapes: the byte after the backslash -> the character it stands for.
_SIMPLE_ESCAPES = {b'"': '"', b"\\": "\\", b"/": "/", b"b": "\b", b"f": "\f", b"n": "\n",
                   b"r": "\r", b"t": "\t"}
_U_ESCAPE = re.compile(rb"\\u([0-9a-fA-F]{4})")
# The only non-ASCII characters whose str.lower() holds ASCII: KELVIN SIGN ("k"), and I WITH
# DOT ABOVE ("i" and a combining dot, so only the last character of an ASCII match).
_KELVIN = "\u212a".encode()
_DOTTED_I = "\u0130".encode()

# The text view: each line in our layout cut down to what follows ``"text":"``, any other
# kept whole. No match is lost: on valid JSON the optional part matches only ``ts`` (a string
# without backslashes), ``tags`` (an array holding no ``]``), then the key ``text`` and its
# value's quote; the last duplicate key wins, so the matched text starts there or later.
_TEXT_VIEW = re.compile(rb'(?:\{"ts":"[^"\\\n]*","tags":\[[^\]\\\n]*\],"text":")?([^\n]*)\n')
# Our layout's keys, a lowered timestamp's characters, what a counted needle must not hold.
_KEY_PIECES = (b'{"ts":"', b'","tags":[', b'],"text":"')
_TIMESTAMP_CHARS = frozenset("0123456789-t:.z")
_PROOF_BREAKERS = frozenset('"\\[]{},:\n\0')


class _Needle:
    """A lower-cased string that every matching line holds, and how to find those lines.

    Why no match is dropped: an entry matching ``s`` (for a tag, ``"s"`` with its quotes) holds
    it raw in its line unless an escape (``\\"``, ``\\u00e9``…) is involved. ``str.lower``
    maps characters one by one except the final sigma, and ``"`` is neither cased nor
    case-ignorable, so lowering a whole line lowers each string as lowering it alone would.
    A matching line can only lack the needle when (1) an escape stands for a character that may
    be part of the match (for an ASCII ``s``, one whose lower case shares a character with
    ``s``; otherwise any escape, covering surrogate pairs and the sigma rule), or (2) ``s`` is
    ASCII, the line was lowered as bytes and it holds ``_KELVIN`` (``s`` holds ``k``) or
    ``_DOTTED_I`` (a query ends with ``i``). Those lines are candidates too; the matcher checks
    every candidate, so an extra one costs time, never a result.
    """

    def __init__(self, s: str, *, quoted: bool) -> None:
        self.quoted = quoted
        self.text = f'"{s}"' if quoted else s
        self.ascii = s.isascii()
        self.chars = frozenset(s)
        if self.ascii:
            self.needle = self.text.encode("ascii")
            self.simple = frozenset(b for b, char in _SIMPLE_ESCAPES.items() if char in self.chars)
            self.specials = [_KELVIN] if "k" in self.chars else []
            if not quoted and s.endswith("i"):
                self.specials.append(_DOTTED_I)
            self.lowers = any("a" <= c <= "z" or "A" <= c <= "Z" for c in s)
            # Patterns whose every match holds the needle (so many times) outside any text.
            self.structural: list[tuple[bytes, int]] = []
            if s and not self.chars & _PROOF_BREAKERS:
                needle = self.needle
                self.structural = [(k, k.count(needle)) for k in _KEY_PIECES if needle in k]
                if self.chars <= _TIMESTAMP_CHARS:
                    self.structural.append((b'{"ts":"' + needle, 1))
        self._u_verdicts: dict[bytes, bool] = {}

    def candidates(self, buf: bytes, lo: int) -> Iterator[bytes]:
        """The lines of ``buf[lo:]`` (whole lines) that may match, last line first."""
        if not self.ascii:
            yield from self._unicode_candidates(buf[lo:])
            return
        # bytes.lower changes ASCII letters only: a needle without any finds the same bytes.
        low = buf.lower() if self.lowers else buf
        hidden = self._hidden_starts(buf, lo)  # ascending; taken from the end
        needle, end, found = self.needle, len(buf), 0
        while True:
            hit = low.rfind(needle, lo, end)
            start = low.rfind(b"\n", 0, hit) + 1 if hit >= 0 else lo
            while hidden and (hidden[-1] > start or hit < 0):
                yield _line(buf, hidden.pop())
            if hit < 0:
                return
            if hidden and hidden[-1] == start:
                hidden.pop()
            yield _line(buf, start)
            end = start
            found += 1
            if found == _DENSE_LINES and not self.quoted and end > lo:
                if self._only_in_keys_and_timestamps(low, lo, end):
                    while hidden:
                        yield _line(buf, hidden.pop())
                else:
                    yield from self._text_view_candidates(buf, low, lo, end, hidden)
                return

    def _only_in_keys_and_timestamps(self, low: bytes, lo: int, end: int) -> bool:
        """Whether every occurrence of the needle in ``low[lo:end]`` is in a key name of our
        layout or starts a timestamp, so no text holds it (but through an escape or special).

        Why counting proves it: the needle holds no JSON punctuation, so each occurrence lies
        within one string or outside all, and counts add up over strings. Each match of a
        :attr:`structural` pattern (raw quotes: structure) names one distinct key or timestamp
        string holding the needle; when the counts agree, no other string (no text) holds it.
        """
        if not self.structural:
            return False
        total = low.count(self.needle, lo, end)
        return total == sum(low.count(p, lo, end) * times for p, times in self.structural)

    def _hidden_starts(self, buf: bytes, lo: int) -> list[int]:
        """Starts of the lines of ``buf[lo:]`` where an escape or a special character may hide
        the needle (cases 1 and 2 of the class docstring), ascending."""
        offsets = []
        pos = buf.find(b"\\", lo)
        while pos >= 0:
            after = buf[pos + 1 : pos + 2]
            if after == b"u":
                match = _U_ESCAPE.match(buf, pos)
                if match is not None and self._hides(match.group(1)):
                    offsets.append(pos)
            elif after in self.simple:
                offsets.append(pos)
            pos = buf.find(b"\\", pos + 2)  # skip the escaped byte: "\\\\" pairs stay aligned
        if self.specials and not buf.isascii():
            for special in self.specials:
                offsets.extend(_find_all(buf, special, lo))
        return sorted({buf.rfind(b"\n", 0, offset) + 1 for offset in offsets})

    def _hides(self, digits: bytes) -> bool:
        """Whether the escape ``\\u<digits>`` stands for a character that may be part of a match."""
        verdict = self._u_verdicts.get(digits)
        if verdict is None:
            verdict = bool(self.chars & set(chr(int(digits, 16)).lower()))
            self._u_verdicts[digits] = verdict
        return verdict

    def _text_view_candidates(
        self, buf: bytes, low: bytes, lo: int, end: int, hidden: list[int]
    ) -> Iterator[bytes]:
        """The candidates among the lines of ``buf[lo:end]``, found in its text view."""
        view = b"\n".join(_TEXT_VIEW.findall(low, lo, end))
        numbers = _line_numbers(view, _find_all(view, self.needle))
        numbers |= _line_numbers(buf, hidden, lo)
        if numbers:
            lines = buf[lo:end].split(b"\n")
            for number in sorted(numbers, reverse=True):
                yield lines[number]

    def _unicode_candidates(self, block: bytes) -> Iterator[bytes]:
        """The same for a non-ASCII needle, found in the block decoded and lowered whole (with
        the decoder's U+FFFD and the same newlines, so line numbers agree); every line holding
        a backslash is a candidate too."""
        lowered = block.decode("utf-8", "replace").lower()
        numbers = _line_numbers(lowered, _find_all(lowered, self.text))
        numbers |= _line_numbers(block, _find_all(block, b"\\"))
        if numbers:
            lines = block.split(b"\n")
            for number in sorted(numbers, reverse=True):
                if number < len(lines):
                    yield lines[number]

    def may_match(self, line: bytes) -> bool:
        """The same test for one line (for the second of two filters)."""
        if self.ascii:
            return self.needle in line.lower() or bool(self._hidden_starts(line, 0))
        return b"\\" in line or self.text in line.decode("utf-8", "replace").lower()


_CANONICAL_TS_BYTES = re.compile(_CANONICAL_TS.pattern.encode("ascii"))
_TS_PREFIX = b'{"ts":"'
# Every spelling of the key "ts" in JSON: each letter raw or as a \u escape.
_TS_KEY = re.compile(rb'"(?:t|\\u0074)(?:s|\\u0073)"')
# The start of a line in our layout, capturing its timestamp (a literal prefix: found fast).
_TS_LINE = re.compile(rb'\n\{"ts":"(' + _CANONICAL_TS_BYTES.pattern + rb')"')


class _Window:
    """Rejects, without decoding, lines whose ``ts`` lies outside ``[since, until]``.

    Only lines in our layout qualify: ``{"ts":"``, a canonical timestamp and its quote, and no
    other ``"ts"`` key, raw or escaped like ``"t\\u0073"`` (the last duplicate key wins; a raw
    ``"ts"`` is never inside a string). Canonical timestamps compare as bytes as the times do;
    the bounds are rounded inwards to the millisecond, the journal's precision.
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
            and (b"\\u007" not in line or len(_TS_KEY.findall(line)) == 1)
        ):
            key = line[7:31]
            return (self.low is not None and key < self.low) or (
                self.high is not None and key > self.high
            )
        return False

    def trim(self, block: bytes) -> list[bytes] | None:
        """The lines of ``block`` :meth:`rejects` lets through, last first, found by bisection
        when every line is in our layout and in time order; else None (judge each line)."""
        lines = _lines(block)
        count = len(lines)
        if count == 0 or block.count(b'"ts"') != count or b"\\u007" in block:
            return None
        keys = _TS_LINE.findall(b"\n" + block)
        if len(keys) != count or keys != sorted(keys):
            return None
        low = bisect.bisect_left(keys, self.low) if self.low is not None else 0
        high = bisect.bisect_right(keys, self.high) if self.high is not None else count
        return lines[low:high][::-1]


#: How a search opens an index: ``(read(pos, size), fstat)`` -> an
#: :class:`~jupyter_agent_memory.journal.index.IndexView` (raising :class:`IndexFailed`) or None.
IndexOpener = Callable[[Callable[[int, int], bytes], os.stat_result], Any]


def search(
    f: BinaryIO,
    *,
    query: str = "",
    tag: str = "",
    limit: int = 20,
    since: datetime | None = None,
    until: datetime | None = None,
    index: IndexOpener | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> SearchResult:
    """The last ``limit`` entries matching every filter, newest first, exactly as
    :func:`reference_search` finds them (rules and counters: the module docstring); ``index``
    is called only for a search an index can narrow."""
    matcher = Matcher(query, tag, since, until)
    limit = max(1, int(limit))
    block_size = max(1, int(block_size))
    read, st = file_reader(f)
    size = st.st_size if st is not None and stat.S_ISREG(st.st_mode) else f.seek(0, os.SEEK_END)
    if index is not None and st is not None:
        try:
            plan = _indexed_plan(st, read, size, matcher, index)
            if plan is not None:
                ranges, candidates, end = plan
                result = _run(read, matcher, limit, ranges, candidates, end, block_size)
                result.indexed = True
                return result
        except (OSError, IndexFailed):
            pass  # a plain search below, from the start
    return _run(read, matcher, limit, [(0, size)], None, size, block_size)


class IndexFailed(Exception):
    """The index could not answer (a damaged or vanished database): search without it."""


def _indexed_plan(
    st: os.stat_result, read: Callable[[int, int], bytes], size: int, matcher: Matcher,
    opener: IndexOpener
) -> tuple[list[tuple[int, int]], Iterator[int] | None, int] | None:
    """``(ranges to scan newest first, candidate line offsets, end of the indexed part)`` for
    a search the index can narrow, or None for a plain search."""
    if not matcher.query and matcher.since is None and matcher.until is None:
        return None
    if st.st_size != size:
        st = os.stat_result((*st[:6], size, *st[7:]))
    view = opener(read, st)
    if view is None:
        return None
    tail = (view.end, size)
    if matcher.query:
        candidates = view.text_candidates(matcher.query)
        if candidates is not None:
            return [tail], candidates, view.end
    ranges = view.window_ranges(matcher.since, matcher.until)
    if ranges is None:
        return None
    return [tail, *ranges], None, view.end


def _run(
    read: Callable[[int, int], bytes], matcher: Matcher, limit: int,
    ranges: list[tuple[int, int]], candidates: Iterator[int] | None, end: int, block_size: int
) -> SearchResult:
    """Scan ``ranges`` (newest first), then read ``candidates`` (offsets, newest first)."""
    query_needle = _Needle(matcher.query, quoted=False) if matcher.query else None
    tag_needle = _Needle(matcher.tag, quoted=True) if matcher.tag else None
    primary = query_needle or tag_needle
    secondary = tag_needle if query_needle is not None else None
    window = None
    if matcher.since is not None or matcher.until is not None:
        with contextlib.suppress(OverflowError, ValueError):  # a bound at the ends of time
            window = _Window(matcher.since, matcher.until)
    first = min(_WINDOW_FIRST_BLOCK if window is not None else _FIRST_BLOCK, block_size)
    result = SearchResult()

    def take(line: bytes, inside_window: bool = False) -> bool:
        """Decode and match one line; True once ``limit`` matches are in."""
        result.scanned += 1
        entry = decode_line(line)
        if entry is CORRUPT:
            result.skipped += 1
        elif entry is not None and (
            matcher.matches_inside_window(entry) if inside_window else matcher.matches(entry)
        ):
            result.append(entry)
            return len(result) >= limit
        return False

    def block_candidates(buf: bytes, lo: int) -> Iterator[tuple[bytes, bool]]:
        """``(line, inside the window)`` for the lines of ``buf[lo:]`` that may match."""
        if query_needle is None and window is not None:
            trimmed = window.trim(buf[lo:])
            if trimmed is not None:
                for line in trimmed:
                    if tag_needle is None or tag_needle.may_match(line):
                        yield line, True
                return
        lines = primary.candidates(buf, lo) if primary is not None else reversed(_lines(buf[lo:]))
        for line in lines:
            if secondary is not None and not secondary.may_match(line):
                continue
            if window is not None and window.rejects(line):
                continue
            yield line, False

    def scan(floor: int, top: int) -> bool:
        for buf, lo in _backward_blocks(read, floor, top, first, block_size):
            for line, inside in block_candidates(buf, lo):
                if take(line, inside):
                    return True
        return False

    for floor, top in ranges:
        if scan(floor, top):
            return result
    budget = _CANDIDATE_BUDGET
    for offset in candidates or ():
        line = _line_at(read, offset, end)
        budget -= 1
        if budget < 0:
            # Too many candidates (a common query, a rare tag): scan the rest instead, ending
            # with this line (every later one was seen or proven unable to match).
            scan(0, min(end, offset + len(line) + 1))
            return result
        if secondary is not None and not secondary.may_match(line):
            continue
        if window is not None and window.rejects(line):
            continue
        if take(line):
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
    """The plain algorithm :func:`search` must agree with (for tests and benchmarks): decode
    every line, keep the last ``limit`` matches, newest first."""
    matcher = Matcher(query, tag, since, until)
    limit = max(1, int(limit))
    f.seek(0)
    data = f.read()
    lines = _lines(data) if data else []
    matches = []
    skipped = 0
    for line in lines:
        entry = decode_line(line)
        if entry is CORRUPT:
            skipped += 1
        elif entry is not None and matcher.matches(entry):
            matches.append(entry)
    return SearchResult(reversed(matches[-limit:]), skipped=skipped, scanned=len(lines))


def iter_entries(
    f: BinaryIO,
    *,
    on_corrupt: Callable[[int, bytes], None] | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> Iterator[dict[str, Any]]:
    """Every entry of ``f``, oldest first, read in blocks of ``block_size`` bytes; each
    corrupted line is skipped, calling ``on_corrupt(line_number, raw_line)`` (1-based)."""
    for number, line in enumerate(_forward_lines(f, max(1, int(block_size))), 1):
        entry = decode_line(line)
        if entry is CORRUPT:
            if on_corrupt is not None:
                on_corrupt(number, line)
        elif entry is not None:
            yield entry


def _forward_lines(f: BinaryIO, block_size: int) -> Iterator[bytes]:
    """Every line of ``f`` from its start, read in blocks of ``block_size`` bytes."""
    f.seek(0)
    pending: list[bytes] = []
    while chunk := f.read(block_size):
        newline = chunk.rfind(b"\n") + 1
        if not newline:
            pending.append(chunk)
            continue
        yield from _lines(b"".join([*pending, chunk[:newline]]))
        pending = [chunk[newline:]] if newline < len(chunk) else []
    if pending:
        yield b"".join(pending)
