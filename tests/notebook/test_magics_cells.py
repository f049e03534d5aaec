"""The IPython magics, driven through a real InteractiveShell.

One shell for the session (IPython allows one ``InteractiveShell.instance()`` per process); the
extension is loaded and unloaded around every test, and each test gets its own agents root and
working directory.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display
from IPython.utils.capture import capture_output

from jupyter_agent_memory import AgentMemory, PromptBuilder
from jupyter_agent_memory.errors import EmptyEditError
from jupyter_agent_memory.notebook.display import (
    AgentSummary,
    DiffView,
    FactsView,
    HistoryView,
    JournalResult,
    PromptView,
    RawText,
)

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture(scope="session")
def ip(tmp_path_factory: pytest.TempPathFactory) -> InteractiveShell:
    """The session's shell, with its IPython directory in a temp folder."""
    ipython_dir = tmp_path_factory.mktemp("ipython")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IPYTHONDIR", str(ipython_dir))
        shell = InteractiveShell.instance()
    return shell


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh agents root and working directory for one test."""
    agents = tmp_path / "agents"
    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_ROOT", str(agents))
    monkeypatch.delenv("JUPYTER_AGENT_MEMORY_AGENT", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return agents


@pytest.fixture
def shell(ip: InteractiveShell, root: Path) -> Any:
    """The shell with the extension loaded (the package name, as users type it)."""
    ip.run_line_magic("load_ext", "jupyter_agent_memory")
    yield ip
    ip.run_line_magic("unload_ext", "jupyter_agent_memory")
    # %config writes into the shell's config, which outlives the extension.
    ip.config.pop("AgentMemoryMagics", None)


@pytest.fixture
def mem(shell: InteractiveShell) -> AgentMemory:
    """A folder agent ``./demo`` made active through the magic."""
    with capture_output():
        shell.run_line_magic("agent_memory", "./demo")
    return AgentMemory.open(Path("demo").resolve())


def magics(shell: InteractiveShell) -> Any:
    return shell.magics_manager.registry["AgentMemoryMagics"]


def fmt(shell: InteractiveShell, obj: object) -> dict[str, str]:
    """The mime bundle a notebook would receive for ``obj``."""
    data, _metadata = shell.display_formatter.format(obj)
    return data


def line(shell: InteractiveShell, text: str) -> tuple[Any, Any]:
    """Run ``%name args`` (given as 'name args') and return (result, captured output)."""
    name, _, args = text.partition(" ")
    with capture_output() as cap:
        result = shell.run_line_magic(name, args)
    return result, cap


def cell(shell: InteractiveShell, header: str, body: str) -> Any:
    """Run a cell magic; what it returns is displayed, as a notebook shows a cell's value."""
    name, _, args = header.partition(" ")
    with capture_output() as cap:
        result = shell.run_cell_magic(name, args, body)
        if result is not None:
            display(result)
    return cap


def journal_lines(mem: AgentMemory) -> list[dict[str, Any]]:
    path = mem.path / "memory" / "JOURNAL.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


# -- loading -------------------------------------------------------------------------------


def test_load_registers_magics_and_unload_removes_them(ip: InteractiveShell, root: Path) -> None:
    manager = ip.magics_manager
    hooks_before = list(ip.events.callbacks["post_run_cell"])
    ip.run_line_magic("load_ext", "jupyter_agent_memory")
    try:
        for name in ("agent_memory", "fact", "journal", "memprompt"):
            assert name in manager.magics["line"]
        assert "fact_update" in manager.magics["cell"]
        instance = manager.registry["AgentMemoryMagics"]
        assert instance in ip.configurables
        assert len(ip.events.callbacks["post_run_cell"]) == len(hooks_before) + 1
        # Loading never creates an agent folder: agents open on first use.
        assert not root.exists()
    finally:
        ip.run_line_magic("unload_ext", "jupyter_agent_memory")
    for name in ("agent_memory", "fact", "journal", "memprompt"):
        assert name not in manager.magics["line"]
    assert "fact_update" not in manager.magics["cell"]
    assert "AgentMemoryMagics" not in dict.keys(manager.registry)
    assert instance not in ip.configurables
    assert ip.events.callbacks["post_run_cell"] == hooks_before
    result = ip.run_cell("%fact")
    assert not result.success  # the magic is really gone


