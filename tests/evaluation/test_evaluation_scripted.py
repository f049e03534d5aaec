"""The evaluation harness with the deterministic ScriptedModel: real agent folders, exact texts."""

from __future__ import annotations

import json
import re
import sys

import pytest
from processes import run_python

from jupyter_agent_memory import AgentMemory, PromptBuilder, provision
from jupyter_agent_memory.evaluation import (
    EvaluationRunner,
    FactContains,
    JournalContains,
    ModelTurn,
    PromptContains,
    Rule,
    Scenario,
    ScriptedModel,
    Session,
    ToolCall,
    call_tool,
    count_facts,
    default_toolset,
    journal,
    recall,
    remember,
    run_scenario,
    search,
)

TS = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z"
DONE = {"bootstrap_completed": True}


def assistant_model() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(
                r"my name is (\w+)",
                calls=[remember("- The user's name is {1}."), journal("Met {1}.", ["intro"])],
                reply="Nice to meet you, {1}!",
            ),
            Rule(
                r"I (?:moved|live) (?:to|in) (?P<city>\w+)",
                calls=[remember("- The user lives in {city}.", replaces=r"lives in")],
                reply="Noted, {city}.",
            ),
            Rule(r"lunch was (.*)", calls=[journal("Lunch: {1}", ["food"])], reply="Logged."),
            Rule(
                r"what'?s my name",
                reply=recall(r"user's name is (\w+)", "You are {1}.", "I don't know yet."),
            ),
            Rule(r"what did I eat", calls=[search(tag="food")], reply="From the journal: {result}"),
        ],
        default_reply="Sure.",
    )


@pytest.fixture
def mem(tmp_path):
    return AgentMemory.open(tmp_path / "agent")


def test_multi_session_scenario_records_everything(mem, tmp_path):
    scenario = Scenario(
        [
            Session(
                ["Hi, my name is Ada.", "I live in Paris", "Lunch was ramen"],
                expect=[
                    FactContains("ada"),
                    FactContains("lives in Paris"),
                    FactContains("ramen", present=False),
                    JournalContains(text="met ada", tag="INTRO"),
                    JournalContains(tag="food"),
                    PromptContains("The user's name is Ada."),
                ],
                name="intro",
            ),
            Session(
                ["What's my name?", "I moved to Lyon", "What did I eat?"],
                expect=[FactContains("Lyon"), FactContains("Paris", present=False)],
                name="recall",
            ),
        ],
        name="onboarding",
    )
    result = run_scenario(mem, assistant_model(), scenario, workspace=tmp_path, config=DONE)
    assert result.passed
    assert result.failures == []
    first, second = result.sessions

    # Session 1 started from the prompt of an empty agent; session 2 from what session 1 wrote.
    builder = PromptBuilder(
        tools=default_toolset(), path_aliases={tmp_path: "/workspace", mem.path: "/agent"}
    )
    assert "<facts>" not in first.system_prompt
    assert second.system_prompt == first.next_prompt
    assert second.next_prompt == builder.build(mem, workspace=tmp_path, config=DONE).text
    assert "<facts>\n- The user's name is Ada.\n- The user lives in Paris.\n</facts>" in (
        second.system_prompt
    )
    assert first.prompt_chars == len(first.system_prompt)
    assert second.prompt_tokens > first.prompt_tokens
    assert first.bootstrap is False
    assert [name for name, _, _ in first.prompt_sections]

    assert [(t.user, t.reply) for t in first.turns] == [
        ("Hi, my name is Ada.", "Nice to meet you, Ada!"),
        ("I live in Paris", "Noted, Paris."),
        ("Lunch was ramen", "Logged."),
    ]
    calls = first.tool_calls
    assert [(c.name, c.arguments, c.is_error) for c in calls[:2]] == [
        ("memory", {"action": "update", "content": "- The user's name is Ada.\n"}, False),
        ("memory", {"action": "append", "text": "Met Ada.", "tags": ["intro"]}, False),
    ]
    assert calls[0].result == "Memory updated."
    assert re.fullmatch(rf"Journal entry added at {TS}\.", calls[1].result)
    assert first.facts_before == ""
    assert first.facts_after == "- The user's name is Ada.\n- The user lives in Paris.\n"
    assert first.facts_diff == (
        "--- FACT.md (before)\n+++ FACT.md (after)\n@@ -0,0 +1,2 @@\n"
        "+- The user's name is Ada.\n+- The user lives in Paris.\n"
    )
    assert [(e["text"], e["tags"]) for e in first.new_entries] == [
        ("Met Ada.", ["intro"]),
        ("Lunch: ramen", ["food"]),
    ]

    # Recall came from the prompt alone; the correction replaced the outdated line.
    assert second.turns[0].reply == "You are Ada."
    assert second.facts_diff.splitlines()[3:] == [
        " - The user's name is Ada.",
        "-- The user lives in Paris.",
        "+- The user lives in Lyon.",
    ]
    search_call = second.turns[2].tool_calls[0]
    assert search_call.arguments == {"action": "search", "tag": "food"}
    assert [e["text"] for e in json.loads(search_call.result)] == ["Lunch: ramen"]
    assert second.turns[2].reply == f"From the journal: {search_call.result}"
    assert second.new_entries == []
    assert mem.facts == "- The user's name is Ada.\n- The user lives in Lyon.\n"

    rows = result.rows()
    assert [(r["facts"], r["facts_added"], r["facts_removed"]) for r in rows] == [
        (2, 2, 0),
        (2, 1, 1),
    ]
    assert [(r["tool_calls"], r["new_entries"], r["expectations"]) for r in rows] == [
        (4, 2, "6/6"),
        (2, 0, "2/2"),
    ]


