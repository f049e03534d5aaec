"""Starting real worker processes for the multi-process and fault tests."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def spawn(code: str, *args: object) -> subprocess.Popen[str]:
    """Run ``code`` (dedented) in a fresh interpreter with ``args`` as ``sys.argv[1:]``."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