def test_reload_ext_gives_a_fresh_instance(shell: InteractiveShell) -> None:
    first = magics(shell)
    with capture_output():
        shell.run_line_magic("reload_ext", "jupyter_agent_memory")
    second = magics(shell)
    assert second is not first
    assert shell.magics_manager.magics["line"]["fact"].__self__ is second
    assert first not in shell.configurables


def test_submodule_can_be_loaded_directly(ip: InteractiveShell, root: Path) -> None:
    ip.run_line_magic("load_ext", "jupyter_agent_memory.notebook.magics")
    try:
        assert "fact" in ip.magics_manager.magics["line"]
    finally:
        ip.run_line_magic("unload_ext", "jupyter_agent_memory.notebook.magics")
    assert "fact" not in ip.magics_manager.magics["line"]


def test_help_shows_argparse_usage_and_examples(shell: InteractiveShell) -> None:
    for name, expected in [
        ("fact", ["%fact [--raw] [--history] [--diff [SHA]] [--restore SHA]", "--agent AGENT",
                  "%fact --restore 3f2a9c1"]),
        ("journal", ["-t TAG, --tag TAG", "--since ISO", "-n N, --limit N",
                     "%journal append Met Ana about the Q3 report -t meeting -t q3"]),
        ("memprompt", ["--workspace DIR", "--facts", "--raw", "--diff", "%memprompt --raw"]),
        ("agent_memory", ["--template T", "%agent_memory ./demo-agent"]),
    ]:
        with capture_output() as cap:
            shell.run_line_magic("pinfo", f"%{name}")
        for text in expected:
            assert text in cap.stdout, (name, text)
    with capture_output() as cap:
        shell.run_line_magic("pinfo", "%%fact_update")
    assert "Memory updated." in cap.stdout
    assert "%%fact_update [--agent AGENT]" in cap.stdout


def test_config_traitlets(shell: InteractiveShell, root: Path) -> None:
    AgentMemory.open("research")
    with capture_output():
        shell.run_line_magic("config", "AgentMemoryMagics.default_agent = 'research'")
        shell.run_line_magic("config", "AgentMemoryMagics.budget_tokens = 5")
    instance = magics(shell)
    assert instance.default_agent == "research"
    assert instance.memory.path == (root / "research").resolve()
    view, _ = line(shell, "memprompt")
    assert view.budget_tokens == 5
    assert view.warnings


# -- %agent_memory -------------------------------------------------------------------------


def test_agent_memory_selects_folder_and_id(shell: InteractiveShell, root: Path) -> None:
    result, cap = line(shell, "agent_memory ./demo")
    assert result is None
    demo = Path("demo").resolve()
    assert cap.stdout == f"Active agent: {demo}\n"
    assert (demo / "memory").is_dir() and (demo / "SOUL.md").is_file()
    assert magics(shell).memory.path == demo

    _, cap = line(shell, "agent_memory research")
    research = (root / "research").resolve()
    assert cap.stdout == f"Active agent: 'research' ({research})\n"
    assert magics(shell).memory.agent_id == "research"

    # --agent is the same as TARGET; giving two different ones is refused.
    line(shell, "agent_memory --agent ./demo")
    assert magics(shell).memory.path == demo
    with pytest.raises(UsageError, match="either as TARGET or as --agent"):
        line(shell, "agent_memory research --agent ./demo")


def test_default_agent_is_the_engine_default(shell: InteractiveShell, root: Path) -> None:
    AgentMemory.open()
    result, _ = line(shell, "fact")
    assert str(result) == "(FACT.md is empty)"
    assert magics(shell).memory.path == (root / "default").resolve()


@pytest.mark.parametrize(
    "magic",
    ["fact", "fact --history", "journal", "journal search x", "memprompt", "memprompt --facts",
     "fact --agent nosuch", "journal --agent ../outside", "memprompt --agent typo"],
)
def test_read_only_magics_refuse_a_missing_agent_and_create_nothing(
    shell: InteractiveShell, root: Path, tmp_path: Path, magic: str
) -> None:
    with pytest.raises(UsageError) as info:
        shell.run_line_magic(*magic.split(" ", 1)) if " " in magic else shell.run_line_magic(
            magic, ""
        )
    assert "does not exist (no folder at " in str(info.value)
    assert "%agent_memory " in str(info.value)
    assert not root.exists()
    assert not (tmp_path.parent / "outside").exists()


