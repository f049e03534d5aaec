"""The journal line format: timestamps, encoding a line, decoding one, and the matching rules.

One compact JSON object per line, keys ``ts``, ``tags``, ``text`` first (then any extra keys
another tool wrote), separators ``(',', ':')``, non-ASCII kept raw, UTF-8, ending in ``\\n``.
``ts`` is UTC with milliseconds and ``Z``: ``2026-11-29T10:04:05.678Z``.

Decoding never yields text that cannot be encoded again: bytes that are not UTF-8 and JSON
escapes of lone surrogates (``"\\ud83d"``, written by other tools) both come back as U+FFFD, in
keys and values alike, and the line is kept. :func:`decode_line` is the only decoder; the fast
search, the plain whole-file algorithm (``reference_search``), ``iter_entries`` and the index
all use it, so they agree on every line.

Matching rules are :class:`Matcher`'s (documented in :mod:`~jupyter_agent_memory.journal.scan`).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

__all__ = [
    "CORRUPT",
    "Matcher",
    "decode_line",
    "encode_line",
    "format_timestamp",
    "parse_time",
]

_FIRST_KEYS = ("ts", "tags", "text")


# -- timestamps --------------------------------------------------------------------------------


def format_timestamp(dt: datetime) -> str:
    """``dt`` in UTC with milliseconds and ``Z`` (a naive ``dt`` is taken to be UTC)."""
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc)
    return (
        f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:"
        f"{dt.second:02d}.{dt.microsecond // 1000:03d}Z"
    )


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


_LINE_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
# JSON for one string, exactly as the encoder above writes it.
_json_string: Any = getattr(json.encoder, "encode_basestring")  # noqa: B009


def _plain_line(entry: dict[str, Any]) -> str | None:
    """The JSON of an entry holding just ``ts``, ``tags`` and ``text`` as strings (what every
    append writes), put together directly: the same text the encoder makes, several times
    faster. None for any other entry."""
    if len(entry) != 3:
        return None
    ts, tags, text = entry.get("ts"), entry.get("tags"), entry.get("text")
    if type(ts) is not str or type(text) is not str or type(tags) is not list:
        return None
    if not all(type(tag) is str for tag in tags):
        return None
    quote = _json_string
    return (
        f'{{"ts":{quote(ts)},"tags":[{",".join(map(quote, tags))}],"text":{quote(text)}}}'
    )


def encode_line(entry: dict[str, Any]) -> bytes:
    """One journal line for ``entry``: compact JSON, ``ts``/``tags``/``text`` first, ``\\n``-ended.

    Non-ASCII text stays raw UTF-8. A lone surrogate (which UTF-8 cannot carry) is written as a
    ``\\uXXXX`` escape, which readers see as U+FFFD (``AgentMemory.append`` refuses such text
    before it gets here). Raises ``TypeError`` for a non-dict or an
    unserialisable value and ``ValueError`` for NaN/infinity.
    """
    if not isinstance(entry, dict):
        raise TypeError(f"a journal entry must be a dict, got {type(entry).__name__}")
    text = _plain_line(entry)
    if text is not None:
        try:
            return text.encode("utf-8") + b"\n"
        except UnicodeEncodeError:
            pass  # a lone surrogate: the general path below escapes it
    ordered = {key: entry[key] for key in _FIRST_KEYS if key in entry}
    for key, value in entry.items():
        ordered.setdefault(key, value)
    text = _LINE_ENCODER.encode(ordered)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        # Surrogates only occur inside JSON strings, where an escape is equally valid.
        data = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")
    # json.dumps escapes every control character, so the line cannot contain a raw newline.
    return data + b"\n"


# -- decoding and matching ---------------------------------------------------------------------

#: What :func:`decode_line` returns for a line that holds no entry.
CORRUPT = object()

# A JSON escape of a UTF-16 surrogate; paired ones decode to one character, lone ones are
# repaired after decoding. Cheap to look for: our own writer never produces one.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def decode_line(line: bytes) -> Any:
    """The entry on ``line``; ``None`` for a blank line; :data:`CORRUPT` for anything else.

    Invalid UTF-8 and lone-surrogate escapes are read as U+FFFD (module docstring).
    """
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        text = line.decode("utf-8", "replace")
    try:
        entry = _loads(text)
    except (ValueError, RecursionError):
        return CORRUPT if line.strip() else None
    if not isinstance(entry, dict):
        return CORRUPT
    if b"\\u" in line and _SURROGATE_ESCAPE.search(line):
        try:
            entry = _repair(entry)
        except RecursionError:
            return CORRUPT
    return entry


# The decoder's C scanner (an attribute json.JSONDecoder sets up but does not declare).
_scan_once: Any = getattr(json.JSONDecoder(), "scan_once")  # noqa: B009


def _loads(text: str) -> Any:
    """``json.loads(text)``, calling the C scanner directly for a line that is one JSON value
    from its first character to its last (every line our writer makes); anything else, such
    as surrounding blanks or an error, takes ``json.loads`` itself, so results and errors
    are the same."""
    try:
        value, end = _scan_once(text, 0)
    except StopIteration:
        return json.loads(text)
    if end != len(text):
        return json.loads(text)
    return value


def _repair(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value) if _LONE_SURROGATE.search(value) else value
    if isinstance(value, list):
        return [_repair(item) for item in value]
    if isinstance(value, dict):
        return {_repair(key): _repair(item) for key, item in value.items()}
    return value


class Matcher:
    """The filters of one search, applied to a decoded entry (the single source of truth)."""

    def __init__(
        self, query: str, tag: str, since: datetime | None, until: datetime | None
    ) -> None:
        self.query = (query or "").lower()
        self.tag = (tag or "").lower()
        self.since = _aware(since)
        self.until = _aware(until)

    def matches(self, entry: dict[str, Any]) -> bool:
        """Whether ``entry`` passes every filter (the rules are listed in the search module)."""
        if not self._matches_text_and_tags(entry):
            return False
        if self.since is None and self.until is None:
            return True
        ts = entry.get("ts")
        if not isinstance(ts, str):
            return False
        try:
            when = parse_time(ts)
        except ValueError:
            return False
        if self.since is not None and when < self.since:
            return False
        return self.until is None or when <= self.until

    def matches_inside_window(self, entry: dict[str, Any]) -> bool:
        """:meth:`matches` for an entry whose ``ts`` is already known to be a canonical
        timestamp inside ``[since, until]`` when compared as text (the byte-level window
        prefilter proved it): only whether that text is a real date and time is left to check, as
        :func:`parse_time` would."""
        if not self._matches_text_and_tags(entry):
            return False
        try:
            datetime.fromisoformat(entry["ts"][:-1])
        except (KeyError, TypeError, ValueError):
            return False
        return True

    def _matches_text_and_tags(self, entry: dict[str, Any]) -> bool:
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
        return True

