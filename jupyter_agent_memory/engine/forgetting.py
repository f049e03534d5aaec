"""Forgetting that is verified: remove a text (a pattern, or every credential; compared under
:func:`.textnorm.normalize`) everywhere memory keeps it under one hold of the lock, each file
replaced atomically with the old bytes cut away; a fresh ``memory/.generation`` makes derived
copies stale. Then every file, the index caches and a fresh prompt are searched to verify. The
receipt holds an HMAC keyed with ``memory/.forget-key``, never the text or a plain hash.
"""

from __future__ import annotations

import contextlib
import hmac
import itertools
import json
import os
import re
import secrets as tokens
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MemoryToolError, engine_boundary
from ..folder import Folder, close_fd, read_all, retry_eintr, sha256_hex
from ..journal import encode_line
from . import history, sessions
from . import secrets as credentials
from .access import GENERATION, commit, folders, locked
from .store import FORGET_KEY, sweep
from .store import FORGET_RECEIPTS as RECEIPTS
from .textnorm import normalize

if TYPE_CHECKING:
    from .access import Locked
    from .store import AgentMemory

TOMBSTONE_TAG = "forgotten"
#: What a scrubbed string (an old reason, a stored prompt line) is replaced with.
PLACEHOLDER = "[forgotten]"
_KINDS = ("profile", "facts", "journal", "history", "sessions", "caches")
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class _Matcher:
    """Decides whether a piece of text holds what is to be forgotten."""

    def __init__(self, text: str | None, pattern: str | None, find_secrets: bool) -> None:
        if (text is not None) + (pattern is not None) + bool(find_secrets) != 1:
            raise MemoryToolError("Forget needs exactly one of: a text, a pattern, or secrets=True")
        self.text = text
        self.pattern = pattern
        self.needle: str | None = None
        self.regex: re.Pattern[str] | None = None
        if text is not None:
            if not isinstance(text, str) or not normalize(text).strip():
                raise MemoryToolError("The text to forget must be a non-empty string")
            if "\n" in text:
                raise MemoryToolError("Forget one line of text at a time (or give a pattern)")
            _require_sendable(text, "text")
            self.needle = normalize(text)
        if pattern is not None:
            try:
                self.regex = re.compile(pattern)
            except (re.error, TypeError) as exc:
                raise MemoryToolError(f"Invalid pattern: {exc}") from None
            _require_sendable(pattern, "pattern")
            if self.regex.search("") is not None:
                raise MemoryToolError(
                    f"The pattern {pattern!r} matches the empty string, so it would forget "
                    "every line: make it match what is to be forgotten"
                )
        self.describe = "secrets" if find_secrets else ("pattern" if pattern else "text")

    def __call__(self, value: str) -> bool:
        if self.needle is not None:
            return self.needle in normalize(value)
        # Patterns see the text as written and normalised without case folding (_credentials).
        if self.regex is not None:
            return self.regex.search(value) is not None or (
                self.regex.search(normalize(value, fold_case=False)) is not None
            )
        return bool(_credentials(value))

    def in_bytes(self, data: bytes) -> bool:
        """Whether raw file bytes hold the text in any form: raw, normalised, JSON-escaped."""
        text = data.decode("utf-8", "replace")
        if self(text):
            return True
        if self.text is not None:
            # JSON escapes of the text, as another tool or a cache may have stored it.
            escaped = {json.dumps(self.text, ensure_ascii=a)[1:-1] for a in (True, False)}
            normalized = normalize(text)
            if any(normalize(form) in normalized for form in escaped):
                return True
        # JSON lines store text escaped: read each one back and look at its strings.
        for line in text.splitlines():
            if line.lstrip().startswith("{"):
                with contextlib.suppress(ValueError, RecursionError):
                    if any(self(value) for value in _strings(json.loads(line))):
                        return True
        return False

    def digest(self, key: bytes) -> str:
        """The receipt's keyed hash of what was forgotten (see the module docstring)."""
        value = self.needle if self.needle is not None else self.pattern or ""
        material = f"{self.describe}\0{value}"
        return hmac.new(key, material.encode("utf-8", "surrogatepass"), "sha256").hexdigest()