def test_writing_magics_refuse_a_missing_agent_too(shell: InteractiveShell, root: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        shell.run_line_magic("journal", "append hello")
    with pytest.raises(UsageError, match="does not exist"):
        shell.run_cell_magic("fact_update", "--agent typo", "- x\n")
    assert not root.exists()


def test_agent_memory_without_target_creates_the_default_agent(
    shell: InteractiveShell, root: Path
) -> None:
    with capture_output():
        shell.run_line_magic("config", "AgentMemoryMagics.panel = 'never'")
    summary, _ = line(shell, "agent_memory")
    assert isinstance(summary, AgentSummary)
    assert (root / "default" / "memory").is_dir()


def test_agent_memory_without_argument_in_terminal_is_a_summary(
    shell: InteractiveShell, mem: AgentMemory
) -> None:
    mem.update_facts("- one\n")
    mem.update_facts("- two\n")
    mem.append("hello", ["x"])
    summary, cap = line(shell, "agent_memory")
    assert cap.stdout == ""
    assert isinstance(summary, AgentSummary)
    text = fmt(shell, summary)["text/plain"]
    journal_size = (mem.path / "memory" / "JOURNAL.jsonl").stat().st_size
    assert text.splitlines() == [
        "agent          (folder path)",
        f"folder         {mem.path}",
        "SOUL.md        0 B",
        "USER.md        0 B",
        f"FACT.md        6 B (sha256 {mem.facts_sha256[:12]}, 1 earlier versions)",
        f"JOURNAL.jsonl  {journal_size} B",
    ]
    assert "<table" in fmt(shell, summary)["text/html"]


def test_agent_memory_without_argument_can_show_the_panel(
    shell: InteractiveShell, mem: AgentMemory
) -> None:
    from jupyter_agent_memory.notebook.panel import MemoryPanel

    magics(shell).panel = "always"
    panel, _ = line(shell, "agent_memory")
    try:
        assert isinstance(panel, MemoryPanel)
        assert panel.mem.path == mem.path
        assert repr(panel) == "MemoryPanel('demo')"
    finally:
        panel.close()


def test_agent_memory_panel_is_reused_until_closed(shell: InteractiveShell,
                                                    mem: AgentMemory) -> None:
    magics(shell).panel = "always"
    first, _ = line(shell, "agent_memory")
    again, _ = line(shell, "agent_memory")
    assert again is first
    first.close()
    fresh, _ = line(shell, "agent_memory")
    assert fresh is not first
    with capture_output():
        shell.run_line_magic("config", "AgentMemoryMagics.budget_tokens = 10")
    rebuilt, _ = line(shell, "agent_memory")
    try:
        assert rebuilt is not fresh and rebuilt.builder.budget_tokens == 10
        from jupyter_agent_memory.notebook.panel import is_live

        assert not is_live(fresh)
    finally:
        rebuilt.close()


def test_agent_memory_with_template(shell: InteractiveShell, root: Path) -> None:
    _, cap = line(shell, "agent_memory ./guided --template guide")
    folder = Path("guided").resolve()
    assert cap.stdout.splitlines()[0] == f"Active agent: {folder}"
    assert cap.stdout.splitlines()[1].startswith("Provisioned from template ")
    record = json.loads((folder / ".template.json").read_text())
    assert record["template"] == "guide"
    assert (folder / "SOUL.md").read_text().strip()
    summary, _ = line(shell, "agent_memory")
    assert summary.template == record["name"]


def test_agent_memory_bad_template_changes_nothing(shell: InteractiveShell,
                                                   mem: AgentMemory) -> None:
    before = sorted(p.name for p in mem.path.iterdir())
    with pytest.raises(UsageError) as info:
        line(shell, "agent_memory --template no-such-template")
    assert "no-such-template" in str(info.value)
    assert "\n" not in str(info.value)
    assert sorted(p.name for p in mem.path.iterdir()) == before


@pytest.mark.parametrize("target", ["system", "SYSTEM"])
def test_agent_memory_refuses_reserved_id(shell: InteractiveShell, mem: AgentMemory,
                                          root: Path, target: str) -> None:
    with pytest.raises(UsageError) as info:
        line(shell, f"agent_memory {target}")
    assert "reserved" in str(info.value)
    assert magics(shell).memory.path == mem.path  # the active agent did not change
    assert not (root / target).exists()


def test_unsafe_agent_path_is_one_usage_error(shell: InteractiveShell, tmp_path: Path) -> None:
    real = tmp_path / "real-agent"
    real.mkdir()
    Path("linked").symlink_to(real)
    with pytest.raises(UsageError) as info:
        line(shell, "agent_memory ./linked")
    message = str(info.value)
    assert "linked" in message and "\n" not in message
    assert list(real.iterdir()) == []  # nothing was written through the link
    result = shell.run_cell("%fact --agent ./linked")
    assert not result.success


# -- %fact and %%fact_update ---------------------------------------------------------------


def test_fact_update_writes_prints_tool_text_and_diff(shell: InteractiveShell,
                                                      mem: AgentMemory) -> None:
    cap = cell(shell, "fact_update", "# Facts\n- The user prefers metric units.\n")
    assert cap.stdout == "Memory updated.\n"
    assert mem.facts == "# Facts\n- The user prefers metric units.\n"
    (diff,) = cap.outputs
    assert diff.data["text/plain"].splitlines() == [
        "--- FACT.md (before)",
        "+++ FACT.md (after)",
        "@@ -0,0 +1,2 @@",
        "+# Facts",
        "+- The user prefers metric units.",
    ]
    assert "+- The user prefers metric units." in diff.data["text/html"]

    cap = cell(shell, "fact_update", "# Facts\n- The user prefers imperial units.\n")
    assert cap.stdout == "Memory updated.\n"
    assert cap.outputs[0].data["text/plain"].splitlines()[2:] == [
        "@@ -1,2 +1,2 @@",
        " # Facts",
        "-- The user prefers metric units.",
        "+- The user prefers imperial units.",
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # IPython itself refuses a cell magic with no body at all.
        ("", r"^%%fact_update is a cell magic, but the cell body is empty\.$"),
        # The editing surfaces' one guard (the same text as CLI fact --set and REST PUT).
        ("\n", "^" + re.escape(EmptyEditError().message) + "$"),
        ("   \n\n  ", "^" + re.escape(EmptyEditError().message) + "$"),
    ],
)
def test_fact_update_empty_body_is_refused(shell: InteractiveShell, mem: AgentMemory,
                                           body: str, message: str) -> None:
    mem.update_facts("- keep me\n")
    with pytest.raises(UsageError, match=message):
        cell(shell, "fact_update", body)
    assert mem.facts == "- keep me\n"
    assert len(mem.history()) == 0


