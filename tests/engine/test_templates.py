"""Templates, provisioning and product_info (docs/formats.md)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import stat
from datetime import datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

import jupyter_agent_memory
from jupyter_agent_memory import (
    AgentMemory,
    MemoryToolError,
    TemplateError,
    UnsafePathError,
    list_templates,
    product_info,
    provision,
)
from jupyter_agent_memory.engine.templates import BUILTIN_DIR, manifest_path_for

GUIDE = BUILTIN_DIR / "guide"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def files(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder`` (links not followed): file bytes, or None for others."""
    found: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            is_file = stat.S_ISREG(os.lstat(path).st_mode)
            found[str(path.relative_to(folder))] = path.read_bytes() if is_file else None
    return found


def make_template(base: Path, spec: Any = None, *, soul: bytes = b"# Soul\n\nTemplate soul.\n",
                  user: bytes = b"# User\n", fact: bytes = b"# Facts\n",
                  manifest: Any = None) -> Path:
    """A template folder; ``spec`` is written as agent.json (a str is written verbatim)."""
    folder = base
    (folder / "memory").mkdir(parents=True)
    if spec is None:
        spec = {"name": "Custom"}
    (folder / "agent.json").write_text(spec if isinstance(spec, str) else json.dumps(spec))
    (folder / "SOUL.md").write_bytes(soul)
    (folder / "USER.md").write_bytes(user)
    (folder / "memory" / "FACT.md").write_bytes(fact)
    if manifest is not None:
        (folder / "product-manifest.json").write_text(json.dumps(manifest))
    return folder


# -- built-ins and first run -------------------------------------------------------------------


def test_builtin_templates() -> None:
    assert list_templates() == ["assistant", "guide"]


def test_first_provision_copies_the_template(mem: AgentMemory) -> None:
    definition = provision("guide", mem)
    assert definition.name == "Memory Guide"
    assert definition.instructions is not None and "product_info" in definition.instructions
    assert definition.configuration == {"budget_tokens": 4000}
    assert definition.folder == GUIDE
    assert definition.manifest_path == GUIDE / "product-manifest.json"
    assert (mem.path / "SOUL.md").read_bytes() == (GUIDE / "SOUL.md").read_bytes()
    assert (mem.path / "USER.md").read_bytes() == (GUIDE / "USER.md").read_bytes()
    assert (mem.path / "memory" / "FACT.md").read_bytes() == (
        GUIDE / "memory" / "FACT.md"
    ).read_bytes()
    for name in ("SOUL.md", "USER.md", "memory/FACT.md", ".template.json"):
        assert stat.S_IMODE(os.lstat(mem.path / name).st_mode) == 0o600, name
    # Nothing product-owned is copied into the agent folder.
    assert sorted(files(mem.path)) == [
        ".template.json", "SOUL.md", "USER.md", "memory", "memory/.lock", "memory/FACT.md"
    ]
    record = json.loads((mem.path / ".template.json").read_text())
    assert list(record) == ["template", "builtin", "name", "provisioned_at"]
    assert record["template"] == "guide"
    assert record["builtin"] is True
    assert record["name"] == "Memory Guide"
    assert datetime.fromisoformat(record["provisioned_at"]).tzinfo is not None
    assert mem.template_info() == record
    assert manifest_path_for(mem) == GUIDE / "product-manifest.json"


def test_provision_to_a_folder_path_creates_the_agent(tmp_path: Path) -> None:
    target = tmp_path / "new-agent"
    definition = provision("assistant", target)
    assert definition.name == "Notebook Assistant"
    assert definition.instructions is None
    assert definition.manifest_path is None
    assert (target / "SOUL.md").read_bytes() == (BUILTIN_DIR / "assistant" / "SOUL.md").read_bytes()
    assert AgentMemory.open(target).template_info()["template"] == "assistant"  # type: ignore[index]


def test_localized_name_is_picked_by_locale(tmp_path: Path) -> None:
    assert provision("guide", tmp_path / "fr", locale="fr-CA").name == "Guide de la mémoire"
    assert provision("guide", tmp_path / "de", locale="de_DE").name == "Gedächtnis-Guide"
    assert provision("guide", tmp_path / "xx", locale="xx").name == "Memory Guide"


def test_custom_template_folder(tmp_path: Path) -> None:
    template = make_template(tmp_path / "tpl", {"name": "Custom", "instructions": "Be brief."})
    definition = provision(template, tmp_path / "agent")
    assert (definition.name, definition.instructions) == ("Custom", "Be brief.")
    record = json.loads((tmp_path / "agent" / ".template.json").read_text())
    assert (record["template"], record["builtin"]) == (str(template), False)
    assert (tmp_path / "agent" / "SOUL.md").read_bytes() == b"# Soul\n\nTemplate soul.\n"