def test_failing_expectations_are_reported_with_details(mem, tmp_path):
    scenario = Scenario(
        [
            Session(
                ["Hi, my name is Ada."],
                expect=[
                    FactContains("Grace"),
                    FactContains("Ada", present=False),
                    JournalContains(tag="food"),
                    JournalContains(text="met", tag="intro", present=False),
                    PromptContains("Grace"),
                    PromptContains("Ada"),
                ],
            ),
            Session(["Hello"], expect=[FactContains("Ada"), JournalContains(text="Met")]),
        ],
        name="fails",
    )
    result = run_scenario(mem, assistant_model(), scenario, workspace=tmp_path, config=DONE)
    assert not result.passed
    assert [(index, o.description, o.detail) for index, o in result.failures] == [
        (1, "FACT.md contains 'Grace'", "not in FACT.md"),
        (1, "FACT.md does not contain 'Ada'", "found, but it should be absent"),
        (1, "a new journal entry with tag 'food'", "no match among 1 new entry"),
        (
            1,
            "no new journal entry with text 'met' and tag 'intro'",
            "found, but it should be absent",
        ),
        (1, "next prompt contains 'Grace'", "not in the next prompt"),
        # Only entries added during the session count.
        (2, "a new journal entry with text 'Met'", "no match among 0 new entries"),
    ]
    assert [s.passed for s in result.sessions] == [False, False]
    text = str(result)
    assert text.splitlines()[0] == (
        "Scenario 'fails' with model scripted: 2 sessions, 2/8 expectations passed"
    )
    assert "[FAIL] session 1: FACT.md contains 'Grace' (not in FACT.md)" in text
    assert "[PASS] session 1: next prompt contains 'Ada'" in text
    assert "[PASS] session 2: FACT.md contains 'Ada'" in text


def test_empty_fact_file_detail(mem, tmp_path):
    result = run_scenario(
        mem, ScriptedModel([]), Scenario([Session(["hi"], [FactContains("x")])]), config=DONE
    )
    assert result.failures[0][1].detail == "FACT.md is empty"
    assert result.sessions[0].turns[0].reply == "OK."