def test_fact_update_run_as_cell_reports_usage_error(shell: InteractiveShell,
                                                     mem: AgentMemory) -> None:
    with capture_output() as cap:
        result = shell.run_cell("%%fact_update\n\n")
    assert not result.success
    assert cap.stderr.strip() == "UsageError: " + EmptyEditError().message
    assert mem.facts == ""


def test_fact_shows_markdown_and_plain_text(shell: InteractiveShell, mem: AgentMemory) -> None:
    view, _ = line(shell, "fact")
    assert isinstance(view, FactsView)
    assert fmt(shell, view) == {"text/plain": "(FACT.md is empty)",
                                "text/html": "<p><em>FACT.md is empty.</em></p>"}
    mem.update_facts("# Facts\n- **metric** units <b>\n")
    view, _ = line(shell, "fact")
    bundle = fmt(shell, view)
    assert "text/markdown" not in bundle  # front ends render it with raw HTML live
    assert "<h1>Facts</h1>" in bundle["text/html"]
    assert "<li><strong>metric</strong> units &lt;b&gt;</li>" in bundle["text/html"]
    assert bundle["text/plain"] == "# Facts\n- **metric** units <b>\n"
    assert view.sha256 == mem.facts_sha256


def test_fact_raw_returns_the_exact_text(shell: InteractiveShell, mem: AgentMemory) -> None:
    mem.update_facts("line one\nline two")
    result, cap = line(shell, "fact --raw")
    assert isinstance(result, str) and isinstance(result, RawText)
    assert result == "line one\nline two" and cap.stdout == ""
    # Displayed as the text itself: no quotes, no escapes.
    assert fmt(shell, result) == {"text/plain": "line one\nline two"}
    mem.update_facts("ends with newline\n")
    result, _ = line(shell, "fact --raw")
    assert result == "ends with newline\n"
    # As code uses it: an assignment gets the text and shows nothing.
    shell.run_cell("facts = %fact --raw")
    assert shell.user_ns["facts"] == "ends with newline\n"


