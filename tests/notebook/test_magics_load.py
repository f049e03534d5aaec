"""``%load_ext jupyter_agent_memory`` stays light: no widgets, server or MCP imports.

Each check runs in a fresh interpreter, since this test session may already have imported
those packages for other tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ["ipywidgets", "jupyter_server", "tornado", "mcp", "jupyter_agent_memory.notebook.panel",
         "openai", "pandas", "matplotlib"]

SCRIPT = f"""
import json, sys
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", sys.argv[1])
for cell in sys.argv[2:]:
    result = ip.run_cell(cell)
    if not result.success:
        raise SystemExit("cell failed: " + cell)
heavy = {HEAVY!r}
print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
"""


def run_clean(tmp_path: Path, extension: str, *cells: str) -> list[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "JUPYTER_AGENT_MEMORY_ROOT": str(tmp_path / "agents"),
    }
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, extension, *cells],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "extension", ["jupyter_agent_memory", "jupyter_agent_memory.notebook.magics"]
)
def test_load_ext_imports_nothing_heavy(tmp_path: Path, extension: str) -> None:
    assert run_clean(tmp_path, extension) == []
    # Loading alone creates no agent folder.
    assert not (tmp_path / "agents").exists()


def test_magics_in_a_terminal_stay_light(tmp_path: Path) -> None:
    cells = [
        "%agent_memory ./demo",
        "%%fact_update\n- metric units\n",
        "%fact",
        "%fact --history",
        "%journal append hello -t x",
        "%journal search hello",
        "%memprompt",
        "%agent_memory",
    ]
    assert run_clean(tmp_path, "jupyter_agent_memory", *cells) == []
    assert (tmp_path / "demo" / "memory" / "FACT.md").read_text() == "- metric units\n"
