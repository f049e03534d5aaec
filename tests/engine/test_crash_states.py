"""Crash states: record the file-system calls of provisioning, updates, appends, session starts
with pruning, a restore and a forget with ``strace``, replay every prefix of them onto an empty
copy, and check the agent folder each crash could leave.

For every prefix three states are checked, the ones ext4 with ``data=ordered`` allows (and a
file system that persists directory entries on its own):

- ``all``: every call of the prefix reached the disk;
- ``unsynced data lost``: file contents are what the last ``fsync`` of each file made durable
  (a file never flushed is empty), directory entries as the calls left them;
- ``unsynced entries lost``: in each folder, only the entry changes (create, rename, unlink,
  mkdir) made before that folder's last ``fsync`` survive; file contents as written.

In each state the folder must open and read, every receipt must find its prompt, no line may
be glued to another, every acknowledged operation must have its effect (an operation is
acknowledged when the recorded program printed its ``ACK`` line, a ``write`` to fd 1 in the
trace), FACT.md must hold what the last acknowledged operation or the one in flight left, and
once the forget is acknowledged the forgotten text must be nowhere.
"""

from __future__ import annotations

import codecs
import json
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from harness_checks import exactly_once, forgotten_nowhere, well_formed

from jupyter_agent_memory import AgentMemory

SECRET = "door code 4417"
SOUL = "# Soul\n\nFrom the template.\n"
FACTS = {
    "U1": f"- {SECRET}\n- keep\n",
    "U2": "- keep\n- more\n",
    "R": f"- {SECRET}\n- keep\n",
    "F": "- keep\n",
}
PROGRAM = textwrap.dedent(
    """
    import hashlib, os, sys
    from jupyter_agent_memory import AgentMemory, PromptBuilder, forget
    from jupyter_agent_memory.engine.templates import provision
    folder, template, workspace = sys.argv[1:4]
    facts = {facts!r}
    def ack(*words):
        os.write(1, (" ".join(words) + "\\n").encode())
    mem = AgentMemory.open(folder, keep_sessions=2)
    provision(template, mem); ack("ACK", "P")
    mem.update_facts(facts["U1"]); ack("ACK", "U1")
    mem.update_facts(facts["U2"]); ack("ACK", "U2")
    mem.append("entry one {secret}"); ack("ACK", "A1")
    mem.append("entry two"); ack("ACK", "A2")
    for n in range(3):
        started = PromptBuilder().start_session(mem, workspace)
        ack("ACK", "S", started.receipt["session_id"])
    mem.restore(hashlib.sha256(facts["R"].encode()).hexdigest()); ack("ACK", "R")
    forget(mem, "{secret}"); ack("ACK", "F")
    mem.append("entry three"); ack("ACK", "A3")
    """
).format(facts=FACTS, secret=SECRET)
SYSCALLS = (
    "openat,open,creat,write,pwrite64,ftruncate,truncate,rename,renameat,renameat2,"
    "unlink,unlinkat,mkdir,mkdirat,rmdir,fsync,fdatasync,dup,dup2,dup3,fcntl"
)
_LINE = re.compile(r"^\d+\s+(\w+)\((.*)\)\s+=\s+(-?\d+)(?:<([^>]*)>)?")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_FD = re.compile(r"(?:^|, )(-?\d+|AT_FDCWD)<([^>]*)>")


def _decode(escaped: str) -> str:
    return codecs.escape_decode(escaped.encode())[0].decode("utf-8", "surrogateescape")


@dataclass
class Event:
    """One replayable call: a data change of an inode, an entry change, a flush, an ack."""

    kind: str  # "data", "entry", "sync", "ack"
    inode: int = -1
    offset: int = -1  # -1: append at the end
    data: bytes = b""
    truncate: int = -1
    op: str = ""  # entry: "create", "rename", "unlink", "mkdir", "rmdir"
    path: str = ""
    target: str = ""
    label: tuple[str, ...] = ()


@dataclass
class Recording:
    events: list[Event] = field(default_factory=list)


def record(tmp: Path) -> tuple[Recording, Path, Path]:
    root = tmp / "agents"
    root.mkdir()
    folder = root / "agent"
    template = tmp / "template"
    (template / "memory").mkdir(parents=True)
    (template / "agent.json").write_text(json.dumps({"name": "T"}))
    (template / "SOUL.md").write_text(SOUL)
    (template / "memory" / "notes.md").write_text("notes\n")
    workspace = tmp / "workspace"
    workspace.mkdir()
    trace = tmp / "trace"
    subprocess.run(
        ["strace", "-f", "-qq", "-y", "-xx", "-s", "4194304", "-e", f"trace={SYSCALLS}",
         "-o", str(trace), sys.executable, "-c", PROGRAM, str(folder), str(template),
         str(workspace)],
        check=True, capture_output=True, timeout=300,
    )
    return parse(trace.read_text(), str(root)), root, folder


