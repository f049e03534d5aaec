"""``product_info`` as Cherry Studio's assistant server answers it.

Cherry Studio: the assistant MCP server's productInfo / readProductManifest (result shapes,
argument checks, manifest checks and their error texts, compact JSON.stringify output).
"""

from __future__ import annotations

import errno
import json
import os
import threading
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

import jupyter_agent_memory
from jupyter_agent_memory import AgentMemory, MemoryToolError, product_info, provision
from jupyter_agent_memory.engine.manifest import package_manifest

RUNTIME = jupyter_agent_memory.__version__
VALID = {"schemaVersion": 1, "package": {"name": "demo", "version": "2.0.0-dev"}, "routes": [1]}


@pytest.fixture
def template(tmp_path: Path) -> Path:
    folder = tmp_path / "tpl"
    folder.mkdir()
    (folder / "agent.json").write_text('{"name": "Demo"}')
    return folder


@pytest.fixture
def agent(template: Path, tmp_path: Path) -> AgentMemory:
    (template / "product-manifest.json").write_text(json.dumps(VALID))
    mem = AgentMemory.open(tmp_path / "agent")
    provision(template, mem)
    return mem


def write_manifest(template: Path, text: str) -> None:
    (template / "product-manifest.json").write_text(text)


def error_of(mem: AgentMemory, args: Any) -> tuple[int, str]:
    with pytest.raises(MemoryToolError) as info:
        product_info(mem, args)
    return info.value.code, info.value.message


# -- shapes --------------------------------------------------------------------------------------


def test_index_section_and_all_are_compact_json(agent: AgentMemory) -> None:
    head = f'{{"runtimeVersion":"{RUNTIME}","manifestVersion":"2.0.0-dev"'
    assert product_info(agent, {"source": "manifest"}) == head + ',"sections":["package","routes"]}'
    assert product_info(agent, {"source": "manifest", "section": "routes"}) == (
        head + ',"section":"routes","data":[1]}'
    )
    assert product_info(agent, {"source": "manifest", "section": "all"}) == (
        head + ',"section":"all","manifest":'
        '{"schemaVersion":1,"package":{"name":"demo","version":"2.0.0-dev"},"routes":[1]}}'
    )
    # hasOwnProperty: schemaVersion is a section one may ask for, though it is not listed.
    assert json.loads(product_info(agent, {"source": "manifest", "section": "schemaVersion"}))[
        "data"
    ] == 1


def test_an_empty_section_is_the_overview(agent: AgentMemory) -> None:
    # Strict-mode clients send every property; "" is how they leave a string out.
    overview = product_info(agent, {"source": "manifest"})
    assert json.loads(overview)["sections"] == ["package", "routes"]
    assert product_info(agent, {"source": "manifest", "section": ""}) == overview


def test_javascript_key_order_and_number_spelling(agent: AgentMemory, template: Path) -> None:
    write_manifest(
        template,
        '{"schemaVersion": 1.0, "package": {"version": "1"}, "b": {"z": 1, "10": 2, "2": 3},'
        ' "7": 2.0, "a": 1.5, "nested": {"01": 0, "1": 0},'
        ' "numbers": [12345678901234567890, 1e-7, 1e21, 1e20, -0.0, 0.000001]}',
    )
    # Object.keys: integer-like keys first, ascending; "01" is not integer-like.
    assert json.loads(product_info(agent, {"source": "manifest"}))["sections"] == [
        "7", "package", "b", "a", "nested", "numbers"
    ]
    text = product_info(agent, {"source": "manifest", "section": "all"})
    assert text.endswith(
        '"manifest":{"7":2,"schemaVersion":1,"package":{"version":"1"},'
        '"b":{"2":3,"10":2,"z":1},"a":1.5,"nested":{"1":0,"01":0},'
        '"numbers":[12345678901234567000,1e-7,1e+21,100000000000000000000,0,0.000001]}}'
    )


def test_non_ascii_is_kept_and_lone_surrogates_are_escaped(
    agent: AgentMemory, template: Path
) -> None:
    write_manifest(
        template,
        '{"schemaVersion": 1, "package": {"version": "1"}, "notes": "café 😀 \\ud83d"}',
    )
    text = product_info(agent, {"source": "manifest", "section": "notes"})
    assert text.endswith('"data":"café 😀 \\ud83d"}')
    text.encode("utf-8")  # always encodable, so no transport can choke on it


def test_the_guide_manifest_is_in_the_reference_format(mem: AgentMemory) -> None:
    provision("guide", mem)
    generated = package_manifest()
    assert generated["schemaVersion"] == 1
    assert generated["package"]["name"] == "jupyter-agent-memory"
    assert generated["package"]["version"] == version("jupyter-agent-memory")
    index = json.loads(product_info(mem, {"source": "manifest"}))
    # manifestVersion can be compared with runtimeVersion: both are package versions.
    assert index == {
        "runtimeVersion": RUNTIME,
        "manifestVersion": version("jupyter-agent-memory"),
        "sections": ["package", "files", "tools", "magics", "cli", "rest"],
    }
    everything = json.loads(product_info(mem, {"source": "manifest", "section": "all"}))
    assert everything["manifest"] == json.loads(json.dumps(generated))


