"""Agent templates: provisioning a data folder, and product knowledge from a manifest.

A template is a folder holding ``agent.json``, ``SOUL.md``, ``USER.md``, ``memory/FACT.md``
and optionally ``product-manifest.json``. Built-in templates ship inside the package
(``builtin_templates/``); any folder of that shape works too.

:func:`provision` never overwrites what a user or agent wrote: SOUL.md and USER.md are copied
only when missing or empty (or when SOUL.md is byte-identical to an older stock version the
template lists), files under ``memory/`` only when missing. Product knowledge is never copied
into FACT.md: :func:`product_info` reads the template's manifest fresh on every call.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .errors import INVALID_PARAMS, MemoryToolError, TemplateError
from .paths import match_name
from .store import MEMORY_DIR, SOUL, USER, AgentMemory

BUILTIN_DIR = Path(__file__).parent / "builtin_templates"
AGENT_JSON = "agent.json"
MANIFEST = "product-manifest.json"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")

#: The ``product_info`` tool (design section 6), in the same neutral shape as ``MEMORY_TOOL``:
#: ``name``, ``description`` and a JSON schema under ``input_schema``. It is offered only for an
#: agent provisioned from a template that ships a product manifest.
PRODUCT_INFO_TOOL: dict[str, Any] = {
    "name": "product_info",
    "description": (
        "Look up facts about the product this agent belongs to (version, features, commands) "
        "from its template's product manifest, read fresh on every call. Use it for product "
        "questions instead of storing product knowledge in FACT.md. Without 'section' it "
        "returns the runtime version, the manifest version and the list of sections; with a "
        "section name it returns that section's data; 'all' returns every section."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "source": {
                "type": "string",
                "enum": ["manifest"],
                "description": 'Where to read product knowledge from; always "manifest".',
            },
            "section": {
                "type": "string",
                "description": 'A section name from the manifest, or "all".',
            },
        },
        "required": ["source"],
        "additionalProperties": False,
    },
}


@dataclass(frozen=True)
class TemplateDefinition:
    """A validated template: its ``agent.json`` and where its files are."""

    template_id: str
    folder: Path
    builtin: bool
    name: str
    names: dict[str, str]
    instructions: str | None = None
    configuration: dict[str, Any] = field(default_factory=dict)
    stock_soul_sha256: tuple[str, ...] = ()

    @property
    def manifest_path(self) -> Path | None:
        """The template's ``product-manifest.json``, or None when it has none."""
        path = self.folder / MANIFEST
        return path if path.is_file() else None


def list_templates() -> list[str]:
    """Names of the built-in templates."""
    return sorted(p.name for p in BUILTIN_DIR.iterdir() if (p / AGENT_JSON).is_file())


def load_template(
    template: str | os.PathLike[str], locale: str | None = None
) -> TemplateDefinition:
    """Find and validate a template (a built-in name or a folder); writes nothing."""
    text = os.fspath(template)
    builtin = (
        isinstance(template, str)
        and (BUILTIN_DIR / text / AGENT_JSON).is_file()
        and ("/" not in text and "\\" not in text)
    )
    folder = BUILTIN_DIR / text if builtin else Path(text).expanduser().resolve()
    if not builtin and not folder.is_dir():
        known = ", ".join(list_templates())
        raise TemplateError(
            f'Unknown template "{text}": not a built-in template ({known}) nor a folder'
        )
    spec_path = folder / AGENT_JSON
    try:
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TemplateError(f"Invalid template {folder}: {AGENT_JSON} is missing") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise TemplateError(f"Invalid template {spec_path}: not valid JSON ({exc})") from None
    if not isinstance(spec, dict):
        raise TemplateError(f"Invalid template {spec_path}: it must hold a JSON object")
    names = _localized(spec, "name", spec_path, required=True)
    instructions = _localized(spec, "instructions", spec_path, required=False)
    configuration = spec.get("configuration", {})
    if not isinstance(configuration, dict):
        raise TemplateError(f"Invalid template {spec_path}: 'configuration' must be an object")
    stock = spec.get("stock_soul_sha256", [])
    if not isinstance(stock, list) or not all(
        isinstance(s, str) and _SHA256.match(s.lower()) for s in stock
    ):
        raise TemplateError(
            f"Invalid template {spec_path}: "
            "'stock_soul_sha256' must be a list of sha256 hex strings"
        )
    return TemplateDefinition(
        template_id=text if builtin else str(folder),
        folder=folder,
        builtin=builtin,
        name=_pick(names, locale),
        names=names,
        instructions=_pick(instructions, locale) if instructions else None,
        configuration=configuration,
        stock_soul_sha256=tuple(s.lower() for s in stock),
    )


