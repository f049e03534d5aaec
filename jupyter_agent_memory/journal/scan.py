"""Searching the journal: newest first, reading the file backwards in blocks.

The line format, the one decoder and the matching rules live in
:mod:`~jupyter_agent_memory.journal.format`, the optional index in
:mod:`~jupyter_agent_memory.journal.index`. Every function here works on a binary file object
that the caller has already opened (the store opens files with ``O_NOFOLLOW`` and hands them
in); nothing here opens a path by name.

Lines and entries
-----------------
The file is split on ``b"\\n"`` only. A final segment without ``\\n`` (a write torn by a crash)
is an ordinary line: it counts when it happens to be a complete JSON object.

- A *blank* line (only whitespace) is ignored: it is neither an entry nor corrupted.
- A line is an *entry* when it holds one JSON object (``json.loads`` rules, so ``NaN`` and
  duplicate keys behave as in Python: the last duplicate wins). Bytes that are not UTF-8 and
  escaped lone surrogates are read as U+FFFD; such a line is kept, never dropped.
- Any other line is *corrupted*: it is skipped, counted, and never fails a search.

Matching (the same :class:`~jupyter_agent_memory.journal.format.Matcher` serves every search)
---------------------------------------------------------------------------------------------
- ``query``: ``query.lower() in text.lower()``. An entry whose ``text`` is not a string never
  matches a non-empty query.
- ``tag``: some item of ``tags`` is a string equal to ``tag`` ignoring case (``str.lower``).
  When ``tags`` is not a list the entry has no tags, so it never matches a non-empty tag.
- ``since`` / ``until``: both inclusive, on ``ts`` parsed by ``parse_time``. When a window
  is given, an entry whose ``ts`` is missing, not a string or unparseable never matches.
- Empty ``query`` / ``tag`` and ``None`` bounds filter nothing.
- Results are the last ``limit`` matches in file order, newest first, each entry exactly as
  parsed from the file (extra keys included).

How a search avoids decoding every line
---------------------------------------
:func:`search` reads the file backwards in blocks of whole lines (64 KiB first, doubling up to
``block_size``) and stops at the ``limit``-th match, so its memory does not depend on the
journal's size and a frequent tag costs a few lines. It decodes only *candidate* lines and
checks each with the matcher; every other line is one it has proven cannot match:

- with a ``query`` (else a ``tag``), the candidates are the lines whose ``bytes.lower()`` holds
  the lower-cased needle (a tag between its JSON quotes), plus the lines where an escape or
  one of two special characters could hide it (:class:`_Needle` gives the argument). Once 16
  lines of one block have held a query, the rest of that block is searched in its *text view*
  (:data:`_TEXT_VIEW`), which keeps only the text of each line in our own layout, so a query
  that also fills every line's keys or timestamp (``tag``, ``2025``) costs a search of the texts
  instead of a decode per line;
- with a time window and no query, lines in our own layout whose timestamp lies outside the
  window are skipped without decoding, a whole block at a time when its lines are in time
  order (:class:`_Window`);
- with an index (passed in as ``index``), a substring query of three or more characters
  decodes only the lines the index names, and a time window reads only the parts of the file
  it overlaps; the part of the file not indexed yet is scanned as above, and any failure of
  the index means a plain search instead.

Counters: ``SearchResult.scanned`` counts the lines a search decoded (every line for
:func:`reference_search`; for :func:`search`, the candidates from the end back to where it
stopped), ``SearchResult.skipped`` the corrupted lines among them (a line proven unable to
match is never decoded, so its corruption goes unnoticed: it could not have matched), and
``SearchResult.indexed`` whether the index narrowed the search.
"""

from __future__ import annotations

import bisect
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any, BinaryIO

from .format import _CANONICAL_TS, CORRUPT, Matcher, decode_line, format_timestamp
from .reader import file_reader

__all__ = ["DEFAULT_BLOCK_SIZE", "IndexFailed", "IndexOpener", "SearchResult", "iter_entries",
           "reference_search", "search"]