# -- upgrades never touch user content ---------------------------------------------------------


def test_reprovision_after_upgrade_keeps_every_user_edit(tmp_path: Path) -> None:
    template = make_template(tmp_path / "tpl")
    mem = AgentMemory.open(tmp_path / "agent")
    provision(template, mem)
    mem.write_soul("My own soul.\n")
    mem.write_user("Ada, UTC.\n")
    mem.update_facts("- learned fact\n")
    mem.append("journal entry")
    # The template is upgraded: every file changes and a new memory file appears.
    (template / "SOUL.md").write_bytes(b"# Soul v2\n")
    (template / "USER.md").write_bytes(b"# User v2\n")
    (template / "memory" / "FACT.md").write_bytes(b"# Facts v2\n")
    (template / "memory" / "NOTES.md").write_bytes(b"new stock notes\n")
    before_journal = (mem.path / "memory" / "JOURNAL.jsonl").read_bytes()
    before_history = mem.history()
    provision(template, mem)
    assert mem.soul == "My own soul.\n"
    assert mem.user == "Ada, UTC.\n"
    assert mem.facts == "- learned fact\n"
    assert (mem.path / "memory" / "JOURNAL.jsonl").read_bytes() == before_journal
    assert (mem.path / "memory" / "NOTES.md").read_bytes() == b"new stock notes\n"
    assert mem.history() == before_history


def test_empty_persona_files_are_filled_but_whitespace_is_content(tmp_path: Path) -> None:
    template = make_template(tmp_path / "tpl")
    mem = AgentMemory.open(tmp_path / "agent")  # SOUL.md and USER.md exist, 0 bytes
    (mem.path / "USER.md").write_bytes(b"\n")
    (mem.path / "memory" / "FACT.md").write_bytes(b"")
    provision(template, mem)
    assert (mem.path / "SOUL.md").read_bytes() == b"# Soul\n\nTemplate soul.\n"
    assert (mem.path / "USER.md").read_bytes() == b"\n"
    # memory/ files are copied only when missing: an existing empty FACT.md stays.
    assert (mem.path / "memory" / "FACT.md").read_bytes() == b""


def test_case_variants_are_not_duplicated(tmp_path: Path) -> None:
    template = make_template(tmp_path / "tpl")
    folder = tmp_path / "agent"
    (folder / "memory").mkdir(parents=True)
    (folder / "soul.md").write_bytes(b"lower soul\n")
    (folder / "memory" / "fact.md").write_bytes(b"lower fact\n")
    provision(template, folder)
    assert sorted(os.listdir(folder)) == [".template.json", "USER.md", "memory", "soul.md"]
    assert sorted(os.listdir(folder / "memory")) == [".lock", "fact.md"]
    assert (folder / "soul.md").read_bytes() == b"lower soul\n"


# -- stock SOUL migration ----------------------------------------------------------------------


OLD_STOCK = b"# Soul\n\nI am the old stock soul.\n"


def test_byte_identical_old_stock_soul_is_replaced(tmp_path: Path) -> None:
    template = make_template(
        tmp_path / "tpl", {"name": "T", "stock_soul_sha256": [sha(OLD_STOCK).upper()]},
        soul=b"# Soul\n\nI am the new stock soul.\n",
    )
    mem = AgentMemory.open(tmp_path / "agent")
    mem.write_soul(OLD_STOCK.decode())
    provision(template, mem)
    assert (mem.path / "SOUL.md").read_bytes() == b"# Soul\n\nI am the new stock soul.\n"


@pytest.mark.parametrize("edited", [OLD_STOCK + b" ", OLD_STOCK.replace(b"\n", b"\r\n"),
                                    OLD_STOCK.replace(b"old", b"Old")])
def test_edited_old_stock_soul_is_kept(tmp_path: Path, edited: bytes) -> None:
    template = make_template(tmp_path / "tpl", {"name": "T", "stock_soul_sha256": [sha(OLD_STOCK)]})
    mem = AgentMemory.open(tmp_path / "agent")
    (mem.path / "SOUL.md").write_bytes(edited)
    provision(template, mem)
    assert (mem.path / "SOUL.md").read_bytes() == edited


def test_stock_hashes_never_apply_to_user_md(tmp_path: Path) -> None:
    old_user = b"# User\n\nold stock user\n"
    template = make_template(tmp_path / "tpl", {"name": "T", "stock_soul_sha256": [sha(old_user)]})
    mem = AgentMemory.open(tmp_path / "agent")
    (mem.path / "USER.md").write_bytes(old_user)
    provision(template, mem)
    assert (mem.path / "USER.md").read_bytes() == old_user


