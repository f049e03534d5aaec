"""Compile the journal search's optional line scanner into the wheel, when a C compiler is there.

``jupyter_agent_memory/_linescan.c`` is a small CPython extension that finds journal lines
holding a substring without holding the GIL (see ``journal_plans.py``). The package works the
same without it, only slower on whole-file scans, so this hook never fails a build: without a
compiler, Python headers or a working link it prints one line and the wheel stays pure Python
(``py3-none-any``). With ``JUPYTER_AGENT_MEMORY_PURE_PYTHON=1`` it does not try at all.

The compiler and flags are the ones the running Python was built with (``sysconfig``), the
way extension builds have always found them; an editable install compiles next to the source.

The module lives outside the package: it is part of the build, not of what gets installed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("jupyter_agent_memory") / "_linescan.c"
MODULE = "jupyter_agent_memory/_linescan"
PURE_ENV = "JUPYTER_AGENT_MEMORY_PURE_PYTHON"
PREFIX = "jupyter-agent-memory: "


class ScannerBuildError(Exception):
    """Why the scanner could not be compiled (one line)."""


def _tool(var: str) -> list[str]:
    """The command in ``sysconfig`` variable ``var`` (e.g. ``gcc -pthread``), its program found
    on ``PATH``."""
    words = shlex.split(sysconfig.get_config_var(var) or "")
    if not words:
        raise ScannerBuildError(f"this Python names no {var}")
    program = shutil.which(words[0])
    if program is None:
        raise ScannerBuildError(f"no C compiler ({words[0]!r} is not on PATH)")
    return [program, *words[1:]]


def compile_scanner(source: Path, target: Path, extra_flags: tuple[str, ...] = ()) -> None:
    """Compile and link ``source`` into the extension module ``target`` (``extra_flags`` go to
    the compiler: the tests build the portable variant with ``-U__SSE2__``)."""
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").is_file():
        raise ScannerBuildError(f"no Python headers (no Python.h in {include})")
    flags = shlex.split(sysconfig.get_config_var("CCSHARED") or "")
    with tempfile.TemporaryDirectory() as scratch:
        obj = Path(scratch) / "_linescan.o"
        steps = [
            [*_tool("CC"), *flags, "-O2", *extra_flags, "-I", include, "-c", str(source)]
            + ["-o", str(obj)],
            [*_tool("LDSHARED"), str(obj), "-o", str(target)],
        ]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
                raise ScannerBuildError(f"{Path(step[0]).name} failed: {last}")


class ScannerBuildHook(BuildHookInterface):
    """Hatchling wheel hook: ship the compiled scanner, or nothing when it cannot be built."""

    PLUGIN_NAME = "custom"
    _scratch: str | None = None

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if os.environ.get(PURE_ENV, "").strip() not in ("", "0"):
            print(f"{PREFIX}{PURE_ENV} is set: no compiled line scanner", file=sys.stderr)
            return
        suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
        root = Path(self.root)
        if version == "editable":
            target = root / f"{MODULE}{suffix}"
        else:
            self._scratch = tempfile.mkdtemp(prefix="jupyter-agent-memory-scanner-")
            target = Path(self._scratch) / f"_linescan{suffix}"
        try:
            compile_scanner(root / SOURCE, target)
        except (ScannerBuildError, OSError) as exc:
            print(
                f"{PREFIX}the journal's compiled line scanner is not built ({exc}); the pure "
                "Python search is used instead",
                file=sys.stderr,
            )
            return
        if version != "editable":
            build_data["force_include"][str(target)] = f"{MODULE}{suffix}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
