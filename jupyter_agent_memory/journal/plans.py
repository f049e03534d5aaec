"""Search plans: how the journal search avoids decoding lines that cannot match.

Everything here works on raw bytes of whole lines and only ever *narrows* the lines that get
decoded; every line it lets through is decoded and checked by
:class:`~jupyter_agent_memory.journal.format.Matcher`, the single source of truth. So a plan may
let too much through (costing time), never too little. Which lines each plan may skip, and why
that is exact, is documented on :class:`_Needle` (substrings and tags), :class:`_Window` (time
windows) and :func:`strip_skeleton` (needles that also occur in keys and timestamps).

When the package was installed with its compiled line scanner (``_linescan``, built from
``_linescan.c`` where a C compiler was at hand), ASCII needles are found by it instead: it
finds exactly the lines the lower-case-and-find plans below find (for query needles, those of
text mode), without holding the GIL. ``JUPYTER_AGENT_MEMORY_PURE_PYTHON=1`` turns it off.
"""

from __future__ import annotations

import bisect
import heapq
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

from .format import _CANONICAL_TS, Matcher, format_timestamp

FIND_LINES: Any = None

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
# A block with more candidate lines than this (and most of its lines) makes a query's plan be
# chosen again.
_REPLAN_MIN_LINES = 64
# How much of each block text mode looks at to see whether the needle still fills most lines.
_RECHECK_BYTES = 64 * 1024


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
        self.quoted = quoted
        # Text mode (see strip_skeleton): for a query whose bytes also occur in the keys,
        # timestamps or tags of most lines, look for it only where each line's text begins.
        self.text_only = False
        # The compiled scanner serves ASCII needles; a newline never lies inside a raw line.
        self.compiled = self.ascii and "\n" not in self.text
        if self.ascii:
            self.needle = self.text.encode("ascii")
            self.simple = frozenset(b for b, ch in _SIMPLE_ESCAPES.items() if ch in self.chars)
            # For the compiled scanner: every \u escape makes its line a candidate there.
            self.escapes = bytes(sorted(self.simple | {_U}))
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
        hits.extend(self._special_hits(buf, lo))
        return hits

    def _special_hits(self, buf: bytes, lo: int) -> list[int]:
        """Offsets of the non-ASCII characters whose lower case holds part of the needle."""
        hits: list[int] = []
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
        """The cheapest exact way to find the needle, judged on ``sample``; [] = lower mode
        (or text mode, when :attr:`text_only` is set)."""
        if not self.quoted:
            lowered = sample.lower()
            everywhere = lowered.count(self.needle)
            if everywhere * 4 > sample.count(b"\n"):
                in_texts = strip_skeleton(lowered).count(self.needle)
                if everywhere > 2 * in_texts:
                    self.text_only = True
                    return []
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

    def served_compiled(self) -> bool:
        """Whether the compiled scanner finds this needle (it is installed and not off)."""
        return FIND_LINES is not None and self.compiled

    def candidates(self, buf: bytes, lo: int) -> Iterator[tuple[int, bytes]]:
        """``(start, line)`` for each line of ``buf[lo:]`` that may match, last line first."""
        if not self.ascii:
            yield from self._candidates_unicode(buf, lo)
            return
        if self.served_compiled():
            yield from self._candidates_compiled(buf, lo)
            return
        if self.plan is None and self._sample:
            # Chosen on the second block only, so a search that ends early never pays for it.
            self.plan = self._choose_plan(self._sample)
            self._sample = b""
        if self.text_only:
            yield from self._candidates_text_only(buf, lo)
            return
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
        if (
            not self.quoted
            and isinstance(spans, list)
            and len(spans) > _REPLAN_MIN_LINES
            and len(spans) * 4 > buf.count(b"\n", lo)
        ):
            # The needle fills most lines of this block although the plan was chosen where it
            # did not (a year that starts halfway through the journal, say): choose again here.
            self.plan = self._choose_plan(buf[lo:])
            if self.text_only:
                yield from self._candidates_text_only(buf, lo)
                return
        yield from _lines_of(buf, spans, self._extra_hits(buf, lo))

    def _candidates_compiled(self, buf: bytes, lo: int) -> Iterator[tuple[int, bytes]]:
        """The same lines from the compiled scanner: query needles are looked for only where
        each line's text begins (text mode, exact for every needle; see strip_skeleton), tag
        needles anywhere in the line; it also names the lines with a relevant escape."""
        assert FIND_LINES is not None
        starts = FIND_LINES(buf, self.needle, lo, not self.quoted, self.escapes)
        spans = [(start, _line_end(buf, start)) for start in reversed(starts)]
        yield from _lines_of(buf, spans, self._special_hits(buf, lo))

    def _candidates_text_only(self, buf: bytes, lo: int) -> Iterator[tuple[int, bytes]]:
        """Text mode: the needle searched in the block with each line's skeleton removed, plus
        the lines the escape and special-character scan names (both by line number)."""
        block = buf[lo:]
        lowered = block.lower()
        head = _RECHECK_BYTES
        if lowered.count(self.needle, 0, head) * 4 <= block.count(b"\n", 0, head):
            # No longer in most lines' keys or timestamps: the usual plans are faster again
            # (chosen afresh from the next block on).
            self.text_only, self.plan = False, None
        stripped = strip_skeleton(lowered)
        numbers = _line_numbers(stripped, _find_all_plain(stripped, self.needle, 0), b"\n")
        extra = self._extra_hits(buf, lo)
        if extra:
            extra.sort()
            numbers |= _line_numbers(block, [hit - lo for hit in extra], b"\n")
        if numbers:
            yield from _numbered_lines(block, numbers)

    def _candidates_unicode(self, buf: bytes, lo: int) -> Iterator[tuple[int, bytes]]:
        """The same for a non-ASCII needle: lower-case the decoded block (``str.lower``) and
        find the needle in it; every line holding a backslash is a candidate too."""
        block = buf[lo:]
        # Undecodable bytes become U+FFFD exactly as the decoder reads them; the decoded block
        # has exactly the same newlines (a newline byte never belongs to a multi-byte sequence,
        # and lowering neither makes nor removes one), so line numbers agree.
        lowered = block.decode("utf-8", "replace").lower()
        numbers = _line_numbers(lowered, _find_all_str(lowered, self.text), "\n")
        numbers |= _line_numbers(block, _find_all_plain(block, b"\\", 0), b"\n")
        if numbers:
            yield from _numbered_lines(block, numbers)

    def may_match(self, line: bytes) -> bool:
        """The same test for one line (used for the second of two filters)."""
        if self.ascii:
            return self.needle in line.lower() or bool(self._extra_hits(line))
        return self.text in line.decode("utf-8", "replace").lower() or b"\\" in line