# -- invalid templates write nothing -----------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "it must hold a JSON object"),
        ({}, "'name' is required and must be a non-empty string or a map of locale to "
             "non-empty string"),
        ({"name": ""}, "'name' is required and must be"),
        ({"name": "  "}, "'name' is required and must be"),
        ({"name": 5}, "'name' is required and must be"),
        ({"name": {}}, "'name' is required and must be"),
        ({"name": {"en": 5}}, "'name' is required and must be"),
        ({"name": ["T"]}, "'name' is required and must be"),
        ({"name": "T", "instructions": 5}, "'instructions' must be a non-empty string or a map"),
        ({"name": "T", "instructions": {"en": ""}}, "'instructions' must be a non-empty"),
        ({"name": "T", "configuration": []}, "'configuration' must be an object"),
        ({"name": "T", "configuration": "x"}, "'configuration' must be an object"),
        ({"name": "T", "stock_soul_sha256": "abc"}, "'stock_soul_sha256' must be a list of sha256"),
        ({"name": "T", "stock_soul_sha256": ["abc"]}, "'stock_soul_sha256' must be a list"),
        ({"name": "T", "stock_soul_sha256": [5]}, "'stock_soul_sha256' must be a list"),
    ],
)
def test_invalid_agent_json_writes_nothing(tmp_path: Path, spec: Any, message: str) -> None:
    template = make_template(tmp_path / "tpl", spec)
    target = tmp_path / "agent"
    with pytest.raises(TemplateError) as info:
        provision(template, target)
    assert info.value.code == -32602
    assert isinstance(info.value, ValueError)
    assert info.value.message.startswith(f"Invalid template {template / 'agent.json'}: ")
    assert message in info.value.message
    assert not target.exists()


def test_missing_agent_json_writes_nothing(tmp_path: Path) -> None:
    template = make_template(tmp_path / "tpl")
    (template / "agent.json").unlink()
    with pytest.raises(TemplateError) as info:
        provision(template, tmp_path / "agent")
    assert info.value.message == f"Invalid template {template}: agent.json is missing"
    assert not (tmp_path / "agent").exists()


def test_invalid_template_leaves_an_existing_agent_untouched(tmp_path: Path) -> None:
    template = make_template(tmp_path / "tpl", {"name": 5})
    mem = AgentMemory.open(tmp_path / "agent")
    before = files(mem.path)
    with pytest.raises(TemplateError):
        provision(template, mem)
    assert files(mem.path) == before


def test_unknown_template_name(agents_root: Path, tmp_path: Path) -> None:
    with pytest.raises(TemplateError) as info:
        provision("no-such-template", tmp_path / "agent")
    assert info.value.message == (
        'Unknown template "no-such-template": not a built-in template (assistant, guide) '
        "nor a folder"
    )
    assert not (tmp_path / "agent").exists()


# -- links at destinations ---------------------------------------------------------------------


@pytest.mark.parametrize("destination", ["SOUL.md", "USER.md", "memory/FACT.md", ".template.json"])
def test_dangling_symlink_at_a_destination_stops_everything(
    tmp_path: Path, destination: str
) -> None:
    template = make_template(tmp_path / "tpl")
    mem = AgentMemory.open(tmp_path / "agent")
    link = mem.path / destination
    if link.exists():
        link.unlink()
    link.symlink_to(tmp_path / "planted-by-attacker")
    before = files(tmp_path)
    with pytest.raises(UnsafePathError) as info:
        provision(template, mem)
    assert str(link) in info.value.message
    assert info.value.code == -32603
    assert files(tmp_path) == before
    assert not (tmp_path / "planted-by-attacker").exists()


# -- product_info ------------------------------------------------------------------------------


@pytest.fixture
def guide(mem: AgentMemory) -> AgentMemory:
    provision("guide", mem)
    return mem


SECTIONS = ["package", "files", "tools", "magics", "cli", "rest"]


def call(mem: AgentMemory, **args: Any) -> Any:
    return json.loads(product_info(mem, args))


def test_product_info_lists_sections(guide: AgentMemory) -> None:
    # Cherry Studio: the assistant server's productInfo (compact JSON, manifestVersion is
    # package.version, sections are the top-level keys but schemaVersion)
    text = product_info(guide, {"source": "manifest"})
    assert text == json.dumps(
        {
            "runtimeVersion": jupyter_agent_memory.__version__,
            "manifestVersion": version("jupyter-agent-memory"),
            "sections": SECTIONS,
        },
        separators=(",", ":"),
    )