def test_table_is_plain_aligned_text(mem, tmp_path):
    scenario = Scenario([Session(["Hi, my name is Ada."], name="intro"), Session(["Hello"])])
    result = run_scenario(mem, assistant_model(), scenario, workspace=tmp_path, config=DONE)
    lines = result.table().splitlines()
    assert lines[0].split() == [
        "session", "name", "turns", "calls", "errors", "prompt", "chars", "prompt", "tokens",
        "facts", "+lines", "-lines", "journal+", "expect",
    ]  # fmt: skip
    assert set(lines[1].replace(" ", "")) == {"-"}
    first = lines[2].split()
    assert first[:5] == ["1", "intro", "1", "2", "0"]
    assert first[5:7] == [
        str(result.sessions[0].prompt_chars),
        str(result.sessions[0].prompt_tokens),
    ]
    assert first[7:] == ["1", "1", "0", "1", "0/0"]
    assert len({len(line) for line in lines[:2]}) == 1


def test_tool_errors_are_fed_back_and_the_loop_continues(mem, tmp_path):
    model = ScriptedModel(
        [
            Rule(
                "empty", calls=[call_tool("memory", action="update", content="")], reply="{result}"
            ),
            Rule("nonsense", calls=[lambda ctx: ToolCall("memory", '{"action": ')], reply="ok"),
            Rule("other tool", calls=[call_tool("shell", cmd="ls")], reply="{result}"),
        ]
    )
    scenario = Scenario([Session(["empty", "nonsense", "other tool"])])
    result = run_scenario(mem, model, scenario, workspace=tmp_path, config=DONE)
    session = result.sessions[0]
    assert [(c.result, c.is_error) for c in session.tool_calls] == [
        ("Error: MCP error -32602: 'content' is required for update action", True),
        (
            "Error: MCP error -32602: Tool arguments are not valid JSON: "
            "Expecting value at line 1 column 12",
            True,
        ),
        ("Error: MCP error -32601: Unknown tool: shell; offered tools: memory, profile", True),
    ]
    assert (
        session.turns[0].reply == "Error: MCP error -32602: 'content' is required for update action"
    )
    assert result.rows()[0]["tool_errors"] == 3
    assert session.tool_calls[1].arguments_text() == '{"action": '
    assert not (mem.path / "memory" / "FACT.md").exists()


class LoopingModel:
    """Calls a tool forever; the runner must stop it."""

    name = "looping"

    def __init__(self):
        self.seen = []

    def complete(self, messages, tools):
        self.seen.append(list(messages))
        return ModelTurn(tool_calls=[ToolCall("memory", {"action": "search"})])


def test_tool_rounds_are_bounded(mem, tmp_path):
    model = LoopingModel()
    result = EvaluationRunner(mem, model, max_tool_rounds=3, config=DONE).run(
        Scenario([Session(["go"])])
    )
    turn = result.sessions[0].turns[0]
    assert turn.note == "stopped after 3 tool rounds without a reply"
    assert turn.reply == ""
    assert [c.result for c in turn.tool_calls] == ["No journal entries found."] * 3
    assert len(model.seen) == 3
    # The conversation sent to the model is in OpenAI chat format with call ids echoed back.
    last = model.seen[-1]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert last[2]["tool_calls"][0]["function"] == {
        "name": "memory",
        "arguments": '{"action": "search"}',
    }
    assert last[3]["tool_call_id"] == last[2]["tool_calls"][0]["id"]


class RecordingModel(ScriptedModel):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.requests = []

    def complete(self, messages, tools):
        self.requests.append((list(messages), tools))
        return super().complete(messages, tools)


def test_each_session_starts_a_fresh_conversation(mem, tmp_path):
    model = RecordingModel(assistant_model().rules)
    scenario = Scenario([Session(["Hi, my name is Ada."]), Session(["What's my name?"])])
    run_scenario(mem, model, scenario, workspace=tmp_path, config=DONE)
    last_messages, tools = model.requests[-1]
    assert [m["role"] for m in last_messages] == ["system", "user"]
    assert last_messages[1]["content"] == "What's my name?"
    assert [t["function"]["name"] for t in tools] == ["memory", "profile"]
    assert tools[0]["type"] == "function"


