"""Small mistakes get a clear message on the human surfaces, through a real IPython shell and
the command line where the same flag exists; the memory tool keeps its lenient rules.

- ``-n 0``, ``-n -3`` and ``--limit -3`` are refused with the rule (a positive integer);
  the tool still turns a limit below 1 into 1 for models.
- ``%journal append`` with no text gives the usage line.
- A forget dry run says its hash is of what *would* be forgotten, and every count says what
  it counts (a stored session prompt file is shared by the sessions that started with it).
- The budget warning names the largest part.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from jupyter_agent_memory import AgentMemory, PromptBuilder
from jupyter_agent_memory.cli import main
from jupyter_agent_memory.notebook.display import ForgetReceipt, PromptView

RULE = "-n/--limit must be a positive integer (1 or more), got {}"


@pytest.fixture
def shell(ip: InteractiveShell, agents_root: Path) -> Any:
    """The shared shell with the extension loaded and ``./demo`` active."""
    ip.run_line_magic("load_ext", "jupyter_agent_memory")
    with capture_output():
        ip.run_line_magic("agent_memory", "./demo")
    yield ip
    ip.run_line_magic("unload_ext", "jupyter_agent_memory")
    ip.config.pop("AgentMemoryMagics", None)


@pytest.fixture
def demo(shell: InteractiveShell) -> AgentMemory:
    mem = AgentMemory.open(Path("demo").resolve())
    for n in range(3):
        mem.append(f"entry {n}", ["t"])
    return mem


def cell(shell: InteractiveShell, source: str) -> tuple[bool, str, Any]:
    """Run ``source`` as a cell: whether it succeeded, what it wrote to stderr, its result."""
    with capture_output() as cap:
        result = shell.run_cell(source)
    return result.success, cap.stderr, result.result


@pytest.mark.parametrize(
    ("flags", "value"),
    [("-n 0", 0), ("-n -3", -3), ("--limit -3", -3), ("search -n 0", 0),
     ("search report --limit=-1", -1), ("search -t t -n -3", -3)],
)
def test_journal_refuses_a_count_below_one(
    shell: InteractiveShell, demo: AgentMemory, flags: str, value: int
) -> None:
    ok, err, result = cell(shell, f"%journal {flags}")
    assert (ok, result) == (False, None)
    assert err == f"UsageError: {RULE.format(value)}\n"


def test_the_count_is_checked_before_the_agent_is_looked_up(shell: InteractiveShell) -> None:
    with pytest.raises(UsageError, match=r"^-n/--limit must be a positive integer"):
        shell.run_line_magic("journal", "search -n 0 --agent no-such-agent")
    assert not (Path.cwd() / "no-such-agent").exists()


def test_a_positive_count_still_works(shell: InteractiveShell, demo: AgentMemory) -> None:
    ok, err, result = cell(shell, "%journal search -n 2")
    assert (ok, err) == (True, "")
    assert [e["text"] for e in result] == ["entry 2", "entry 1"]


def test_the_tool_keeps_its_clamp(demo: AgentMemory) -> None:
    # What a model sends is not refused: below 1 means 1 (the deliberate difference).
    for limit in (0, -3, "-3"):
        found = json.loads(demo.call_tool({"action": "search", "limit": limit}))
        assert [e["text"] for e in found] == ["entry 2"]


@pytest.mark.parametrize("flags", [["-n", "0"], ["-n", "-3"], ["--limit", "-3"]])
def test_cli_journal_search_refuses_a_count_below_one(
    agents_root: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    mem = AgentMemory.open("pip")
    mem.append("kept", [])
    code = main(["journal", "search", *flags, "--agent", "pip"])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err == f"jupyter-agent-memory: error: {RULE.format(int(flags[1]))}\n"
    # Refused before anything is looked up: a missing agent gets the same answer.
    assert main(["journal", "search", *flags, "--agent", "missing"]) == 1
    assert RULE.format(int(flags[1])) in capsys.readouterr().err
    assert not (agents_root / "missing").exists()


def test_journal_append_without_text_shows_the_usage(
    shell: InteractiveShell, demo: AgentMemory
) -> None:
    before = (demo.path / "memory" / "JOURNAL.jsonl").read_bytes()
    for source in ("%journal append", "%journal append -t meeting", '%journal append "  "'):
        ok, err, _ = cell(shell, source)
        assert not ok
        assert err == (
            "UsageError: The entry text is missing. Usage: %journal append TEXT [-t TAG]...\n")
    assert (demo.path / "memory" / "JOURNAL.jsonl").read_bytes() == before


def test_forget_dry_run_says_what_it_hashes_and_counts_files(
    shell: InteractiveShell, demo: AgentMemory
) -> None:
    demo.update_facts("- The door code is 4417.\n- Metric units.\n")
    builder = PromptBuilder()
    # Three sessions start from the same prompt: they share its stored text and the stored
    # FACT.md version it quotes, so two texts hold the door code, not three sessions.
    for _ in range(3):
        builder.start_session(demo, Path.cwd())
    assert len(demo.sessions()) == 3
    ok, err, dry = cell(shell, "%forget --dry-run door code")
    assert (ok, err) == (True, "")
    stored = [p for p in dry["places"] if p.startswith("memory/.sessions/")]
    assert isinstance(dry, ForgetReceipt) and dry["changed"]["sessions"] == len(stored) == 2
    plain = shell.display_formatter.format(dry)[0]["text/plain"].splitlines()
    assert plain[0] == "Dry run, nothing changed. Forgetting would change:"
    assert "  facts: 1 line of FACT.md" in plain
    assert ("  sessions: 2 stored session texts (prompts and file versions, shared by every "
            "session that used them)") in plain
    assert plain[-1] == (
        f"Dry run at {dry['ts']}, no receipt written; keyed sha256 of what would be forgotten "
        f"{dry['forgotten_sha256'][:12]}.")
    assert "what was forgotten" not in "\n".join(plain)
    assert not (demo.path / "memory" / "FORGET.jsonl").exists()

    ok, err, done = cell(shell, "%forget door code")
    assert ok and done["verified"] is True
    plain = str(done).splitlines()
    assert plain[-2] == (
        f"Receipt {done['ts']} (in memory/FORGET.jsonl), keyed sha256 of what was forgotten "
        f"{done['forgotten_sha256'][:12]}.")
    assert (demo.path / "memory" / "FORGET.jsonl").exists()


def test_cli_and_magic_print_the_same_forget_report(
    shell: InteractiveShell, demo: AgentMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    demo.update_facts("- The door code is 4417.\n")
    _, _, dry = cell(shell, "%forget --dry-run door code")
    assert main(["forget", "door code", "--dry-run", "--agent", str(demo.path)]) == 0
    printed = capsys.readouterr().out.splitlines()
    # The same lines; only the dry run's time differs, and its hash: before any real forget the
    # agent has no key yet, and a dry run keys with a throwaway one rather than write a key.
    assert printed[:-1] == str(dry).splitlines()[:-1]
    last, dry_last = printed[-1], str(dry).splitlines()[-1]
    assert last.split(",", 1)[1].rsplit(" ", 1)[0] == dry_last.split(",", 1)[1].rsplit(" ", 1)[0]


def test_memprompt_budget_warning_names_the_large_file(
    shell: InteractiveShell, demo: AgentMemory
) -> None:
    demo.update_facts("- a fact the user asked to keep\n" * 400)
    view = shell.run_line_magic("memprompt", "--budget 700")
    assert isinstance(view, PromptView)
    (warning,) = view.warnings
    assert warning.endswith("Nothing was cut. The largest part is FACT.md (facts): trim it.")
    assert "The largest part is FACT.md (facts): trim it." in (
        shell.display_formatter.format(view)[0]["text/html"])