def test_product_info_one_section_and_all(guide: AgentMemory) -> None:
    head = {
        "runtimeVersion": jupyter_agent_memory.__version__,
        "manifestVersion": version("jupyter-agent-memory"),
    }
    package = call(guide, source="manifest", section="package")
    assert list(package) == ["runtimeVersion", "manifestVersion", "section", "data"]
    assert package["section"] == "package"
    assert package["data"]["name"] == "jupyter-agent-memory"
    assert package["data"]["version"] == version("jupyter-agent-memory")
    everything = call(guide, source="manifest", section="all")
    assert list(everything) == ["runtimeVersion", "manifestVersion", "section", "manifest"]
    assert {k: everything[k] for k in head} == head
    assert everything["section"] == "all"
    assert list(everything["manifest"]) == ["schemaVersion", *SECTIONS]
    assert everything["manifest"]["package"] == package["data"]
    text = product_info(guide, {"source": "manifest", "section": "files"})
    assert text == json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"source": "manifest", "section": "nope"}, "Unknown product manifest section: nope"),
        ({"source": "web"}, "Unknown product_info source: web"),
        ({}, "Unknown product_info source: undefined"),
        ({"source": None}, "Unknown product_info source: null"),
        ({"source": "manifest", "section": " "}, "'section' must be a non-empty string"),
        ({"source": "manifest", "section": 3}, "'section' must be a non-empty string"),
        ({"source": "manifest", "path": "/etc"}, "Unsupported product_info argument: path"),
    ],
)
def test_product_info_errors(guide: AgentMemory, args: dict[str, Any], message: str) -> None:
    with pytest.raises(MemoryToolError) as info:
        product_info(guide, args)
    assert (info.value.code, info.value.message) == (-32602, message)


@pytest.mark.parametrize("template", [None, "assistant"])
def test_product_info_unavailable(mem: AgentMemory, template: str | None) -> None:
    if template:
        provision(template, mem)
    with pytest.raises(MemoryToolError) as info:
        product_info(mem, {"source": "manifest"})
    assert (info.value.code, info.value.message) == (-32603, "Product manifest is unavailable")


def test_custom_manifest_is_read_fresh_on_every_call(tmp_path: Path) -> None:
    manifest = {"schemaVersion": 1, "package": {"version": "7"}, "api": {"v": 1}}
    template = make_template(tmp_path / "tpl", manifest=manifest)
    mem = AgentMemory.open(tmp_path / "agent")
    provision(template, mem)
    assert call(mem, source="manifest", section="api")["data"] == {"v": 1}
    manifest["api"] = {"v": 2}
    (template / "product-manifest.json").write_text(json.dumps(manifest))
    assert call(mem, source="manifest", section="api")["data"] == {"v": 2}
    assert "product-manifest.json" not in os.listdir(mem.path)
    assert "v" not in mem.facts


# -- the guide manifest matches the installed package ------------------------------------------


def test_guide_manifest_matches_what_exists(guide: AgentMemory) -> None:
    from jupyter_agent_memory.cli import build_parser
    from jupyter_agent_memory.notebook.magics import AgentMemoryMagics
    from jupyter_agent_memory.server import ROUTES

    sections = call(guide, source="manifest", section="all")["manifest"]
    assert sections["package"]["version"] == version("jupyter-agent-memory")

    magics = sections["magics"]
    assert magics
    registered = {f"%{n}" for n in AgentMemoryMagics.magics["line"]} | {
        f"%%{n}" for n in AgentMemoryMagics.magics["cell"]
    }
    assert {m["name"] for m in magics} == registered
    assert all(m["summary"] for m in magics)

    (subparsers,) = [
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ]
    assert sections["cli"]
    assert [c["command"] for c in sections["cli"]] == [
        f"jupyter-agent-memory {name}" for name in subparsers.choices
    ]
    assert all(c["summary"] for c in sections["cli"])

    assert sections["rest"]
    assert [(r["methods"], r["path"]) for r in sections["rest"]] == [
        ("/".join(methods), path) for methods, path, _ in ROUTES
    ]


def test_provisioning_copies_a_template_without_a_memory_folder(tmp_path: Path) -> None:
    template = tmp_path / "tpl"
    template.mkdir()
    (template / "agent.json").write_text('{"name": "Bare"}')
    definition = provision(template, tmp_path / "agent")
    assert definition.name == "Bare"
    assert sorted(files(tmp_path / "agent")) == [
        ".template.json", "SOUL.md", "USER.md", "memory", "memory/.lock"
    ]
    shutil.rmtree(template)
    # The template is gone: the agent still works, product_info says it is unavailable.
    mem = AgentMemory.open(tmp_path / "agent")
    with pytest.raises(MemoryToolError, match="^Product manifest is unavailable$"):
        product_info(mem, {"source": "manifest"})