#: The largest block :func:`search` and :func:`iter_entries` read at once, by default.
DEFAULT_BLOCK_SIZE = 1024 * 1024
# The first backward block is small, so that a search the newest entries answer costs
# microseconds; a window's first block smaller still (its matches are usually near the end of
# the range it reads).
_FIRST_BLOCK = 64 * 1024
_WINDOW_FIRST_BLOCK = 8 * 1024
# Candidate lines of one block found by lowering and ``rfind`` before the rest of the block
# is searched in its text view.
_DENSE_LINES = 16
# Candidate lines named by the index that a search reads one by one before it scans the rest
# of the file instead (each costs a read; a scan reads in big blocks).
_CANDIDATE_BUDGET = 4096


class SearchResult(list):
    """Matching journal entries, newest first.

    Attributes: ``scanned`` — lines the search decoded; ``skipped`` — the corrupted lines
    among them; ``indexed`` — whether the journal's index narrowed the search (see the module
    docstring).
    """

    def __init__(
        self, entries: Any = (), *, skipped: int = 0, scanned: int = 0, indexed: bool = False
    ) -> None:
        super().__init__(entries)
        self.skipped = skipped
        self.scanned = scanned
        self.indexed = indexed

    def __repr__(self) -> str:
        entries = list.__repr__(self)
        return (
            f"SearchResult({entries}, skipped={self.skipped}, scanned={self.scanned}, "
            f"indexed={self.indexed})"
        )


# -- reading the file --------------------------------------------------------------------------


def _backward_blocks(
    read: Callable[[int, int], bytes], floor: int, end: int, first: int, largest: int
) -> Iterator[tuple[bytes, int]]:
    """``[floor, end)`` of the file as ``(buf, lo)`` pairs, last part first, where ``buf[lo:]``
    is a run of whole lines and ``buf[:lo]`` the tail of a line that the next pair holds whole.

    ``floor`` is a line start. Reads only up to ``end`` (the size the file had when the search
    began), so concurrent appends do not shift the blocks. Blocks grow from ``first`` to
    ``largest`` bytes; a longer line is read whole.
    """
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


def _reversed_lines(block: bytes) -> Iterator[bytes]:
    """Every line of ``block`` (whole lines), last line first."""
    return reversed(_lines(block))


def _find_all(data: Any, pattern: Any, lo: int = 0, hi: int | None = None) -> list[int]:
    """Offsets of ``pattern`` in ``data[lo:hi]`` (bytes or str), ascending."""
    hi = len(data) if hi is None else hi
    hits = []
    hit = data.find(pattern, lo, hi)
    while hit >= 0:
        hits.append(hit)
        hit = data.find(pattern, hit + 1, hi)
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


# -- candidate lines for a query or a tag --------------------------------------------------------

# JSON's two-character escapes: the byte after the backslash -> the character it stands for.
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
                   "t": "\t"}
_U_ESCAPE = re.compile(rb"\\u([0-9a-fA-F]{4})")
# The only non-ASCII characters whose str.lower() holds an ASCII character: KELVIN SIGN
# lowers to "k"; I WITH DOT ABOVE to "i" and a combining dot, so it can only supply the last
# character of an ASCII match.
_KELVIN = "\u212a".encode()
_DOTTED_I = "\u0130".encode()

# The text view of a run of whole lines: one item per line, each line in our own layout cut
# down to what follows ``"text":"``, any other line kept whole.
#
# Why it loses no match. The optional part matches only a line that starts with ``{"ts":"``,
# bytes without quotes or backslashes, ``","tags":[``, bytes without ``]`` or backslashes, and
# ``],"text":"``. On a line that is valid JSON (only those can match) that is an object whose
# first members are ``ts`` (a string: without a backslash, its first quote ends it) and
# ``tags`` (an array: nothing inside holds a ``]``, so there is no nested array and its first
# ``]`` closes it), then the key ``text`` and the opening quote of its string value. JSON keeps
# the last of duplicate keys, so the text a search matches begins there or later, inside what
# the view keeps.
_TEXT_VIEW = re.compile(rb'(?:\{"ts":"[^"\\\n]*","tags":\[[^\]\\\n]*\],"text":")?([^\n]*)\n')
# Our layout's keys as written (with the quotes around them), the characters of a lower-cased
# canonical timestamp, and the characters a needle must not hold to be counted in strings.
_KEY_PIECES = (b'{"ts":"', b'","tags":[', b'],"text":"')
_TIMESTAMP_CHARS = frozenset("0123456789-t:.z")
_PROOF_BREAKERS = frozenset('"\\[]{},:\n\0')