def test_fact_history_diff_and_restore(shell: InteractiveShell, mem: AgentMemory) -> None:
    empty, cap = line(shell, "fact --diff")
    assert empty is None and cap.stdout == "No earlier FACT.md versions yet.\n"
    history, _ = line(shell, "fact --history")
    assert isinstance(history, HistoryView) and history == []
    assert fmt(shell, history)["text/plain"] == "No earlier FACT.md versions yet."

    first_sha = mem.update_facts("- a\n- b\n")
    mem.update_facts("- a\n- c\n")
    mem.update_facts("- a\n- d\n")
    history, _ = line(shell, "fact --history")
    assert history == mem.history()
    assert [v["size"] for v in history] == [8, 8]
    text = fmt(shell, history)["text/plain"].splitlines()
    assert text[0] == f"{history[0]['ts']}  {history[0]['sha256'][:12]}  8 B"
    assert f'title="{history[1]["sha256"]}"' in fmt(shell, history)["text/html"]

    latest, _ = line(shell, "fact --diff")
    assert isinstance(latest, DiffView)
    assert latest.lines[0] == f"--- FACT.md@{history[0]['sha256'][:12]}"
    assert latest.lines[3:] == [" - a", "-- c", "+- d"]

    older, _ = line(shell, f"fact --diff {first_sha[:7]}")
    assert older.lines[0] == f"--- FACT.md@{first_sha[:7]}"
    assert older.lines[3:] == [" - a", "-- b", "+- d"]

    result, cap = line(shell, f"fact --restore {first_sha[:10]}")
    assert isinstance(result, DiffView)
    assert mem.facts == "- a\n- b\n"
    assert mem.facts_sha256 == first_sha
    assert cap.stdout == (f"Restored FACT.md to version {first_sha[:12]}; the version it "
                          "replaced is kept in the history.\n")
    assert fmt(shell, result)["text/plain"].splitlines()[3:] == [" - a", "-- d", "+- b"]
    assert len(mem.history()) == 3  # a restore is a normal update


def test_fact_bad_sha_and_conflicting_options(shell: InteractiveShell, mem: AgentMemory) -> None:
    mem.update_facts("- a\n")
    mem.update_facts("- b\n")
    for args in ("fact --restore 0000000", "fact --diff 0000000", "fact --restore zz"):
        with pytest.raises(UsageError) as info:
            line(shell, args)
        assert "\n" not in str(info.value) and str(info.value)
    assert mem.facts == "- b\n"
    with pytest.raises(UsageError, match=r"^Choose one of --raw, --history$"):
        line(shell, "fact --raw --history")
    with pytest.raises(UsageError, match="unrecognized arguments: --bogus"):
        line(shell, "fact --bogus")


def test_fact_agent_option_acts_on_another_agent(shell: InteractiveShell, root: Path,
                                                 mem: AgentMemory) -> None:
    AgentMemory.open("other")
    with capture_output() as cap:
        shell.run_cell_magic("fact_update", "--agent other", "- other agent\n")
    assert cap.stdout == "Memory updated.\n"
    other = AgentMemory.open("other")
    assert other.facts == "- other agent\n"
    assert mem.facts == ""
    view, _ = line(shell, "fact --agent other")
    assert str(view) == "- other agent\n"
    assert magics(shell).memory.path == mem.path  # --agent does not switch


# -- %journal ------------------------------------------------------------------------------


def test_journal_append_prints_tool_text(shell: InteractiveShell, mem: AgentMemory) -> None:
    result, cap = line(shell, "journal append Met Ana about the Q3 report -t meeting -t q3")
    (entry,) = journal_lines(mem)
    assert entry["text"] == "Met Ana about the Q3 report"
    assert entry["tags"] == ["meeting", "q3"]
    assert TS.match(entry["ts"])
    assert result == f"Journal entry added at {entry['ts']}." and cap.stdout == ""
    assert fmt(shell, result)["text/plain"] == f"Journal entry added at {entry['ts']}."


