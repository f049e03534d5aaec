"""Sessions on record: each real session start appends a receipt to ``memory/SESSIONS.jsonl``
(the prompt's sha256 and, per section, its source file's version), and stores the prompt and
source texts once each under ``memory/.sessions/<sha256>.txt``, so a past prompt can be shown,
diffed and traced line by line. Retention is bounded by count and by bytes.
"""

from __future__ import annotations

import difflib
import json
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MemoryToolError, SessionNotFoundError, engine_boundary
from ..folder import Folder, sha256_hex
from ..journal import format_timestamp
from .access import locked, read_memory
from .jstext import js_trim

if TYPE_CHECKING:
    from .access import Locked
    from .prompt import Prompt
    from .store import AgentMemory

SESSIONS_LOG = "SESSIONS.jsonl"
BLOBS_DIR = ".sessions"
DEFAULT_KEEP_SESSIONS = 1000
DEFAULT_KEEP_BYTES = 64 * 1024 * 1024
BLOB_NAME = re.compile(r"^[0-9a-f]{64}\.txt$")
_SESSION_ID = re.compile(r"^[0-9a-f]{6,32}$")


@dataclass(frozen=True)
class SessionStart:
    """What :meth:`AgentMemory.start_session` returns: the prompt and its receipt."""

    prompt: Prompt
    receipt: dict[str, Any]


@dataclass(frozen=True)
class Origin:
    """Where one line of a recorded prompt came from: ``source`` the file (None: text the
    prompt builder wrote), ``version`` its sha256 then, ``line`` the 1-based line in it."""

    section: str
    source: str | None
    version: str | None
    line: int | None
    text: str

    def __str__(self) -> str:
        if self.source is None:
            return f"builder text of the {self.section!r} section: {self.text!r}"
        version = self.version[:12] if self.version else "?"
        return f"{self.source} @ {version} line {self.line}: {self.text!r}"


