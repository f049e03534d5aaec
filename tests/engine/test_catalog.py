"""The declared tables the product manifest comes from match the real magics, CLI and server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from processes import run_python

from jupyter_agent_memory import AgentMemory, product_info, provision
from jupyter_agent_memory.cli import build_parser
from jupyter_agent_memory.engine import catalog as manifest_catalog
from jupyter_agent_memory.engine.manifest import package_manifest


def summary_of(func: object) -> str:
    """The first paragraph of a magic's own docstring on one line, as ``%name?`` starts.

    ``magic_arguments`` puts the usage in front of the docstring and keeps the docstring as
    its parser's description; a magic without arguments has its docstring as is.
    """
    parser = getattr(func, "parser", None)
    text = parser.description if parser is not None else func.__doc__  # type: ignore[attr-defined]
    return " ".join((text or "").strip().split("\n\n")[0].split())


def test_the_magics_table_is_the_registered_magics_class(
    ip: InteractiveShell, agents_root: Path
) -> None:
    ip.run_line_magic("load_ext", "jupyter_agent_memory")
    try:
        registered = ip.magics_manager.registry["AgentMemoryMagics"].magics
        found: dict[str, tuple[set[str], str]] = {}
        for kind in ("line", "cell"):
            for name, func in registered[kind].items():
                kinds, _ = found.get(name, (set(), ""))
                found[name] = (kinds | {kind}, summary_of(func))
        actual = {
            name: ("line/cell" if kinds == {"line", "cell"} else kinds.pop(), summary)
            for name, (kinds, summary) in found.items()
        }
        declared = {m.name: (m.kind, m.summary) for m in manifest_catalog.MAGICS}
        assert declared == actual
        # And the shell really answers to each name as the manifest spells it.
        for magic in manifest_catalog.MAGICS:
            kind = "cell" if magic.kind == "cell" else "line"
            assert ip.find_magic(magic.name, kind) is not None, magic.spelled
    finally:
        ip.run_line_magic("unload_ext", "jupyter_agent_memory")


def cli_choices(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The sub-commands the real parser accepts, from its own error for an unknown one."""
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["no-such-command"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    listed = re.search(r"invalid choice: .*\(choose from (.*)\)$", err.strip())
    assert listed is not None, err
    return [name.strip("'") for name in listed.group(1).split(", ")]


def cli_help_lines(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """``name -> help`` as the real parser's ``--help`` lists its sub-commands."""
    monkeypatch.setenv("COLUMNS", "400")  # argparse wraps to the terminal: no wrapping here
    text = build_parser().format_help()
    block = text.split("\n  COMMAND\n", 1)[1].split("\n\n", 1)[0]
    return dict(
        re.fullmatch(r" {4}(\S+) +(.+)", line).groups()  # type: ignore[union-attr]
        for line in block.splitlines()
    )


def test_the_commands_table_is_the_real_parser(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [command.name for command in manifest_catalog.COMMANDS]
    assert names == cli_choices(capsys)
    assert {c.name: c.summary for c in manifest_catalog.COMMANDS} == cli_help_lines(monkeypatch)
    for name in names:  # each is a real sub-parser with its own help
        with pytest.raises(SystemExit) as exit_info:
            build_parser().parse_args([name, "--help"])
        assert exit_info.value.code == 0
        assert capsys.readouterr().out.startswith(f"usage: {manifest_catalog.PROG} {name} ")


def test_the_server_exports_the_declared_routes() -> None:
    from jupyter_agent_memory import server
    from jupyter_agent_memory.server import routes

    assert server.ROUTES is routes.ROUTES is manifest_catalog.ROUTES
    assert server.API_PREFIX == routes.API_PREFIX == "/agent-memory/api"
    for methods, path, summary in server.ROUTES:  # the shape documentation relies on
        assert methods and path.startswith(server.API_PREFIX) and summary.endswith(".")


def test_the_manifest_lists_exactly_the_tables(tmp_path: Path) -> None:
    manifest = package_manifest()
    assert manifest["magics"] == [
        {"name": ("%%" if m.kind == "cell" else "%") + m.name, "kind": m.kind, "summary": m.summary}
        for m in sorted(manifest_catalog.MAGICS, key=lambda m: m.name)
    ]
    spelled = {m["name"]: m["kind"] for m in manifest["magics"]}
    assert spelled["%%fact_update"] == "cell" and spelled["%memprompt"] == "line"
    assert manifest["cli"] == [
        {"command": f"jupyter-agent-memory {c.name}", "summary": c.summary}
        for c in manifest_catalog.COMMANDS
    ]
    assert manifest["rest"] == [
        {"methods": "/".join(m), "path": p, "summary": s} for m, p, s in manifest_catalog.ROUTES
    ]
    # The guide agent's product_info serves the same tables.
    mem = AgentMemory.open(tmp_path / "agent")
    provision("guide", mem)
    section = json.loads(product_info(mem, {"source": "manifest", "section": "cli"}))
    assert section["data"] == manifest["cli"]


def test_building_the_manifest_imports_no_surface() -> None:
    probe = (
        "import ast, json, sys\n"
        "from jupyter_agent_memory.engine.manifest import package_manifest\n"
        "def parse(*args, **kwargs): raise AssertionError('the manifest parsed source code')\n"
        "ast.parse = parse\n"
        "package_manifest()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('IPython', 'tornado', 'jupyter_server', 'mcp', 'ipywidgets') or m in "
        "('jupyter_agent_memory.cli', 'jupyter_agent_memory.notebook.magics', "
        "'jupyter_agent_memory.server'))))\n"
    )
    done = run_python(probe)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
