"""The journal (``memory/JOURNAL.jsonl``): reading it, and searching it fast.

The line format and the decoder live in :mod:`~jupyter_agent_memory.journal.format`, the
byte-level plans in :mod:`~jupyter_agent_memory.journal.plans`, the optional index in
:mod:`~jupyter_agent_memory.journal.index`; their public names are importable from here too.

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
- A line is an *entry* when it holds one JSON object (``json.loads`` rules, so ``NaN`` and
  duplicate keys behave as in Python: the last duplicate wins). Bytes that are not UTF-8 and
  escaped lone surrogates are read as U+FFFD; such a line is kept, never dropped.
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
see :class:`_Needle` for why that prefilter never drops a matching line. A query whose bytes
also fill every line's keys, timestamps or tags (``tag``, ``2025``) is looked for only where
each line's text begins (text mode, :func:`~jupyter_agent_memory.journal.plans.strip_skeleton`);
a non-ASCII query in the lower-cased block. With ``since`` / ``until``, lines in our own layout
whose timestamp lies outside the window are skipped without decoding, a whole block at a time
by bisection when its lines are in time order (:class:`_Window`).

Where the install built the compiled line scanner (``_linescan``), it finds an ASCII needle's
lines instead, in text mode for every query, without holding the GIL; full-size blocks are
then read ahead in a helper thread while it scans (:func:`_backward_blocks`).

With the optional index (:mod:`~jupyter_agent_memory.journal.index`, passed in as ``index``),
a time window reads only the part of the file it overlaps (found in logarithmic time when the
journal is in order), and a substring query of three or more characters decodes only the
lines the trigram index names, each confirmed by the same matcher. The part of the file not
indexed yet is always scanned as above, and any failure of the index means a plain search.

Counters: ``SearchResult.scanned`` counts the lines the search actually read one by one, that
is decoded (every line for :func:`reference_search`; for :func:`search`, the lines from the end
back to where it stopped that the prefilter let through), and ``SearchResult.skipped`` the
corrupted lines among them. A line the prefilter proves cannot match is never decoded, so its
corruption goes unnoticed, which is harmless: it could not have matched.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

from .format import (
    _CORRUPT,
    Matcher,
    _decode,
)
from .plans import (
    _Needle,
    _reversed_lines,
    _window,
)

# The first backward block is small so that a search satisfied by the newest entries costs
# microseconds; later blocks grow so a full scan makes few, large reads.
_FIRST_BLOCK = 64 * 1024
_MAX_BLOCK = 1024 * 1024
_WINDOW_FIRST_BLOCK = 8 * 1024
_BISECT_READ = 512
# Candidate lines named by the full-text index that a search decodes one by one before it
# scans the rest of the file instead (each costs a read; a scan reads in big blocks).
_CANDIDATE_BUDGET = 4096


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


# -- reading the file --------------------------------------------------------------------------


def _reader(f: BinaryIO) -> tuple[Callable[[int, int], bytes], os.stat_result | None]:
    """A ``read(pos, size)`` for ``f`` (``os.pread`` when it has a descriptor, else seek+read),
    and the descriptor's ``fstat`` (None without one)."""
    try:
        fd = f.fileno()
        st: os.stat_result | None = os.fstat(fd)
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        fd, st = -1, None

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

    return read, st