def record(
    mem: AgentMemory, prompt: Prompt, *, session_id: str | None = None,
    client: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Append the receipt of a session that starts with ``prompt``; returns the receipt."""
    text = prompt.text
    blobs: dict[str, str] = {sha256_hex(text.encode("utf-8", "surrogatepass")): text}
    blobs.update((s.sha256, s.content) for s in prompt.sections
                 if s.content is not None and s.sha256 is not None)
    sections = [
        {"name": s.name, "source": None if s.source is None else str(s.source),
         "version": s.sha256, "chars": s.chars, "tokens": s.tokens}
        for s in prompt.sections
    ]
    base = next((s for s in sections if s["name"] == "system"), None)
    receipt = {
        "ts": timestamp(mem),
        "session_id": session_id or secrets.token_hex(8),
        "client": _client(client),
        "prompt_sha256": next(iter(blobs)),
        "chars": len(text),
        "tokens": prompt.tokens,
        "base": {"source": base["source"], "version": base["version"]} if base else None,
        "sections": sections,
        "budget_tokens": prompt.budget_tokens,
        "warnings": list(prompt.warnings),
    }
    line = encode_receipts([receipt])
    # One hold of the lock for texts, receipt and pruning: a forget comes wholly before or
    # after, and neither a crash sweep nor pruning sees a text before its receipt is written.
    with locked(mem) as txn:
        memory = txn.memory
        _require_current(txn, prompt)
        stored_bytes = 0  # only a new text can push the store over its bound
        with memory.subfolder(BLOBS_DIR, create=True) as store:
            new = [d for d in blobs if store.lstat(f"{d}.txt") is None]  # each text kept once
            for digest in new:
                data = blobs[digest].encode("utf-8", "surrogatepass")
                store.write_atomic(f"{digest}.txt", data, txn.recheck)
            if new:
                stored_bytes = sum(st.st_size for n in store.names() if (st := store.lstat(n)))
        log = memory.lookup(SESSIONS_LOG) or SESSIONS_LOG
        before = memory.lstat(log)
        size = before.st_size if before is not None else 0
        memory.append_line(log, line)
        # Receipts are about the same size, so the log's size estimates their count.
        too_many = (size + len(line)) // max(1, len(line)) > mem.keep_sessions * 1.1
        if too_many or stored_bytes > mem.keep_bytes:
            _prune(mem, txn)
    return receipt


class StalePromptError(MemoryToolError):
    """A prompt's source file changed between building the prompt and recording it."""


def _require_current(txn: Locked, prompt: Prompt) -> None:
    """Raise :class:`StalePromptError` unless every agent file the prompt used still holds
    that version under the lock (a session built just before a forget must not store it)."""
    ours = {txn.mem.path: txn.agent, txn.memory.path: txn.memory}
    for section in prompt.sections:
        source = Path(section.source) if section.source is not None else None
        folder = ours.get(source.parent) if source is not None else None
        if source is None or folder is None or section.sha256 is None:
            continue
        data = folder.read_bytes(source.name)
        # The version is the hash of the text as the builder decoded it.
        text = None if data is None else data.decode("utf-8", errors="replace")
        if text is None or sha256_hex(text.encode("utf-8", "surrogatepass")) != section.sha256:
            raise StalePromptError(
                f"{source} changed while the session started; nothing was recorded, build "
                "the prompt again"
            )


def _prune(mem: AgentMemory, txn: Locked) -> None:
    """Keep the newest ``keep_sessions`` receipts within ``keep_bytes`` of stored texts."""
    memory = txn.memory
    receipts = read_receipts(memory)
    kept = receipts[-mem.keep_sessions :]
    with memory.subfolder(BLOBS_DIR, create=True) as store:
        sizes = {n: st.st_size for n in store.names() if (st := store.lstat(n))}
        total = 0
        chosen: list[dict[str, Any]] = []
        counted: set[str] = set()
        for receipt in reversed(kept):  # newest first; the newest is always kept
            names = {f"{v}.txt" for v in _versions(receipt)}
            cost = sum(sizes.get(n, 0) for n in names - counted)
            if chosen and total + cost > mem.keep_bytes:
                break
            total += cost
            counted |= names
            chosen.append(receipt)
        kept = chosen[::-1]
        log = memory.lookup(SESSIONS_LOG) or SESSIONS_LOG
        memory.write_atomic(log, encode_receipts(kept), txn.recheck)
        # Texts go only once no receipt on disk points at them.
        unused = [n for n in store.names() if BLOB_NAME.match(n) and n not in counted]
        if any([store.unlink(name) for name in unused]):  # all unlinked, then one flush
            store.fsync()


def encode_receipts(receipts: list[dict[str, Any]]) -> bytes:
    """Receipts as the sessions log stores them: one compact JSON object per line."""
    return "".join(
        json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in receipts
    ).encode()


def receipts(mem: AgentMemory) -> list[dict[str, Any]]:
    """Every recorded session, newest first."""
    found: list[dict[str, Any]] = read_memory(mem, read_receipts, [])
    return found[::-1]


@engine_boundary
def find(mem: AgentMemory, session_id: str) -> dict[str, Any]:
    """The receipt whose id is ``session_id`` or starts with it (at least 6 hex digits)."""
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id.lower()):
        raise MemoryToolError(
            f'Invalid session id "{session_id}": give an id or a prefix of at least 6 hex '
            "digits (see the list of sessions)"
        )
    wanted = session_id.lower()
    matches = [r for r in receipts(mem) if str(r.get("session_id", "")).startswith(wanted)]
    ids = {r["session_id"] for r in matches}
    if not matches:
        raise SessionNotFoundError(f'No recorded session matches "{session_id}"')
    if len(ids) > 1:
        raise MemoryToolError(
            f'Session id "{session_id}" is ambiguous: it matches {len(ids)} sessions'
        )
    return matches[0]


def prompt_text(mem: AgentMemory, session_id: str) -> str:
    """The exact system prompt the session started with (checked against its sha256)."""
    receipt = find(mem, session_id)
    return _blob(mem, str(receipt["prompt_sha256"]), what="prompt of session " + session_id)