@pytest.mark.parametrize(
    ("args", "text", "tags"),
    [
        ("append Don't forget the milk", "Don't forget the milk", []),
        ('append "two  spaces kept"', "two  spaces kept", []),
        ('append she said "hi" twice', 'she said "hi" twice', []),
        ('append -t "a tag" tagged first', "tagged first", ["a tag"]),
        ("append -- -5 degrees outside", "-5 degrees outside", []),
        ("append Ünïcode ✓ -t café", "Ünïcode ✓", ["café"]),
    ],
)
def test_journal_append_text_forms(shell: InteractiveShell, mem: AgentMemory, args: str,
                                   text: str, tags: list[str]) -> None:
    line(shell, f"journal {args}")
    (entry,) = journal_lines(mem)
    assert (entry["text"], entry["tags"]) == (text, tags)


def test_journal_append_empty_text_is_refused(shell: InteractiveShell, mem: AgentMemory) -> None:
    # No text is a usage mistake: the usage line, not the tool's message for models.
    for args in ("journal append", "journal append -t x", 'journal append ""',
                 "journal append '   '"):
        with pytest.raises(UsageError) as refused:
            line(shell, args)
        assert str(refused.value) == (
            "The entry text is missing. Usage: %journal append TEXT [-t TAG]...")
    assert journal_lines(mem) == []
    with pytest.raises(UsageError, match=r"^--since applies to search, not append$"):
        line(shell, "journal append hello --since 2026-01-01")
    assert journal_lines(mem) == []


def test_journal_list_and_search(shell: InteractiveShell, mem: AgentMemory) -> None:
    empty, _ = line(shell, "journal")
    assert empty == [] and fmt(shell, empty)["text/plain"] == "No journal entries found."
    mem.append("Kickoff with Ana", ["meeting"])
    mem.append("Wrote the report draft", ["writing"])
    mem.append("Review of the REPORT with Bo", ["Meeting", "review"])

    latest, _ = line(shell, "journal")
    assert isinstance(latest, JournalResult)
    assert [e["text"] for e in latest] == [
        "Review of the REPORT with Bo", "Wrote the report draft", "Kickoff with Ana"]
    assert latest == list(mem.search())

    hits, _ = line(shell, "journal search report")
    assert [e["text"] for e in hits] == ["Review of the REPORT with Bo", "Wrote the report draft"]
    tagged, _ = line(shell, "journal search -t MEETING")
    assert [e["text"] for e in tagged] == ["Review of the REPORT with Bo", "Kickoff with Ana"]
    one, _ = line(shell, "journal search -t meeting -n 1")
    assert [e["text"] for e in one] == ["Review of the REPORT with Bo"]
    two, _ = line(shell, "journal -n 2")
    assert len(two) == 2
    none, _ = line(shell, "journal search nothing-like-this")
    assert none == []
    assert fmt(shell, none)["text/plain"] == "No matching journal entries found."

    text = fmt(shell, one)["text/plain"].splitlines()
    assert text == [f"{one[0]['ts']}  [Meeting, review] Review of the REPORT with Bo",
                    "(1 entry, newest first)"]


def test_journal_time_window(shell: InteractiveShell, mem: AgentMemory) -> None:
    path = mem.path / "memory" / "JOURNAL.jsonl"
    rows = [("2026-01-01T10:00:00.000Z", "new year"), ("2026-02-01T10:00:00.000Z", "february"),
            ("2026-03-01T10:00:00.000Z", "march")]
    path.write_text("".join(
        json.dumps({"ts": ts, "tags": [], "text": t}, separators=(",", ":")) + "\n"
        for ts, t in rows))
    hits, _ = line(shell, "journal search --since 2026-02-01 --until 2026-03-01T10:00:00Z")
    assert [e["text"] for e in hits] == ["march", "february"]
    hits, _ = line(shell, "journal --until 2026-01-31")
    assert [e["text"] for e in hits] == ["new year"]
    with pytest.raises(UsageError) as info:
        line(shell, "journal search --since yesterday")
    assert "since" in str(info.value) and "yesterday" in str(info.value)
    with pytest.raises(UsageError) as info:
        line(shell, "journal search --until 2026-13-45")
    assert "until" in str(info.value)