def test_mcp_style_tool_name(mem, tmp_path):
    model = RecordingModel(assistant_model().rules)
    scenario = Scenario([Session(["Hi, my name is Ada."], expect=[FactContains("Ada")])])
    name = "mcp__agent-memory__memory"
    result = run_scenario(mem, model, scenario, tool_name=name, workspace=tmp_path, config=DONE)
    assert result.passed
    assert f"`{name}`" in result.sessions[0].system_prompt
    assert [c.name for c in result.sessions[0].tool_calls] == [name, name]
    profile = "mcp__agent-memory__profile"
    assert [t["function"]["name"] for t in model.requests[0][1]] == [name, profile]
    assert f"`{profile}` (`file`: `soul`" in result.sessions[0].system_prompt

    # Calling the unprefixed name is the model's error when the tool is offered prefixed.
    class Unprefixed:
        def complete(self, messages, tools):
            if messages[-1]["role"] == "tool":
                return ModelTurn(text="done")
            return ModelTurn(tool_calls=[ToolCall("memory", {"action": "search"})])

    result = run_scenario(mem, Unprefixed(), Scenario([Session(["x"])]), tool_name=name)
    assert result.model == "Unprefixed"
    assert result.sessions[0].tool_calls[0].result == (
        f"Error: MCP error -32601: Unknown tool: memory; offered tools: {name}, {profile}"
    )


def test_product_info_is_offered_for_a_guide_agent(mem, tmp_path):
    provision("guide", mem)
    model = RecordingModel(
        [Rule("version", calls=[call_tool("product_info", source="manifest")], reply="{result}")]
    )
    result = run_scenario(mem, model, Scenario([Session(["Which version?"])]), config=DONE)
    offered = [t["function"]["name"] for t in model.requests[0][1]]
    assert offered == ["memory", "profile", "product_info"]
    from jupyter_agent_memory.__about__ import __version__

    reply = json.loads(result.sessions[0].turns[0].reply)
    assert reply["runtimeVersion"] == __version__


def test_bootstrap_prompt_and_base_prompt(mem, tmp_path):
    result = run_scenario(
        mem, ScriptedModel([]), Scenario([Session(["hi"])]), base_prompt="You are terse."
    )
    session = result.sessions[0]
    assert session.bootstrap is True
    assert session.system_prompt.startswith("You are terse.\n\n")
    assert "## Bootstrap Mode" in session.system_prompt
    # A system.md in the workspace is the base; the runner's base_prompt is then not used.
    (tmp_path / "system.md").write_text("Workspace base.\n")
    result = run_scenario(
        mem, ScriptedModel([]), Scenario([Session(["hi"])]), workspace=tmp_path,
        base_prompt="You are terse.",
    )  # fmt: skip
    assert result.sessions[0].system_prompt.startswith("Workspace base.\n\n")
    assert "You are terse." not in result.sessions[0].system_prompt


def test_scenario_from_dict():
    scenario = Scenario.from_dict(
        {
            "name": "data",
            "sessions": [
                {
                    "name": "one",
                    "turns": ["a", "b"],
                    "expect": [
                        {"fact": "Ada"},
                        {"journal": "met", "tag": "intro"},
                        {"tag": "food", "present": False},
                        {"prompt": "Ada"},
                    ],
                },
                {"turns": ["c"]},
            ],
        }
    )
    assert scenario.name == "data"
    assert [s.turns for s in scenario.sessions] == [["a", "b"], ["c"]]
    assert scenario.sessions[0].expect == [
        FactContains("Ada"),
        JournalContains("met", "intro"),
        JournalContains(None, "food", present=False),
        PromptContains("Ada"),
    ]
    with pytest.raises(ValueError, match="Unknown expectation"):
        Scenario.from_dict({"sessions": [{"turns": [], "expect": [{"weather": 1}]}]})
    with pytest.raises(ValueError, match="Session 1 needs a 'turns' or 'transcript' list"):
        Scenario.from_dict({"sessions": [{"turns": "hello"}]})
    with pytest.raises(ValueError, match="needs a 'sessions' list"):
        Scenario.from_dict({})


