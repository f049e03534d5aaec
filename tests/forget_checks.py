"""What the forget tests (command line and REST) check on disk, and the agent they start from.

A copy of a text counts wherever it can hide: raw, case-folded, or JSON-escaped with and
without ``ensure_ascii``, in any file of the agent folder.
"""

from __future__ import annotations

import json
from pathlib import Path

from jupyter_agent_memory import AgentMemory, PromptBuilder

TEXT = 'Zoë\'s "door" code 4417'
TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
SESSION_ID = "abcdef0000000001"


def forms(text: str) -> list[bytes]:
    """The byte forms a copy of ``text`` can take in a file."""
    escaped = {json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
    return sorted({text.encode(), *(e.encode() for e in escaped)})


def copies(folder: Path, text: str) -> list[str]:
    """Files under ``folder`` (relative paths) holding ``text`` in any of its :func:`forms`."""
    wanted = forms(text)
    folded_forms = [form.decode().casefold() for form in wanted]
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        data = path.read_bytes()
        folded = data.decode("utf-8", "replace").casefold()
        if any(form in data for form in wanted) or any(form in folded for form in folded_forms):
            found.append(str(path.relative_to(folder)))
    return found


def stored(mem: AgentMemory) -> dict[str, bytes]:
    """Bytes of every stored place forgetting may change, by path."""
    memory = mem.path / "memory"
    paths = [memory / "FACT.md", memory / "JOURNAL.jsonl", memory / "SESSIONS.jsonl"]
    for folder in (memory / ".history", memory / ".sessions"):
        paths += sorted(folder.rglob("*")) if folder.exists() else []
    return {str(p): p.read_bytes() for p in paths if p.is_file()}


def holding_text(mem: AgentMemory) -> AgentMemory:
    """``mem`` with TEXT in FACT.md, its history, the journal and a recorded session."""
    mem.update_facts(f"# Facts\n\n- {TEXT.upper()} is written on the fridge.\n- Keep this.\n")
    mem.update_facts(f"# Facts\n\n- {TEXT} opens the side door.\n- Keep this.\n")
    mem.append(f"Bea asked for {TEXT}", tags=["home"])
    mem.append("Unrelated entry about lunch", tags=["food"])
    PromptBuilder().start_session(mem, session_id=SESSION_ID)
    assert copies(mem.path, TEXT), "the agent must really hold the text"
    return mem
