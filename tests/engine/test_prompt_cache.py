"""The builder's one cache: bounded, shared safely by threads, and able to hold no descriptor.

Correctness is always judged against an uncached build (a fresh builder) of the same files.
"""

from __future__ import annotations

import gc
import json
import os
import random
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent_memory import AgentMemory, MemoryToolError, PromptBuilder, provision
from jupyter_agent_memory.engine.prompt import PromptWarning
from jupyter_agent_memory.engine.prompt_cache import Kind, Plan, PromptCache, Watch

SOUL = "# Soul\nI am Pip, a patient research assistant who explains with worked examples.\n"
USER = "# User\nAda, a mathematician who prefers metric units.\n"
# Every FACT.md state has its own size, so no two states can share a stat key (see below).
FACTS = ["# Facts\n" + f"- fact {i}\n" * (i + 1) for i in range(6)]
USER_STATES = (True, False)


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def signature(prompt: Any) -> tuple[Any, ...]:
    """What two builds must agree on: the text, the flags and every section's source and
    version."""
    return (
        prompt.text,
        prompt.bootstrap,
        prompt.budget_tokens,
        prompt.warnings,
        tuple((s.name, s.source, s.chars, s.sha256) for s in prompt.sections),
    )


def replace_file(path: Path, text: str) -> None:
    """Replace ``path`` atomically, as the store does: readers see the old or the new file."""
    temp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
    temp.write_text(text)
    os.replace(temp, path)


def set_state(agent: Path, facts: int, user: bool) -> None:
    replace_file(agent / "memory" / "FACT.md", FACTS[facts])
    if user:
        replace_file(agent / "USER.md", USER)
    else:
        (agent / "USER.md").unlink(missing_ok=True)


@pytest.fixture
def agent(tmp_path: Path) -> AgentMemory:
    template = tmp_path / "tpl"
    template.mkdir()
    (template / "agent.json").write_text(
        json.dumps({"name": "T", "instructions": "Tutor.", "configuration": {"budget_tokens": 9}})
    )
    mem = AgentMemory.open(tmp_path / "agent")
    provision(template, mem)
    mem.write_soul(SOUL)
    return mem


def uncached(mem: AgentMemory, workspace: Path, session: bool) -> tuple[Any, ...]:
    builder = PromptBuilder()
    with pytest.warns(UserWarning, match="over the budget"):
        if session:
            return signature(builder.build_session(mem, workspace))
        return signature(builder.build(mem, workspace, config={"budget_tokens": 9}))


@pytest.mark.parametrize(
    ("hold_files", "cache_entries"), [(True, 512), (False, 512), (True, 6), (False, 6)]
)
@pytest.mark.slow
def test_threads_sharing_a_builder_while_files_change_get_exact_prompts(
    agent: AgentMemory, tmp_path: Path, hold_files: bool, cache_entries: int
) -> None:
    workspaces = [tmp_path / "ws-a", tmp_path / "ws-b"]
    for space in workspaces:
        space.mkdir()
    (workspaces[1] / "system.md").write_text("Be brief.\n")
    # Every state the files can be in, built without any cache.
    valid: dict[tuple[Any, ...], set[tuple[Any, ...]]] = {}
    for facts in range(len(FACTS)):
        for user in USER_STATES:
            set_state(agent.path, facts, user)
            for space in workspaces:
                for session in (True, False):
                    valid.setdefault((space, session), set()).add(
                        uncached(agent, space, session)
                    )
    builder = PromptBuilder(hold_files=hold_files, cache_entries=cache_entries)
    stop = threading.Event()
    problems: list[str] = []
    counts = [0] * 4

    def write() -> None:
        rng = random.Random(7)
        while not stop.is_set():
            set_state(agent.path, rng.randrange(len(FACTS)), rng.choice(USER_STATES))
            time.sleep(rng.choice((0, 0.0005, 0.002)))

    def read(index: int) -> None:
        rng = random.Random(index)
        try:
            while not stop.is_set():
                space, session = rng.choice(workspaces), rng.choice((True, False))
                if session:
                    prompt = builder.build_session(agent, space)
                else:
                    prompt = builder.build(agent, space, config={"budget_tokens": 9})
                if signature(prompt) not in valid[(space, session)]:
                    problems.append(f"thread {index}: a prompt no uncached build gives")
                counts[index] += 1
        except Exception as exc:  # reported below, with the thread that saw it
            problems.append(f"thread {index}: {exc!r}")

    threads = [threading.Thread(target=read, args=(i,)) for i in range(4)]
    threads.append(threading.Thread(target=write))
    # catch_warnings is process-wide and not thread-safe: set once, around all the threads.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PromptWarning)
        for thread in threads:
            thread.start()
        time.sleep(1.5)
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert problems == []
    assert min(counts) > 20  # every reader really ran
    # After the last change, no thread may keep an old prompt: the files decide.
    for space in workspaces:
        for session in (True, False):
            with pytest.warns(UserWarning):
                prompt = (
                    builder.build_session(agent, space)
                    if session
                    else builder.build(agent, space, config={"budget_tokens": 9})
                )
            assert signature(prompt) == uncached(agent, space, session)
    info = builder.cache_info()
    assert info.entries <= cache_entries and info.descriptors <= info.max_descriptors
    if not hold_files:
        assert info.descriptors == 0