def test_bad_scenario_objects_are_refused():
    assert Session("just one turn").turns == ["just one turn"]
    with pytest.raises(TypeError, match="turns must be strings"):
        Session([1])
    with pytest.raises(TypeError, match="Expectation objects"):
        Session(["x"], expect=["Ada"])
    with pytest.raises(TypeError, match="Session objects"):
        Scenario([["x"]])
    with pytest.raises(ValueError, match="'text', 'tag' or both"):
        JournalContains()


def test_runner_refuses_bad_models_and_limits(mem):
    with pytest.raises(TypeError, match="complete"):
        EvaluationRunner(mem, object())
    with pytest.raises(ValueError, match="max_tool_rounds"):
        EvaluationRunner(mem, ScriptedModel([]), max_tool_rounds=0)


def test_count_facts():
    assert count_facts("") == 0
    assert count_facts("# Facts\n\n- a\n* b\n+ c\n1. d\n\nnot an item\n") == 4
    assert count_facts("# Facts\nplain line\nanother\n") == 2


def test_a_fact_line_starting_with_plus_or_minus_signs_is_counted(mem):
    # Its diff lines read "+++ ..." and "--- ...", like the diff's own two header lines.
    mem.update_facts("-- old setting\n- kept\n")
    model = ScriptedModel([Rule("swap", calls=[remember("++ new setting", replaces="^--")])])
    result = run_scenario(mem, model, Scenario([Session(["swap"])]), config=DONE)
    row = result.rows()[0]
    assert (row["facts_added"], row["facts_removed"]) == (1, 1)


def test_a_model_without_a_name_is_labelled_by_its_class(mem, tmp_path):
    from jupyter_agent_memory.evaluation import CachedModel, run_matrix

    class Nameless(ScriptedModel):
        name = None

    scenario = Scenario([Session(["hi"])], name="s")
    model = Nameless([])
    assert run_scenario(mem, model, scenario, config=DONE).model == "Nameless"
    assert CachedModel(model, tmp_path / "cache").name == "Nameless"
    matrix = run_matrix([model], scenario, root=tmp_path / "m", config=DONE)
    assert [run.model for run in matrix.runs] == ["Nameless"]
    assert matrix.runs[0].result.model == "Nameless"
    assert matrix.runs[0].model_spec["name"] == "Nameless"


def test_dataframe_plot_and_html(mem, tmp_path, monkeypatch):
    # matplotlib keeps its font cache under MPLCONFIGDIR: keep it out of the home folder.
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    scenario = Scenario(
        [Session(["My name is Ada <script>alert(1)</script>"], name="<b>x</b>"), Session(["hi"])],
        name="a & b",
    )
    result = run_scenario(mem, assistant_model(), scenario, workspace=tmp_path, config=DONE)

    frame = result.to_dataframe()
    assert list(frame.index) == [1, 2]
    assert list(frame["facts"]) == [1, 1]
    assert frame.loc[1, "name"] == "<b>x</b>"
    assert frame.loc[2, "prompt_tokens"] == result.sessions[1].prompt_tokens

    figure = result.plot()
    import matplotlib.pyplot as plt

    assert not plt.get_fignums()  # closed in pyplot, so never shown twice or in a window
    bars_axes, facts_axes = figure.axes
    assert [p.get_height() for p in bars_axes.patches] == [s.prompt_tokens for s in result.sessions]
    assert list(facts_axes.lines[0].get_ydata()) == [1, 1]

    page = result._repr_html_()
    assert "<script>" not in page and "<b>x</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page
    assert "a &amp; b" in page
    assert page.count("<details><summary><b>Session") == 2


def test_missing_pandas_and_matplotlib_name_the_extra(mem, tmp_path, monkeypatch):
    result = run_scenario(mem, ScriptedModel([]), Scenario([Session(["hi"])]), config=DONE)
    monkeypatch.setitem(sys.modules, "pandas", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    hint = re.escape('pip install "jupyter-agent-memory[eval]"')
    with pytest.raises(ImportError, match=hint):
        result.to_dataframe()
    with pytest.raises(ImportError, match=hint):
        result.plot()


def test_harness_import_is_light():
    code = (
        "import sys, jupyter_agent_memory.evaluation; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'openai', 'pandas', 'matplotlib', 'mcp', 'httpx'}))"
    )
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
