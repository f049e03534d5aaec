"""Fresh checkouts and clean environments, for tests that install the project as a newcomer
would: only ``python3`` on PATH, a temp HOME, and nothing of this machine's Node.js."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def only_python_on_path(tmp: Path) -> Path:
    """A directory holding nothing but a ``python3`` (and ``python``) link to this interpreter."""
    bin_dir = tmp / "bin-only-python"
    if not bin_dir.exists():
        bin_dir.mkdir()
        for name in ("python3", "python"):
            (bin_dir / name).symlink_to(sys.executable)
    return bin_dir


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """An ``env -i``-like environment: a temp HOME, PATH with only python, Jupyter folders in
    temp dirs. Kept from this machine: its pip and proxy settings and the certificate
    authorities it trusts (so pip, Python and node reach the same registries), and its pip and
    yarn download caches (so the test does not download node and the npm packages again)."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if k.startswith("PIP_")
        or k.lower() in ("http_proxy", "https_proxy", "no_proxy")
        or k in ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE")
    }
    caches = {
        "PIP_CACHE_DIR": Path.home() / ".cache" / "pip",
        "YARN_GLOBAL_FOLDER": Path.home() / ".yarn" / "berry",
    }
    kept.update({k: str(v) for k, v in caches.items() if k not in kept and v.is_dir()})
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env = {
        **kept,
        "HOME": str(home),
        "PATH": str(only_python_on_path(tmp)),
        "JUPYTER_DATA_DIR": str(tmp / "jupyter-data"),
        "JUPYTER_AGENT_MEMORY_ROOT": str(tmp / "agents"),
        "LANG": "C.UTF-8",
    }
    env.update(extra)
    return env


def clean_checkout(dest: Path) -> Path:
    """The files of this working tree that git tracks or would track (not ignored) copied to
    ``dest``: what a fresh clone of the next commit holds (no built sidebar, node_modules, lib/)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        rel = raw.decode()
        source = REPO / rel
        if not source.is_file():  # deleted in the working tree, not yet committed
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    assert not (dest / "jupyter_agent_memory" / "labextension").exists()
    assert (dest / "sidebar_build.py").is_file(), "sidebar_build.py must be tracked by git"
    return dest


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> tuple[int, str]:
    done = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout
