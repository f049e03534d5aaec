"""First-run setup: a new agent's prompt has a ``## Bootstrap Mode`` block until a journal
append tagged ``bootstrap``, which :func:`note_append` records in ``<agent>/.state.json`` (so no
prompt build scans the journal). The rules' order is Cherry Studio's.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import MemoryConflictError, MemoryToolError
from ..folder import sha256_hex
from .access import read_agent_bytes, replace_agent_file
from .jstext import JS_LINE_TERMINATORS, js_trim, utf16_length

if TYPE_CHECKING:
    from .store import AgentMemory

BOOTSTRAP_TAG = "bootstrap"
#: The agent's own state, written by the engine only (atomically, under the lock).
STATE_FILE = ".state.json"
#: A SOUL.md with at most this many characters of real text is still a stub.
SOUL_STUB_CHARS = 50

# A line starting with "#" or ">", as JavaScript's /^#.*$/gm sees lines (the terminator stays).
_TEMPLATE_LINE = re.compile(f"(?:\\A|(?<=[{JS_LINE_TERMINATORS}]))[#>][^{JS_LINE_TERMINATORS}]*")


class BootstrapStateWarning(UserWarning):
    """A ``bootstrap`` append was stored but the completion could not be recorded."""


def soul_is_configured(soul: str) -> bool:
    """True when SOUL.md holds real content, by Cherry Studio's arithmetic: trimmed, with
    lines starting with ``#`` or ``>`` blanked and trimmed again, more than 50 UTF-16 units."""
    content = js_trim(soul)
    if utf16_length(content) <= SOUL_STUB_CHARS:
        return False
    stripped = js_trim(_TEMPLATE_LINE.sub("", content))
    return utf16_length(stripped) > SOUL_STUB_CHARS


def needs_bootstrap(
    soul: str, config: Mapping[str, Any] | None = None, has_user_instructions: bool = False,
    recorded: bool | None = None,
) -> bool:
    """Whether the bootstrap block belongs in the prompt: by the ``recorded`` state, else
    ``config["bootstrap_completed"]``, else not with instructions, else by the SOUL.md rule."""
    if recorded is not None:
        return not recorded
    completed = (config or {}).get("bootstrap_completed")
    if isinstance(completed, bool):
        return not completed
    return not has_user_instructions and not soul_is_configured(soul)


def parse_state(raw: bytes | str | None) -> dict[str, Any]:
    """The state file's object, or ``{}`` when it is missing or not a JSON object."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    try:
        state = json.loads(text or "{}")
    except ValueError:
        return {}
    return state if isinstance(state, dict) else {}


def recorded_completion(raw: bytes | str | None) -> bool | None:
    """``bootstrap_completed`` as recorded in the state file's bytes (None: not recorded)."""
    value = parse_state(raw).get("bootstrap_completed")
    return value if isinstance(value, bool) else None


def note_append(memory: AgentMemory, entry: Mapping[str, Any]) -> None:
    """Record the end of bootstrap if ``entry`` is tagged ``bootstrap`` (a failure only warns)."""
    tags = entry.get("tags") or ()
    if not any(isinstance(tag, str) and tag.lower() == BOOTSTRAP_TAG for tag in tags):
        return
    try:
        _record(memory, True, entry.get("ts"))
    except (OSError, MemoryToolError) as exc:
        warnings.warn(
            "The bootstrap entry was stored, but completing bootstrap could not be recorded "
            f"in {memory.path / STATE_FILE}: {exc}",
            BootstrapStateWarning,
            stacklevel=3,
        )


def set_bootstrap_completed(memory: AgentMemory, completed: bool | None) -> None:
    """Record (``True``), reopen (``False``: the block comes back even with instructions, a
    reset) or forget (``None``: the default rules again) the agent's bootstrap."""
    stamp = memory.now().isoformat(timespec="milliseconds").replace("+00:00", "Z")
    _record(memory, completed, stamp)


def _record(memory: AgentMemory, completed: bool | None, ts: Any) -> None:
    """Write the state file, compare-and-swap against what was read (never over a writer)."""
    for _attempt in range(8):
        raw = read_agent_bytes(memory, STATE_FILE)
        state = parse_state(raw)
        if state.get("bootstrap_completed") is completed:
            return
        state.pop("bootstrap_completed_at", None)
        if completed is None:
            state.pop("bootstrap_completed", None)
        else:
            state["bootstrap_completed"] = completed
            if completed:
                state["bootstrap_completed_at"] = ts
        text = json.dumps(state, indent=2, ensure_ascii=False) + "\n"
        try:
            replace_agent_file(memory, STATE_FILE, text.encode(), sha256_hex(raw))
            return
        except MemoryConflictError:
            continue  # another writer got there first: read again
    raise MemoryToolError(f"{memory.path / STATE_FILE} kept changing; bootstrap state not written")