def _lines_of(
    buf: bytes, spans: Iterator[tuple[int, int]] | list[tuple[int, int]], hits: list[int]
) -> Iterator[tuple[int, bytes]]:
    """``(start, line)`` for ``spans`` (last line first) and the lines holding the offsets
    ``hits`` (escapes, special characters), each line once."""
    if hits:
        extra = sorted({_line_span(buf, hit) for hit in hits}, reverse=True)
        spans = _dedupe(heapq.merge(spans, extra, reverse=True))
    for start, end in spans:
        yield start, buf[start:end]


def _find_all(buf: bytes, pattern: bytes, lo: int) -> list[int]:
    """Offsets of ``pattern`` in ``buf[lo:]``: a memchr loop on its first byte while hits are
    rare, then the regex engine for the rest of ``buf``."""
    hits: list[int] = []
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


# The start of a line our own writer wrote, up to where the text value begins, lower-cased
# (see strip_skeleton).
_SKELETON = re.compile(rb'\n\{"ts":"[^"\\\n]*","tags":\[[^\]\\\n]*\],"text":"')


def strip_skeleton(lowered: bytes) -> bytes:
    """``lowered`` (a run of whole lines, lower-cased) with the start of each line in our own
    layout removed, from ``{"ts":`` up to where the ``text`` value begins; line ``k`` of the
    result is what is left of line ``k``.

    Why no match is lost. The removed part is ``{"ts":"`` + a string without quotes or
    backslashes + ``","tags":[`` + bytes without ``]`` or backslashes + ``],"text":"``. Inside
    a JSON string a quote is always escaped, so on a valid line this is the object's first
    two members, a flat array, and the key of a third member, and nothing of the value of the
    last ``text`` key (the one JSON keeps) lies in it: that value starts where the removed
    part ends, or later. A line that is not valid JSON never matches anyway.
    """
    return _SKELETON.sub(b"\n", b"\n" + lowered)[1:]


