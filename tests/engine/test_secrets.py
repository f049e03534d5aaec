"""The credential guard: every known format refused on every write, look-alikes kept, and
every check linear in the text's length, whatever a model writes."""

from __future__ import annotations

import time

import pytest
from credential_corpus import DISGUISED, FAKE, INNOCENT, MORE

from jupyter_agent_memory import AgentMemory, MemoryToolError
from jupyter_agent_memory.engine import secrets as credentials


def test_the_corpus_covers_every_format() -> None:
    assert {fmt.kind for fmt in credentials.FORMATS} == set(FAKE)


@pytest.mark.parametrize(("kind", "secret"), sorted(FAKE.items()))
def test_each_credential_format_is_found_and_refused_on_every_write(
    mem: AgentMemory, kind: str, secret: str
) -> None:
    text = f"- Remember this: {secret} (for the deploy)"
    assert [s.kind for s in credentials.find(text)] == [kind]
    for call, field in [
        ({"action": "update", "content": text}, "content"),
        ({"action": "append", "text": text}, "text"),
        ({"action": "append", "text": "x", "tags": [secret]}, "tags"),
    ]:
        with pytest.raises(MemoryToolError) as info:
            mem.call_tool(call)
        assert info.value.code == -32602
        assert info.value.message.startswith(
            f"Refusing to store '{field}': it contains what looks like {kind}. "
            "Do not store credentials in memory"
        )
    with pytest.raises(MemoryToolError):
        mem.write_user(text)
    assert not (mem.path / "memory" / "FACT.md").exists()
    assert not (mem.path / "memory" / "JOURNAL.jsonl").exists()


@pytest.mark.parametrize(("kind", "text"), sorted([*DISGUISED.items(), *MORE.items()]))
def test_disguised_credentials_are_found_where_they_are(kind: str, text: str) -> None:
    line = f"note: {text} -- keep it"
    (found,) = credentials.find(line)
    assert found.kind == kind
    # The span is in the text as written, invisible characters included.
    span = line[found.start : found.end]
    visible = "".join(c for c in span if c not in credentials.INVISIBLE)
    assert visible.strip("`\"<>") in text.translate(dict.fromkeys(map(ord, credentials.INVISIBLE)))
    assert found.start > 0 and line[found.end :].endswith("-- keep it")


@pytest.mark.parametrize("text", INNOCENT)
def test_ordinary_memory_is_never_refused(mem: AgentMemory, text: str) -> None:
    assert credentials.find(text) == []
    assert mem.call_tool({"action": "update", "content": text + "\n"}) == "Memory updated."
    assert mem.call_tool({"action": "append", "text": text}).startswith("Journal entry added")


def test_every_format_has_hints_its_matches_contain() -> None:
    # The hints only skip work: each sample still holds one of its format's hints, and every
    # hint is lower case (it is looked for in the lowered text).
    samples = [*FAKE.values(), *MORE.values()]
    for fmt in credentials.FORMATS:
        assert fmt.hints and all(hint == hint.lower() for hint in fmt.hints)
        matches = [m.group() for s in samples for m in fmt.pattern.finditer(s)]
        assert matches, f"no sample of {fmt.pattern.pattern}"
        for match in matches:
            assert any(hint in match.lower() for hint in fmt.hints), fmt.kind


# -- linear time --------------------------------------------------------------------------------

#: Texts that made backtracking patterns quadratic: a format's start repeated, alone or with a
#: piece that lets a pattern run on before it fails, and invisible characters everywhere.
ADVERSARIAL = sorted(
    {FAKE[kind][:4] for kind in FAKE}
    | {FAKE[kind][:-3] for kind in FAKE}
    | {"sk-", "sk-a-", "eyJ-", "eyJaaaaaaaa.eyJ-", "bearer ", "Bearer a1", "://a:", "://a:b@",
       "aws secret key ", "-----BEGIN A ", "SG.a.", "x-", "a\u200b"}
)


def _best_time(text: str, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        credentials.find(text)
        best = min(best, time.perf_counter() - started)
    return best


@pytest.mark.slow
@pytest.mark.parametrize("unit", ADVERSARIAL)
def test_the_check_is_linear_on_adversarial_text(unit: str) -> None:
    small = (unit * (64 * 1024 // len(unit) + 1))[: 64 * 1024]
    large = (unit * (1024 * 1024 // len(unit) + 1))[: 1024 * 1024]
    ratio = _best_time(large) / max(_best_time(small), 1e-6)
    # 16 times the text: about 16 times the work when linear (memory effects add some),
    # 256 times when quadratic.
    assert ratio < 100, (unit, ratio)