def test_journal_html_escapes_untrusted_values(shell: InteractiveShell, mem: AgentMemory) -> None:
    mem.append('<script>alert("x")</script> & more', ['<img src=x onerror="y">'])
    path = mem.path / "memory" / "JOURNAL.jsonl"
    with path.open("a") as handle:
        handle.write(json.dumps({"ts": "2030-01-01T00:00:00.000Z", "tags": [], "text": "t",
                                 "source": "<i>tool</i>"}) + "\n")
    result, _ = line(shell, "journal")
    page = fmt(shell, result)["text/html"]
    assert "<script>" not in page and "<img" not in page and "<i>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; more" in page
    assert "&lt;img src=x onerror=&quot;y&quot;&gt;" in page
    assert re.search(r"<th [^>]*>source</th>", page) and "&lt;i&gt;tool&lt;/i&gt;" in page
    assert result[0]["source"] == "<i>tool</i>"  # extra keys are kept


def test_journal_bad_input(shell: InteractiveShell, mem: AgentMemory) -> None:
    mem.append("x", ["a"])
    cases = [
        ("journal bogus", r"^Unknown journal command 'bogus', expected append or search$"),
        ("journal search -t a -t b", r"^search filters on one tag at a time"),
        ("journal search -n many", r"invalid int value: 'many'"),
        ("journal --wat", r"unrecognized arguments: --wat"),
    ]
    for args, pattern in cases:
        with pytest.raises(UsageError, match=pattern):
            line(shell, args)
    assert [e["text"] for e in journal_lines(mem)] == ["x"]


def test_journal_usage_error_in_a_cell_is_one_line(shell: InteractiveShell,
                                                   mem: AgentMemory) -> None:
    with capture_output() as cap:
        result = shell.run_cell("%journal append")
    assert not result.success
    assert cap.stderr == (
        "UsageError: The entry text is missing. Usage: %journal append TEXT [-t TAG]...\n")


# -- %memprompt ----------------------------------------------------------------------------


def test_memprompt_matches_the_engine(shell: InteractiveShell, mem: AgentMemory) -> None:
    mem.update_facts("- The user prefers metric units.\n")
    view, _ = line(shell, "memprompt")
    assert isinstance(view, PromptView)
    expected = PromptBuilder().build(mem, workspace=os.getcwd())
    assert view.text == expected.text
    assert [s.name for s in view.sections] == [s.name for s in expected.sections]
    bundle = fmt(shell, view)
    plain = bundle["text/plain"]
    assert plain.startswith(
        f"System prompt: {len(expected.text)} chars · ~{expected.tokens} tokens")
    assert expected.text in plain
    assert "## Memories" in bundle["text/html"]
    assert "&lt;facts&gt;" in bundle["text/html"]  # the prompt is shown escaped

    raw, cap = line(shell, "memprompt --raw")
    assert isinstance(raw, RawText) and raw == expected.text
    assert cap.stdout == "" and cap.stderr == ""
    shell.run_cell("text = %memprompt --raw")
    assert shell.user_ns["text"] == expected.text


def test_memprompt_workspace_and_facts(shell: InteractiveShell, mem: AgentMemory,
                                       tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "system.md").write_text("You are a careful research assistant.\n")
    view, _ = line(shell, f"memprompt --workspace {project}")
    assert view.text.startswith("You are a careful research assistant.\n\n")
    assert view.base_from_file is True
    with pytest.raises(UsageError) as info:
        line(shell, f"memprompt --workspace {tmp_path / 'missing'}")
    # The same text as every surface (the engine decides what a workspace is).
    missing = tmp_path / "missing"
    assert str(info.value) == f"Workspace {missing} does not exist; give an existing folder"

    result, cap = line(shell, "memprompt --facts")
    assert result is None
    assert cap.stdout == "No Agent Knowledge section: FACT.md is empty.\n"
    mem.update_facts("- metric\n")
    view, _ = line(shell, "memprompt --facts")
    assert view.text == PromptBuilder().build_facts_section(mem)
    assert view.text.startswith("## Agent Knowledge")