def _find_all_str(text: str, pattern: str) -> list[int]:
    """Offsets of ``pattern`` in ``text``."""
    hits = []
    hit = text.find(pattern)
    while hit >= 0:
        hits.append(hit)
        hit = text.find(pattern, hit + 1)
    return hits


def _line_numbers(buf: Any, hits: list[int], newline: Any) -> set[int]:
    """The (0-based) numbers of the lines of ``buf`` holding the ascending offsets ``hits``."""
    numbers = set()
    line = 0
    prev = 0
    for hit in hits:
        line += buf.count(newline, prev, hit)
        prev = hit
        numbers.add(line)
    return numbers


def _numbered_lines(block: bytes, numbers: set[int]) -> Iterator[tuple[int, bytes]]:
    """``(0, line)`` for the lines of ``block`` with those numbers, last line first."""
    lines = block.split(b"\n")
    for number in sorted(numbers, reverse=True):
        if number < len(lines):
            yield 0, lines[number]


def _find_all_plain(buf: bytes, pattern: bytes, lo: int) -> list[int]:
    """Offsets of ``pattern`` in ``buf[lo:]`` by repeated ``bytes.find``."""
    hits = []
    hit = buf.find(pattern, lo)
    while hit >= 0:
        hits.append(hit)
        hit = buf.find(pattern, hit + 1)
    return hits


def _line_end(buf: bytes, start: int) -> int:
    """Where the line of ``buf`` starting at ``start`` ends (its newline, or the end)."""
    stop = buf.find(b"\n", start)
    return len(buf) if stop < 0 else stop


def _line_span(buf: bytes, pos: int) -> tuple[int, int]:
    """``(start, end)`` of the line of ``buf`` holding offset ``pos`` (end excludes the newline)."""
    return buf.rfind(b"\n", 0, pos) + 1, _line_end(buf, pos)


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


# -- the time-window prefilter -----------------------------------------------------------------

_CANONICAL_TS_BYTES = re.compile(_CANONICAL_TS.pattern.encode("ascii"))
_TS_PREFIX = b'{"ts":"'
# Every spelling of the key "ts" in JSON: each letter raw or as a \u escape (4 digits, no hex
# letters, so case does not matter).
_TS_KEY = re.compile(rb'"(?:t|\\u0074)(?:s|\\u0073)"')
# The start of a line in our own layout, capturing its canonical timestamp.
# (After a newline: a literal prefix the regex engine finds fast; ``^`` with MULTILINE is
# several times slower.)
TS_LINE = re.compile(
    rb'\n\{"ts":"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z)"'
)


def layout_keys(block: bytes, lines: int) -> list[bytes] | None:
    """The timestamps of the ``lines`` lines of ``block`` when every one of them is a line
    :meth:`_Window.rejects` may judge (our layout, no second ``ts`` key), else None."""
    if lines == 0 or block.count(b'"ts"') != lines or b"\\u007" in block:
        return None
    keys = TS_LINE.findall(b"\n" + block)
    return keys if len(keys) == lines else None


class _Window:
    """Rejects, without decoding, lines whose ``ts`` lies outside ``[since, until]``.

    Only lines in our own layout qualify: ``{"ts":"`` then a canonical timestamp and its
    closing quote, and no other ``"ts"`` token in the line, spelled raw or with escapes such as
    ``"t\\u0073"`` (JSON keeps the last duplicate key; inside a string a quote is always
    escaped, so a raw ``"ts"`` is a key or a whole value).
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
        when it is not (then each line has to be judged on its own)."""
        lines = block.split(b"\n")
        if block.endswith(b"\n"):
            lines.pop()
        keys = layout_keys(block, len(lines))
        if keys is None:
            return None
        first, last = keys[0], keys[-1]
        if (self.low is not None and last < self.low) or (
            self.high is not None and first > self.high
        ):
            if keys == sorted(keys):
                return []  # the whole block lies outside the window
            return None
        if keys != sorted(keys):
            return None
        lo = bisect.bisect_left(keys, self.low) if self.low is not None else 0
        hi = bisect.bisect_right(keys, self.high) if self.high is not None else len(keys)
        return lines[lo:hi][::-1]


def _window(matcher: Matcher) -> _Window | None:
    """The window prefilter for ``matcher``, when it has bounds that can be rounded."""
    if matcher.since is None and matcher.until is None:
        return None
    try:
        return _Window(matcher.since, matcher.until)
    except (OverflowError, ValueError):  # a bound at the very ends of time: decode everything
        return None