class _Needle:
    """A lower-cased string that every matching line holds, and how to find those lines.

    Why nothing that matches is dropped. Take an entry whose ``text.lower()`` contains ``s``
    (for a tag: an item equal to ``s`` ignoring case, so the line holds ``"s"`` with its JSON
    quotes). Inside a JSON string every character is written raw except where the line uses an
    escape (``\\"``, ``\\n``, ``\\u00e9``…). ``str.lower`` maps characters one by one, except
    the Greek final sigma, which looks at its neighbours; a JSON string is delimited by ``"``,
    which is neither cased nor case-ignorable, so lowering a whole line lowers each string as
    lowering it alone would. Hence, with no escape involved, the lowered line holds the needle.
    A matching line can only lack it when

    1. an escape stands for a character that may be part of the match: for an ASCII ``s``, an
       escape whose character's lower case shares a character with ``s``; for any other ``s``,
       any escape at all (which also covers surrogate pairs and the sigma rule);
    2. ``s`` is ASCII, the line was lowered as bytes (``bytes.lower`` changes ASCII letters
       only) and it holds one of the two non-ASCII characters whose lower case holds ASCII
       (``_KELVIN`` when ``s`` holds ``k``, ``_DOTTED_I`` when a query ends with ``i``).

    Lines holding one of those are candidates too. Every candidate is decoded and checked by
    the matcher, so an extra candidate costs time, never a result.
    """

    def __init__(self, s: str, *, quoted: bool) -> None:
        self.quoted = quoted
        self.text = f'"{s}"' if quoted else s
        self.ascii = s.isascii()
        self.chars = frozenset(s)
        if self.ascii:
            self.needle = self.text.encode("ascii")
            self.simple = frozenset(
                escape.encode() for escape, char in _SIMPLE_ESCAPES.items() if char in self.chars
            )
            self.specials = [_KELVIN] if "k" in self.chars else []
            if not quoted and s.endswith("i"):
                self.specials.append(_DOTTED_I)
            self.lowers = any("a" <= c <= "z" or "A" <= c <= "Z" for c in s)
            # Patterns whose every match holds the needle in a string no text is (see
            # _only_in_keys_and_timestamps), with how many times.
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
        layout or at the start of a timestamp: then no text there holds it (but through an
        escape or a special character).

        Why counting proves it. The needle holds no quote, bracket, brace, comma, colon or
        backslash, so each occurrence lies inside one JSON string, or outside every string,
        never across a boundary; counting (greedy, non-overlapping) adds up over strings.
        Each match of a pattern of :attr:`structural` (``","tags":[``, or ``{"ts":"`` and
        the needle: raw quotes, so structure, never inside a string) names one key-name string
        or timestamp value holding the needle, never a text value, and no two matches name
        the same string. So when the needle's count equals the sum of theirs, no other string
        holds it, and no text in particular.
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
        """The same for a non-ASCII needle: found in the block decoded and lowered as a whole;
        every line holding a backslash is a candidate too."""
        # Undecodable bytes become U+FFFD exactly as the decoder reads them, and the decoded
        # block has the same newlines (a newline byte is never part of a multi-byte sequence,
        # and lowering neither makes nor removes one), so line numbers agree.
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


# -- the time-window prefilter -----------------------------------------------------------------

_CANONICAL_TS_BYTES = re.compile(_CANONICAL_TS.pattern.encode("ascii"))
_TS_PREFIX = b'{"ts":"'
# Every spelling of the key "ts" in JSON: each letter raw or as a \u escape (4 digits, no hex
# letters, so case does not matter).
_TS_KEY = re.compile(rb'"(?:t|\\u0074)(?:s|\\u0073)"')
# The start of a line in our own layout, capturing its canonical timestamp. (After a newline:
# a literal prefix the regular expression engine finds fast.)
_TS_LINE = re.compile(
    rb'\n\{"ts":"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z)"'
)


