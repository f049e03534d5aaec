"""The guarantees at the edges: forgetting that is true when it says verified, receipts that
neither leak nor tear, acknowledgements that mean durable, errors that say what happened, and
locks that hold. Each test drives the interleaving or the failure that once broke the promise.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import hmac
import json
import os
import re
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent_memory import (
    AgentMemory,
    MemoryConflictError,
    MemoryToolError,
    PromptBuilder,
    forget,
    lint,
)
from jupyter_agent_memory.engine import history, sessions
from jupyter_agent_memory.engine.templates import provision
from jupyter_agent_memory.engine.textnorm import normalize
from jupyter_agent_memory.errors import MemoryIOError, TemplateError, UnsafePathError
from jupyter_agent_memory.folder import Folder
from jupyter_agent_memory.journal import append as journal_append

SECRET = "door code 4417"


def copies(folder: Path, text: str) -> list[str]:
    """Files under ``folder`` holding ``text`` raw or in any normalised spelling."""
    needle = normalize(text)
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        data = path.read_bytes()
        decoded = data.decode("utf-8", "replace")
        strings = [decoded]
        for line in decoded.splitlines():
            if line.startswith("{"):
                try:
                    strings.append(json.dumps(json.loads(line), ensure_ascii=False))
                except ValueError:
                    pass
        if text.encode() in data or any(needle in normalize(s) for s in strings):
            found.append(str(path.relative_to(folder)))
    return found


def in_thread(work: Callable[[], Any], wait: float = 5.0) -> dict[str, Any]:
    """Run ``work`` in another thread; wait up to ``wait`` s; its result or error."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = work()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(wait)
    outcome["done"] = not thread.is_alive()
    outcome["thread"] = thread
    return outcome


# -- forgetting that is true --------------------------------------------------------------------