def provision(
    template: str | os.PathLike[str],
    agent: AgentMemory | str | os.PathLike[str],
    locale: str | None = None,
) -> TemplateDefinition:
    """Fill an agent folder from a template without overwriting anything a user wrote.

    ``agent`` is an :class:`AgentMemory` or a folder path. The template is validated before
    anything is written; a symlink at any destination (dangling ones included) stops the whole
    provisioning before the first write. Records the template in ``<agent>/.template.json``.
    """
    definition = load_template(template, locale)
    persona = {name: _read_template_file(definition.folder, name) for name in (SOUL, USER)}
    memory_files = _template_memory_files(definition.folder)
    memory = agent if isinstance(agent, AgentMemory) else AgentMemory.open(Path(agent))
    _refuse_links(memory, [n for n, data in persona.items() if data is not None], memory_files)
    if persona[SOUL] is not None:
        memory.replace_if_stock(SOUL, persona[SOUL], definition.stock_soul_sha256)
    if persona[USER] is not None:
        memory.replace_if_stock(USER, persona[USER], ())
    for name, data in memory_files.items():
        memory.add_memory_file_if_missing(name, data)
    memory.write_template_record(
        {
            "template": definition.template_id,
            "builtin": definition.builtin,
            "name": definition.name,
            "provisioned_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
    )
    return definition


def template_for(memory: AgentMemory) -> TemplateDefinition | None:
    """The template an agent was provisioned from, when it is still available."""
    record = memory.template_info()
    if not record or not isinstance(record.get("template"), str):
        return None
    try:
        return load_template(record["template"])
    except TemplateError:
        return None


def manifest_path_for(memory: AgentMemory) -> Path | None:
    """The product manifest of the agent's template, or None (no template, or no manifest)."""
    definition = template_for(memory)
    return definition.manifest_path if definition is not None else None


def read_manifest(definition: TemplateDefinition) -> dict[str, Any]:
    """Load a template's manifest now (never cached, so it cannot go stale)."""
    path = definition.manifest_path
    if path is None:
        raise MemoryToolError(
            f"Template {definition.template_id} has no {MANIFEST}", INVALID_PARAMS
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MemoryToolError(f"Cannot read {path}: {exc}", -32603) from None
    if not isinstance(manifest, dict):
        raise MemoryToolError(f"Invalid {path}: it must hold a JSON object", -32603)
    if definition.builtin and manifest.get("generated") is True:
        # Built-in manifests describe this very package, so they are computed from it.
        from .manifest import package_manifest

        return package_manifest()
    return manifest


def product_info(memory: AgentMemory, args: dict[str, Any]) -> str:
    """The ``product_info`` tool: manifest data as JSON text.

    No ``section``: ``{runtimeVersion, manifestVersion, sections: [names]}``; a section name:
    that section's data; ``"all"``: every section.
    """
    from .__about__ import __version__

    if not isinstance(args, dict):
        raise MemoryToolError("Tool arguments must be a JSON object", INVALID_PARAMS)
    source = args.get("source", "manifest")
    if source != "manifest":
        raise MemoryToolError(f'Unknown source "{source}", expected manifest', INVALID_PARAMS)
    definition = template_for(memory)
    if definition is None or definition.manifest_path is None:
        raise MemoryToolError(
            f"product_info is not available: {memory.path} was not provisioned from a template "
            "with a product manifest",
            INVALID_PARAMS,
        )
    manifest = read_manifest(definition)
    sections = manifest.get("sections", {})
    if not isinstance(sections, dict):
        sections = {}
    section = args.get("section")
    head = {"runtimeVersion": __version__, "manifestVersion": manifest.get("version")}
    if section is None or section == "":
        result: Any = {**head, "sections": list(sections)}
    elif section == "all":
        result = {**head, "sections": sections}
    elif isinstance(section, str) and section in sections:
        result = sections[section]
    else:
        known = ", ".join([*sections, "all"])
        raise MemoryToolError(
            f'Unknown section "{section}", expected one of: {known}', INVALID_PARAMS
        )
    return json.dumps(result, indent=2, ensure_ascii=False)


def _localized(spec: dict[str, Any], key: str, path: Path, required: bool) -> dict[str, str]:
    value = spec.get(key)
    if value is None and not required:
        return {}
    if isinstance(value, str) and value.strip():
        return {"": value}
    if (
        isinstance(value, dict)
        and value
        and all(isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in value.items())
    ):
        return dict(value)
    need = "is required and " if required else ""
    raise TemplateError(
        f"Invalid template {path}: '{key}' {need}must be a non-empty string "
        "or a map of locale to non-empty string"
    )


def _pick(names: dict[str, str], locale: str | None) -> str:
    if "" in names:
        return names[""]
    for wanted in (locale, (locale or "").split("-")[0].split("_")[0], "en"):
        if wanted and wanted in names:
            return names[wanted]
    return next(iter(names.values()))


def _read_template_file(folder: Path, canonical: str) -> bytes | None:
    try:
        name = match_name(os.listdir(folder), canonical)
    except OSError:
        return None
    if name is None or not (folder / name).is_file():
        return None
    return (folder / name).read_bytes()


def _template_memory_files(folder: Path) -> dict[str, bytes]:
    try:
        memory_name = match_name(os.listdir(folder), MEMORY_DIR)
    except OSError:
        return {}
    if memory_name is None or not (folder / memory_name).is_dir():
        return {}
    source = folder / memory_name
    return {
        p.name: p.read_bytes()
        for p in sorted(source.iterdir())
        if p.is_file() and not p.name.startswith(".")
    }


def _refuse_links(memory: AgentMemory, persona: list[str], memory_files: dict[str, bytes]) -> None:
    """Fail before any write when a destination is a link or not a regular file."""
    from .paths import Folder

    with Folder.open(memory.path) as agent:
        checks = [(agent, name) for name in persona]
        with agent.subfolder(agent.lookup(MEMORY_DIR) or MEMORY_DIR, create=True) as mem:
            checks += [(mem, name) for name in memory_files]
            for folder, canonical in checks:
                existing = folder.lookup(canonical)
                if existing is not None:
                    folder.require_replaceable(existing)
            record = agent.lookup(".template.json")
            if record is not None:
                agent.require_replaceable(record)