@dataclass
class _Run:
    """One forget pass: what to look for, whether to write, and what was found where."""

    match: _Matcher
    dry_run: bool
    txn: Locked
    reason: str = ""
    changed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_KINDS, 0))
    places: list[str] = field(default_factory=list)

    def found(self, kind: str | None, place: str, count: int = 1) -> bool:
        """Count matches of ``kind`` (None: listed only) at ``place``; True to write them."""
        if kind is not None:
            self.changed[kind] += count
        self.places.append(place)
        return not self.dry_run


def _credentials(value: str) -> list[credentials.Secret]:
    """Credentials in ``value`` as written, else as normalised without case folding (which
    would change what formats recognise): a zero-width space inside a key cannot hide it."""
    return credentials.find(value) or credentials.find(normalize(value, fold_case=False))


def _require_sendable(value: str, field: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MemoryToolError(
            f"The {field} to forget is not valid Unicode text: lone surrogate "
            f"U+{ord(value[exc.start]):04X} at position {exc.start}"
        ) from None


def _check_reason(reason: Any, match: _Matcher) -> str:
    """The reason, when it may be stored: it must hold neither the text nor a credential."""
    if not isinstance(reason, str):
        raise MemoryToolError("The reason must be a string")
    if not reason:
        return ""
    try:
        reason.encode("utf-8")
    except UnicodeEncodeError:
        raise MemoryToolError("The reason is not valid Unicode text") from None
    if match(reason):
        raise MemoryToolError("The reason must not contain what is being forgotten")
    if found := _credentials(reason):
        raise MemoryToolError(
            f"The reason must not contain a credential (it holds what looks like "
            f"{found[0].kind}): it is stored in the receipt"
        )
    return reason


@engine_boundary
def forget(
    mem: AgentMemory, text: str | None = None, *, pattern: str | None = None,
    secrets: bool = False, dry_run: bool = False, reason: str = "",
) -> dict[str, Any]:
    """Remove ``text`` (or ``pattern``'s matches, or every credential) from the profile files
    and FACT.md (whole lines), the journal (tombstones), history, session texts, receipts and
    the index; then verify. Returns the receipt (docs/formats.md): ``remaining`` names each
    place still holding it or unreadable, ``verified`` if it is empty; a dry run writes nothing."""
    match = _Matcher(text, pattern, secrets)
    reason = _check_reason(reason, match)
    with folders(mem) as (_agent, memory):
        if memory is None:
            raise MemoryToolError(f"{mem.path} has no memory/ folder")
    with locked(mem) as txn:
        run = _Run(match, dry_run, txn, reason)
        if not dry_run:
            sweep(txn.agent, txn.memory)  # a killed forget's temp files hold the text too
        for scrub in (_profile, _journal, _history, _sessions, _receipts, _caches):
            scrub(run)
        receipt: dict[str, Any] = {
            "ts": sessions.timestamp(mem),
            "forgotten_sha256": _digest(match, txn, create=not dry_run),
            "what": match.describe,
            "reason": reason,
            "dry_run": dry_run,
            "changed": run.changed,
            "places": run.places,
            "verified": False,
            "remaining": [],
        }
        if dry_run:
            return receipt
        # Everything derived before this point is stale, in every process and cache folder.
        commit(txn.memory, GENERATION, (tokens.token_hex(16) + "\n").encode(), txn.recheck)
        remaining = _scan(mem, match)
        receipt.update(verified=not remaining, remaining=remaining)
        txn.memory.append_line(RECEIPTS, sessions.encode_receipts([receipt]))
    # Held descriptors are reopened on next use; closed after the lock (the innermost one).
    mem.close()
    return receipt


def _digest(match: _Matcher, txn: Locked, create: bool) -> str:
    """The receipt's keyed hash (a dry run before the first forget uses a key not kept)."""
    memory = txn.memory
    raw = memory.read_bytes(memory.lookup(FORGET_KEY)) or b""
    with contextlib.suppress(ValueError):
        key = bytes.fromhex(raw.decode("ascii", "replace").strip())
        if len(key) == 32:
            return match.digest(key)
    key = tokens.token_bytes(32)
    if create:
        commit(memory, FORGET_KEY, (key.hex() + "\n").encode(), txn.recheck)
    return match.digest(key)


def _profile(run: _Run) -> None:
    """SOUL.md, USER.md and FACT.md: the lines that hold the text go."""
    for canonical in ("SOUL.md", "USER.md"):
        _scrub_file(run.txn.agent, canonical, "profile", "", run)
    # Written directly, not as an update: an update would keep the old text in history.
    _scrub_file(run.txn.memory, "FACT.md", "facts", "memory/", run)


def _scrub_file(folder: Folder, canonical: str, kind: str, prefix: str, run: _Run) -> None:
    name = folder.lookup(canonical)
    if name is None:
        return
    content = (folder.read_bytes(name) or b"").decode("utf-8", "surrogatepass")
    kept, removed = _drop_lines(content, run.match)
    if removed and run.found(kind, prefix + name, removed):
        commit(folder, name, kept.encode("utf-8", "surrogatepass"), run.txn.recheck, scrub=True)


def _journal(run: _Run) -> None:
    memory = run.txn.memory
    name = memory.lookup("JOURNAL.jsonl")
    if name is None:
        return
    out: list[bytes] = []
    count = 0
    for raw, text, entry in _json_lines(memory.read_bytes(name) or b""):
        # The line as written, and every string (keys too) as it decodes: no escape hides it.
        values = _strings(entry) if isinstance(entry, dict) else []
        if not (run.match(text) or any(run.match(value) for value in values)):
            out.append(raw)
            continue
        count += 1
        ts = entry.get("ts") if isinstance(entry, dict) else None
        text = f"[forgotten: {run.reason}]" if run.reason else PLACEHOLDER
        tombstone = {"ts": ts if isinstance(ts, str) else "", "tags": [TOMBSTONE_TAG], "text": text}
        out.append(encode_line(tombstone))
    if count and run.found("journal", f"memory/{name}", count):
        commit(memory, name, b"".join(out), run.txn.recheck, scrub=True)


def _json_lines(data: bytes) -> Iterator[tuple[bytes, str, Any]]:
    """Each line of a JSON-lines file: its bytes, its text, and its value (None: not JSON)."""
    for raw in data.splitlines(keepends=True):
        text = raw.decode("utf-8", "replace")
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            value = None
        yield raw, text, value


def _strings(value: Any) -> list[str]:
    """Every string (keys included) inside a decoded JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _remove_scrubbed(folder: Folder, name: str) -> bool:
    """Remove ``name`` and cut its bytes away, so no descriptor held on it reads them."""
    try:
        fd = folder.open_file(name, os.O_WRONLY)
    except FileNotFoundError:
        return False
    try:
        folder.unlink(name)
        os.ftruncate(fd, 0)
    finally:
        close_fd(fd)
    return True


def _history(run: _Run) -> None:
    memory = run.txn.memory
    if memory.lookup(history.HISTORY_DIR) is None:
        return
    removed = False
    with memory.subfolder(history.HISTORY_DIR) as versions:
        for version in history.versions(versions):
            kept, dropped = _drop_lines(version.content.decode("utf-8", "surrogatepass"), run.match)
            place = f"memory/{history.HISTORY_DIR}/{version.name}"
            if not dropped or not run.found("history", place):
                continue
            stamp = version.name.split("-", 1)[0]
            if kept.strip():
                data = kept.encode("utf-8", "surrogatepass")
                name = f"{stamp}-{sha256_hex(data)[:12]}.md"
                if name != version.name:
                    versions.write_atomic(name, data, run.txn.recheck)
            # The scrubbed copy is safe first; only then does the old version go.
            removed = _remove_scrubbed(versions, version.name) or removed
        if removed:
            versions.fsync()


def _sessions(run: _Run) -> None:
    memory = run.txn.memory
    if memory.lookup(sessions.BLOBS_DIR) is None:
        return
    receipts = sessions.read_receipts(memory)
    # Scrubbed section by section, so the receipts' section sizes (for `why`) can follow.
    layouts = {str(r.get("prompt_sha256")): [int(x["chars"]) for x in r["sections"]]
               for r in receipts if isinstance(r.get("sections"), list)}
    renamed: dict[str, str] = {}
    new_layouts: dict[str, list[int]] = {}
    with memory.subfolder(sessions.BLOBS_DIR) as store:
        for name in sorted(n for n in store.names() if sessions.BLOB_NAME.match(n)):
            content = (store.read_bytes(name) or b"").decode("utf-8", "surrogatepass")
            parts = _split(content, layouts.get(name[:-4]))
            scrubbed = [_drop_lines(part, run.match, placeholder=PLACEHOLDER) for part in parts]
            place = f"memory/{sessions.BLOBS_DIR}/{name}"
            if not any(removed for _, removed in scrubbed) or not run.found("sessions", place):
                continue
            new = "\n\n".join(kept for kept, _removed in scrubbed).encode("utf-8", "surrogatepass")
            digest = sha256_hex(new)
            store.write_atomic(f"{digest}.txt", new, run.txn.recheck)
            renamed[name[:-4]] = digest
            new_layouts[name[:-4]] = [len(kept) for kept, _removed in scrubbed]
        if renamed:
            # Receipts point at the scrubbed texts and say so; then the old texts go.
            for receipt in receipts:
                _follow(receipt, renamed, new_layouts)
            log = memory.lookup(sessions.SESSIONS_LOG) or sessions.SESSIONS_LOG
            commit(memory, log, sessions.encode_receipts(receipts), run.txn.recheck, scrub=True)
            for old in renamed:
                _remove_scrubbed(store, f"{old}.txt")
            store.fsync()


def _receipts(run: _Run) -> None:
    """Earlier forget receipts: any string in them holding the text (a reason) is replaced."""
    memory = run.txn.memory
    name = memory.lookup(RECEIPTS)
    if name is None:
        return
    out: list[bytes] = []
    changed = False
    for raw, text, receipt in _json_lines(memory.read_bytes(name) or b""):
        if isinstance(receipt, dict):
            scrubbed = _scrub_strings(receipt, run.match)
            if scrubbed != receipt:
                changed = True
                raw = sessions.encode_receipts([scrubbed])
        elif run.match(text):
            changed = True  # a torn line holding the text: dropped
            continue
        out.append(raw)
    if changed and run.found(None, f"memory/{name}"):
        commit(memory, name, b"".join(out), run.txn.recheck, scrub=True)


def _scrub_strings(value: Any, match: _Matcher) -> Any:
    """``value`` with every string that holds the text replaced by the placeholder."""
    if isinstance(value, str):
        return PLACEHOLDER if match(value) else value
    if isinstance(value, dict):
        return {k: _scrub_strings(v, match) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_strings(item, match) for item in value]
    return value


def _split(text: str, layout: list[int] | None) -> list[str]:
    """A stored prompt cut into its sections (joined by blank lines); else the whole text."""
    if not layout or sum(layout) + 2 * (len(layout) - 1) != len(text):
        return [text]
    starts = itertools.accumulate((chars + 2 for chars in layout), initial=0)
    return [text[start : start + chars] for start, chars in zip(starts, layout, strict=False)]


def _follow(receipt: dict[str, Any], renamed: dict[str, str], sizes: dict[str, list[int]]) -> None:
    """Point a receipt at scrubbed texts, with the new sizes, and mark it."""
    touched = False
    old = receipt.get("prompt_sha256")
    sections = [s for s in receipt.get("sections") or () if isinstance(s, dict)]
    if old in renamed:
        receipt["prompt_sha256"] = renamed[old]
        new = sizes.get(old, [])
        if len(new) == len(sections):
            for section, chars in zip(sections, new, strict=True):
                section["chars"], section["tokens"] = chars, (chars + 3) // 4
            receipt["chars"] = sum(new) + 2 * (len(new) - 1)
            receipt["tokens"] = (receipt["chars"] + 3) // 4
        touched = True
    for section in sections:
        if section.get("version") in renamed:
            section["version"] = renamed[section["version"]]
            touched = True
    if touched:
        receipt["forgotten"] = True


def _caches(run: _Run) -> None:
    """Every index registered in the agent folder, whatever cache folder it is in."""
    for path in run.txn.mem.index_files():
        if run.found("caches", str(path)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def _walk(root: Path) -> Iterator[tuple[Path, bytes | None, OSError | None]]:
    """Every entry under ``root`` (depth first, no link followed): ``(path, bytes of a regular
    file or None, the error that stopped reading it)``: "not read" is never "clean"."""
    try:
        names = sorted(retry_eintr(os.listdir, root))
    except OSError as exc:
        yield root, None, exc
        return
    for name in names:
        path = root / name
        try:
            st = retry_eintr(os.lstat, path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            yield path, None, exc
            continue
        if stat.S_ISDIR(st.st_mode):
            yield from _walk(path)
        elif stat.S_ISREG(st.st_mode):
            yield from _read_file(path)
        # A link points outside (nothing of ours behind it); a pipe or device holds no bytes.


def _read_file(path: Path) -> Iterator[tuple[Path, bytes | None, OSError | None]]:
    """``(path, its bytes, None)``, or ``(path, None, the error)``; nothing when it is gone."""
    try:
        fd = os.open(path, _READ_FLAGS)
        try:
            yield path, read_all(fd), None
        finally:
            close_fd(fd)
    except FileNotFoundError:
        return
    except OSError as exc:
        yield path, None, exc


def _scan(mem: AgentMemory, match: _Matcher) -> list[str]:
    """Places still holding the text (or unreadable): files, index caches, ``"<prompt>"``."""
    from .prompt import PromptBuilder

    remaining = []
    caches = (found for path in mem.index_files() for found in _read_file(path))
    for path, data, error in itertools.chain(_walk(mem.path), caches):
        place = str(path.relative_to(mem.path)) if path.is_relative_to(mem.path) else str(path)
        if error is not None:
            remaining.append(f"{place} (unreadable: {error.strerror or error})")
        elif data is not None and match.in_bytes(data):
            remaining.append(place)
    try:
        prompt = PromptBuilder().build(mem)
    except MemoryToolError as exc:
        remaining.append(f"<prompt> (could not be built: {exc.message})")
    else:
        if match(prompt.text):
            remaining.append("<prompt>")
    return remaining


def _drop_lines(content: str, match: _Matcher, placeholder: str | None = None) -> tuple[str, int]:
    """``content`` without the lines that match (or with ``placeholder`` in their place)."""
    kept, removed = [], 0
    for line in content.splitlines(keepends=True):
        if match(line):
            removed += 1
            if placeholder is not None:
                kept.append(placeholder + ("\n" if line.endswith("\n") else ""))
        else:
            kept.append(line)
    return "".join(kept), removed


def lint(mem: AgentMemory) -> list[dict[str, Any]]:
    """Credentials stored under the agent folder, ``{"file", "line", "kind"}`` each, never the
    secret (an unreadable file: line 0, kind ``"unreadable: …"``)."""
    findings = []
    for path, data, error in _walk(mem.path):
        relative = str(path.relative_to(mem.path)) if path != mem.path else "."
        if error is not None:
            kind = f"unreadable: {error.strerror or error}"
            findings.append({"file": relative, "line": 0, "kind": kind})
            continue
        if data is None:
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            candidates = [line, normalize(line, fold_case=False)]
            if line.startswith("{"):  # a journal line: its text is stored escaped
                with contextlib.suppress(ValueError, RecursionError):
                    candidates += _strings(json.loads(line))
            kinds = {s.kind for candidate in candidates for s in credentials.find(candidate)}
            findings += [{"file": relative, "line": number, "kind": kind} for kind in sorted(kinds)]
    return findings
