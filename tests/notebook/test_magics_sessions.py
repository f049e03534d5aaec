"""Looking back through the magics: %memprompt --sessions / --session / --diff ID ID / --why,
and %forget, driven through a real InteractiveShell."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from jupyter_agent_memory import AgentMemory, PromptBuilder
from jupyter_agent_memory.notebook.display import (
    DiffView,
    ForgetReceipt,
    PromptView,
    RawText,
    SessionsView,
    WhyView,
)


@pytest.fixture
def shell(ip: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_ROOT", str(tmp_path / "agents"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    ip.run_line_magic("load_ext", "jupyter_agent_memory")
    with capture_output():
        ip.run_line_magic("agent_memory", "./demo")
    yield ip
    ip.run_line_magic("unload_ext", "jupyter_agent_memory")


@pytest.fixture
def mem(shell: InteractiveShell) -> AgentMemory:
    return AgentMemory.open(Path("demo").resolve())


def line(shell: InteractiveShell, text: str) -> tuple[Any, Any]:
    name, _, args = text.partition(" ")
    with capture_output() as cap:
        result = shell.run_line_magic(name, args)
    return result, cap


def fmt(shell: InteractiveShell, obj: object) -> dict[str, str]:
    data, _ = shell.display_formatter.format(obj)
    return data


def start(mem: AgentMemory, client: str = "test-client") -> dict[str, Any]:
    started = PromptBuilder().start_session(mem, Path.cwd(),
                                            client={"name": client, "version": "1.2"})
    return started.receipt


def test_sessions_lists_every_recorded_start(shell: InteractiveShell, mem: AgentMemory) -> None:
    empty, _ = line(shell, "memprompt --sessions")
    assert isinstance(empty, SessionsView) and empty == []
    assert fmt(shell, empty)["text/plain"].startswith("No sessions on record yet")

    mem.update_facts("- The user prefers metric units.\n")
    first = start(mem)
    mem.update_facts("- The user prefers imperial units.\n")
    second = start(mem, "other")
    listed, cap = line(shell, "memprompt --sessions")
    assert cap.stdout == ""
    assert listed == mem.sessions()
    assert [r["session_id"] for r in listed] == [second["session_id"], first["session_id"]]
    text = fmt(shell, listed)["text/plain"].splitlines()
    assert text[0].split() == ["time", "(UTC)", "id", "client", "~tokens", "prompt"]
    assert text[1].split() == [second["ts"], second["session_id"], "other", "1.2",
                               str(second["tokens"]), second["prompt_sha256"][:12]]
    page = fmt(shell, listed)["text/html"]
    assert f"<code>{first['session_id']}</code>" in page
    assert f"<code>{first['prompt_sha256'][:12]}</code>" in page
    assert "test-client 1.2" in page and "2 sessions, newest first" in page
    # A preview never records.
    line(shell, "memprompt")
    assert len(mem.sessions()) == 2


def test_session_shows_that_exact_prompt(shell: InteractiveShell, mem: AgentMemory) -> None:
    mem.update_facts("- first version\n")
    receipt = start(mem)
    recorded = mem.session_prompt(receipt["session_id"])
    mem.update_facts("- second version\n")  # the recorded prompt does not follow the file

    view, _ = line(shell, f"memprompt --session {receipt['session_id'][:8]}")
    assert isinstance(view, PromptView)
    assert view.text == recorded and "- first version" in view.text
    assert view.title.startswith(f"Session {receipt['session_id']} ")
    assert [s.name for s in view.sections] == [s["name"] for s in receipt["sections"]]
    raw, _ = line(shell, f"memprompt --session {receipt['session_id']} --raw")
    assert isinstance(raw, RawText) and raw == recorded
    shell.run_cell(f"text = %memprompt --session {receipt['session_id']} --raw")
    assert shell.user_ns["text"] == recorded

    with pytest.raises(UsageError, match='No recorded session matches "abcdef"'):
        line(shell, "memprompt --session abcdef")
    with pytest.raises(UsageError, match="Invalid session id"):
        line(shell, "memprompt --session xyz")


def test_diff_of_two_sessions_and_of_the_previous_build(
    shell: InteractiveShell, mem: AgentMemory
) -> None:
    mem.update_facts("- a\n- b\n")
    one = start(mem)["session_id"]
    mem.update_facts("- a\n- c\n")
    two = start(mem)["session_id"]
    diff, _ = line(shell, f"memprompt --diff {one} {two[:6]}")
    assert isinstance(diff, DiffView)
    assert diff.lines[0].startswith(f"--- session {one} (")
    assert diff.lines[1].startswith(f"+++ session {two} (")
    assert "-- b" in diff.lines and "+- c" in diff.lines
    assert diff.removed == 1 and diff.added == 1

    # With no id, --diff still compares with the previous build in this kernel.
    _, cap = line(shell, "memprompt --diff")
    assert cap.stdout.startswith("No earlier build of this prompt in this session")
    mem.update_facts("- a\n- d\n")
    since, _ = line(shell, "memprompt --diff")
    assert since.fromfile == "previous build" and "+- d" in since.lines

    with pytest.raises(UsageError, match="--diff takes no session id .* or two ids, not 1"):
        line(shell, f"memprompt --diff {one}")
    with pytest.raises(UsageError, match="apply to building a prompt"):
        line(shell, f"memprompt --diff {one} {two} --facts")


def test_why_names_file_version_and_line(shell: InteractiveShell, mem: AgentMemory) -> None:
    mem.update_facts("# Facts\n\n- The user prefers metric units.\n- Reports go out on Mondays.\n")
    older = start(mem)
    version = mem.facts_sha256
    mem.update_facts("# Facts\n- Reports go out on Fridays.\n")
    newest = start(mem)

    origins, _ = line(shell, 'memprompt --why "metric units"')
    assert isinstance(origins, WhyView) and origins == []  # the newest session has no such line
    assert str(origins) == (f"No line of session {newest['session_id']}'s prompt contains "
                            "'metric units'.")

    origins, _ = line(shell, f'memprompt --why "metric units" --session {older["session_id"]}')
    (origin,) = origins
    assert origins == mem.why(older["session_id"], "metric units")
    assert (origin.section, origin.version, origin.line) == ("facts", version, 3)
    assert origin.source == str(mem.file_path("FACT.md"))
    text = fmt(shell, origins)
    assert text["text/plain"] == f"{origin.source} @ {version[:12]} line 3: " \
                                 "'- The user prefers metric units.'"
    assert re.search(r"<mark [^>]*>metric units</mark>", text["text/html"])

    # A line the builder wrote is named as such.
    (builder_line, *_) = line(shell, 'memprompt --why "## Memories"')[0]
    assert builder_line.source is None and builder_line.section == "memories"


def test_why_without_sessions_and_bad_combinations(shell: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="No sessions on record yet"):
        line(shell, "memprompt --why anything")
    with pytest.raises(UsageError, match="Choose one of --sessions, --why"):
        line(shell, "memprompt --sessions --why x")
    with pytest.raises(UsageError, match="--raw applies to one session's prompt"):
        line(shell, "memprompt --sessions --raw")


def test_help_documents_every_option(shell: InteractiveShell) -> None:
    for magic, options in (("memprompt", ("--sessions", "--session ID", "--diff [ID ...]",
                                          "--why TEXT")),
                           ("forget", ("--pattern REGEX", "--secrets", "--dry-run",
                                       "--reason R"))):
        doc = shell.find_line_magic(magic).__doc__
        for option in options:
            assert option in doc, (magic, option)


def test_forget_needs_exactly_one_target(shell: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="Give exactly one of TEXT, --pattern REGEX, --secrets$"):
        line(shell, "forget")
    with pytest.raises(UsageError, match=r"\(got TEXT, --secrets\)"):
        line(shell, "forget Ana --secrets")


def test_forget_receipt_view() -> None:
    receipt = ForgetReceipt({"ts": "2026-12-01T08:00:00.000Z", "dry_run": False,
                             "verified": True, "forgotten_sha256": "ab" * 32,
                             "changed": {"facts": 1, "journal": [1, 2], "history": 0}})
    assert receipt["verified"] is True
    assert str(receipt).splitlines() == [
        "Forgotten. Changed:", "  facts: 1 line of FACT.md",
        "  journal: 2 journal entries (tombstones keep their times)",
        "  history: 0 earlier FACT.md versions",
        "Receipt 2026-12-01T08:00:00.000Z (in memory/FORGET.jsonl), keyed sha256 of what was "
        f"forgotten {'ab' * 6}.",
        "Verified: found in no form (raw, case-folded, JSON-escaped) in the agent's files.",
    ]
    dry = ForgetReceipt({**receipt, "dry_run": True, "verified": False,
                         "changed": {"sessions": 4}})
    assert str(dry).splitlines() == [
        "Dry run, nothing changed. Forgetting would change:",
        "  sessions: 4 stored session texts (prompts and file versions, shared by every "
        "session that used them)",
        "Dry run at 2026-12-01T08:00:00.000Z, no receipt written; keyed sha256 of what would be "
        f"forgotten {'ab' * 6}.",
    ]
    failed = ForgetReceipt({"verified": False, "remaining": ["<memory/FACT.md>"],
                            "changed": {"facts": 1}})
    page = failed._repr_html_()
    assert "Verification FAILED: still found in &lt;memory/FACT.md&gt;" in page
    assert "var(--jp-error-color1" in page.split("Verification FAILED")[0].rsplit("<div", 1)[1]
    nothing = ForgetReceipt({"dry_run": True, "changed": {"facts": 0}})
    assert str(nothing).splitlines()[0] == "Nothing to forget: no stored place holds it."


def _bytes_under(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_forget_dry_run_then_forget_for_real(shell: InteractiveShell, mem: AgentMemory) -> None:
    secret_place = "221B Baker Street"
    mem.update_facts(f"# Facts\n- The user lives at {secret_place}.\n- Metric units.\n")
    mem.update_facts("# Facts\n- Metric units.\n")  # the address lives on in the history
    mem.append(f"Visited {secret_place} today", ["visit"])
    start(mem)
    before = _bytes_under(mem.path)
    assert secret_place.encode() in before

    dry, cap = line(shell, f"forget --dry-run {secret_place}")
    assert isinstance(dry, ForgetReceipt) and dry["dry_run"] is True
    assert cap.stdout == ""
    assert _bytes_under(mem.path) == before  # a dry run changes nothing
    assert dry.counts()["journal"] == 1 and dry.counts()["history"] >= 1
    plain = fmt(shell, dry)["text/plain"]
    assert plain.startswith("Dry run, nothing changed. Forgetting would change:")
    assert secret_place not in plain and secret_place not in fmt(shell, dry)["text/html"]

    done, _ = line(shell, f'forget {secret_place} --reason "moved out"')
    assert done["verified"] is True and done["dry_run"] is False
    assert "Verified: found in no form" in fmt(shell, done)["text/plain"]
    after = _bytes_under(mem.path)
    assert secret_place.encode() not in after
    assert secret_place.lower().encode() not in after.lower()
    assert mem.facts == "# Facts\n- Metric units.\n"

    nothing, _ = line(shell, f"forget {secret_place}")
    assert str(nothing).startswith("Nothing to forget: no stored place holds it.")
    with pytest.raises(UsageError, match="The reason must not contain what is being forgotten"):
        line(shell, "forget Metric --reason 'Metric units'")


def test_active_agent_location_for_the_sidebar(shell: InteractiveShell, mem: AgentMemory) -> None:
    import json

    from IPython.lib.pretty import pretty

    from jupyter_agent_memory.notebook.magics import active_agent_location

    where = active_agent_location(shell)
    assert where == {"loaded": True, "path": str(mem.path), "agent_id": None, "exists": True}
    assert json.loads(pretty(where)) == where  # what the kernel's user_expressions send
    with capture_output():
        shell.run_line_magic("agent_memory", "research")
    where = active_agent_location(shell)
    assert (where["agent_id"], where["exists"]) == ("research", True)
    shell.run_line_magic("unload_ext", "jupyter_agent_memory")
    try:
        assert active_agent_location(shell) == {"loaded": False}
    finally:
        shell.run_line_magic("load_ext", "jupyter_agent_memory")


def test_sessions_view_text_keeps_a_hostile_client_name_inert(mem: AgentMemory) -> None:
    PromptBuilder().start_session(
        mem, client={"name": "evil\x1b[2J\n2026-01-01  ffffff000000", "version": "1"}
    )
    text = str(SessionsView(mem.sessions()))
    assert "\x1b" not in text
    assert len(text.splitlines()) == 2  # the heading and the one session
