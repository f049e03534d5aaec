"""Forgetting that is verified: remove a text everywhere memory keeps it, then prove it.

``forget`` removes a text, a pattern or every stored credential from FACT.md (the lines that
hold it), the journal (matching entries become tombstones that keep their time and say why,
never the content), FACT.md history, the stored session prompts and source texts, and the
journal's derived search index. Each file is replaced atomically under the agent's lock, so a
crash leaves every file either before or after, and running it again finishes the job.

Then it verifies: every byte under the agent folder (and the index's cache files) is read and
searched for the text in its raw, case-folded and JSON-escaped forms, and a fresh prompt is
built and searched too. The receipt, appended to ``memory/FORGET.jsonl``, says which kinds of
places changed and how many, and holds a hash of what was forgotten, never the text.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import INVALID_PARAMS, MemoryIOError, MemoryToolError
from ..folder import Folder, sha256_hex
from . import history, sessions
from . import secrets as credentials

if TYPE_CHECKING:
    from .store import AgentMemory

RECEIPTS = "FORGET.jsonl"
TOMBSTONE_TAG = "forgotten"
_KINDS = ("profile", "facts", "journal", "history", "sessions", "caches")


class _Matcher:
    """Decides whether a piece of text holds what is to be forgotten."""

    def __init__(self, text: str | None, pattern: str | None, find_secrets: bool) -> None:
        given = [x for x in (text, pattern) if x is not None] + ([True] if find_secrets else [])
        if len(given) != 1:
            raise MemoryToolError(
                "Forget needs exactly one of: a text, a pattern, or secrets=True", INVALID_PARAMS
            )
        self.text = text
        self.secrets = find_secrets
        self.regex: re.Pattern[str] | None = None
        if text is not None:
            if not isinstance(text, str) or not text.strip():
                raise MemoryToolError(
                    "The text to forget must be a non-empty string", INVALID_PARAMS
                )
            if "\n" in text:
                raise MemoryToolError(
                    "Forget one line of text at a time (or give a pattern)", INVALID_PARAMS
                )
            self.folded = text.casefold()
        if text is not None:
            _require_sendable(text, "text")
        if pattern is not None:
            try:
                self.regex = re.compile(pattern)
            except (re.error, TypeError) as exc:
                raise MemoryToolError(f"Invalid pattern: {exc}", INVALID_PARAMS) from None
            _require_sendable(pattern, "pattern")
            if self.regex.search("") is not None:
                raise MemoryToolError(
                    f"The pattern {pattern!r} matches the empty string, so it would forget "
                    "every line: make it match what is to be forgotten",
                    INVALID_PARAMS,
                )
        self.describe = "secrets" if find_secrets else ("pattern" if pattern else "text")
        self.digest = sha256_hex(
            ("\0secrets" if find_secrets else (text if text is not None else "\0" + str(pattern)))
            .encode("utf-8", "surrogatepass")
        )

    def __call__(self, value: str) -> bool:
        if self.text is not None:
            return self.folded in value.casefold()
        if self.regex is not None:
            return self.regex.search(value) is not None
        return bool(credentials.find(value))

    def in_bytes(self, data: bytes) -> bool:
        """Whether raw file bytes hold the text in any form: raw, case-folded, JSON-escaped."""
        text = data.decode("utf-8", "replace")
        if self(text):
            return True
        if self.text is not None:
            escaped = {
                json.dumps(self.text)[1:-1],
                json.dumps(self.text, ensure_ascii=False)[1:-1],
            }
            folded = text.casefold()
            if any(form.encode() in data or form.casefold() in folded for form in escaped):
                return True
        # JSON lines store text escaped: read each one back and look again.
        for line in text.splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError, RecursionError):
                    if self(json.dumps(json.loads(line), ensure_ascii=False)):
                        return True
        return False


@dataclass
class _Run:
    """One forget pass: what to look for, whether to write, and what was found where."""

    match: _Matcher
    dry_run: bool
    recheck: Callable[[], None]
    reason: str = ""
    changed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_KINDS, 0))
    places: list[str] = field(default_factory=list)

    def found(self, kind: str, place: str, count: int = 1) -> bool:
        """Count ``count`` matches of ``kind`` at ``place``; True when they should be written."""
        self.changed[kind] += count
        self.places.append(place)
        return not self.dry_run


def _require_sendable(value: str, field: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MemoryToolError(
            f"The {field} to forget is not valid Unicode text: lone surrogate "
            f"U+{ord(value[exc.start]):04X} at position {exc.start}",
            INVALID_PARAMS,
        ) from None


def forget(
    mem: AgentMemory,
    text: str | None = None,
    *,
    pattern: str | None = None,
    secrets: bool = False,
    dry_run: bool = False,
    reason: str = "",
) -> dict[str, Any]:
    """Remove ``text`` (or ``pattern``'s matches, or every stored credential) from memory.

    SOUL.md, USER.md and FACT.md lose the lines that hold it, journal entries become
    tombstones, history versions and stored session texts are scrubbed, and the journal's
    search index is dropped; then every byte under the folder is scanned, and a fresh prompt
    built, to verify. Public engine errors only (the ``MemoryToolError`` family).

    Returns the receipt: ``{"ts", "forgotten_sha256", "what", "reason", "dry_run",
    "changed": {kind: count}, "places": [paths relative to the agent folder],
    "verified", "remaining": [paths]}``. With ``dry_run`` nothing is written and
    ``changed``/``places`` say what would change.
    """
    try:
        return _forget(mem, text, pattern, secrets, dry_run, reason)
    except MemoryToolError:
        raise
    except OSError as exc:
        raise MemoryIOError(exc) from exc


def _forget(
    mem: AgentMemory,
    text: str | None,
    pattern: str | None,
    find_secrets: bool,
    dry_run: bool,
    reason: str,
) -> dict[str, Any]:
    match = _Matcher(text, pattern, find_secrets)
    if not isinstance(reason, str):
        raise MemoryToolError("The reason must be a string", INVALID_PARAMS)
    if reason and match(reason):
        raise MemoryToolError(
            "The reason must not contain what is being forgotten", INVALID_PARAMS
        )
    with mem._folders() as (agent, memory):
        if memory is None:
            raise MemoryToolError(f"{mem.path} has no memory/ folder", INVALID_PARAMS)
        with memory.locked(".lock", mem.lock_timeout):
            run = _Run(match, dry_run, lambda: mem._recheck(agent, memory), reason)
            _profile(agent, run)
            _facts(memory, run)
            _journal(memory, run)
            _history(memory, run)
            _sessions(memory, run)
            _caches(mem, run)
    if not dry_run:
        # A replaced journal's old bytes stay on disk while a descriptor holds them.
        mem.close()
    changed, places = run.changed, run.places
    remaining = [] if dry_run else _scan(mem, match)
    receipt = {
        "ts": sessions._timestamp(mem),
        "forgotten_sha256": match.digest,
        "what": match.describe,
        "reason": reason,
        "dry_run": dry_run,
        "changed": changed,
        "places": places,
        "verified": not dry_run and not remaining,
        "remaining": remaining,
    }
    if not dry_run:
        line = (json.dumps(receipt, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        # create_memory: the receipt's folder is made when missing, so it is never None.
        with mem._folders(create_memory=True) as (_agent, memory):
            assert memory is not None
            with memory.locked(".lock", mem.lock_timeout):
                fd = memory.open_file(RECEIPTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                try:
                    os.write(fd, line)
                    os.fsync(fd)
                finally:
                    os.close(fd)
    return receipt


# -- each kind of place ---------------------------------------------------------------------------


def _profile(agent: Folder, run: _Run) -> None:
    """SOUL.md and USER.md: the lines that hold the text go, like FACT.md's."""
    for canonical in ("SOUL.md", "USER.md"):
        _scrub_file(agent, canonical, "profile", "", run)


def _facts(memory: Folder, run: _Run) -> None:
    # Written directly, not as an update: an update would keep the old text in history.
    _scrub_file(memory, "FACT.md", "facts", "memory/", run)


def _scrub_file(folder: Folder, canonical: str, kind: str, prefix: str, run: _Run) -> None:
    name = folder.lookup(canonical)
    if name is None:
        return
    content = (folder.read_bytes(name) or b"").decode("utf-8", "surrogatepass")
    kept, removed = _drop_lines(content, run.match)
    if removed and run.found(kind, prefix + name, removed):
        folder.write_atomic(name, kept.encode("utf-8", "surrogatepass"), run.recheck)


def _journal(memory: Folder, run: _Run) -> None:
    from ..journal import encode_line

    name = memory.lookup("JOURNAL.jsonl")
    if name is None:
        return
    data = memory.read_bytes(name) or b""
    out: list[bytes] = []
    count = 0
    for raw in data.splitlines(keepends=True):
        text = raw.decode("utf-8", "replace")
        try:
            entry = json.loads(text)
        except (ValueError, RecursionError):
            entry = None
        shown = json.dumps(entry, ensure_ascii=False) if isinstance(entry, dict) else text
        # The dump escapes quotes and backslashes: the entry's own strings are searched too.
        values = _strings(entry) if isinstance(entry, dict) else []
        match = run.match
        if not (match(shown) or match(text) or any(match(value) for value in values)):
            out.append(raw)
            continue
        count += 1
        ts = entry.get("ts") if isinstance(entry, dict) else None
        tombstone = {
            "ts": ts if isinstance(ts, str) else "",
            "tags": [TOMBSTONE_TAG],
            "text": f"[forgotten: {run.reason}]" if run.reason else "[forgotten]",
        }
        out.append(encode_line(tombstone))
    if count and run.found("journal", f"memory/{name}", count):
        memory.write_atomic(name, b"".join(out), run.recheck)


def _strings(value: Any) -> list[str]:
    """Every string (keys included) inside a decoded JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _history(memory: Folder, run: _Run) -> None:
    if memory.lookup(history.HISTORY_DIR) is None:
        return
    with memory.subfolder(history.HISTORY_DIR) as versions:
        for version in history.versions(versions):
            content = version.content.decode("utf-8", "surrogatepass")
            kept, removed = _drop_lines(content, run.match)
            if not removed or not run.found(
                "history", f"memory/{history.HISTORY_DIR}/{version.name}"
            ):
                continue
            stamp = version.name.split("-", 1)[0]
            if kept.strip():
                data = kept.encode("utf-8", "surrogatepass")
                name = f"{stamp}-{sha256_hex(data)[:12]}.md"
                if name != version.name:
                    versions.write_atomic(name, data, run.recheck)
            # The scrubbed copy is safe first; only then does the old version go.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(version.name, dir_fd=versions.fd)


def _sessions(memory: Folder, run: _Run) -> None:
    if memory.lookup(sessions.BLOBS_DIR) is None:
        return
    receipts = sessions._read_receipts(memory)
    # A stored prompt is scrubbed section by section, so each receipt's section sizes (which
    # `why` uses to find the sections) can follow the text.
    layouts = {str(r.get("prompt_sha256")): [int(x["chars"]) for x in r["sections"]]
               for r in receipts if isinstance(r.get("sections"), list)}
    renamed: dict[str, str] = {}
    new_layouts: dict[str, list[int]] = {}
    with memory.subfolder(sessions.BLOBS_DIR) as store:
        for name in sorted(store.names()):
            if not sessions.BLOB_NAME.match(name):
                continue
            content = (store.read_bytes(name) or b"").decode("utf-8", "surrogatepass")
            parts = _split(content, layouts.get(name[:-4]))
            scrubbed = [_drop_lines(part, run.match, placeholder="[forgotten]") for part in parts]
            if not any(removed for _kept, removed in scrubbed):
                continue
            if not run.found("sessions", f"memory/{sessions.BLOBS_DIR}/{name}"):
                continue
            new = "\n\n".join(kept for kept, _removed in scrubbed).encode("utf-8", "surrogatepass")
            digest = sha256_hex(new)
            store.write_atomic(f"{digest}.txt", new, run.recheck)
            renamed[name[:-4]] = digest
            new_layouts[name[:-4]] = [len(kept) for kept, _removed in scrubbed]
        if renamed:
            # Receipts point at the scrubbed texts and say so; then the old texts go.
            for receipt in receipts:
                _follow(receipt, renamed, new_layouts)
            lines = "".join(
                json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in receipts
            )
            memory.write_atomic(sessions.SESSIONS_LOG, lines.encode(), run.recheck)
            for old in renamed:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{old}.txt", dir_fd=store.fd)


def _split(text: str, layout: list[int] | None) -> list[str]:
    """A stored prompt cut into its sections (joined by blank lines); else the whole text."""
    if not layout or sum(layout) + 2 * (len(layout) - 1) != len(text):
        return [text]
    parts, offset = [], 0
    for chars in layout:
        parts.append(text[offset : offset + chars])
        offset += chars + 2
    return parts


def _follow(
    receipt: dict[str, Any], renamed: dict[str, str], layouts: dict[str, list[int]]
) -> None:
    """Point a receipt at scrubbed texts, with the new sizes, and mark it."""
    touched = False
    old = receipt.get("prompt_sha256")
    sections = [s for s in receipt.get("sections") or () if isinstance(s, dict)]
    if old in renamed:
        receipt["prompt_sha256"] = renamed[old]
        sizes = layouts.get(old, [])
        if len(sizes) == len(sections):
            for section, chars in zip(sections, sizes, strict=True):
                section["chars"], section["tokens"] = chars, (chars + 3) // 4
            receipt["chars"] = sum(sizes) + 2 * (len(sizes) - 1)
            receipt["tokens"] = (receipt["chars"] + 3) // 4
        touched = True
    for section in sections:
        if section.get("version") in renamed:
            section["version"] = renamed[section["version"]]
            touched = True
    if touched:
        receipt["forgotten"] = True


def _caches(mem: AgentMemory, run: _Run) -> None:
    for path in _cache_files(mem):
        if run.found("caches", str(path)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def _cache_files(mem: AgentMemory) -> list[Path]:
    # Every index registered in the agent folder, whatever cache folder it is in.
    return mem.index_files()


# -- verification ---------------------------------------------------------------------------------


def _scan(mem: AgentMemory, match: _Matcher) -> list[str]:
    """Every file under the agent folder (and its caches) still holding the text, and the
    fresh prompt (as ``"<prompt>"``) if it does."""
    remaining = []
    for dirpath, _dirnames, filenames in os.walk(mem.path, followlinks=False):
        for name in filenames:
            path = Path(dirpath) / name
            if name == RECEIPTS and path.parent.name == "memory":
                continue  # receipts hold hashes and counts only
            try:
                if os.path.islink(path) or not path.is_file():
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            if match.in_bytes(data):
                remaining.append(str(path.relative_to(mem.path)))
    for path in _cache_files(mem):
        with contextlib.suppress(OSError):
            if match.in_bytes(path.read_bytes()):
                remaining.append(str(path))
    from .prompt import PromptBuilder

    with contextlib.suppress(MemoryToolError):
        if match(PromptBuilder().build(mem).text):
            remaining.append("<prompt>")
    return remaining


def _drop_lines(content: str, match: _Matcher, placeholder: str | None = None) -> tuple[str, int]:
    """``content`` without the lines that match (or with ``placeholder`` in their place)."""
    lines = content.splitlines(keepends=True)
    kept, removed = [], 0
    for line in lines:
        if match(line):
            removed += 1
            if placeholder is not None:
                kept.append(placeholder + ("\n" if line.endswith("\n") else ""))
        else:
            kept.append(line)
    return "".join(kept), removed


def lint(mem: AgentMemory) -> list[dict[str, Any]]:
    """Credentials already stored under the agent folder: ``{"file", "line", "kind"}`` each.

    Never the secret itself; ``forget(mem, secrets=True)`` removes them.
    """
    findings = []
    for dirpath, dirnames, filenames in os.walk(mem.path, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            try:
                if os.path.islink(path) or not path.is_file():
                    continue
                text = path.read_bytes().decode("utf-8", "replace")
            except OSError:
                continue
            for number, line in enumerate(text.splitlines(), 1):
                candidates = [line]
                if line.startswith("{"):  # a journal line: its text is stored escaped
                    with contextlib.suppress(ValueError, RecursionError):
                        candidates.append(json.dumps(json.loads(line), ensure_ascii=False))
                kinds = {s.kind for candidate in candidates for s in credentials.find(candidate)}
                for kind in sorted(kinds):
                    relative = str(path.relative_to(mem.path))
                    findings.append({"file": relative, "line": number, "kind": kind})
    return findings
