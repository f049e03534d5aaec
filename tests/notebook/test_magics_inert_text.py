"""The text/plain of the magics' views keeps model- and client-written text inert.

A terminal IPython prints ``text/plain`` as it is, so an ESC sequence, an OSC 52 clipboard
write or a BEL a model put in a journal entry (or a client put in its self-chosen name) would
act on the reader's terminal. Driven through a real ``InteractiveShell``: the magic's result
is formatted by the shell's own display formatter, as its display hook does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_agent_memory import AgentMemory, PromptBuilder
from jupyter_agent_memory.notebook.display import inert_line

CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # OSC 52: set the clipboard, ended by BEL
CLEAR = "\x1b[2J"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u2028")  # never in the output, in any form raw


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_ROOT", str(tmp_path / "agents"))
    monkeypatch.delenv("JUPYTER_AGENT_MEMORY_AGENT", raising=False)
    monkeypatch.chdir(tmp_path)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_agent_memory")
    yield ip
    ip.run_line_magic("unload_ext", "jupyter_agent_memory")


def plain(shell: InteractiveShell, line: str) -> str:
    """The text/plain a terminal IPython would print for ``line``'s result."""
    result = shell.run_cell(line)
    result.raise_error()
    data, _ = shell.display_formatter.format(result.result)
    return data["text/plain"]


def test_inert_line_escapes_what_acts_on_a_terminal_and_keeps_the_rest() -> None:
    assert inert_line(f"a{CLIPBOARD}b{CLEAR}\nc\r\u202ed\u2028é🧠\t") == (
        "a\\x1b]52;c;ZWNobyBwd25lZA==\\x07b\\x1b[2J\\nc\\r\\u202ed\\u2028é🧠\\t"
    )
    assert inert_line("\ud800") == "\\ud800"  # a lone surrogate, never written raw
    assert inert_line(7) == "7"


def test_journal_text_plain_shows_control_codes_as_escapes(shell: InteractiveShell) -> None:
    mem = AgentMemory.open("default")
    mem.call_tool({
        "action": "append",
        "text": f"copied {CLIPBOARD} then {CLEAR}\nsecond line\u202eevil\u2028third\x9bx",
        "tags": [f"t{CLEAR}", "plain"],
    })
    # Another tool's entry: odd keys and values of any kind, with control codes too.
    with (mem.path / "memory" / "JOURNAL.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"ts": "2026-01-01T00:00:00.000Z\\u001b[31m", "text": "x", '
                '"note\\u0007": "\\u001b]52;c;AA==\\u0007"}\n')
    for line in ("%journal", "%journal search copied", "%journal search -t plain"):
        text = plain(shell, line)
        for raw in RAW:
            assert raw not in text, (line, raw)
        assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in text or line.endswith("plain")
    lines = plain(shell, "%journal").splitlines()
    # The extra entry's line, then the appended entry's three lines (its own newline kept as
    # a line break, the separator U+2028 escaped), then the footer.
    # (extra keys are shown as JSON, which writes control codes as \\u escapes itself)
    assert lines[0] == (
        '2026-01-01T00:00:00.000Z\\x1b[31m  x  {"note\\u0007": "\\u001b]52;c;AA==\\u0007"}'
    )
    assert lines[1].endswith("  [t\\x1b[2J, plain] copied \\x1b]52;c;ZWNobyBwd25lZA==\\x07 "
                             "then \\x1b[2J")
    assert lines[2].strip() == "second line\\u202eevil\\u2028third\\x9bx"
    assert lines[3] == "(2 entries, newest first)"
    # In code the entries are untouched: only their display is inert.
    result = shell.run_cell("%journal search copied").result
    assert result[0]["text"].startswith(f"copied {CLIPBOARD}")


def test_sessions_text_plain_keeps_a_hostile_client_name_on_one_inert_line(
    shell: InteractiveShell,
) -> None:
    mem = AgentMemory.open("default")
    PromptBuilder().start_session(
        mem, client={"name": f"evil{CLEAR}\n2026-01-01  ffffff000000 {CLIPBOARD}",
                     "version": "1\u202e"},
        session_id="d" * 16,
    )
    text = plain(shell, "%memprompt --sessions")
    for raw in RAW:
        assert raw not in text, raw
    heading, row = text.splitlines()
    assert heading.split() == ["time", "(UTC)", "id", "client", "~tokens", "prompt"]
    assert row.split("  ")[1] == "d" * 16
    client = "evil\\x1b[2J\\n2026-01-01  ffffff000000 \\x1b]52;c;ZWNobyBwd25lZA==\\x07 1\\u202e"
    assert client in row