def test_a_restore_overlapping_a_forget_cannot_write_the_text_back(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem.update_facts(f"- {SECRET}\n- keep\n")
    mem.update_facts("- keep\n")
    old = mem.history()[0]["sha256"]
    real_find = history.find
    forgets: list[dict[str, Any]] = []

    def find_then_forget(stored: list[history.Version], sha: str) -> tuple[str, bytes]:
        found = real_find(stored, sha)
        # A forget in another thread, between the restore's look-up and its write.
        other = AgentMemory.open(mem.path, create=False)
        outcome = in_thread(lambda: forget(other, SECRET), wait=0.5)
        forgets.append(outcome)
        return found

    monkeypatch.setattr(history, "find", find_then_forget)
    mem.restore(old[:12])
    monkeypatch.setattr(history, "find", real_find)
    forgets[0]["thread"].join(20)
    receipt = forgets[0]["result"]
    assert receipt["verified"] is True
    # Whichever came first, once the forget has returned the text is nowhere.
    assert copies(mem.path, SECRET) == []
    assert SECRET not in mem.facts


def test_a_session_started_just_before_a_forget_stores_no_forgotten_text(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    mem.update_facts(f"- {SECRET}\n- keep\n")
    real_build = PromptBuilder.build_session
    ran: list[dict[str, Any]] = []

    def build_then_forget(self: PromptBuilder, *args: Any, **kwargs: Any) -> Any:
        prompt = real_build(self, *args, **kwargs)
        if not ran:  # the forget completes between the build and the record
            other = AgentMemory.open(mem.path, create=False)
            ran.append(in_thread(lambda: forget(other, SECRET)))
        return prompt

    monkeypatch.setattr(PromptBuilder, "build_session", build_then_forget)
    started = PromptBuilder().start_session(mem, workspace)
    assert ran[0]["result"]["verified"] is True
    assert SECRET not in started.prompt.text
    assert copies(mem.path, SECRET) == []
    assert mem.session_prompt(started.receipt["session_id"]) == started.prompt.text


def test_a_file_verification_cannot_read_makes_the_forget_unverified_naming_it(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem.update_facts(f"- {SECRET}\n")
    notes = mem.path / "memory" / "notes.md"
    notes.write_text(f"{SECRET}\n")  # a file of the folder forgetting does not rewrite
    real_open = os.open

    def failing_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if str(path).endswith("notes.md"):
            raise OSError(errno.EIO, "Input/output error", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", failing_open)
    receipt = forget(mem, SECRET)
    assert receipt["verified"] is False
    assert receipt["remaining"] == ["memory/notes.md (unreadable: Input/output error)"]
    monkeypatch.setattr(os, "open", real_open)
    findings = lint(mem)
    assert findings == []


def test_a_folder_verification_cannot_list_is_named_too(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem.update_facts(f"- {SECRET}\n")
    (mem.path / "memory" / "extra").mkdir()
    real = os.listdir

    def failing(path: Any = ".") -> list[str]:
        if str(path).endswith("extra"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "listdir", failing)
    receipt = forget(mem, SECRET)
    assert receipt["remaining"] == ["memory/extra (unreadable: Permission denied)"]
    assert lint(mem) == [
        {"file": "memory/extra", "line": 0, "kind": "unreadable: Permission denied"}
    ]


def test_a_reason_holding_a_credential_or_the_text_is_refused_and_old_reasons_are_scrubbed(
    mem: AgentMemory,
) -> None:
    token = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    mem.update_facts(f"- {SECRET}\n- the porch light\n")
    with pytest.raises(MemoryToolError) as info:
        forget(mem, "porch", reason=f"leaked with {token}")
    assert info.value.message.startswith(
        "The reason must not contain a credential (it holds what looks like a GitHub token)"
    )
    with pytest.raises(MemoryToolError, match="must not contain what is being forgotten"):
        forget(mem, SECRET, reason=f"the {SECRET.upper()}")
    assert not (mem.path / "memory" / "FORGET.jsonl").exists()
    mem.append("the porch light is broken")
    first = forget(mem, "porch light", reason="moved: new door code soon")
    assert first["verified"] is True
    assert "moved: new door code soon" in (mem.path / "memory" / "FORGET.jsonl").read_text()
    # Forgetting "door code" later reaches the earlier reason and the tombstone holding it.
    second = forget(mem, "door code")
    assert second["verified"] is True, second["remaining"]
    assert "memory/FORGET.jsonl" in second["places"]
    assert copies(mem.path, "door code") == []
    log = (mem.path / "memory" / "FORGET.jsonl").read_text()
    receipts = [json.loads(x) for x in log.splitlines()]
    assert [r["reason"] for r in receipts] == ["[forgotten]", ""]
    assert lint(mem) == []


@pytest.mark.parametrize(
    "stored",
    [
        "Zoe\u0308's door code 4417",  # NFD, as macOS copy and paste gives it
        "Zoë's door code \uff14\uff14\uff11\uff17",  # full-width digits
        "Zoë's door\u200b code 4417",  # a zero-width space
        "Zoë's door\u00a0code\u202f4417",  # no-break spaces
        "ZOË'S DOOR CODE 4417",
        "Zoë's door  code\t4417",
    ],
)
def test_unicode_spellings_of_the_text_are_forgotten(mem: AgentMemory, stored: str) -> None:
    text = "Zoë's door code 4417"
    mem.update_facts(f"- {stored}\n- keep\n")
    mem.update_facts("- keep\n- more\n")
    mem.append(f"noted: {stored}")
    receipt = forget(mem, text)
    assert receipt["verified"] is True
    assert receipt["changed"]["history"] == 1 and receipt["changed"]["journal"] == 1
    assert copies(mem.path, text) == []
    assert stored.encode() not in b"".join(
        p.read_bytes() for p in mem.path.rglob("*") if p.is_file()
    )


def test_held_descriptors_of_another_process_expose_no_forgotten_bytes(
    mem: AgentMemory, tmp_path: Path
) -> None:
    mem.update_facts(f"- {SECRET}\n- keep\n")
    mem.append(f"the {SECRET} works")
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
        import sys
        from jupyter_agent_memory import AgentMemory, PromptBuilder
        mem = AgentMemory.open(sys.argv[1])
        builder = PromptBuilder()
        builder.build(mem)  # the prompt cache holds FACT.md open
        mem.search("works")  # the journal reader holds the journal open
        mem.append("from the server")  # and so does the appender
        print("ready", flush=True)
        sys.stdin.readline()
        print(repr(builder.build(mem).text.count("4417")), flush=True)
        """), str(mem.path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        fds = Path(f"/proc/{child.pid}/fd")
        held = [fd for fd in fds.iterdir() if str(os.readlink(fd)).startswith(str(mem.path))]
        assert held, "the child holds files of the agent"
        assert any(SECRET.encode() in Path(fd).read_bytes() for fd in held if Path(fd).is_file())
        assert forget(mem, SECRET)["verified"] is True
        leaks = []
        for fd in fds.iterdir():
            try:
                if stat.S_ISREG(os.stat(fd).st_mode) and SECRET.encode() in fd.read_bytes():
                    leaks.append(os.readlink(fd))
            except OSError:
                continue
        assert leaks == []
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "0"  # its next build has no old bytes
    finally:
        child.kill()
        child.wait()


def test_temp_files_a_killed_forget_left_are_swept_and_never_block_verification(
    mem: AgentMemory,
) -> None:
    mem.append(f"the {SECRET}")
    leftover = mem.path / "memory" / ".JOURNAL.jsonl.0123456789abcdef.tmp"
    leftover.write_text(json.dumps({"ts": "", "tags": [], "text": SECRET}) + "\n")
    receipt = forget(mem, SECRET)
    assert receipt["verified"] is True and not leftover.exists()
    leftover.write_text("x\n")
    AgentMemory.open(mem.path)  # opening sweeps it too
    assert not leftover.exists()


def test_every_forget_replaces_the_generation(mem: AgentMemory) -> None:
    generation = mem.path / "memory" / ".generation"
    assert not generation.exists()
    mem.update_facts(f"- {SECRET}\n")
    forget(mem, "nothing like it")
    first = generation.read_text()
    assert len(first) == 33 and first.endswith("\n") and int(first[:32], 16) >= 0
    forget(mem, SECRET, dry_run=True)
    assert generation.read_text() == first  # a dry run changes nothing
    forget(mem, SECRET)
    assert generation.read_text() != first and stat.S_IMODE(generation.stat().st_mode) == 0o600


# -- receipts that do not leak ----------------------------------------------------------------


def test_the_receipt_hash_is_keyed_with_the_agents_secret(mem: AgentMemory) -> None:
    mem.update_facts(f"- {SECRET}\n")
    receipt = forget(mem, SECRET)
    digest = receipt["forgotten_sha256"]
    # Before, sha256 of the text: "door code NNNN" fell to 10,000 guesses.
    guesses = {
        hashlib.sha256(f"door code {n:04d}".encode()).hexdigest(): n for n in range(10_000)
    }
    guesses |= {hashlib.sha256(normalize(f"door code {n:04d}").encode()).hexdigest(): n
                for n in range(10_000)}
    assert digest not in guesses
    key_file = mem.path / "memory" / ".forget-key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = bytes.fromhex(key_file.read_text().strip())
    assert len(key) == 32
    # Whoever holds the key (the agent's owner) can still check a text against receipts.
    expected = hmac.new(key, b"text\0" + normalize(SECRET).encode(), "sha256").hexdigest()
    assert digest == expected
    log = (mem.path / "memory" / "FORGET.jsonl").read_bytes()
    # The digests are random-looking hex that holds "4417" about once in a thousand runs.
    words = re.sub(rb"[0-9a-f]{64}", b"<digest>", log)
    assert SECRET.encode() not in log and b"4417" not in words


# -- receipts that do not tear ------------------------------------------------------------------


def test_a_torn_sessions_line_never_swallows_the_next_receipt(
    mem: AgentMemory, workspace: Path
) -> None:
    builder = PromptBuilder()
    first = builder.start_session(mem, workspace).receipt
    log = mem.path / "memory" / "SESSIONS.jsonl"
    with open(log, "ab") as handle:
        handle.write(b'{"ts":"2026-01-01T00:00:00.000Z","session_id":"abc')  # a crash mid-line
    second = builder.start_session(mem, workspace).receipt
    assert [r["session_id"] for r in mem.sessions()] == [second["session_id"], first["session_id"]]
    assert log.read_bytes().endswith(b"\n")


def test_a_short_write_of_a_forget_receipt_is_completed(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem.update_facts("- the blue kettle\n- the red bicycle\n")
    real_write = os.write

    def short_write(fd: int, data: Any) -> int:
        data = bytes(data)
        if b'"forgotten_sha256"' in data and len(data) > 10:
            return real_write(fd, data[: len(data) // 2])  # a full disk's partial write
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", short_write)
    forget(mem, "blue kettle")
    forget(mem, "red bicycle")
    monkeypatch.setattr(os, "write", real_write)
    lines = (mem.path / "memory" / "FORGET.jsonl").read_bytes().splitlines()
    assert [json.loads(line)["verified"] for line in lines] == [True, True]


def test_pruning_never_removes_a_text_whose_receipt_is_being_written(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    # Another writer prunes (keep one session) right after this start stored its text.
    for n in range(2):
        mem.update_facts(f"- earlier {n}\n")
        PromptBuilder().start_session(mem, workspace)
    mem.update_facts("- this session's facts\n")
    other = AgentMemory.open(mem.path, keep_sessions=1, lock_timeout=0.2)
    real = Folder.write_atomic
    fired: list[str] = []

    def write_then_prune(self: Folder, name: str, data: bytes, *args: Any, **kw: Any) -> None:
        real(self, name, data, *args, **kw)
        if sessions.BLOB_NAME.match(name) and not fired:
            fired.append(name)
            try:
                other.update_facts(f"- changed {time.monotonic()}\n", None)
                PromptBuilder().start_session(other, workspace)
            except MemoryToolError:
                pass  # after the fix it waits for this start's lock, in vain

    monkeypatch.setattr(Folder, "write_atomic", write_then_prune)
    started = PromptBuilder().start_session(mem, workspace)
    monkeypatch.setattr(Folder, "write_atomic", real)
    assert fired
    receipt = next(r for r in mem.sessions() if r["session_id"] == started.receipt["session_id"])
    assert mem.session_prompt(receipt["session_id"]) == started.prompt.text


def test_opening_the_agent_elsewhere_never_breaks_a_session_start(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    real = os.replace
    opened: list[bool] = []

    def replace_after_a_sweep(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if str(src).startswith(".") and sessions.BLOB_NAME.match(str(dst)) and not opened:
            opened.append(True)
            try:  # another process opens the agent: its crash sweep runs under the lock
                AgentMemory.open(mem.path, lock_timeout=0.2)
            except MemoryToolError:
                pass
        real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace_after_a_sweep)
    started = PromptBuilder().start_session(mem, workspace)
    assert opened and mem.session_prompt(started.receipt["session_id"]) == started.prompt.text


# -- acknowledgements that mean durable ---------------------------------------------------------


class WritebackModel:
    """``os.fsync`` as Linux behaves after a failed writeback: the first flush of an open file
    description reports the error, a second flush of the same description reports success,
    and the data that was dirty when the writeback failed never reaches the disk."""

    def __init__(self, journal: Path) -> None:
        self.journal = journal
        self.durable = 0  # bytes of the journal on disk
        self.lost: list[tuple[int, int]] = []
        self.fail_next = False
        self.arrived = threading.Barrier(2, timeout=1.0)
        self.lock = threading.Lock()

    def fsync(self, fd: int) -> None:
        if os.fstat(fd).st_ino != os.stat(self.journal).st_ino:
            return
        if self.fail_next:
            try:
                self.arrived.wait()  # both threads' lines are written before the writeback
            except threading.BrokenBarrierError:
                pass
        with self.lock:
            size = os.fstat(fd).st_size
            if self.fail_next:
                self.fail_next = False
                self.lost.append((self.durable, size))
                self.durable = size
                raise OSError(errno.EIO, "Input/output error")
            self.durable = max(self.durable, size)


def test_two_threads_sharing_an_agent_never_acknowledge_a_line_a_failed_writeback_lost(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem.append("first")
    model = WritebackModel(mem.path / "memory" / "JOURNAL.jsonl")
    monkeypatch.setattr(journal_append, "full_fsync", model.fsync)
    model.fail_next = True
    outcomes = [in_thread(lambda i=i: mem.append(f"thread {i}"), wait=0) for i in range(2)]
    for outcome in outcomes:
        outcome["thread"].join(10)
    acknowledged = [o["result"]["text"] for o in outcomes if "result" in o]
    failed = [o["error"] for o in outcomes if "error" in o]
    assert len(failed) >= 1 and all(isinstance(e, OSError) for e in failed)
    data = (mem.path / "memory" / "JOURNAL.jsonl").read_bytes()
    for text in acknowledged:
        line = json.dumps(text)[1:-1].encode()
        at = data.find(line)
        assert at >= 0, text
        assert not any(start <= at < end for start, end in model.lost), (
            f"{text!r} was acknowledged but its writeback failed"
        )
    # What failed left no entry: a retry stores each exactly once.
    stored = [e["text"] for e in mem.entries()]
    assert sorted(stored) == sorted(["first", *acknowledged])


def test_an_append_whose_flush_fails_while_a_forget_rewrites_the_journal_is_stored_once(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem.append("older entry about the porch")
    real = journal_append.full_fsync
    ran: list[dict[str, Any]] = []

    def flush_during_a_forget(fd: int) -> None:
        if not ran:
            # The line is written; before its flush a forget (of something else) rewrites the
            # journal with the line in it, then the flush of the old file fails.
            ran.append(forget(AgentMemory.open(mem.path), "porch"))
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(journal_append, "full_fsync", flush_during_a_forget)
    entry = mem.append("new entry")
    assert ran[0]["verified"] is True
    texts = [e["text"] for e in mem.entries()]
    assert texts == ["[forgotten]", "new entry"] and entry["text"] == "new entry"


# -- errors that say what happened --------------------------------------------------------------


def failing_folder_flush(monkeypatch: pytest.MonkeyPatch, folder: Path) -> dict[str, bool]:
    """Flushing ``folder`` (after a rename into it) fails with EIO while ``state["fail"]``."""
    from jupyter_agent_memory import folder as folder_module

    real = folder_module.full_fsync
    target = os.stat(folder).st_ino
    state = {"fail": True}

    def flaky(fd: int) -> None:
        if state["fail"] and os.fstat(fd).st_ino == target:
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(folder_module, "full_fsync", flaky)
    return state


def test_an_update_whose_folder_flush_fails_says_it_took_effect_and_a_retry_succeeds(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem.update_facts("- zero\n")
    first = mem.update_facts("- one\n")  # the history folder exists now
    state = failing_folder_flush(monkeypatch, mem.path / "memory")
    with pytest.raises(MemoryIOError) as info:
        mem.update_facts("- two\n", expected_sha256=first.sha256)
    assert info.value.errno == errno.EIO
    assert info.value.message.startswith(
        "FACT.md now holds the new content (sha256 "
        + hashlib.sha256(b"- two\n").hexdigest()
        + "), but flushing its folder to disk failed (Input/output error)"
    )
    assert mem.facts == "- two\n"
    two = hashlib.sha256(b"- two\n").hexdigest()
    assert (
        f"writing the same content again (with expected_sha256 {two}, or with none) makes "
        "it durable (" in info.value.message
    )
    state["fail"] = False
    # The old token is stale now, as for any compare-and-swap: the retry the error names works.
    with pytest.raises(MemoryConflictError):
        mem.update_facts("- two\n", expected_sha256=first.sha256)
    again = mem.update_facts("- two\n", expected_sha256=two)
    assert again.sha256 == two and mem.facts == "- two\n"
    assert len(mem.history()) == 2  # the retry kept no second copy of "- one"


def test_a_restore_whose_folder_flush_fails_says_it_took_effect(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem.update_facts("- old\n")
    mem.update_facts("- new\n")
    old = mem.history()[0]["sha256"]
    state = failing_folder_flush(monkeypatch, mem.path / "memory")
    with pytest.raises(MemoryIOError, match="now holds the new content"):
        mem.restore(old)
    assert mem.facts == "- old\n"
    state["fail"] = False
    assert mem.restore(old).sha256 == old


def make_template(tmp_path: Path) -> Path:
    folder = tmp_path / "tpl"
    (folder / "memory").mkdir(parents=True)
    (folder / "agent.json").write_text(json.dumps({"name": "Tpl"}))
    (folder / "SOUL.md").write_text("# Soul\n\nI am the template's soul.\n")
    (folder / "USER.md").write_text("# User\n")
    (folder / "memory" / "notes.md").write_text("notes\n")
    return folder


def test_provisioning_never_reports_success_after_failing_to_list_the_template(
    mem: AgentMemory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = make_template(tmp_path)
    real = os.listdir

    def failing(path: Any = ".") -> list[str]:
        if Path(str(path)) == template:
            raise OSError(errno.EIO, "Input/output error", str(path))
        return real(path)

    monkeypatch.setattr(os, "listdir", failing)
    with pytest.raises(MemoryIOError) as info:
        provision(template, mem)
    assert info.value.code == -32603 and info.value.errno == errno.EIO
    assert (mem.path / "SOUL.md").read_text() == "" and mem.template_info() is None


def test_an_io_error_reading_a_template_file_is_an_io_error_not_an_invalid_template(
    mem: AgentMemory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = make_template(tmp_path)
    real = os.read

    def failing_read(fd: int, size: int) -> bytes:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("notes.md"):
            raise OSError(errno.EIO, "Input/output error")
        return real(fd, size)

    monkeypatch.setattr(os, "read", failing_read)
    with pytest.raises(MemoryIOError) as info:
        provision(template, mem)
    assert not isinstance(info.value, TemplateError) and info.value.code == -32603
    assert (mem.path / "SOUL.md").read_text() == ""  # read before anything was written


def test_provisioning_retries_an_interrupted_listing(
    mem: AgentMemory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = make_template(tmp_path)
    real = os.listdir
    interrupted: list[str] = []

    def once_interrupted(path: Any = ".") -> list[str]:
        if not interrupted and Path(str(path)) == template:
            interrupted.append(str(path))
            raise InterruptedError(errno.EINTR, "Interrupted system call")
        return real(path)

    monkeypatch.setattr(os, "listdir", once_interrupted)
    provision(template, mem)
    assert interrupted and mem.soul == "# Soul\n\nI am the template's soul.\n"


def test_provisioning_that_fails_part_way_says_exactly_what_it_wrote(
    mem: AgentMemory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = make_template(tmp_path)
    real = Folder.write_atomic

    def full_disk_for_notes(self: Folder, name: str, *args: Any, **kwargs: Any) -> None:
        if name == "notes.md":
            raise OSError(errno.ENOSPC, "No space left on device", name)
        real(self, name, *args, **kwargs)

    monkeypatch.setattr(Folder, "write_atomic", full_disk_for_notes)
    with pytest.raises(MemoryIOError) as info:
        provision(template, mem)
    assert info.value.message.startswith(
        f"Provisioning from the template {str(template)!r} stopped after it wrote SOUL.md, "
        "USER.md: No space left on device. Nothing else was changed; provisioning again "
        "finishes the job"
    )
    monkeypatch.setattr(Folder, "write_atomic", real)
    provision(template, mem)
    assert (mem.path / "memory" / "notes.md").read_text() == "notes\n"


def test_a_session_started_without_an_unreadable_fact_md_says_so(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    mem.update_facts("- a fact\n")
    real = os.fdopen

    class Failing:
        def __enter__(self) -> Failing:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def read(self) -> bytes:
            raise OSError(errno.EIO, "Input/output error")

    def failing_fdopen(fd: int, *args: Any, **kwargs: Any) -> Any:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("FACT.md"):
            return Failing()
        return real(fd, *args, **kwargs)

    monkeypatch.setattr(os, "fdopen", failing_fdopen)
    with pytest.warns(UserWarning, match="could not be read"):
        started = PromptBuilder().start_session(mem, workspace)
    assert started.receipt["warnings"] == [
        f"{mem.path / 'memory' / 'FACT.md'} could not be read (Input/output error): it is "
        "left out of this prompt"
    ]


# -- locks --------------------------------------------------------------------------------------


def test_deleting_the_lock_file_while_it_is_held_loses_no_update(
    mem: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = mem.update_facts("- start\n")
    other = AgentMemory.open(mem.path)
    real = Folder.write_atomic
    inside: list[Any] = []

    def delete_lock_and_race(self: Folder, name: str, *args: Any, **kwargs: Any) -> None:
        if name == "FACT.md" and not inside:
            # While this update holds the lock: the lock file is deleted and another writer
            # makes its own compare-and-swap update against the same version.
            inside.append(None)
            (mem.path / "memory" / ".lock").unlink()
            inside[0] = other.update_facts("- theirs\n", expected_sha256=start.sha256)
        real(self, name, *args, **kwargs)

    monkeypatch.setattr(Folder, "write_atomic", delete_lock_and_race)
    with pytest.raises(UnsafePathError, match="was removed or replaced while this write held"):
        mem.update_facts("- mine\n", expected_sha256=start.sha256)
    monkeypatch.setattr(Folder, "write_atomic", real)
    # Exactly one of the two compare-and-swap updates succeeded, and its text is what is there.
    assert inside[0].sha256 == hashlib.sha256(b"- theirs\n").hexdigest()
    assert mem.facts == "- theirs\n"


def test_a_waiter_whose_lock_file_was_replaced_takes_the_new_one(mem: AgentMemory) -> None:
    lock = mem.path / "memory" / ".lock"
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    outcome = in_thread(lambda: mem.update_facts("- waited\n"), wait=0.3)
    assert not outcome["done"]  # waiting on the old lock file
    os.unlink(lock)
    holder = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)  # a new holder of a new lock file
    fcntl.flock(holder, fcntl.LOCK_EX)
    os.close(fd)  # the old file's lock is free: the waiter must not take it as the lock
    outcome["thread"].join(0.5)
    assert outcome["thread"].is_alive() and mem.facts == ""
    os.close(holder)
    outcome["thread"].join(10)
    assert mem.facts == "- waited\n"


# -- directory flushes ----------------------------------------------------------------------------


def flushed_folders(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    from jupyter_agent_memory import folder

    real = folder.full_fsync
    seen: list[tuple[int, int]] = []

    def recording(fd: int) -> None:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            seen.append((st.st_dev, st.st_ino))
        real(fd)

    monkeypatch.setattr(folder, "full_fsync", recording)
    return seen


def identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino)


def test_a_new_agent_folder_is_flushed_into_its_root(
    agents_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = flushed_folders(monkeypatch)
    mem = AgentMemory.open("fresh")
    for folder in (agents_root.parent, agents_root, mem.path):
        assert identity(folder) in seen, folder


def test_forgets_deletions_are_flushed(mem: AgentMemory, monkeypatch: pytest.MonkeyPatch) -> None:
    mem.update_facts(f"- {SECRET}\n")
    mem.update_facts("- other\n")  # the only history version holds nothing but the text
    versions = mem.path / "memory" / ".history"
    seen = flushed_folders(monkeypatch)
    receipt = forget(mem, SECRET)
    assert receipt["changed"]["history"] == 1 and list(versions.iterdir()) == []
    assert identity(versions) in seen