def parse(text: str, root: str) -> Recording:
    """The events of the trace that touch ``root`` (and the program's ack lines)."""
    recording = Recording()
    events = recording.events
    names: dict[str, int] = {}  # path -> inode
    fds: dict[int, int] = {}
    fds_paths: dict[int, str] = {}
    next_inode = [0]

    def inode_of(path: str, create: bool) -> int:
        if path not in names and create:
            next_inode[0] += 1
            names[path] = next_inode[0]
            events.append(Event("entry", op="create", path=path, inode=next_inode[0]))
        return names.get(path, -1)

    def inside(path: str) -> bool:
        return path == root or path.startswith(root + "/")

    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None or int(match.group(3)) < 0:
            continue
        call, args, ret = match.group(1), match.group(2), int(match.group(3))
        strings = [_decode(s) for s in _STRING.findall(args)]
        dirfds = [(_decode(p)) for _n, p in _FD.findall(args)]
        first_fd = _FD.search(args)
        fd = int(first_fd.group(1)) if first_fd and first_fd.group(1) != "AT_FDCWD" else -1

        def resolved(index: int, name: str, dirfds: list[str] = dirfds) -> str:
            if name.startswith("/"):
                return name
            return f"{dirfds[index]}/{name}" if index < len(dirfds) else name

        if call in ("openat", "open", "creat"):
            path = _decode(match.group(4) or "")
            if not inside(path):
                continue
            if "O_DIRECTORY" in args:
                fds[ret] = -2  # a folder: only its flushes matter
                fds_paths[ret] = path
                continue
            created = "O_CREAT" in args or call == "creat"
            inode = inode_of(path, created)
            fds[ret] = inode
            fds_paths[ret] = path
            if "O_TRUNC" in args:
                events.append(Event("data", inode=inode, truncate=0))
        elif call in ("dup", "dup2", "dup3") or (call == "fcntl" and "F_DUPFD" in args):
            if fd in fds:
                fds[ret] = fds[fd]
                fds_paths[ret] = fds_paths[fd]
        elif call in ("write", "pwrite64"):
            if fd == 1 and strings and strings[0].startswith("ACK"):
                events.append(Event("ack", label=tuple(strings[0].split())))
                continue
            if fds.get(fd, -1) < 0:
                continue
            data = strings[0].encode("utf-8", "surrogateescape")[:ret]
            offset = int(args.rsplit(",", 1)[1]) if call == "pwrite64" else -1
            events.append(Event("data", inode=fds[fd], offset=offset, data=data))
        elif call == "ftruncate":
            if fds.get(fd, -1) >= 0:
                events.append(Event("data", inode=fds[fd], truncate=int(args.rsplit(",", 1)[1])))
        elif call in ("fsync", "fdatasync"):
            if fd in fds:
                events.append(Event("sync", inode=fds[fd], path=fds_paths[fd]))
        elif call in ("rename", "renameat", "renameat2"):
            old = resolved(0, strings[0])
            new = resolved(1 if call != "rename" else 0, strings[1])
            if inside(old):
                if old in names:
                    names[new] = names.pop(old)
                events.append(Event("entry", op="rename", path=old, target=new))
        elif call in ("unlink", "unlinkat", "rmdir"):
            path = resolved(0, strings[0])
            if not inside(path):
                continue
            directory = call == "rmdir" or "AT_REMOVEDIR" in args
            names.pop(path, None)
            events.append(Event("entry", op="rmdir" if directory else "unlink", path=path))
        elif call in ("mkdir", "mkdirat"):
            path = resolved(0, strings[0])
            if inside(path):
                events.append(Event("entry", op="mkdir", path=path))
    return recording


def state(events: list[Event], variant: str) -> tuple[dict[str, bytes], set[str]]:
    """Files (path -> bytes) and folders a crash after ``events`` leaves, in ``variant``."""
    content: dict[int, bytearray] = {}
    synced: dict[int, bytes] = {}
    last_dir_sync: dict[str, int] = {}
    for index, event in enumerate(events):
        if event.kind == "sync" and event.inode == -2:
            last_dir_sync[event.path] = index
    files: dict[str, int] = {}
    folders: set[str] = set()
    for index, event in enumerate(events):
        if event.kind == "data":
            buf = content.setdefault(event.inode, bytearray())
            if event.truncate >= 0:
                del buf[event.truncate :]
            elif event.offset >= 0:
                buf[event.offset : event.offset + len(event.data)] = event.data
            else:
                buf += event.data
        elif event.kind == "sync" and event.inode >= 0:
            synced[event.inode] = bytes(content.get(event.inode, b""))
        elif event.kind == "entry":
            parent = str(Path(event.path).parent)
            if variant == "unsynced entries lost" and last_dir_sync.get(parent, -1) < index:
                continue
            if event.op == "create":
                files[event.path] = event.inode
                content.setdefault(event.inode, bytearray())
            elif event.op == "rename" and event.path in files:
                files[event.target] = files.pop(event.path)
            elif event.op == "unlink":
                files.pop(event.path, None)
            elif event.op == "mkdir":
                folders.add(event.path)
            elif event.op == "rmdir":
                folders.discard(event.path)
    if variant == "unsynced data lost":
        return {p: synced.get(i, b"") for p, i in files.items()}, folders
    return {p: bytes(content.get(i, b"")) for p, i in files.items()}, folders


