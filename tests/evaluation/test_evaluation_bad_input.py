"""Bad scenarios, bad LongMemEval files and bad runner options: a clear error naming the
problem, never a silently different experiment (an inverted check, gold evidence split into
characters, a limit that is not applied) and never an AttributeError from deep inside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jupyter_agent_memory.evaluation import (
    SAMPLE_PATH,
    EvaluationRunner,
    Rule,
    Scenario,
    ScriptedModel,
    Session,
    load_longmemeval,
    load_longmemeval_sample,
    longmemeval_scenario,
    recall,
    run_scenario,
)


def one_session(**session: object) -> dict:
    return {"sessions": [{"turns": ["Hi, I'm Ada."], **session}]}


# -- Scenario.from_dict --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (None, "A scenario must be an object, got NoneType"),
        ([{"turns": ["x"]}], "A scenario must be an object, got list"),
        (one_session(expect={"fact": "Ada"}), "Session 1: 'expect' must be a list of objects"),
        (one_session(expect="fact"), "Session 1: 'expect' must be a list of objects"),
        (one_session(expect=["fact"]), "Session 1: Each expectation must be an object, got 'fact'"),
        # bool("false") is True: the check would silently be turned around.
        (
            one_session(expect=[{"fact": "Ada", "present": "false"}]),
            "Session 1: Expectation {'fact': 'Ada', 'present': 'false'}: 'present' must be "
            "true or false",
        ),
        (
            one_session(expect=[{"abstains": "no"}]),
            "'abstains' must be true or false",
        ),
        (
            one_session(expect=[{"tool": "memory", "ok": "false"}]),
            "'ok' must be true or false",
        ),
        (
            one_session(expect=[{"reply": "Ada", "turn": "last"}]),
            "'turn' must be a turn index (an integer) or null",
        ),
        (
            one_session(expect=[{"reply": "Ada", "turn": True}]),
            "'turn' must be a turn index (an integer) or null",
        ),
        # tuple("chat") would be the gold sessions 'c', 'h', 'a', 't'.
        (
            one_session(evidence={"sessions": "chat"}),
            "Session 1: evidence 'sessions' must be a list of strings, got 'chat'",
        ),
        (
            one_session(evidence={"entries": 5}),
            "Session 1: evidence 'entries' must be a list of strings, got 5",
        ),
        (
            one_session(evidence={"texts": ["ok", 3]}),
            "evidence 'texts' must be a list of strings, got ['ok', 3]",
        ),
        # A null turn must not become the user message "None".
        ({"sessions": [{"turns": ["hi", None]}]}, "Session 1: Session turns must be strings"),
    ],
)
def test_bad_scenario_data_is_a_clear_value_error(data: object, message: str) -> None:
    with pytest.raises(ValueError) as info:
        Scenario.from_dict(data)  # type: ignore[arg-type]
    assert str(info.value) == message or str(info.value).endswith(message)


def test_good_flags_and_turns_still_load() -> None:
    scenario = Scenario.from_dict(
        one_session(
            expect=[
                {"fact": "Ada", "present": False},
                {"reply": "Ada", "turn": 0},
                {"reply": "Ada", "turn": None},
                {"tool": "memory", "ok": True},
            ],
            evidence={"sessions": ["chat"]},
        )
    )
    (session,) = scenario.sessions
    assert session.evidence is not None and session.evidence.sessions == ("chat",)
    assert [getattr(e, "present", None) for e in session.expect] == [False, True, True, True]
    assert session.expect[1].turn == 0 and session.expect[2].turn is None
    assert session.expect[3].ok is True


# -- the LongMemEval loader ----------------------------------------------------------------


def sample_item(**changes: object) -> dict:
    item = json.loads(SAMPLE_PATH.read_text(encoding="utf-8"))[0]
    item.update(changes)
    return item


def test_answer_session_ids_must_be_a_list() -> None:
    item = sample_item()
    gold = item["answer_session_ids"]
    assert longmemeval_scenario(item).sessions[-1].evidence.sessions == tuple(gold)
    # A bare string would be one gold session per character.
    for bad in (gold[0], {"id": gold[0]}, 7):
        with pytest.raises(ValueError) as info:
            longmemeval_scenario(sample_item(answer_session_ids=bad))
        assert str(info.value) == (
            f"LongMemEval item {item['question_id']!r}: answer_session_ids must be a list of "
            "session ids"
        )
    # Without gold sessions the has_answer turns are still evidence, at turn level only.
    evidence = longmemeval_scenario(sample_item(answer_session_ids=None)).sessions[-1].evidence
    assert (evidence.sessions, evidence.turns) == ((), ("sample_user_01_s2#1",))


def test_a_turn_that_is_not_an_object_is_named() -> None:
    item = sample_item()
    sessions = [["hello"], *item["haystack_sessions"][1:]]
    with pytest.raises(ValueError) as info:
        longmemeval_scenario(sample_item(haystack_sessions=sessions))
    assert str(info.value) == (
        f"LongMemEval item {item['question_id']!r}, session "
        f"{item['haystack_session_ids'][0]!r}: turn 1 is not an object with role and content, "
        "got 'hello'"
    )


def test_limit_is_applied_exactly_and_checked() -> None:
    everything = load_longmemeval_sample()
    assert len(everything) > 2
    assert load_longmemeval_sample(limit=0) == []
    assert [s.name for s in load_longmemeval_sample(limit=2)] == [s.name for s in everything[:2]]
    for bad in (-1, "2", 1.5, True):
        with pytest.raises(ValueError) as info:
            load_longmemeval_sample(limit=bad)
        assert str(info.value) == (
            f"limit must be a whole number of items (0 or more), got {bad!r}"
        )


def test_one_question_type_given_as_a_string_is_one_type() -> None:
    everything = load_longmemeval_sample()
    kind = everything[0].labels["question_type"]
    wanted = [s.name for s in everything if s.labels["question_type"] == kind]
    assert [s.name for s in load_longmemeval_sample(question_types=kind)] == wanted
    assert [s.name for s in load_longmemeval_sample(question_types=[kind])] == wanted


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe[]", "is not UTF-8 text (invalid start byte at byte 0)"),
        (b"[" * 200_000 + b"]" * 200_000, "is not valid JSON: nested too deeply"),
    ],
)
def test_unreadable_files_are_value_errors_naming_the_file(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "items.json"
    path.write_bytes(content)
    with pytest.raises(ValueError) as info:
        load_longmemeval(path)
    assert str(info.value) == f"{path} {message}"


# -- scripted models and the runner ----------------------------------------------------------


def test_bad_rule_patterns_and_rule_lists_are_refused_up_front() -> None:
    with pytest.raises(ValueError) as info:
        Rule("(unclosed", reply="x")
    assert str(info.value) == (
        "Rule: invalid pattern '(unclosed': missing ), unterminated subpattern at position 0"
    )
    with pytest.raises(ValueError, match=r"^recall: invalid pattern '\['"):
        recall("[", "found", "missing")
    with pytest.raises(TypeError, match="^Rule: the pattern must be a string, got 5$"):
        Rule(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^ScriptedModel takes a list of Rule objects$"):
        ScriptedModel("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^ScriptedModel rules must be Rule objects, got 'hi'$"):
        ScriptedModel([Rule("x"), "hi"])  # type: ignore[list-item]


def test_runner_options_and_scenarios_of_the_wrong_type(tmp_path: Path) -> None:
    model = ScriptedModel([Rule("hi", reply="hello")])
    scenario = Scenario([Session(["hi"])])
    for name, value in (
        ("max_tool_rounds", "3"),
        ("max_tool_rounds", 2.5),
        ("retrieval_k", 0.5),
        ("retrieval_k", True),
    ):
        with pytest.raises(ValueError) as info:
            EvaluationRunner(tmp_path / "agent", model, **{name: value})
        assert str(info.value) == f"{name} must be a whole number, at least 1, got {value!r}"
    with pytest.raises(TypeError) as type_info:
        run_scenario(tmp_path / "agent", model, {"sessions": [{"turns": ["hi"]}]})  # type: ignore[arg-type]
    assert str(type_info.value) == (
        "run takes a Scenario (Scenario.from_dict builds one from plain data), got dict"
    )
    # One baseline named as a string is that baseline, not four unknown letters.
    result = run_scenario(tmp_path / "agent", model, scenario, baselines="bm25")
    assert [turn.reply for turn in result.sessions[0].turns] == ["hello"]


# -- saved results and matrices ----------------------------------------------------------------


@pytest.fixture
def saved(tmp_path: Path) -> tuple[dict, dict]:
    from jupyter_agent_memory.evaluation import run_matrix

    model = ScriptedModel([Rule("hi", reply="hello")])
    matrix = run_matrix([model], [Scenario([Session(["hi"])], name="a")], root=tmp_path / "m")
    data = json.loads(matrix.to_json())
    return data["runs"][0]["result"], data


def test_an_incomplete_or_mistyped_result_is_a_value_error(saved: tuple[dict, dict]) -> None:
    from jupyter_agent_memory.evaluation import EvaluationResult

    result, _ = saved
    assert EvaluationResult.from_dict(result).to_dict() == result
    without = {k: v for k, v in result.items() if k != "scenario"}
    with pytest.raises(ValueError) as info:
        EvaluationResult.from_dict(without)
    assert str(info.value) == "Not a complete evaluation result: 'scenario' is missing"
    with pytest.raises(ValueError) as info:
        EvaluationResult.from_dict({**result, "sessions": 5})
    assert str(info.value) == "Not a valid evaluation result: 'int' object is not iterable"
    with pytest.raises(ValueError, match="^Not a valid evaluation result: "):
        EvaluationResult.from_dict({**result, "sessions": [{}]})
    with pytest.raises(ValueError) as info:
        EvaluationResult.from_json("[" * 200_000)
    assert str(info.value) == "Not valid JSON: nested too deeply"


def test_an_incomplete_matrix_is_a_value_error(saved: tuple[dict, dict], tmp_path: Path) -> None:
    from jupyter_agent_memory.evaluation import MatrixResult

    _, data = saved
    assert MatrixResult.from_json(json.dumps(data)).runs[0].scenario == "a"
    with pytest.raises(ValueError) as info:
        MatrixResult.from_json(json.dumps({k: v for k, v in data.items() if k != "runs"}))
    assert str(info.value) == "Not a complete evaluation matrix: 'runs' is missing"
    with pytest.raises(ValueError) as info:
        MatrixResult.from_json(json.dumps({**data, "runs": [{"scenario": "a"}]}))
    assert str(info.value) == "Not a complete evaluation matrix: 'model' is missing"
    path = tmp_path / "matrix.json"
    path.write_bytes(b"\xff{}")
    with pytest.raises(ValueError) as info:
        MatrixResult.load(path)
    assert str(info.value) == f"{path} is not UTF-8 text (invalid start byte at byte 0)"


@pytest.mark.parametrize("seeds", [3, "012", [1.7], [True], [0, None]])
def test_seeds_must_be_integers(tmp_path: Path, seeds: object) -> None:
    from jupyter_agent_memory.evaluation import run_matrix

    model = ScriptedModel([Rule("hi", reply="hello")])
    with pytest.raises(TypeError) as info:
        run_matrix([model], Scenario([Session(["hi"])]), seeds=seeds, root=tmp_path / "m")
    assert str(info.value) == f"seeds must be a list of integers, got {seeds!r}"
    assert not (tmp_path / "m").exists()


def test_a_bad_template_is_refused_before_any_run(tmp_path: Path) -> None:
    from jupyter_agent_memory.errors import TemplateError
    from jupyter_agent_memory.evaluation import run_matrix

    model = ScriptedModel([Rule("hi", reply="hello")])
    with pytest.raises(TemplateError, match='^Unknown template "nosuch"'):
        run_matrix(
            [model],
            Scenario([Session(["hi"])]),
            templates={"good": "assistant", "bad": "nosuch"},
            root=tmp_path / "m",
        )
    assert not (tmp_path / "m").exists()  # not even the good template's run


def test_a_scenario_without_sessions_is_refused_before_running(tmp_path: Path) -> None:
    from jupyter_agent_memory.evaluation import run_matrix

    model = ScriptedModel([Rule("hi", reply="hello")])
    with pytest.raises(ValueError) as info:
        run_scenario(tmp_path / "agent", model, Scenario([], name="empty"))
    assert str(info.value) == "Scenario 'empty' has no sessions to run"
    with pytest.raises(ValueError) as info:
        run_matrix(
            [model],
            [Scenario([Session(["hi"])], name="full"), Scenario([], name="empty")],
            root=tmp_path / "m",
        )
    assert str(info.value) == "Scenario 'empty' has no sessions to run"
    assert not (tmp_path / "m").exists()  # the full scenario did not run first


def test_a_check_of_a_turn_the_session_lacks_fails_whichever_way_it_is_put() -> None:
    from jupyter_agent_memory.evaluation import (
        ReplyAbstains,
        ReplyContains,
        ReplyJudged,
        ReplyMatches,
        SessionState,
    )
    from jupyter_agent_memory.evaluation.records import TurnRecord

    state = SessionState("", [], "", [TurnRecord("q", "hello")])
    # "reply 9 does not contain X" is not true of a session with one reply.
    for check in (
        ReplyContains("hello", turn=9),
        ReplyContains("bye", turn=9, present=False),
        ReplyMatches("hel+", turn=-2, present=False),
        ReplyAbstains(turn=9, present=False),
        ReplyJudged("x", lambda question, answer, reply: False, turn=3, present=False),
    ):
        outcome = check.check(state)
        assert not outcome.passed, check
        assert outcome.detail.startswith("no such turn: the session has 1 "), outcome.detail
    assert ReplyContains("bye", turn=0, present=False).check(state).passed
    empty = SessionState("", [], "", [])
    outcome = ReplyContains("x", turn=None, present=False).check(empty)
    assert (outcome.passed, outcome.detail) == (False, "no such turn: the session has no replies")
