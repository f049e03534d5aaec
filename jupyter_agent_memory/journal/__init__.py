"""The journal (``memory/JOURNAL.jsonl``): its line format (:mod:`.format`), appending
(:mod:`.append`), reading (:mod:`.reader`), searching (:mod:`.scan`) and the optional index
(:mod:`.index`, imported on first use: it needs ``sqlite3``).

This layer knows files and bytes, nothing of agents, prompts or surfaces; the engine's store
is its only writer.
"""

from __future__ import annotations

from .format import CORRUPT, Matcher, decode_line, encode_line, format_timestamp, parse_time
from .reader import INDEX_REGISTRY
from .scan import (
    DEFAULT_BLOCK_SIZE,
    IndexOpener,
    SearchResult,
    iter_entries,
    reference_search,
    search,
)

__all__ = [
    "CORRUPT",
    "DEFAULT_BLOCK_SIZE",
    "INDEX_REGISTRY",
    "IndexOpener",
    "Matcher",
    "SearchResult",
    "decode_line",
    "encode_line",
    "format_timestamp",
    "iter_entries",
    "parse_time",
    "reference_search",
    "search",
]
