"""The engine stays light: no notebook, server or MCP stack is imported by it."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

from processes import run_python

FORBIDDEN = ("IPython", "ipywidgets", "tornado", "jupyter_server", "mcp")
ENGINE_MODULES = ("errors", "folder", "journal", "engine", "engine.paths", "engine.store",
                  "engine.tool", "engine.prompt", "engine.templates", "engine.manifest", "cli")


def imported_modules(code: str, tmp_path: Path) -> list[str]:
    """Run ``code`` in a fresh interpreter and return the names in ``sys.modules`` after it."""
    env = dict(os.environ)
    env["JUPYTER_AGENT_MEMORY_ROOT"] = str(tmp_path / "agents")
    env.pop("JUPYTER_AGENT_MEMORY_AGENT", None)
    env["IPYTHONDIR"] = str(tmp_path / "ipython")
    program = textwrap.dedent(code) + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    done = run_python(program, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in FORBIDDEN]


def test_importing_the_engine_imports_no_heavy_stack(tmp_path: Path) -> None:
    modules = imported_modules(
        "import jupyter_agent_memory\n"
        + "".join(f"import jupyter_agent_memory.{name}\n" for name in ENGINE_MODULES)
        + "from jupyter_agent_memory import (AgentMemory, PromptBuilder, MEMORY_TOOL, provision,\n"
        "    product_info, MemoryToolError, list_agents, default_root)\n",
        tmp_path,
    )
    assert "jupyter_agent_memory.engine.store" in modules
    assert heavy(modules) == []


def test_using_the_engine_imports_no_heavy_stack(tmp_path: Path) -> None:
    modules = imported_modules(
        """
        from jupyter_agent_memory import AgentMemory, PromptBuilder, provision, product_info
        from jupyter_agent_memory.cli import main
        mem = AgentMemory.open("light")
        provision("guide", mem)
        mem.call_tool({"action": "update", "content": "- fact\\n"})
        mem.call_tool({"action": "append", "text": "entry", "tags": ["t"]})
        mem.call_tool({"action": "search", "tag": "t"})
        mem.restore(mem.history()[0]["sha256"])
        PromptBuilder().build(mem)
        product_info(mem, {"source": "manifest", "section": "all"})
        main(["journal", "search", "--agent", "light"])
        main(["prompt", "--agent", "light"])
        """,
        tmp_path,
    )
    assert heavy(modules) == []


def test_importing_the_package_alone_loads_no_engine_module(tmp_path: Path) -> None:
    modules = imported_modules("import jupyter_agent_memory", tmp_path)
    assert [m for m in modules if m.startswith("jupyter_agent_memory.")] == [
        "jupyter_agent_memory.__about__"
    ]


def test_first_calls_from_many_threads_see_whole_modules(tmp_path: Path) -> None:
    """The engine imports some modules on first use (the journal index needs sqlite3). Threads
    that make their first call together, as an HTTP server's workers do, must each get the
    finished module, never one another thread is still executing (an AttributeError on a
    partially initialised module, seen in the MCP HTTP server)."""
    env = dict(os.environ, JUPYTER_AGENT_MEMORY_ROOT=str(tmp_path / "agents"))
    program = textwrap.dedent(
        """
        import threading
        from jupyter_agent_memory import AgentMemory
        mem = AgentMemory.open("threads")
        start, errors = threading.Barrier(8), []
        def first_call(n):
            start.wait()
            try:
                mem.call_tool({"action": "append", "text": f"entry {n}"})
                mem.call_tool({"action": "search", "query": "entry"})
            except Exception as exc:
                errors.append(repr(exc))
        threads = [threading.Thread(target=first_call, args=(n,)) for n in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(errors)
        """
    )
    done = run_python(program, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