def materialise(files: dict[str, bytes], folders: set[str], root: str, into: Path) -> Path:
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    for folder in sorted(folders):
        (into / Path(folder).relative_to(root)).mkdir(parents=True, exist_ok=True)
    for path, data in files.items():
        target = into / Path(path).relative_to(root)
        if target.parent.is_dir():
            target.write_bytes(data)
            target.chmod(0o600)
    return into


def check(folder: Path, acked: list[tuple[str, ...]], next_op: str | None) -> list[str]:
    if not folder.exists():
        return [f"acknowledged {acked} but the agent folder is gone"] if acked else []
    done = {label[1] for label in acked}
    # A provisioning cut short leaves a temp copy of a template file (template text, nothing
    # of the user's) that only the next provisioning, which knows the name, removes.
    problems = [
        p for p in well_formed(folder)
        if not (next_op == "P" and p.startswith("temp files survive") and ".notes.md." in p)
    ]
    if "P" in done and (folder / "SOUL.md").read_text(errors="replace") != SOUL:
        problems.append("provisioned SOUL.md is not the template's")
    appended = [t for key, t in (("A2", "entry two"), ("A3", "entry three")) if key in done]
    problems += exactly_once(folder, appended)
    if "F" in done:
        problems += forgotten_nowhere(folder, [SECRET])
    last = next((label[1] for label in reversed(acked) if label[1] in FACTS), None)
    allowed = {FACTS[last] if last else ""}
    if next_op in FACTS:
        allowed.add(FACTS[next_op])
    fact = folder / "memory" / "FACT.md"
    got = fact.read_text(errors="replace") if fact.exists() else ""
    if got not in allowed:
        problems.append(f"FACT.md is {got!r}, expected one of {sorted(allowed)}")
    sessions = [label[2] for label in acked if label[1] == "S"]
    recorded = {r["session_id"] for r in AgentMemory.open(folder).sessions()}
    if sessions and sessions[-1] not in recorded:
        problems.append(f"acknowledged session {sessions[-1]} is not on record")
    return problems


ORDER = ["P", "U1", "U2", "A1", "A2", "S", "S", "S", "R", "F", "A3"]


def replay(tmp_path: Path, stride: int) -> tuple[int, list[str]]:
    recording, root, _folder = record(tmp_path)
    events = recording.events
    assert sum(e.kind == "ack" for e in events) == len(ORDER), "the trace lacks ack lines"
    states = 0
    violations: list[str] = []
    cuts = sorted(set(range(0, len(events) + 1, stride)) | {len(events)})
    for cut in cuts:
        prefix = events[:cut]
        acked = [e.label for e in prefix if e.kind == "ack"]
        next_op = ORDER[len(acked)] if len(acked) < len(ORDER) else None
        for variant in ("all", "unsynced data lost", "unsynced entries lost"):
            files, folders = state(prefix, variant)
            agents = materialise(files, folders, str(root), tmp_path / "state")
            states += 1
            for problem in check(agents / "agent", acked, next_op):
                violations.append(f"after {cut} of {len(events)} calls ({variant}): {problem}")
    return states, violations


def _strace() -> None:
    if shutil.which("strace") is None:
        pytest.fail("strace is not installed: .ci/run installs it (apt-get install strace)")


def test_every_third_crash_state_keeps_every_promise(tmp_path: Path) -> None:
    _strace()
    states, violations = replay(tmp_path, stride=3)
    print(f"\ncrash states: {states} replayed, {len(violations)} violations")
    assert states > 100
    assert violations == []


@pytest.mark.slow
def test_every_crash_state_keeps_every_promise(tmp_path: Path) -> None:
    _strace()
    states, violations = replay(tmp_path, stride=1)
    print(f"\ncrash states: {states} replayed, {len(violations)} violations")
    assert violations == [], violations[:20]


def test_the_recorded_program_did_what_the_checks_assume(tmp_path: Path) -> None:
    _strace()
    recording, _root, folder = record(tmp_path)
    assert (folder / "memory" / "FACT.md").read_text() == FACTS["F"]
    assert forgotten_nowhere(folder, [SECRET]) == []
    assert [e.label[1] for e in recording.events if e.kind == "ack"] == ORDER