def diff(mem: AgentMemory, first: str, second: str) -> str:
    """A unified diff of two sessions' prompts (empty when they were identical)."""
    a, b = find(mem, first), find(mem, second)
    old = prompt_text(mem, a["session_id"]).splitlines(keepends=True)
    new = prompt_text(mem, b["session_id"]).splitlines(keepends=True)
    label = "session {0[session_id]} ({0[ts]})".format
    return "".join(difflib.unified_diff(old, new, label(a), label(b)))


def why(mem: AgentMemory, session_id: str, needle: str) -> list[Origin]:
    """Where each line of a past session's prompt that contains ``needle`` came from."""
    if not isinstance(needle, str) or not needle.strip():
        raise MemoryToolError("Give the text (or part of a line) to trace")
    receipt = find(mem, session_id)
    text = prompt_text(mem, receipt["session_id"])
    origins: list[Origin] = []
    offset = 0
    for section in receipt["sections"]:
        chars = int(section["chars"])
        body = text[offset : offset + chars]
        offset += chars + 2  # sections are joined by a blank line
        version = section.get("version")
        content = _blob(mem, version, what=f"{section['source']} version") if version else None
        for number, line in enumerate(body.split("\n")):
            if needle in line:
                origins.append(_origin(section, content, body, number, line))
    return origins


def _origin(
    section: dict[str, Any], content: str | None, body: str, number: int, line: str
) -> Origin:
    name = str(section["name"])
    # A memory block is "<name>\n<trimmed content>\n</name>" (its tags are the builder's); the
    # system section is the trimmed file itself.
    wrapped = name in ("soul", "user", "facts")
    if content is None or (wrapped and number in (0, body.count("\n"))):
        return Origin(name, None, None, None, line)
    # The builder trims the file (JavaScript's trim): count the lines the trim removed.
    trimmed = js_trim(content)
    leading = content.find(trimmed) if trimmed else 0
    number += content[:leading].count("\n") + (0 if wrapped else 1)
    return Origin(name, str(section["source"]), str(section["version"]), number, line)


def read_receipts(memory: Folder) -> list[dict[str, Any]]:
    """Every receipt in ``memory/``'s sessions log, oldest first (torn lines skipped)."""
    data = memory.read_bytes(memory.lookup(SESSIONS_LOG)) or b""
    found = []
    for raw in data.splitlines():
        try:
            receipt = json.loads(raw)
        except (ValueError, RecursionError):
            continue  # a torn last line from a crash: skipped, never fatal
        if isinstance(receipt, dict) and isinstance(receipt.get("session_id"), str):
            found.append(receipt)
    return found


def _blob(mem: AgentMemory, digest: str, what: str) -> str:
    data = read_memory(mem, lambda store: store.read_bytes(f"{digest}.txt"), None, BLOBS_DIR)
    if data is None:
        raise MemoryToolError(f"The stored text of the {what} is gone")
    if sha256_hex(data) != digest:
        raise MemoryToolError(f"The stored text of the {what} does not match its sha256 {digest}")
    return data.decode("utf-8", "surrogatepass")


def _versions(receipt: dict[str, Any]) -> set[str]:
    found = {str(receipt.get("prompt_sha256"))}
    sections = [s for s in receipt.get("sections") or () if isinstance(s, dict)]
    return found | {str(s["version"]) for s in sections if s.get("version")}


#: The most characters of a client's self-chosen name or version kept in a receipt: a client
#: calling itself a megabyte long must not grow the log by a megabyte a session.
CLIENT_FIELD_CHARS = 200


def _client(client: dict[str, Any] | None) -> dict[str, Any] | None:
    if not client:
        return None
    limit = CLIENT_FIELD_CHARS
    kept = {k: str(client[k]) for k in ("name", "version") if client.get(k) is not None}
    return {k: v if len(v) <= limit else v[:limit] + "…" for k, v in kept.items()}


def timestamp(mem: AgentMemory) -> str:
    """The agent's current time as receipts write it (UTC, milliseconds, ``Z``)."""
    return format_timestamp(mem.now())
