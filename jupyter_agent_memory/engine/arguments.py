"""The search arguments every surface shares: the lenient ``limit`` and the time window.

The store's :meth:`~jupyter_agent_memory.engine.store.AgentMemory.search` and the ``memory``
tool read them the same way, so a model, a notebook and a REST client get the same results.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

from .. import journal
from ..errors import INVALID_PARAMS, MemoryToolError

#: What ``limit`` means when it is missing or not an integer.
DEFAULT_LIMIT = 20


def normalize_limit(value: object) -> int:
    """The lenient ``limit`` rule of every search: ints, integral floats and int strings, at
    least 1. Anything else means ``DEFAULT_LIMIT``. ``3.0`` is an integer in JSON Schema."""
    if isinstance(value, bool):
        return DEFAULT_LIMIT
    if isinstance(value, int):
        return max(1, value)
    if isinstance(value, float):
        return max(1, int(value)) if value.is_integer() else DEFAULT_LIMIT
    if isinstance(value, str):
        try:
            return max(1, int(value.strip()))
        except ValueError:
            return DEFAULT_LIMIT
    return DEFAULT_LIMIT


def coerce_time(value: datetime | str | None, field: str) -> datetime | None:
    """Parse a time-window bound (datetime or ISO-8601 text; no zone means UTC)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, str):
        try:
            return journal.parse_time(value)
        except ValueError:
            pass
    raise MemoryToolError(
        f"Invalid '{field}': expected an ISO-8601 date or time, "
        f"got {json.dumps(value, default=str)}",
        INVALID_PARAMS,
    )


def check_count(value: int, name: str) -> int:
    """A count a person typed (``-n``, ``--limit``, the panel's Limit): returned when it is a
    positive integer, else -32602 naming ``name`` and the rule.

    People asking for ``-n 0`` or ``-n -3`` made a mistake worth telling them about; the tool
    keeps its lenient rule (:func:`normalize_limit`) because a model cannot read a usage text.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MemoryToolError(
            f"{name} must be a positive integer (1 or more), got {value!r}", INVALID_PARAMS
        )
    return value
