"""The journal line format (``docs/formats.md``): timestamps, encoding and decoding a line, the
matching rules. :func:`decode_line` is the one decoder every search, ``iter_entries`` and the
index use, so they agree on every line.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

_FIRST_KEYS = ("ts", "tags", "text")


def format_timestamp(dt: datetime) -> str:
    """``dt`` in UTC with milliseconds and ``Z`` (a naive ``dt`` is taken to be UTC)."""
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc)
    return (
        f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:"
        f"{dt.second:02d}.{dt.microsecond // 1000:03d}Z"
    )


# A strict ISO-8601 subset, the same on every Python version (unlike ``fromisoformat``).
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
    """An aware ``datetime`` for ``YYYY-MM-DD[[T ]HH:MM[:SS[.fraction]][Z|±HH[:MM]]]`` (no
    zone: UTC; fractions truncated to microseconds); anything else raises ``ValueError``."""
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO-8601 string, got {type(value).__name__}")
    if _CANONICAL_TS.fullmatch(value):
        # Our own format, fast (a window search parses every ts); fromisoformat checks ranges.
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
            int(parts["year"]), int(parts["month"]), int(parts["day"]), int(parts["hour"] or 0),
            int(parts["minute"] or 0), int(parts["second"] or 0), int(fraction), tzinfo=tz
        )
    except ValueError:
        raise ValueError(f"not an ISO-8601 date or time (out of range): {value!r}") from None


def _aware(dt: datetime | None) -> datetime | None:
    """``dt`` with UTC attached when it has no zone."""
    if dt is not None and dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    return dt


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_LINE_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
# JSON for one string, exactly as the encoder above writes it.
_json_string: Any = getattr(json.encoder, "encode_basestring")  # noqa: B009


def _plain_line(entry: dict[str, Any]) -> str | None:
    """The encoder's JSON, several times faster, for an entry of just ``ts``, ``tags`` and
    ``text`` as strings (what every append writes); None for any other entry."""
    if len(entry) != 3:
        return None
    ts, tags, text = entry.get("ts"), entry.get("tags"), entry.get("text")
    if type(ts) is not str or type(text) is not str or type(tags) is not list:
        return None
    if not all(type(tag) is str for tag in tags):
        return None
    quote = _json_string
    return f'{{"ts":{quote(ts)},"tags":[{",".join(map(quote, tags))}],"text":{quote(text)}}}'


def encode_line(entry: dict[str, Any]) -> bytes:
    """One journal line for ``entry``: compact JSON, ``ts``/``tags``/``text`` first, non-ASCII
    raw, a lone surrogate escaped. ``TypeError`` for a non-dict or an unserialisable value,
    ``ValueError`` for NaN/infinity."""
    if not isinstance(entry, dict):
        raise TypeError(f"a journal entry must be a dict, got {type(entry).__name__}")
    text = _plain_line(entry)
    if text is not None:
        try:
            return text.encode("utf-8") + b"\n"
        except UnicodeEncodeError:
            pass  # a lone surrogate: the general path below escapes it
    # ts, tags and text first, then the other keys in their order.
    ordered = {**{key: entry[key] for key in _FIRST_KEYS if key in entry}, **entry}
    text = _LINE_ENCODER.encode(ordered)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        # Surrogates only occur inside JSON strings, where an escape is equally valid.
        data = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")
    # Every control character is escaped, so the line holds no raw newline.
    return data + b"\n"


#: What :func:`decode_line` returns for a line that holds no entry.
CORRUPT = object()

# A JSON escape of a UTF-16 surrogate (never ours); lone ones are repaired after decoding.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def decode_line(line: bytes) -> Any:
    """The entry on ``line``; ``None`` for a blank line; :data:`CORRUPT` for anything else.
    Invalid UTF-8 and lone-surrogate escapes are read as U+FFFD."""
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
    """``json.loads(text)``, calling the C scanner directly when ``text`` is exactly one JSON
    value (every line our writer makes); results and errors are the same."""
    try:
        value, end = _scan_once(text, 0)
    except StopIteration:
        end = -1
    return value if end == len(text) else json.loads(text)


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
        """Whether ``entry`` passes every filter (the rules: the search module's docstring)."""
        if not self._matches_text_and_tags(entry):
            return False
        if self.since is None and self.until is None:
            return True
        try:
            when = parse_time(entry.get("ts", ""))  # ValueError for a ts that is not a string too
        except ValueError:
            return False
        if self.since is not None and when < self.since:
            return False
        return self.until is None or when <= self.until

    def matches_inside_window(self, entry: dict[str, Any]) -> bool:
        """:meth:`matches` for an entry whose ``ts`` the window prefilter proved canonical and
        inside the window as text: only whether it is a real date and time is left to check."""
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
        if not self.tag:
            return True
        tags, tag = entry.get("tags"), self.tag
        return isinstance(tags, list) and any(
            isinstance(item, str) and item.lower() == tag for item in tags
        )