class _Window:
    """Rejects, without decoding, lines whose ``ts`` lies outside ``[since, until]``.

    Only lines in our own layout qualify: ``{"ts":"`` then a canonical timestamp and its
    closing quote, and no other ``"ts"`` token in the line, spelled raw or with escapes such as
    ``"t\\u0073"`` (JSON keeps the last duplicate key; inside a string a quote is always
    escaped, so a raw ``"ts"`` is a key or a whole value). Canonical timestamps are fixed-width
    UTC, so comparing them as bytes compares the times; the bounds are rounded inwards to the
    millisecond, the journal's precision. A rejected line would fail the window check after
    decoding too; every other line is decoded as usual.
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
        """The lines of ``block`` (whole lines) that :meth:`rejects` lets through, last line
        first, found by bisection when every line is in our layout and in time order; None
        when they are not (then each line has to be judged on its own)."""
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


def _window(matcher: Matcher) -> _Window | None:
    """The window prefilter for ``matcher``, when it has bounds that can be rounded."""
    if matcher.since is None and matcher.until is None:
        return None
    try:
        return _Window(matcher.since, matcher.until)
    except (OverflowError, ValueError):  # a bound at the very ends of time: decode everything
        return None


# -- public search -----------------------------------------------------------------------------

#: How a search opens an index: given ``read(pos, size)`` and the journal's ``fstat``, an
#: :class:`~jupyter_agent_memory.journal.index.IndexView` or None (see :func:`search`). The
#: view's methods raise :class:`IndexFailed` when it cannot answer.
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
    """The last ``limit`` entries matching every filter, newest first.

    Reads ``f`` backwards in blocks of at most ``block_size`` bytes (a longer line is read
    whole) and stops at the ``limit``-th match; results are identical to
    :func:`reference_search`. ``index`` is called, only for a search an index can narrow, to
    open the journal's index (see :mod:`~jupyter_agent_memory.journal.index`); when it gives
    one, ``indexed`` is set on the result. See the module docstring for matching rules and
    counters.
    """
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
    """The index could not answer (a damaged or vanished database): the search goes on
    without it."""


def _indexed_plan(
    st: os.stat_result,
    read: Callable[[int, int], bytes],
    size: int,
    matcher: Matcher,
    opener: IndexOpener,
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
    read: Callable[[int, int], bytes],
    matcher: Matcher,
    limit: int,
    ranges: list[tuple[int, int]],
    candidates: Iterator[int] | None,
    end: int,
    block_size: int,
) -> SearchResult:
    """Scan ``ranges`` (newest first), then read ``candidates`` (offsets, newest first)."""
    query_needle = _Needle(matcher.query, quoted=False) if matcher.query else None
    tag_needle = _Needle(matcher.tag, quoted=True) if matcher.tag else None
    primary = query_needle or tag_needle
    secondary = tag_needle if query_needle is not None else None
    window = _window(matcher)
    first = min(_WINDOW_FIRST_BLOCK if window is not None else _FIRST_BLOCK, block_size)
    result = SearchResult()

    def take(line: bytes, inside_window: bool = False) -> bool:
        """Decode and match one line; True once ``limit`` matches are in. ``inside_window``:
        the window prefilter proved the line's timestamp lies inside the window."""
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
        lines = primary.candidates(buf, lo) if primary is not None else _reversed_lines(buf[lo:])
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
            # Too many candidates for a few matches (a common query with a rare tag, say):
            # scanning the rest is cheaper. Every line after this one was already seen or
            # proven unable to match, so the scan ends with it.
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
    """The plain algorithm :func:`search` must agree with (kept for tests and benchmarks).

    Reads the whole file, decodes every line, filters, takes the last ``limit`` matches in file
    order and reverses them. ``skipped`` counts every corrupted line of the file.
    """
    matcher = Matcher(query, tag, since, until)
    limit = max(1, int(limit))
    f.seek(0)
    data = f.read()
    lines = data.split(b"\n")
    if data.endswith(b"\n") or not data:
        lines.pop()
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
    """Every entry of ``f``, oldest first; corrupted lines are skipped.

    ``on_corrupt(line_number, raw_line)`` (1-based) is called for each corrupted line, for
    callers that want to warn. Reads in blocks of ``block_size`` bytes, so memory does not
    depend on the file's size.
    """
    f.seek(0)
    pending: list[bytes] = []
    number = 0

    def emit(line: bytes) -> Iterator[dict[str, Any]]:
        entry = decode_line(line)
        if entry is CORRUPT:
            if on_corrupt is not None:
                on_corrupt(number, line)
        elif entry is not None:
            yield entry

    while True:
        chunk = f.read(max(1, int(block_size)))
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
