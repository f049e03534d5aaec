"""An explicit budget wins over a template's on every surface; the template's applies otherwise.

The agent here is provisioned from the built-in ``guide`` template, whose configuration sets
``budget_tokens`` to 4000 (far above what its memory uses). Each surface that takes a budget
is driven for real: the builder, the magics in an ``InteractiveShell`` (flag, ``%config`` and
the panel), the REST API through pytest-jupyter, and the command line through ``main`` (and,
for ``mcp``, a real MCP client over stdio).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from mcp_harness import TIMEOUT, stdio_params, stdio_session

from jupyter_agent_memory import AgentMemory, PromptBuilder, Toolset, provision
from jupyter_agent_memory.cli import main
from jupyter_agent_memory.engine.prompt import PromptWarning
from jupyter_agent_memory.engine.templates import load_template
from jupyter_agent_memory.mcp_server.service import host_tools

TEMPLATE_BUDGET = 4000
EXPLICIT = 100


def guide_agent(path: Path) -> AgentMemory:
    mem = AgentMemory.open(path)
    provision("guide", mem)
    return mem


def quiet_build(builder: PromptBuilder, mem: AgentMemory, workspace: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PromptWarning)
        return builder.build_session(mem, workspace)


def over_budget_message(
    mem: AgentMemory, workspace: Path, budget: int, tools: Toolset | None = None
) -> str:
    """The warning text an uncached build with ``budget`` gives, computed independently."""
    prompt = quiet_build(PromptBuilder(tools=tools), mem, workspace)
    sizes = ", ".join(f"{s.name} {s.tokens}" for s in prompt.sections if s.name != "system")
    # The guide agent's builder text is larger than the small budget on its own.
    (memories,) = [s for s in prompt.sections if s.name == "memories"]
    assert memories.tokens >= budget and not prompt.bootstrap
    return (
        f"Agent memory uses about {prompt.memory_tokens} tokens, over the budget of {budget} "
        f"(by section: {sizes}). Nothing was cut. The largest part is the builder's own text "
        "about the memory files, which no file controls; the builder's text alone is over this "
        "budget, so raise it."
    )


def test_the_guide_template_really_sets_a_budget_its_memory_stays_under(tmp_path: Path) -> None:
    # The premise of every test below: without an explicit budget, 4000 applies and passes.
    assert load_template("guide").configuration["budget_tokens"] == TEMPLATE_BUDGET
    mem = guide_agent(tmp_path / "agent")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prompt = PromptBuilder().build_session(mem, tmp_path)
    assert (prompt.budget_tokens, prompt.warnings, prompt.over_budget) == (
        TEMPLATE_BUDGET, (), False
    )
    assert EXPLICIT < prompt.memory_tokens < TEMPLATE_BUDGET


# -- the engine --------------------------------------------------------------------------------


def test_a_builder_budget_wins_over_the_templates_and_warns(tmp_path: Path) -> None:
    mem = guide_agent(tmp_path / "agent")
    builder = PromptBuilder(budget_tokens=EXPLICIT)
    expected = over_budget_message(mem, tmp_path, EXPLICIT)
    for _ in range(2):  # cached builds warn as well
        with pytest.warns(PromptWarning) as caught:
            prompt = builder.build_session(mem, tmp_path)
        assert [str(w.message) for w in caught] == [expected]
        assert (prompt.budget_tokens, prompt.warnings, prompt.over_budget) == (
            EXPLICIT, (expected,), True
        )


def test_a_larger_explicit_budget_wins_too(tmp_path: Path) -> None:
    mem = guide_agent(tmp_path / "agent")
    (mem.path / "memory" / "FACT.md").write_text("- a fact\n" * 2000)
    with pytest.warns(PromptWarning, match=f"over the budget of {TEMPLATE_BUDGET} "):
        assert PromptBuilder().build_session(mem, tmp_path).budget_tokens == TEMPLATE_BUDGET
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prompt = PromptBuilder(budget_tokens=100_000).build_session(mem, tmp_path)
    assert (prompt.budget_tokens, prompt.warnings) == (100_000, ())


def test_the_explicit_budget_keeps_the_rest_of_the_template_configuration(
    tmp_path: Path,
) -> None:
    template = tmp_path / "tpl"
    template.mkdir()
    (template / "agent.json").write_text(
        json.dumps({"name": "T", "configuration": {"budget_tokens": 9000,
                                                    "bootstrap_completed": True}})
    )
    mem = AgentMemory.open(tmp_path / "agent")
    provision(template, mem)
    prompt = quiet_build(PromptBuilder(budget_tokens=5), mem, tmp_path)
    # SOUL.md is empty, so only bootstrap_completed from the template turns bootstrap off.
    assert (prompt.budget_tokens, prompt.bootstrap) == (5, False)
    assert quiet_build(PromptBuilder(), mem, tmp_path).budget_tokens == 9000


def test_a_per_call_config_budget_outranks_the_builders(tmp_path: Path) -> None:
    mem = guide_agent(tmp_path / "agent")
    prompt = PromptBuilder(budget_tokens=EXPLICIT).build(
        mem, tmp_path, config={"budget_tokens": 50_000}
    )
    assert (prompt.budget_tokens, prompt.warnings) == (50_000, ())


# -- magics (a real InteractiveShell) -----------------------------------------------------------


@pytest.fixture
def shell(ip: InteractiveShell, agents_root: Path) -> Any:
    ip.run_line_magic("load_ext", "jupyter_agent_memory")
    yield ip
    ip.run_line_magic("unload_ext", "jupyter_agent_memory")


def magic(shell: InteractiveShell, line: str) -> tuple[Any, Any]:
    name, _, rest = line.partition(" ")
    with capture_output() as cap:
        result = shell.run_line_magic(name, rest)
    return result, cap


def test_memprompt_budget_flag_wins_and_the_view_says_so(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    mem = guide_agent(tmp_path / "agent")
    magic(shell, f"agent_memory {mem.path}")
    expected = over_budget_message(mem, Path.cwd(), EXPLICIT)
    view, cap = magic(shell, f"memprompt --budget {EXPLICIT}")
    assert (view.budget_tokens, list(view.warnings), view.over_budget) == (
        EXPLICIT, [expected], True
    )
    plain = shell.display_formatter.format(view)[0]["text/plain"]
    assert f"of a {EXPLICIT}-token budget" in plain
    assert f"WARNING: {expected}" in plain
    _, cap = magic(shell, f"memprompt --raw --budget {EXPLICIT}")
    assert cap.stderr == f"WARNING: {expected}\n"
    # Without a flag or setting, the template's budget is the one reported.
    view, _ = magic(shell, "memprompt")
    assert (view.budget_tokens, list(view.warnings)) == (TEMPLATE_BUDGET, [])
    plain = shell.display_formatter.format(view)[0]["text/plain"]
    assert f"of a {TEMPLATE_BUDGET}-token budget" in plain


def test_config_budget_wins_in_memprompt_and_in_the_panel(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    mem = guide_agent(tmp_path / "agent")
    expected = over_budget_message(mem, Path.cwd(), EXPLICIT)
    magic(shell, f"agent_memory {mem.path}")
    magic(shell, f"config AgentMemoryMagics.budget_tokens = {EXPLICIT}")
    magic(shell, "config AgentMemoryMagics.panel = 'always'")
    try:
        view, _ = magic(shell, "memprompt")
        assert (view.budget_tokens, list(view.warnings)) == (EXPLICIT, [expected])
        panel, _ = magic(shell, "agent_memory")
        try:
            assert panel.last_prompt is not None
            assert (panel.last_prompt.budget_tokens, list(panel.last_prompt.warnings)) == (
                EXPLICIT, [expected]
            )
            assert "jp-AgentMemory-warning" in panel.prompt_view.value
            assert f"of a {EXPLICIT}-token budget" in panel.prompt_view.value
        finally:
            panel.close()
    finally:
        magic(shell, "config AgentMemoryMagics.budget_tokens = None")
        magic(shell, "config AgentMemoryMagics.panel = 'auto'")


def test_the_panel_without_a_budget_reports_the_templates(tmp_path: Path) -> None:
    from jupyter_agent_memory.notebook.panel import MemoryPanel

    mem = guide_agent(tmp_path / "agent")
    panel = MemoryPanel(mem, workspace=tmp_path)
    try:
        assert panel.last_prompt is not None
        assert (panel.last_prompt.budget_tokens, list(panel.last_prompt.warnings)) == (
            TEMPLATE_BUDGET, []
        )
    finally:
        panel.close()


# -- the REST API (a real jupyter_server) --------------------------------------------------------


@pytest.fixture
def server_root(tmp_path: Path) -> Path:
    return tmp_path / "server-agents"


async def fetch_prompt(jp_fetch: Any, tmp_path: Path) -> tuple[dict[str, Any], AgentMemory]:
    mem = guide_agent(tmp_path / "server-agents" / "guided")
    response = await jp_fetch("agent-memory", "api", "agents", "guided", "prompt", method="GET")
    assert response.code == 200
    return json.loads(response.body), mem


@pytest.mark.parametrize("server_settings", [{"prompt_budget_tokens": EXPLICIT}], indirect=True)
# The server's worker thread also issues the builder's Python warning; the reply is checked.
@pytest.mark.filterwarnings("ignore::jupyter_agent_memory.engine.prompt.PromptWarning")
async def test_rest_server_budget_wins(jp_fetch: Any, jp_root_dir: Path, tmp_path: Path) -> None:
    body, mem = await fetch_prompt(jp_fetch, tmp_path)
    expected = over_budget_message(mem, jp_root_dir, EXPLICIT)
    assert (body["budget_tokens"], body["over_budget"], body["warnings"]) == (
        EXPLICIT, True, [expected]
    )


async def test_rest_without_a_server_budget_reports_the_templates(
    jp_fetch: Any, tmp_path: Path
) -> None:
    body, _mem = await fetch_prompt(jp_fetch, tmp_path)
    assert (body["budget_tokens"], body["over_budget"], body["warnings"]) == (
        TEMPLATE_BUDGET, False, []
    )


# -- the command line ------------------------------------------------------------------------


def test_cli_prompt_budget_wins_and_is_reported(
    agents_root: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    mem = guide_agent(agents_root / "guided")
    expected = over_budget_message(mem, tmp_path, EXPLICIT)
    code = main(["prompt", "--agent", "guided", "--budget", str(EXPLICIT),
                 "--workspace", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0
    assert out == quiet_build(PromptBuilder(), mem, tmp_path).text + "\n"
    summary, warning = err.splitlines()
    assert summary.startswith("About ") and summary.endswith(f"; budget {EXPLICIT}.")
    assert warning == f"warning: {expected}"
    code = main(["prompt", "--agent", "guided", "--json", "--workspace", str(tmp_path)])
    data = json.loads(capsys.readouterr().out)
    assert (code, data["budget_tokens"], data["warnings"]) == (0, TEMPLATE_BUDGET, [])


@pytest.mark.slow
def test_cli_mcp_budget_tokens_wins(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    mem = guide_agent(agent)
    expected = over_budget_message(mem, tmp_path, EXPLICIT, host_tools())

    async def prompt_meta(*options: str) -> dict[str, Any]:
        params = stdio_params(agent, tmp_path, "--workspace", str(tmp_path), *options)
        with anyio.fail_after(TIMEOUT):
            async with stdio_session(params) as (session, _init):
                result = await session.read_resource("agent-memory://agent/prompt")
                return dict(result.contents[0].meta or {})

    meta = anyio.run(prompt_meta, "--budget-tokens", str(EXPLICIT))
    assert (meta["budget_tokens"], meta["warnings"]) == (EXPLICIT, [expected])
    meta = anyio.run(prompt_meta)
    assert (meta["budget_tokens"], meta["warnings"]) == (TEMPLATE_BUDGET, [])
