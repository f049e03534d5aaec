"""The search arguments every surface reads the same way: the lenient ``limit`` and the time
window, so a model, a notebook and a REST client get the same results."""

from __future__ import annotations

import contextlib
import json
from datetime import datetime, timezone

from .. import journal
from ..errors import MemoryToolError

#: What ``limit`` means when it is missing or not an integer.
DEFAULT_LIMIT = 20


def normalize_limit(value: object) -> int:
    """The lenient ``limit`` of every search: ints, integral floats (``3.0`` is an integer in
    JSON Schema) and int strings, at least 1; anything else means ``DEFAULT_LIMIT``."""
    if isinstance(value, bool):
        return DEFAULT_LIMIT
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return max(1, int(value))
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return max(1, int(value.strip()))
    return DEFAULT_LIMIT


def coerce_time(value: datetime | str | None, field: str) -> datetime | None:
    """Parse a time-window bound (datetime or ISO-8601 text; no zone means UTC)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return journal.parse_time(value)
    raise MemoryToolError(
        f"Invalid '{field}': expected an ISO-8601 date or time, "
        f"got {json.dumps(value, default=str)}"
    )


def check_count(value: int, name: str) -> int:
    """A count a person typed (``-n``, ``--limit``): returned when a positive integer, else
    -32602 naming ``name``. A person can read a usage text; a model cannot, so the tool keeps
    :func:`normalize_limit`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MemoryToolError(f"{name} must be a positive integer (1 or more), got {value!r}")
    return value