def _backward_blocks(
    read: Callable[[int, int], bytes],
    floor: int,
    end: int,
    first: int | None = None,
    read_ahead: bool = False,
) -> Iterator[tuple[bytes, int]]:
    """``[floor, end)`` of the file as ``(buf, lo)`` pairs, last part first, where ``buf[lo:]``
    is a run of whole lines and ``buf[:lo]`` the tail of a line that the next pair holds whole.

    ``floor`` is a line start. Reads only up to ``end`` (the size the file had when the search
    began), so concurrent appends do not shift the blocks. Blocks grow from 64 KiB to 1 MiB; a
    longer line is read whole. ``first`` overrides the size of the first block.

    With ``read_ahead`` (``read`` is a ``pread``, safe from another thread), once blocks have
    reached full size the next one is read in a helper thread while the caller works on this
    one: the read and the search (the compiled scanner's too) both run without the GIL. No
    read is left running once the generator is done or closed.
    """
    step = first or _FIRST_BLOCK
    pending: tuple[int, Future[bytes]] | None = None
    try:
        while end > floor:
            start = max(floor, end - step)
            if pending is not None and pending[0] == start:
                buf = pending[1].result()
            else:
                buf = read(start, end - start)
            pending = None
            if not buf:  # the file shrank under us: nothing more to read
                return
            if start == floor:
                yield buf, 0
                return
            lo = buf.find(b"\n") + 1
            if 0 < lo < len(buf):
                end = start + lo
                step = max(step, min(step * 2, _MAX_BLOCK))
                if read_ahead and step >= _MAX_BLOCK:
                    ahead = max(floor, end - step)
                    pending = (ahead, _read_ahead_pool().submit(read, ahead, end - ahead))
                yield buf, lo
            else:
                step *= 2  # no whole line in this read: a long line, read more at once
    finally:
        if pending is not None and not pending[1].cancel():
            pending[1].exception()  # waits for the read; its error, if any, no longer matters


_POOL_LOCK = threading.Lock()
_POOL: list[ThreadPoolExecutor] = []


def _read_ahead_pool() -> ThreadPoolExecutor:
    """The threads that read blocks ahead for every search of this process (made on first use)."""
    with _POOL_LOCK:
        if not _POOL:
            from concurrent.futures import ThreadPoolExecutor

            _POOL.append(ThreadPoolExecutor(max_workers=2, thread_name_prefix="journal-read"))
        return _POOL[0]


def _forget_pool_in_child() -> None:
    """A forked child has none of the pool's threads (and maybe a lock held by one): start over."""
    global _POOL_LOCK
    _POOL_LOCK = threading.Lock()
    _POOL.clear()


os.register_at_fork(after_in_child=_forget_pool_in_child)


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


# -- public search -----------------------------------------------------------------------------

# An index opener: given ``read`` and the journal's ``fstat``, the index or None.
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
) -> SearchResult:
    """The last ``limit`` entries matching every filter, newest first.

    Reads ``f`` backwards in blocks and stops at the ``limit``-th match; results are identical
    to :func:`reference_search`. See the module docstring for matching rules and counters.
    With ``index`` (see :mod:`~jupyter_agent_memory.journal.index`), time windows read only
    the parts of the file they overlap and substring queries only the lines the trigram index
    names; any trouble with the index means a plain search instead.
    """
    matcher = Matcher(query, tag, since, until)
    limit = max(1, int(limit))
    read, st = _reader(f)
    concurrent = st is not None  # a pread: blocks may be read ahead in another thread
    size = st.st_size if st is not None and stat.S_ISREG(st.st_mode) else f.seek(0, os.SEEK_END)
    if index is not None and st is not None:
        try:
            planned = _indexed_plan(st, read, size, matcher, index)
        except _index_errors():
            planned = None
        if planned is not None:
            ranges, candidates, end = planned
            try:
                return _run(read, matcher, limit, ranges, candidates, end, concurrent)
            except _index_errors():
                pass  # a plain search below, from the start
    return _run(read, matcher, limit, [(0, size)], None, size, concurrent)


def _index_errors() -> tuple[type[BaseException], ...]:
    """What a failing index raises (only evaluated when something was raised: sqlite3 is
    imported only by searches that use an index)."""
    import sqlite3

    return (OSError, sqlite3.Error)


def _indexed_plan(
    st: os.stat_result,
    read: Callable[[int, int], bytes],
    size: int,
    matcher: Matcher,
    opener: IndexOpener,
) -> tuple[list[tuple[int, int]], Iterator[int] | None, int] | None:
    """``(ranges to scan newest first, candidate line offsets, end of the indexed part)`` for
    a search the index can narrow, or None for a plain search. ``st`` is the journal's
    ``fstat``."""
    from . import index as journal_index

    window = _window(matcher)
    text_query = matcher.query if journal_index.fts_usable(matcher.query) else ""
    if window is None and not text_query:
        return None
    if st.st_size != size:
        st = os.stat_result((*st[:6], size, *st[7:]))
    index = opener(read, st)
    if index is None:
        return None
    if text_query and index.full_text:
        end = index.update_texts()
        return [(end, size)], index.text_candidates(text_query, end), end
    if window is None or size < journal_index.MAP_MIN_BYTES:
        return None
    end = index.update_map()
    ranges = index.window_ranges(window.low, window.high, end)
    if index.in_order and window.high is not None and len(ranges) == 1:
        # Every mapped line is ours and in order: the window's newest end is found by
        # bisection, so the lines after it are not read at all.
        floor, top = ranges[0]
        ranges = [(floor, _bisect_after(read, floor, top, window.high))]
    return [(end, size), *ranges], None, end


