"""Every environment variable the package reads is listed, read one way, and checked."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import jupyter_agent_memory
from jupyter_agent_memory import MemoryToolError, environment

PACKAGE = Path(jupyter_agent_memory.__file__).parent


def _environment_reads() -> dict[str, list[str]]:
    """Module -> places that touch ``os.environ`` or ``os.getenv`` (outside environment.py)."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "environment.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv"):
                found.setdefault(path.relative_to(PACKAGE).as_posix(), []).append(
                    f"line {node.lineno}"
                )
    return found


def _variable_names_in_source() -> set[str]:
    """Every string literal of the package naming one of our variables."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                value = node.value
                if value.startswith("JUPYTER_AGENT_MEMORY_") and value.isupper():
                    names.add(value)
    return names


def test_only_the_environment_module_reads_the_environment() -> None:
    assert _environment_reads() == {}


def test_every_variable_named_in_the_package_is_listed() -> None:
    ours = {name for name in environment.VARIABLES if name.startswith("JUPYTER_AGENT_MEMORY_")}
    assert _variable_names_in_source() == ours
    assert all(description for description in environment.VARIABLES.values())


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), (" TRUE ", True), ("yes", True), ("On", True),
     ("0", False), ("false", False), (" no", False), ("OFF", False), ("", None), ("  ", None)],
)
def test_every_switch_takes_one_vocabulary(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool | None
) -> None:
    monkeypatch.setenv(environment.INDEX, raw)
    assert environment.switch(environment.INDEX) is expected
    monkeypatch.setenv(environment.HOLD_FILES, raw)
    assert environment.switch(environment.HOLD_FILES, default=True) is (
        True if expected is None else expected
    )


@pytest.mark.parametrize("raw", ["2", "auto", "enabled", "truthy", "-1"])
def test_anything_else_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    for name in (environment.INDEX, environment.HOLD_FILES):
        monkeypatch.setenv(name, raw)
        with pytest.raises(MemoryToolError) as info:
            environment.switch(name)
        assert info.value.code == -32602
        assert info.value.message == (
            f"${name} must be 1 or 0 (also true/false, yes/no, on/off), got {raw!r}"
        )


def test_an_unlisted_variable_is_a_programming_error() -> None:
    with pytest.raises(KeyError):
        environment.text("JUPYTER_AGENT_MEMORY_NOPE")