def test_the_bounds_hold_over_many_agents_and_workspaces(tmp_path: Path) -> None:
    gc.collect()  # descriptors of objects earlier tests left for the collector go first
    before = open_fds()
    builder = PromptBuilder(cache_entries=40)
    agents = []
    for i in range(30):
        mem = AgentMemory.open(tmp_path / f"agent{i}")
        mem.write_soul(SOUL.replace("Pip", f"Pip {i}"))
        mem.write_user(USER)
        mem.update_facts(FACTS[i % len(FACTS)])
        agents.append(mem)
    for i, mem in enumerate(agents):
        space = tmp_path / f"ws{i}"
        space.mkdir()
        for _ in range(2):
            prompt = builder.build(mem, space)
            info = builder.cache_info()
            assert info.entries <= 40
            assert info.descriptors <= info.max_descriptors == 64
            assert len(open_fds() - before) <= info.max_descriptors
        assert f"I am Pip {i}," in prompt.text
    info = builder.cache_info()
    assert info.entries == 40  # full, not emptied
    # The most recent builds are still cached; the earliest were evicted and rebuild right.
    assert builder.build(agents[-1], tmp_path / "ws29") is prompt
    assert signature(builder.build(agents[0], tmp_path / "ws0")) == signature(
        PromptBuilder().build(agents[0], tmp_path / "ws0")
    )
    builder.clear_cache()
    assert builder.cache_info().entries == 0
    assert open_fds() == before


def test_holding_off_no_descriptor_stays_open_and_changes_are_still_seen(
    agent: AgentMemory, tmp_path: Path
) -> None:
    agent.write_user(USER)
    agent.update_facts(FACTS[0])
    before = open_fds()
    holding = PromptBuilder()
    holding.build(agent, tmp_path)
    assert len(open_fds() - before) == holding.cache_info().descriptors == 4  # the control
    holding.clear_cache()
    assert open_fds() == before

    builder = PromptBuilder(hold_files=False)
    first = builder.build(agent, tmp_path)
    assert builder.build(agent, tmp_path) is first  # still cached
    assert open_fds() == before
    fact = agent.path / "memory" / "FACT.md"
    steps = [
        lambda: fact.write_text(FACTS[0].replace("fact 0", "fact X")),  # in place, same size
        lambda: replace_file(fact, FACTS[1]),  # replaced
        lambda: fact.unlink(),  # deleted
        lambda: replace_file(agent.path / "user.md", "Grace.\n"),  # a variant appears
        lambda: (agent.path / "USER.md").unlink(),  # the variant is now the one loaded
    ]
    for change in steps:
        change()
        prompt = builder.build(agent, tmp_path)
        assert signature(prompt) == signature(PromptBuilder().build(agent, tmp_path))
        assert builder.build(agent, tmp_path) is prompt
        assert open_fds() == before
    assert "<facts>" not in prompt.text and "<user>\nGrace.\n</user>" in prompt.text
    assert builder.cache_info().descriptors == 0


def test_cache_entries_must_be_a_positive_integer() -> None:
    for bad in (0, -1, True, 2.5, "8"):
        with pytest.raises(MemoryToolError, match="'cache_entries' must be a positive integer"):
            PromptBuilder(cache_entries=bad)  # type: ignore[arg-type]


# -- the cache itself ---------------------------------------------------------------------------


def test_least_recently_used_goes_first_and_sizes_are_counted() -> None:
    cache = PromptCache(max_entries=3, max_chars=10, max_descriptors=0)
    cache.put(Kind.FILE, "a", "A", chars=4)
    cache.put(Kind.FILE, "b", "B", chars=4)
    assert cache.get(Kind.FILE, "a") == "A"  # now more recent than b
    cache.put(Kind.FILE, "c", "C", chars=4)  # 12 characters: b goes
    assert [cache.get(Kind.FILE, k) for k in "abc"] == ["A", None, "C"]
    assert (cache.info().entries, cache.info().chars) == (2, 8)
    cache.put(Kind.FILE, "a", "A2", chars=1)  # a replaced, not added twice
    assert (cache.info().entries, cache.info().chars) == (2, 5)
    cache.put(Kind.FILE, "huge", "H", chars=11)  # larger than the bound on its own
    assert cache.get(Kind.FILE, "huge") is None and cache.info().chars <= 10
    cache.put(Kind.LISTING, "a", "listing")  # kinds never share a key
    assert (cache.get(Kind.FILE, "a"), cache.get(Kind.LISTING, "a")) == ("A2", "listing")
    with pytest.raises(ValueError, match="max_entries must be a non-negative integer"):
        PromptCache(max_entries=-1)