def _bisect_after(read: Callable[[int, int], bytes], floor: int, top: int, high: bytes) -> int:
    """The start of the first line of ``[floor, top)`` whose ``ts`` is after ``high`` (``top``
    when none is), for a range of lines in our layout in time order."""
    lo, hi = floor, top  # invariant: lines before lo are <= high, lines from hi on are after
    while hi - lo > 2 * _BISECT_READ:
        mid = (lo + hi) // 2
        buf = read(mid, _BISECT_READ)
        start = buf.find(b"\n") + 1
        if start == 0 or start + 31 > len(buf) or mid + start >= hi:
            break  # a long line: the scan finishes the job
        if buf[start + 7 : start + 31] > high:
            hi = mid + start
        else:
            lo = mid + start
    return hi


def _run(
    read: Callable[[int, int], bytes],
    matcher: Matcher,
    limit: int,
    ranges: list[tuple[int, int]],
    candidates: Iterator[int] | None,
    end: int,
    read_ahead: bool = False,
) -> SearchResult:
    """Scan ``ranges`` (newest first), then decode ``candidates`` (offsets, newest first);
    ``read_ahead``: ``read`` may run in another thread (see :func:`_backward_blocks`)."""
    tag_needle = _Needle(matcher.tag, quoted=True) if matcher.tag else None
    # Made by the first scan that reads anything: a search the index answers never needs it.
    query_needle: list[_Needle] = []
    window = _window(matcher)

    result = SearchResult()

    def take(line: bytes, inside_window: bool = False) -> bool:
        """Decode and match one line; True once ``limit`` matches are in. ``inside_window``:
        the window plan proved the line's timestamp lies inside the window."""
        result.scanned += 1
        entry = _decode(line)
        if entry is _CORRUPT:
            result.skipped += 1
        elif entry is not None and (
            matcher.matches_inside_window(entry) if inside_window else matcher.matches(entry)
        ):
            result.append(entry)
            return len(result) >= limit
        return False

    # Ranges chosen by the time map usually hold the matches near their end: start small.
    first = min(_WINDOW_FIRST_BLOCK, _FIRST_BLOCK) if window is not None else None

    def scan(floor: int, top: int) -> bool:
        if floor >= top:
            return False
        if matcher.query and not query_needle:
            query_needle.append(_Needle(matcher.query, quoted=False))
        primary = query_needle[0] if query_needle else tag_needle
        secondary = tag_needle if query_needle else None
        # Reading ahead pays only while the search itself runs without the GIL (a thread that
        # waits for the GIL slows a pure-Python scan down instead).
        ahead = read_ahead and primary is not None and primary.served_compiled()
        for buf, lo in _backward_blocks(read, floor, top, first, ahead):
            trimmed = None
            if primary is not None:
                lines = primary.candidates(buf, lo)
            elif window is not None and (trimmed := window.trim(buf[lo:])) is not None:
                lines = ((0, line) for line in trimmed)
            else:
                lines = _reversed_lines(buf[lo:])
            for _start, line in lines:
                if secondary is not None and not secondary.may_match(line):
                    continue
                if trimmed is None and window is not None and window.rejects(line):
                    continue
                if take(line, trimmed is not None):
                    return True
        return False

    for floor, top in ranges:
        if scan(floor, top):
            return result
    budget = _CANDIDATE_BUDGET
    for offset in candidates or ():
        budget -= 1
        if budget < 0:
            # Too many candidates for a few matches (a common query with a rare tag, say):
            # scanning the rest is cheaper. Every line from ``offset`` up was already seen or
            # proven not to match, so the scan starts below it.
            scan(0, offset + len(_line_at(read, offset, end)) + 1)
            return result
        line = _line_at(read, offset, end)
        if tag_needle is not None and not tag_needle.may_match(line):
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
