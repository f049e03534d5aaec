"""What the storage harnesses (crash states, injected I/O errors, SIGKILL soak) check on an
agent folder after whatever happened to it. Each function returns violations as sentences;
an empty list means the folder keeps every promise checked.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.engine.textnorm import normalize


def files(folder: Path) -> dict[str, bytes]:
    """Every regular file under ``folder`` (links not followed), by relative path."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            found[str(path.relative_to(folder))] = path.read_bytes()
    return found


def holding(folder: Path, text: str) -> list[str]:
    """Files under ``folder`` holding ``text`` raw, normalised or JSON-escaped."""
    needle = normalize(text)
    escaped = json.dumps(text)[1:-1].encode()
    found = []
    for name, data in files(folder).items():
        decoded = data.decode("utf-8", "replace")
        if text.encode() in data or escaped in data or needle in normalize(decoded):
            found.append(name)
    return found


def journal_texts(folder: Path) -> list[str]:
    """The ``text`` of every well-formed journal line, oldest first."""
    path = folder / "memory" / "JOURNAL.jsonl"
    if not path.exists():
        return []
    texts = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("text"), str):
            texts.append(entry["text"])
    return texts


def well_formed(folder: Path) -> list[str]:
    """Violations of the folder's own rules, after opening it the way any process would."""
    problems: list[str] = []
    if not folder.exists():
        return problems
    try:
        mem = AgentMemory.open(folder, lock_timeout=5)  # also sweeps crash leftovers
    except Exception as exc:  # noqa: BLE001 - any failure to open is the violation
        return [f"the agent does not open: {exc!r}"]
    try:
        mem.search("")
        receipts = mem.sessions()
    except Exception as exc:  # noqa: BLE001
        return [f"the agent does not read: {exc!r}"]
    for receipt in receipts:
        try:
            mem.session_prompt(receipt["session_id"])
        except Exception as exc:  # noqa: BLE001
            problems.append(f"session {receipt['session_id']}: {exc}")
    memory = folder / "memory"
    for name in ("JOURNAL.jsonl", "SESSIONS.jsonl", "FORGET.jsonl"):
        path = memory / name
        if not path.exists():
            continue
        lines = path.read_bytes().split(b"\n")
        for number, line in enumerate(lines[:-1], 1):  # the last piece may be torn
            if line.strip() and not _parses(line):
                problems.append(f"{name} line {number} is glued or torn: {line[:60]!r}")
    leftovers = [p for p in files(folder) if p.endswith(".tmp")]
    if leftovers:
        problems.append(f"temp files survive opening: {leftovers}")
    mem.close()
    return problems


def _parses(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def exactly_once(folder: Path, acknowledged: list[str]) -> list[str]:
    """Each acknowledged journal text stored exactly once."""
    counts: dict[str, int] = {}
    for text in journal_texts(folder):
        counts[text] = counts.get(text, 0) + 1
    return [
        f"acknowledged entry {text!r} stored {counts.get(text, 0)} times"
        for text in acknowledged
        if counts.get(text, 0) != 1
    ]


def forgotten_nowhere(folder: Path, texts: list[str], caches: list[Path] = ()) -> list[str]:
    """Each forgotten text absent from every byte of the folder and of the cache folders."""
    problems = []
    for text in texts:
        places = holding(folder, text)
        for cache in caches:
            if cache.exists():
                places += [f"{cache}/{p}" for p in holding(cache, text)]
        if places:
            problems.append(f"forgotten {text!r} is back in {places}")
    return problems


def environment(root: Path, cache: Path) -> dict[str, str]:
    """A child process's environment: this agents root and cache folder, nothing inherited
    that points at the caller's own."""
    env = dict(os.environ)
    env["JUPYTER_AGENT_MEMORY_ROOT"] = str(root)
    env["JUPYTER_AGENT_MEMORY_CACHE"] = str(cache)
    env["XDG_CACHE_HOME"] = str(cache)
    return env
