"""The package is POSIX-only and says so: in its metadata, at import, and with no dead fallbacks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from processes import run_python

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "jupyter_agent_memory"
NOT_POSIX = (
    "jupyter-agent-memory needs a POSIX system (Linux, macOS, BSD): its file safety relies on "
    "dir_fd, O_NOFOLLOW and flock, which this platform does not offer"
)


def test_metadata_declares_posix_linux_and_macos_only() -> None:
    # Read as text: tomllib is not in every Python the package supports (3.10).
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    classifiers = re.search(r"^classifiers = \[(.*?)^\]", text, re.S | re.M)
    assert classifiers is not None
    listed = re.findall(r'"([^"]+)"', classifiers.group(1))
    assert "Programming Language :: Python :: 3" in listed
    systems = sorted(c for c in listed if c.startswith("Operating System ::"))
    assert systems == [
        "Operating System :: MacOS",
        "Operating System :: POSIX",
        "Operating System :: POSIX :: Linux",
    ]


@pytest.mark.parametrize(
    "statement",
    [
        "import jupyter_agent_memory.folder",
        "from jupyter_agent_memory import AgentMemory",
        "import jupyter_agent_memory.engine.store",
    ],
)
def test_importing_the_engine_elsewhere_fails_with_the_reason(statement: str) -> None:
    # os.name is what the guard reads; set it before anything of the package is imported.
    code = (
        "import os\n"
        "os.name = 'nt'\n"
        "try:\n"
        f"    {statement}\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc, sep=': ')\n"
        "else:\n"
        "    print('imported')\n"
    )
    done = run_python(code, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"ImportError: {NOT_POSIX}\n"


def test_the_same_import_succeeds_on_posix() -> None:
    code = "import jupyter_agent_memory.folder, os; print(os.name)"
    done = run_python(code, cwd=REPO)
    assert (done.returncode, done.stdout) == (0, "posix\n"), done.stderr


# Constructs that only make sense on a non-POSIX system: Windows modules, platform switches,
# the alternative path separator, and os flags read with a fallback as if they could be absent.
_NON_POSIX = re.compile(
    r"\bmsvcrt\b|\bwinreg\b|\bntpath\b|\bPureWindowsPath\b|\bWindowsPath\b|\bsys\.platform\b"
    r"|\bos\.altsep\b|\bos\.name\b|['\"]nt['\"]|['\"]win32['\"]"
    r"|getattr\(\s*os\s*,\s*['\"]O_|hasattr\(\s*os\s*,\s*['\"]O_"
)


def test_no_dead_non_posix_branch_in_the_package() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if _NON_POSIX.search(line):
                found.append(f"{path.relative_to(REPO)}: {line.strip()}")
    # The one allowed: the guard that refuses to run anywhere else.
    assert found == [
        'jupyter_agent_memory/folder.py: if os.name != "posix":  # pragma: no cover - '
        "checked on the platforms we run on"
    ]


def test_the_scan_would_see_a_fallback() -> None:
    assert _NON_POSIX.search('flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)')
    assert _NON_POSIX.search("if sys.platform == 'win32':")
    assert _NON_POSIX.search("import msvcrt")
    assert _NON_POSIX.search("seps = {os.sep, os.altsep}")
    assert not _NON_POSIX.search("fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW)")