def test_memprompt_diff_against_previous_build(shell: InteractiveShell, mem: AgentMemory) -> None:
    result, cap = line(shell, "memprompt --diff")
    assert result is None
    assert cap.stdout.startswith("No earlier build of this prompt in this session")
    same, _ = line(shell, "memprompt --diff")
    assert isinstance(same, DiffView) and not same.changed
    assert fmt(shell, same)["text/plain"] == "No differences."
    mem.update_facts("- learned something\n")
    changed, _ = line(shell, "memprompt --diff")
    assert changed.changed
    assert "+- learned something" in changed.lines
    assert changed.lines[:2] == ["--- previous build", "+++ this build"]
    with pytest.raises(UsageError, match=r"^Choose one of --raw, --diff$"):
        line(shell, "memprompt --raw --diff")


def test_memprompt_budget_warning(shell: InteractiveShell, mem: AgentMemory) -> None:
    mem.update_facts("- fact\n" * 200)
    view, cap = line(shell, "memprompt --budget 10")
    assert cap.stderr == ""  # shown in the view, not repeated as a Python warning
    assert view.over_budget and view.warnings
    plain = fmt(shell, view)["text/plain"]
    assert f"WARNING: {view.warnings[0]}" in plain
    assert "of a 10-token budget" in plain
    assert "jp-AgentMemory-warning" in fmt(shell, view)["text/html"]
    _, cap = line(shell, "memprompt --raw --budget 10")
    assert cap.stderr == f"WARNING: {view.warnings[0]}\n"
    assert "WARNING" not in cap.stdout
    ok, _ = line(shell, "memprompt --budget 100000")
    assert not ok.warnings and not ok.over_budget
    for bad in ("0", "-5"):
        refused = rf"^'budget_tokens' must be a positive integer, got {bad}$"
        with pytest.raises(UsageError, match=refused):
            line(shell, f"memprompt --budget {bad}")


def test_memprompt_uses_template_configuration(shell: InteractiveShell) -> None:
    line(shell, "agent_memory ./guided --template guide")
    view, _ = line(shell, "memprompt")
    from jupyter_agent_memory.engine.prompt import PromptBuilder

    expected = PromptBuilder().build_session(AgentMemory.open(Path("guided").resolve()))
    assert view.text == expected.text


def test_memprompt_follows_tool_name_config(shell: InteractiveShell, mem: AgentMemory) -> None:
    before, _ = line(shell, "memprompt")
    assert before.text == PromptBuilder().build(mem).text  # what openai_tools() offers
    with capture_output():
        shell.run_line_magic("config", "AgentMemoryMagics.tool_name = 'mcp__agent-memory__memory'")
    try:
        after, _ = line(shell, "memprompt")
    finally:
        with capture_output():
            shell.run_line_magic("config", "AgentMemoryMagics.tool_name = 'memory'")
    assert "`mcp__agent-memory__memory`" in after.text
    assert after.text == PromptBuilder(tool_name="mcp__agent-memory__memory").build(mem).text


def test_symlinked_fact_file_is_refused(shell: InteractiveShell, mem: AgentMemory,
                                        tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("secret\n")
    fact = mem.path / "memory" / "FACT.md"
    fact.symlink_to(outside)
    for run in (lambda: line(shell, "fact"),
                lambda: cell(shell, "fact_update", "- overwrite\n")):
        with pytest.raises(UsageError) as info:
            run()
        assert "FACT.md" in str(info.value) and "\n" not in str(info.value)
    assert outside.read_text() == "secret\n"
    assert fact.is_symlink()


def test_corrupted_journal_lines_are_counted(shell: InteractiveShell, mem: AgentMemory) -> None:
    mem.append("good one")
    path = mem.path / "memory" / "JOURNAL.jsonl"
    with path.open("a") as handle:
        handle.write("{not json\n")
    mem.append("good two")
    with pytest.warns(UserWarning, match="Skipped 1 corrupted line"):
        result, _ = line(shell, "journal")
    assert [e["text"] for e in result] == ["good two", "good one"]
    assert result.skipped == 1
    assert fmt(shell, result)["text/plain"].splitlines()[-1] == (
        "(2 entries, newest first; 1 corrupted line skipped)")
