"""The journal (``memory/JOURNAL.jsonl``): its line format, appending, reading and searching.

This layer knows files and bytes, nothing of agents, prompts or surfaces; the engine's store
is its only writer. Modules:

- :mod:`.format`: the line format, timestamps, the one decoder and the matching rules;
- :mod:`.append`: one durable ``write`` per entry under the agent's lock;
- :mod:`.reader`: the journal file kept open between searches, checked before each use;
- :mod:`.scan`: newest-first search by reading the file backwards in blocks;
- :mod:`.index`: the optional derived index, built only when asked (imported on first use:
  it needs ``sqlite3``).
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
