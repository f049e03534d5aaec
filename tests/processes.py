"""Starting real Python processes: workers for the multi-process and fault tests, and
snippets run to the end in a fresh interpreter (what an import pulls in, a refusal's text)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping


def spawn(code: str, *args: object) -> subprocess.Popen[str]:
    """Run ``code`` (dedented) in a fresh interpreter with ``args`` as ``sys.argv[1:]``."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_python(
    code: str,
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter to its end (bounded by ``timeout`` seconds).

    Output is captured as text; the exit status is the caller's to check.
    """
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
