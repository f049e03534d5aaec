"""The command line called in-process, as the CLI tests drive it."""

from __future__ import annotations

import pytest

from jupyter_agent_memory.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``main(argv)``'s exit code with what it printed to stdout and stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