# -- argument checks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"source": "manifest", "path": "/tmp/secret"}, "Unsupported product_info argument: path"),
        ({"source": "manifest", "url": "https://example.com"},
         "Unsupported product_info argument: url"),
        ({"url": "x", "source": "nope"}, "Unsupported product_info argument: url"),
        ({"source": "release_notes"}, "Unknown product_info source: release_notes"),
        ({}, "Unknown product_info source: undefined"),
        ({"section": "package"}, "Unknown product_info source: undefined"),
        ({"source": None}, "Unknown product_info source: null"),
        ({"source": 1.0}, "Unknown product_info source: 1"),
        ({"source": True}, "Unknown product_info source: true"),
        ({"source": ["manifest"]}, "Unknown product_info source: manifest"),
        ({"source": {"a": 1}}, "Unknown product_info source: [object Object]"),
        ({"source": "MANIFEST"}, "Unknown product_info source: MANIFEST"),
        ({"source": "manifest", "section": " \t\ufeff"}, "'section' must be a non-empty string"),
        ({"source": "manifest", "section": None}, "'section' must be a non-empty string"),
        ({"source": "manifest", "section": ["all"]}, "'section' must be a non-empty string"),
        ({"source": "manifest", "section": "nope"}, "Unknown product manifest section: nope"),
        ({"source": "manifest", "section": " routes"},
         "Unknown product manifest section:  routes"),
    ],
)
def test_argument_errors(agent: AgentMemory, args: dict[str, Any], message: str) -> None:
    assert error_of(agent, args) == (-32602, message)


# -- manifest checks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "Product manifest contains invalid JSON"),
        ('{"schemaVersion": 1, "package": {"version": NaN}}',
         "Product manifest contains invalid JSON"),
        ("\ufeff" + json.dumps(VALID), "Product manifest contains invalid JSON"),
        ("[1]", "Product manifest schema is invalid"),
        ("null", "Product manifest schema is invalid"),
        ('{"schemaVersion": 2, "package": {"version": "1"}}', "Product manifest schema is invalid"),
        ('{"schemaVersion": true, "package": {"version": "1"}}',
         "Product manifest schema is invalid"),
        ('{"schemaVersion": "1", "package": {"version": "1"}}',
         "Product manifest schema is invalid"),
        ('{"schemaVersion": 1, "package": {"version": "  "}}',
         "Product manifest schema is invalid"),
        ('{"schemaVersion": 1, "package": {"version": 2}}', "Product manifest schema is invalid"),
        ('{"schemaVersion": 1, "package": ["1"]}', "Product manifest schema is invalid"),
        ('{"version": "1", "sections": {"api": {}}}', "Product manifest schema is invalid"),
    ],
)
def test_manifest_errors_never_show_a_path(
    agent: AgentMemory, template: Path, text: str, message: str
) -> None:
    write_manifest(template, text)
    for args in ({"source": "manifest"}, {"source": "manifest", "section": "nope"}):
        code, got = error_of(agent, args)
        assert (code, got) == (-32603, message)
        assert str(template) not in got and "/" not in got


def test_a_manifest_that_disappears_mid_session_is_unavailable(
    agent: AgentMemory, template: Path
) -> None:
    assert json.loads(product_info(agent, {"source": "manifest"}))["sections"]
    (template / "product-manifest.json").unlink()
    assert error_of(agent, {"source": "manifest"}) == (-32603, "Product manifest is unavailable")
    # Argument errors are still reported first, as in Cherry Studio.
    assert error_of(agent, {"source": "x"})[1] == "Unknown product_info source: x"


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink", "read-error"])
def test_a_manifest_that_is_not_a_readable_file_is_unavailable_at_once(
    agent: AgentMemory,
    template: Path,
    tmp_path: Path,
    kind: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = template / "product-manifest.json"
    path.unlink()
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        (tmp_path / "elsewhere.json").write_text(json.dumps(VALID))
        path.symlink_to(tmp_path / "elsewhere.json")
    else:
        path.write_text(json.dumps(VALID))
        manifest_inode = path.stat().st_ino
        real_read = os.read

        def failing_read(fd: int, size: int) -> bytes:
            if os.fstat(fd).st_ino == manifest_inode:
                raise OSError(errno.EIO, "Input/output error")
            return real_read(fd, size)

        monkeypatch.setattr(os, "read", failing_read)
    result: list[tuple[int, str]] = []
    thread = threading.Thread(
        target=lambda: result.append(error_of(agent, {"source": "manifest"})), daemon=True
    )
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "product_info blocked on the manifest"
    assert result == [(-32603, "Product manifest is unavailable")]


@pytest.mark.parametrize("template_name", [None, "assistant"])
def test_no_manifest_at_all_is_unavailable(mem: AgentMemory, template_name: str | None) -> None:
    if template_name:
        provision(template_name, mem)
    assert error_of(mem, {"source": "manifest"}) == (-32603, "Product manifest is unavailable")
