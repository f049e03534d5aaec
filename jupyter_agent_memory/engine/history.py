"""FACT.md history: earlier versions in ``memory/.history/<utc time>-<sha12>.md`` (the store
holds the lock around every call)."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import NamedTuple

from ..errors import MemoryToolError, VersionNotFoundError
from ..folder import Folder, sha256_hex

HISTORY_DIR = ".history"
DEFAULT_HISTORY_LIMIT = 100

VERSION_NAME = re.compile(r"^(\d{8}T\d{6}\.\d{6}Z)-([0-9a-f]{12})(?:-\d+)?\.md$")
_STAMP = "%Y%m%dT%H%M%S.%fZ"
_HEX = re.compile(r"^[0-9a-fA-F]+$")


class Version(NamedTuple):
    """One stored FACT.md version: file name, ISO time it was replaced, and its bytes."""

    name: str
    ts: str
    content: bytes


def keep(history: Folder, content: bytes, now: datetime, recheck: Callable[[], None]) -> str | None:
    """Store ``content`` as a version; its name, or None when the newest version holds it."""
    short = sha256_hex(content)[:12]
    names = set(history.names())
    newest = max((n for n in names if VERSION_NAME.match(n)), default="")
    match = VERSION_NAME.match(newest)
    if match and match.group(2) == short and history.read_bytes(newest) == content:
        return None
    base = f"{now.astimezone(timezone.utc).strftime(_STAMP)}-{short}"
    name, counter = f"{base}.md", 1
    while name in names:
        name, counter = f"{base}-{counter}.md", counter + 1
    history.write_atomic(name, content, recheck)
    return name


def prune(history: Folder, limit: int) -> None:
    """Remove the oldest versions beyond ``limit``."""
    versions = sorted(n for n in history.names() if VERSION_NAME.match(n))
    for old in versions[: max(0, len(versions) - limit)]:
        history.unlink(old)


def discard(history: Folder, name: str | None) -> None:
    """Remove a version just kept, when the update it belonged to failed."""
    if name is not None:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=history.fd)


def versions(history: Folder) -> list[Version]:
    """Every stored version, newest first (files that are not versions are ignored)."""
    found = []
    for name in sorted(history.names(), reverse=True):
        match = VERSION_NAME.match(name)
        content = history.read_bytes(name) if match else None
        if match and content is not None:
            found.append(Version(name, _iso(match.group(1)), content))
    return found


def find(stored: list[Version], sha: str) -> tuple[str, bytes]:
    """``(full sha256, content)`` of the one version whose hash starts with ``sha`` (7+ hex
    digits); -32602 when malformed or ambiguous, :class:`VersionNotFoundError` when unknown."""
    if not isinstance(sha, str) or len(sha) < 7 or not _HEX.fullmatch(sha):
        raise MemoryToolError(
            f'Invalid version "{sha}": give a sha256 or a prefix of at least 7 hex digits'
        )
    prefix = sha.lower()
    digests = ((sha256_hex(v.content), v.content) for v in stored)
    matches = {digest: content for digest, content in digests if digest.startswith(prefix)}
    if not matches:
        raise VersionNotFoundError(f'No FACT.md version matches "{sha}"')
    if len(matches) > 1:
        raise MemoryToolError(
            f'Version "{sha}" is ambiguous: it matches {len(matches)} versions; give more digits'
        )
    return next(iter(matches.items()))


def _iso(stamp: str) -> str:
    parsed = datetime.strptime(stamp, _STAMP).replace(tzinfo=timezone.utc)
    return parsed.isoformat(timespec="microseconds").replace("+00:00", "Z")