def test_evicted_and_replaced_watches_are_closed(tmp_path: Path) -> None:
    files = []
    for i in range(3):
        path = tmp_path / f"f{i}"
        path.write_text("x")
        files.append(str(path))
    cache = PromptCache(max_descriptors=4)
    watches = []
    for i in range(3):
        watch = Watch(Plan(paths=(str(tmp_path),), handles=tuple(files[: i + 1])))
        assert watch.arm()
        watch.prompt = f"prompt {i}"
        watches.append(watch)
    cache.put(Kind.FILE, "text", "kept", chars=1)
    cache.put(Kind.WATCH, 0, watches[0])  # 1 descriptor
    cache.put(Kind.WATCH, 1, watches[1])  # 3
    cache.put(Kind.WATCH, 2, watches[2])  # 6 > 4: the oldest holders go until it fits
    assert [w.descriptors for w in watches] == [0, 0, 3]
    assert cache.info().descriptors == 3
    assert cache.get(Kind.FILE, "text") == "kept"  # holds no descriptor: not evicted for them
    assert cache.current_prompt(0) == (None, None)
    assert cache.current_prompt(2) == ("prompt 2", watches[2].plan)
    replacement = Watch(watches[2].plan)
    cache.put(Kind.WATCH, 2, replacement)  # unarmed: holds nothing yet
    assert watches[2].descriptors == 0
    assert cache.current_prompt(2) == (None, watches[2].plan)  # rebuild from this plan
    cache.clear()
    assert cache.info() == type(cache.info())(0, 0, 0, cache.max_entries, cache.max_chars, 4)


def test_a_path_checked_watch_sees_replace_and_delete(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("one")
    watch = Watch(Plan(paths=(str(tmp_path),), handles=(str(path),)), hold=False)
    assert watch.arm() and watch.descriptors == 0
    watch.prompt = "p"
    assert watch.unchanged()
    replace_file(path, "two!")
    assert not watch.unchanged()
    assert watch.arm() and watch.unchanged()
    path.unlink()
    assert not watch.unchanged()
    assert watch.arm() is False  # a missing handle: not worth trusting


# -- the switch for every surface ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, True), ("", True), ("1", True), ("on", True), ("0", False), (" False ", False),
     ("no", False)],
)
def test_the_environment_sets_the_default_for_holding(
    monkeypatch: pytest.MonkeyPatch, value: str | None, expected: bool
) -> None:
    if value is None:
        monkeypatch.delenv("JUPYTER_AGENT_MEMORY_HOLD_FILES", raising=False)
    else:
        monkeypatch.setenv("JUPYTER_AGENT_MEMORY_HOLD_FILES", value)
    assert PromptBuilder().hold_files is expected
    # An explicit argument wins over the environment.
    assert PromptBuilder(hold_files=not expected).hold_files is (not expected)


def test_a_bad_environment_value_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_HOLD_FILES", "maybe")
    with pytest.raises(MemoryToolError) as info:
        PromptBuilder()
    assert info.value.message == (
        "$JUPYTER_AGENT_MEMORY_HOLD_FILES must be 1 or 0 (also true/false, yes/no, on/off), "
        "got 'maybe'"
    )
    assert info.value.code == -32602


@pytest.mark.parametrize("hold", ["1", "0"])
def test_memprompt_in_a_shell_follows_the_switch(
    ip: Any, agent: AgentMemory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hold: str
) -> None:
    from IPython.utils.capture import capture_output

    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_HOLD_FILES", hold)
    agent.write_user(USER)
    agent.update_facts(FACTS[2])
    spaces = []
    for i in range(4):
        spaces.append(tmp_path / f"space{i}")
        spaces[-1].mkdir()
    ip.run_line_magic("load_ext", "jupyter_agent_memory")
    try:
        with capture_output():
            ip.run_line_magic("agent_memory", str(agent.path))
            ip.run_line_magic("memprompt", f"--workspace {spaces[0]}")  # warm up the shell
        before = open_fds()
        with capture_output():
            for space in spaces[1:]:
                view = ip.run_line_magic("memprompt", f"--workspace {space}")
                assert "<facts>\n" + FACTS[2].strip() in view.text
        opened = open_fds() - before
    finally:
        ip.run_line_magic("unload_ext", "jupyter_agent_memory")
    if hold == "0":
        assert opened == set()
    else:
        assert len(opened) == 3 * 4  # memory/, SOUL.md, USER.md and FACT.md per workspace
