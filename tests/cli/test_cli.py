"""The command line (README.md): every sub-command, texts and exit codes."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
from cli_calls import run

import jupyter_agent_memory

# The tests that swap mcp_server for a fake still reach its real limits and service modules,
# whichever test ran first (the CLI imports them by their full names).
import jupyter_agent_memory.mcp_server.limits  # noqa: F401
import jupyter_agent_memory.mcp_server.service  # noqa: F401
from jupyter_agent_memory import AgentMemory, PromptBuilder
from jupyter_agent_memory.cli import DEMO_FACT, main
from jupyter_agent_memory.errors import EmptyEditError

ADDED = re.compile(r"^Journal entry added at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\.\n$")
ERROR = "jupyter-agent-memory: error: "


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# -- init --------------------------------------------------------------------------------------


def test_init_creates_the_default_agent(
    agents_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "init") == (0, f"Agent ready at {agents_root / 'default'}\n", "")
    assert (agents_root / "default" / "memory").is_dir()


def test_init_agent_before_or_after_the_command(
    agents_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "init", "--agent", "a") == (0, f"Agent ready at {agents_root / 'a'}\n", "")
    assert run(capsys, "--agent", "b", "init") == (0, f"Agent ready at {agents_root / 'b'}\n", "")


def test_init_with_a_folder_path(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 agents_root: Path) -> None:
    assert run(capsys, "init", "--agent", "./demo-agent") == (
        0, f"Agent ready at {tmp_path / 'demo-agent'}\n", ""
    )
    assert not agents_root.exists()


def test_init_with_template(agents_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "init", "--agent", "g", "--template", "guide")
    assert (code, out, err) == (0, f"Agent 'Memory Guide' ready at {agents_root / 'g'}\n", "")
    assert AgentMemory.open("g").template_info()["template"] == "guide"  # type: ignore[index]


def test_init_invalid_agent_id(agents_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "init", "--agent", "System") == (
        1, "", ERROR + 'Invalid agent id "System": "system" is reserved\n'
    )
    assert not agents_root.exists()


def test_init_unknown_template_writes_nothing(
    agents_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "init", "--agent", "x", "--template", "nope")
    assert (code, out) == (1, "")
    assert err == ERROR + (
        'Unknown template "nope": not a built-in template (assistant, guide) nor a folder\n'
    )
    assert not (agents_root / "x").exists()


# -- fact --------------------------------------------------------------------------------------


def test_fact_shows_facts_exactly(agents_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mem = AgentMemory.open("f")  # only init creates agents
    fact = mem.path / "memory" / "FACT.md"
    # stdout stays the exact (empty) file, so `fact > backup.md` is a faithful copy.
    assert run(capsys, "fact", "--agent", "f") == (0, "", f"FACT.md is empty ({fact}).\n")
    mem.update_facts("- one\n- two")
    assert run(capsys, "fact", "--agent", "f") == (0, "- one\n- two", "")
    code, out, err = run(capsys, "fact", "--json", "--agent", "f")
    assert (code, err) == (0, "")
    assert json.loads(out) == {"path": str(fact), "content": "- one\n- two", "sha256": sha(
        "- one\n- two"
    )}


def test_fact_set_from_a_file(agents_root: Path, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    AgentMemory.open("f")  # only init creates agents
    source = tmp_path / "facts.md"
    source.write_text("- from file ✓\n", encoding="utf-8")
    assert run(capsys, "fact", "--agent", "f", "--set", str(source)) == (0, "Memory updated.\n", "")
    assert AgentMemory.open("f").facts == "- from file ✓\n"


def test_fact_set_from_stdin(agents_root: Path, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    AgentMemory.open("f")  # only init creates agents
    monkeypatch.setattr(sys, "stdin", io.StringIO("- from stdin\n"))
    assert run(capsys, "fact", "--agent", "f", "--set", "-") == (0, "Memory updated.\n", "")
    assert AgentMemory.open("f").facts == "- from stdin\n"


@pytest.mark.parametrize("body", ["", "\n", "  \n\t\n"])
def test_fact_set_refuses_an_empty_body_with_the_editing_guard(
    agents_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str
) -> None:
    AgentMemory.open("f").update_facts("kept\n")
    (tmp_path / "empty.md").write_text(body)
    assert run(capsys, "fact", "--agent", "f", "--set", str(tmp_path / "empty.md")) == (
        1, "", ERROR + EmptyEditError().message + "\n"
    )
    assert AgentMemory.open("f").facts == "kept\n"


def test_fact_set_missing_file(agents_root: Path, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    AgentMemory.open("f")  # only init creates agents
    code, out, err = run(capsys, "fact", "--agent", "f", "--set", str(tmp_path / "nope.md"))
    assert (code, out) == (1, "")
    assert err.startswith(ERROR) and str(tmp_path / "nope.md") in err
    assert "No such file or directory" in err


def test_fact_set_from_a_file_that_is_not_utf8(agents_root: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "latin1.md"
    source.write_bytes("- caf\u00e9\n".encode("latin-1"))
    AgentMemory.open("f").update_facts("kept\n")
    code, out, err = run(capsys, "fact", "--agent", "f", "--set", str(source))
    assert (code, out) == (1, "")
    assert err.startswith(ERROR) and str(source) in err, err
    assert "Traceback" not in err
    assert AgentMemory.open("f").facts == "kept\n"


def test_fact_history_and_restore(agents_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    AgentMemory.open("h")  # only init creates agents
    assert run(capsys, "fact", "--agent", "h", "--history") == (
        0, "No previous FACT.md versions.\n", ""
    )
    mem = AgentMemory.open("h")
    mem.update_facts("v1\n")
    mem.update_facts("v2 is longer\n")
    mem.update_facts("v3\n")
    code, out, err = run(capsys, "fact", "--agent", "h", "--history")
    versions = mem.history()
    assert (code, err) == (0, "")
    assert out == "".join(
        f"{v['ts']}  {v['sha256'][:12]}  {v['size']} bytes\n" for v in versions
    )
    assert out.splitlines()[0].endswith(f"  {sha('v2 is longer' + chr(10))[:12]}  13 bytes")
    assert run(capsys, "fact", "--agent", "h", "--restore", sha("v1\n")[:8]) == (
        0, f"Restored FACT.md version {sha('v1' + chr(10))[:12]}.\n", ""
    )
    assert mem.facts == "v1\n"
    assert run(capsys, "fact", "--agent", "h", "--restore", "abc") == (
        1, "", ERROR + 'Invalid version "abc": give a sha256 or a prefix of at least 7 hex '
        "digits\n"
    )


def test_fact_options_are_exclusive(agents_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["fact", "--history", "--restore", "abcdefg"])
    assert info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


# -- journal -----------------------------------------------------------------------------------


def test_journal_append_and_search(agents_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    AgentMemory.open("j")  # only init creates agents
    assert run(capsys, "journal", "search", "--agent", "j") == (
        0, "No journal entries found.\n", ""
    )
    code, out, err = run(capsys, "journal", "append", "first entry", "-t", "a", "--tag", "B",
                         "--agent", "j")
    assert (code, err) == (0, "")
    assert ADDED.match(out), out
    run(capsys, "journal", "append", "second entry", "--agent", "j")
    entries = list(AgentMemory.open("j").entries())
    assert [(e["text"], e["tags"]) for e in entries] == [
        ("first entry", ["a", "B"]), ("second entry", [])
    ]
    assert out == f"Journal entry added at {entries[0]['ts']}.\n"

    code, out, err = run(capsys, "journal", "search", "--json", "--agent", "j")
    assert (code, err) == (0, "")
    # --json prints exactly the memory tool's text.
    assert out == json.dumps(entries[::-1], indent=2, ensure_ascii=False) + "\n"
    assert out == AgentMemory.open("j").call_tool({"action": "search"}) + "\n"
    assert json.loads(run(capsys, "--json", "journal", "search", "FIRST", "--agent", "j")[1]) == [
        entries[0]
    ]
    assert json.loads(run(capsys, "journal", "--json", "search", "-t", "b", "--agent", "j")[1]) == [
        entries[0]
    ]
    assert json.loads(run(capsys, "journal", "search", "-n", "1", "--json", "--agent", "j")[1]) == [
        entries[1]
    ]
    # People get one compact line per entry, newest first.
    assert run(capsys, "journal", "search", "--agent", "j") == (0, (
        f"{entries[1]['ts']}   second entry\n"
        f"{entries[0]['ts']}   #a #B  first entry\n"
    ), "")
    assert run(capsys, "journal", "search", "zzz", "--agent", "j") == (
        0, "No matching journal entries found.\n", ""
    )


def test_journal_search_time_window(agents_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mem = AgentMemory.open("w")
    (mem.path / "memory" / "JOURNAL.jsonl").write_text(
        '{"ts":"2026-01-01T10:00:00.000Z","tags":[],"text":"ten"}\n'
        '{"ts":"2026-01-01T12:00:00.000Z","tags":[],"text":"noon"}\n'
    )
    out = run(capsys, "journal", "search", "--json", "--agent", "w", "--since",
              "2026-01-01T11:00+00:00")[1]
    assert [e["text"] for e in json.loads(out)] == ["noon"]
    out = run(capsys, "journal", "search", "--json", "--agent", "w", "--until",
              "2026-01-01T10:00:00")[1]
    assert [e["text"] for e in json.loads(out)] == ["ten"]
    assert run(capsys, "journal", "search", "--agent", "w", "--since", "later") == (
        1, "", ERROR + "Invalid 'since': expected an ISO-8601 date or time, got \"later\"\n"
    )


def test_journal_append_empty_text(agents_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    AgentMemory.open("j")  # only init creates agents
    assert run(capsys, "journal", "append", "", "--agent", "j") == (
        1, "", ERROR + "'text' is required for append action\n"
    )
    assert not (agents_root / "j" / "memory" / "JOURNAL.jsonl").exists()


def test_journal_needs_a_verb(agents_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["journal"])
    assert info.value.code == 2
    assert "required: VERB" in capsys.readouterr().err


# -- prompt ------------------------------------------------------------------------------------


def test_prompt_prints_the_next_session_prompt(
    agents_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "SYSTEM.md").write_text("Base prompt.\n")
    mem = AgentMemory.open("p")
    mem.update_facts("- cli fact\n")
    code, out, err = run(capsys, "prompt", "--agent", "p", "--workspace", str(workspace))
    expected = PromptBuilder().build(mem, workspace=workspace)
    assert (code, out) == (0, expected.text + "\n")
    sizes = ", ".join(f"{s.name} {s.tokens}" for s in expected.sections)
    assert err == f"About {expected.tokens} tokens ({sizes}).\n"
    assert out.startswith("Base prompt.\n\n## Bootstrap Mode\n")
    code, out, _ = run(capsys, "prompt", "--agent", "p", "--workspace", str(workspace),
                       "--tool-name", "memory")
    assert out == PromptBuilder(tool_name="memory").build(mem, workspace=workspace).text + "\n"


def test_prompt_uses_the_template_settings(
    agents_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "init", "--agent", "g", "--template", "guide")
    code, out, err = run(capsys, "prompt", "--agent", "g", "--workspace", str(tmp_path))
    assert code == 0
    assert err.startswith("About ") and err.endswith("; budget 4000.\n")
    # The guide's instructions define its role and its SOUL is real: no bootstrap block.
    assert "## Bootstrap Mode" not in out
    assert "<soul>\n# Soul\n\nI am Mnemo" in out


def test_prompt_refuses_a_symlinked_system_md(
    agents_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    AgentMemory.open()  # only init creates agents
    (tmp_path / "real.md").write_text("x")
    (tmp_path / "system.md").symlink_to(tmp_path / "real.md")
    assert run(capsys, "prompt", "--workspace", str(tmp_path)) == (
        1, "", ERROR + f"Refusing to read {tmp_path / 'system.md'}: it is a symbolic link, "
        "not a regular file\n"
    )


# -- mcp, agents, demo, version ----------------------------------------------------------------


def test_mcp_serves_the_selected_agent(
    agents_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    AgentMemory.open("m")  # only init creates agents
    served: list[AgentMemory] = []
    fake = types.ModuleType("jupyter_agent_memory.mcp_server")
    fake.MemoryService = lambda memory, builder, **_: memory  # type: ignore[attr-defined]
    fake.serve_stdio = lambda service, problem: served.append(service)  # type: ignore[attr-defined]
    fake.serve_http = lambda *a, **k: pytest.fail("stdio is the default")  # type: ignore[attr-defined]
    fake.require_mcp = lambda: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "jupyter_agent_memory.mcp_server", fake)
    assert run(capsys, "mcp", "--agent", "m") == (0, "", "")
    assert [(m.agent_id, m.path) for m in served] == [("m", agents_root / "m")]


def test_mcp_without_the_extra_is_a_clear_error(
    agents_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    AgentMemory.open()  # only init creates agents
    hint = 'The MCP server needs the mcp package: pip install "jupyter-agent-memory[mcp]"'

    def require_mcp() -> None:
        raise ImportError(hint)

    fake = types.ModuleType("jupyter_agent_memory.mcp_server")
    fake.require_mcp = require_mcp  # type: ignore[attr-defined]
    fake.MemoryService = lambda *a, **k: pytest.fail("must not serve")  # type: ignore[attr-defined]
    fake.serve_stdio = lambda *a: pytest.fail("must not serve")  # type: ignore[attr-defined]
    fake.serve_http = lambda *a, **k: pytest.fail("must not serve")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "jupyter_agent_memory.mcp_server", fake)
    assert run(capsys, "mcp") == (1, "", ERROR + hint + "\n")


def test_agents_lists_the_root(agents_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "agents") == (0, f"No agents under {agents_root} yet.\n", "")
    AgentMemory.open("zeta")
    AgentMemory.open("alpha")
    assert run(capsys, "agents") == (0, f"Agents under {agents_root}:\n  alpha\n  zeta\n", "")


def test_demo_runs_on_its_own_agent_and_is_idempotent(
    agents_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "demo")
    assert (code, err) == (0, "")
    mem = AgentMemory.open("demo", create=False)
    assert not (agents_root / "default").exists()  # the user's default agent is left alone
    assert out.startswith(f"Agent 'Memory Guide' at {mem.path}\n\n")
    assert '  memory(action="update")  -> Memory updated.\n' in out
    assert re.search(r'  memory\(action="append"\)  -> Journal entry added at \S+Z\.\n', out)
    assert DEMO_FACT in mem.facts
    assert f"<facts>\n{mem.facts.strip()}\n</facts>" in out
    bin_dir = Path(sys.executable).parent
    script = bin_dir / "jupyter-agent-memory"
    assert out.endswith(
        "Next:\n"
        "  1. JupyterLab, with the Agent Memory sidebar (left) on 'demo':\n"
        f"       {bin_dir / 'jupyter'} lab --AgentMemoryServer.default_agent=demo\n"
        "  2. In a notebook cell:\n"
        "       %load_ext jupyter_agent_memory\n"
        "       %agent_memory demo\n"
        "  3. An MCP client (Claude Desktop, VS Code, Cursor, Cherry Studio) starts:\n"
        f'       {{"command": "{script}", "args": ["mcp", "--agent", "demo"]}}\n'
    )
    record = (mem.path / ".template.json").read_bytes()
    before = (mem.path / "memory" / "JOURNAL.jsonl").read_bytes(), mem.facts
    # Run again: nothing is written twice.
    code, out, _ = run(capsys, "demo")
    assert code == 0
    assert "(FACT.md already holds the demo fact)" in out
    assert "(the journal already records the demo)" in out
    assert ((mem.path / "memory" / "JOURNAL.jsonl").read_bytes(), mem.facts) == before
    assert (mem.path / ".template.json").read_bytes() == record  # not even its date
    assert list_agent_ids(agents_root) == ["demo"]


def test_demo_json_is_one_object_with_the_same_steps(
    agents_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (agents_root.parent / "notebooks").mkdir()
    (agents_root.parent / "notebooks" / "01-quickstart.ipynb").write_text("{}")
    code, out, err = run(capsys, "demo", "--json")
    assert (code, err) == (0, "")
    data = json.loads(out)  # nothing but the object on stdout
    mem = AgentMemory.open("demo", create=False)
    assert (data["agent"], data["path"], data["template"]) == ("demo", str(mem.path), "guide")
    assert [step["action"] for step in data["session_1"]] == ["update", "append"]
    assert data["prompt"] == PromptBuilder().build_session(mem).text
    lab = data["next"][0]["commands"]
    assert lab == [
        f"{Path(sys.executable).parent / 'jupyter'} lab --AgentMemoryServer.default_agent=demo "
        "notebooks/01-quickstart.ipynb"
    ]


def list_agent_ids(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir())


def test_demo_on_a_named_agent(agents_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "demo", "--agent", "trial")[0] == 0
    assert list_agent_ids(agents_root) == ["trial"]


def test_help_shows_examples_templates_environment_and_root(
    agents_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "examples:\n  jupyter-agent-memory demo " in out
    assert "templates: assistant, guide\n" in out
    assert f"agents root: {agents_root}\n" in out
    assert "$JUPYTER_AGENT_MEMORY_ROOT" in out and "$JUPYTER_AGENT_MEMORY_AGENT" in out


def test_options_go_before_or_after_the_sub_command(
    agents_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    AgentMemory.open("x")
    for argv in (
        ["journal", "--agent", "x", "append", "one"],
        ["--agent", "x", "journal", "append", "two"],
        ["journal", "append", "three", "--agent", "x"],
    ):
        code, out, err = run(capsys, *argv)
        assert (code, err) == (0, ""), argv
    assert [e["text"] for e in AgentMemory.open("x").entries()] == ["one", "two", "three"]
    for argv in (["--json", "agents"], ["agents", "--json"]):
        code, out, _ = run(capsys, *argv)
        assert json.loads(out) == {"root": str(agents_root), "agents": ["x"]}


def test_prompt_reports_the_budget_and_warns_over_it(
    agents_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    recwarn: pytest.WarningsRecorder,
) -> None:
    AgentMemory.open().update_facts("- a fact that takes some tokens\n" * 20)
    code, out, err = run(capsys, "prompt", "--budget", "10", "--workspace", str(tmp_path))
    assert code == 0
    lines = err.splitlines()
    assert lines[0].startswith("About ") and lines[0].endswith("; budget 10.")
    assert len(lines) >= 2 and all(line.startswith("warning: ") for line in lines[1:])
    code, out, err = run(capsys, "prompt", "--json", "--budget", "10", "--workspace", str(tmp_path))
    data = json.loads(out)
    assert (code, err, data["budget_tokens"]) == (0, "", 10)
    assert data["warnings"] and data["text"].endswith("</facts>")
    assert [s["name"] for s in data["sections"]][-1] == "facts"
    assert [w.message for w in recwarn] == []  # one plain line, not a Python warning too


def test_version_and_missing_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"jupyter-agent-memory {jupyter_agent_memory.__version__}\n"
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    assert "required: COMMAND" in capsys.readouterr().err


# -- real processes ----------------------------------------------------------------------------


def script_env(agents_root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["JUPYTER_AGENT_MEMORY_ROOT"] = str(agents_root)
    env.pop("JUPYTER_AGENT_MEMORY_AGENT", None)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def test_console_script_and_module_run_for_real(agents_root: Path) -> None:
    AgentMemory.open("r")  # only init creates agents
    env = script_env(agents_root)
    script = Path(sys.executable).parent / "jupyter-agent-memory"
    done = subprocess.run(
        [str(script), "journal", "append", "from the console script", "-t", "cli", "--agent", "r"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert ADDED.match(done.stdout)
    done = subprocess.run(
        [sys.executable, "-m", "jupyter_agent_memory", "journal", "search", "-t", "CLI",
         "--agent", "r", "--json"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert [e["text"] for e in json.loads(done.stdout)] == ["from the console script"]
    done = subprocess.run(
        [sys.executable, "-m", "jupyter_agent_memory", "init", "--agent", "system"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == ERROR + 'Invalid agent id "system": "system" is reserved\n'


def test_jupyter_subcommand_dispatches_to_the_script(agents_root: Path) -> None:
    jupyter = Path(sys.executable).parent / "jupyter"
    done = subprocess.run(
        [str(jupyter), "agent-memory", "init", "--agent", "via-jupyter"],
        env=script_env(agents_root), capture_output=True, text=True, timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"Agent ready at {agents_root / 'via-jupyter'}\n"


# -- hostile and careless input -----------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["fact", "--agent", "nosuch"],
        ["fact", "--history", "--agent", "nosuch"],
        ["--agent", "nosuch", "journal", "search", "x"],
        ["journal", "append", "hello", "--agent", "nosuch"],
        ["prompt", "--agent", "nosuch"],
        ["fact", "--agent", "../outside"],
        ["fact"],
    ],
)
def test_commands_other_than_init_refuse_a_missing_agent_and_create_nothing(
    agents_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (1, "")
    assert err.startswith(ERROR + "Agent ")
    assert "does not exist (no folder at " in err
    assert "jupyter-agent-memory init --agent " in err
    assert not agents_root.exists()
    assert not (tmp_path.parent / "outside").exists()


def test_journal_search_limit_must_be_a_number_as_in_the_magic(
    agents_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    AgentMemory.open()
    with pytest.raises(SystemExit) as info:
        main(["journal", "search", "-n", "abc"])
    assert info.value.code == 2
    assert "argument -n/--limit: invalid int value: 'abc'" in capsys.readouterr().err


def test_prompt_refuses_a_missing_workspace(
    agents_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    AgentMemory.open()
    missing = tmp_path / "nonexistent"
    assert run(capsys, "prompt", "--workspace", str(missing)) == (
        1, "", ERROR + f"Workspace {missing} does not exist; give an existing folder\n"
    )
    (tmp_path / "file").write_text("x")
    assert run(capsys, "prompt", "--workspace", str(tmp_path / "file"))[2] == (
        ERROR + f"Workspace {tmp_path / 'file'} is not a folder; give an existing folder\n"
    )


def test_fact_set_over_the_size_limit_is_refused_with_the_engine_text(
    agents_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    AgentMemory.open().update_facts("kept\n")
    big = tmp_path / "big.md"
    big.write_bytes(b"x" * (1024 * 1024 + 1))
    assert run(capsys, "fact", "--set", str(big)) == (
        1, "", ERROR + "'content' is too large: 1048577 bytes, the limit is 1048576 bytes\n"
    )
    assert AgentMemory.open().facts == "kept\n"


def test_on_a_terminal_model_written_control_codes_are_inert(agents_root: Path) -> None:
    import pty

    mem = AgentMemory.open()
    hostile = "- fact\x1b]52;c;cHduZWQ=\x07 and \x1b[2J end\n"
    mem.update_facts(hostile)
    env = script_env(agents_root)
    outputs = {}
    for argv in (["fact"], ["prompt"]):
        main_fd, child_fd = pty.openpty()
        done = subprocess.run(
            [sys.executable, "-m", "jupyter_agent_memory", *argv],
            stdout=child_fd, stderr=subprocess.PIPE, env=env, timeout=60,
        )
        os.close(child_fd)
        chunks = []
        while True:
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(main_fd)
        assert done.returncode == 0
        outputs[argv[0]] = b"".join(chunks).decode()
    for text in outputs.values():
        assert "\x1b" not in text and "\x07" not in text
        assert "\\x1b]52;c;cHduZWQ=\\x07" in text
    # Not a terminal: the exact bytes, so `fact > backup.md` is a faithful copy.
    piped = subprocess.run(
        [sys.executable, "-m", "jupyter_agent_memory", "fact"],
        capture_output=True, env=env, timeout=60,
    )
    assert piped.stdout.decode() == hostile


def test_agents_list_shows_each_agent_on_one_inert_line(
    agents_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    AgentMemory.open("plain")
    (agents_root / "evil\x1b[31m\n  forged").mkdir()
    assert main(["agents"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    # A name with control characters is no agent id (validate_agent_id), so it is not listed.
    assert out.splitlines() == [f"Agents under {agents_root}:", "  plain"]


def test_journal_search_shows_model_written_control_codes_inert(
    mem: AgentMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    mem.call_tool(
        {
            "action": "append",
            "text": "note \x1b]52;c;ZWNobyBwd25lZA==\x07 then \x1b[2J",
            "tags": ["t\x1b[31m"],
        }
    )
    assert main(["journal", "search", "--agent", "t"]) == 0
    out = capsys.readouterr().out
    assert "note" in out
    assert "\x1b" not in out and "\x07" not in out
