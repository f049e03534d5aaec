"""Agent templates: provisioning a data folder, and product knowledge from a manifest.

A template folder holds ``agent.json``, ``SOUL.md``, ``USER.md``, ``memory/`` and optionally
``product-manifest.json``. :func:`provision` never overwrites what a user or agent wrote;
:func:`product_info` reads the manifest fresh on every call (never copied into FACT.md).
Template files are opened so that a FIFO, a device or a link is refused at once."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import (
    INTERNAL_ERROR,
    MemoryIOError,
    MemoryToolError,
    TemplateError,
    UnsafePathError,
    engine_boundary,
)
from ..folder import Folder, describe, match_name, read_all, retry_eintr
from .access import Locked, locked
from .jstext import js_json, js_ordered, js_string, js_trim
from .manifest import SCHEMA_VERSION, package_manifest
from .store import MEMORY_DIR, SOUL, TEMPLATE_RECORD, USER, AgentMemory, sweep_leftovers

BUILTIN_DIR = Path(__file__).parent / "builtin_templates"
AGENT_JSON = "agent.json"
MANIFEST = "product-manifest.json"
#: The language a localised name or instruction falls back to.
DEFAULT_LOCALE = "en-US"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

#: The ``product_info`` tool, in the same neutral shape as ``MEMORY_TOOL``; offered only for an
#: agent provisioned from a template that ships a product manifest.
PRODUCT_INFO_TOOL: dict[str, Any] = {
    "name": "product_info",
    "description": (
        "Look up facts about the product this agent belongs to (version, features, commands) "
        "from its template's product manifest, read fresh on every call. Use it for product "
        "questions instead of storing product knowledge in FACT.md. Without 'section' it "
        "returns the runtime version, the manifest version and the names of the sections; "
        "with a section name it returns that section's data; 'all' returns the whole manifest."
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
        """The template's ``product-manifest.json`` when it is a regular file, else None."""
        path = self.folder / MANIFEST
        return path if path.is_file() and not path.is_symlink() else None


class NotRegularError(OSError):
    """A file that exists but is not a regular file; ``what`` says what it is."""

    def __init__(self, path: object, what: str) -> None:
        super().__init__(f"{path} is {what}, not a regular file")
        self.what = what


def open_regular(path: str | os.PathLike[str], dir_fd: int | None = None) -> int:
    """Open a regular file for reading (hard links allowed); anything else is refused at once
    (``O_NONBLOCK``: a FIFO never blocks; ``O_NOFOLLOW``: no link; the type is checked)."""
    try:
        fd = os.open(path, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise NotRegularError(path, "a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularError(path, describe(st))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_regular(path: Path) -> bytes:
    fd = open_regular(path)
    try:
        return read_all(fd)
    finally:
        os.close(fd)


def _read_template_bytes(path: Path) -> bytes:
    """:func:`_read_regular` for a template's files: a non-regular file makes the template
    invalid (-32602); an I/O error stays one (-32603: a retry may work)."""
    try:
        return _read_regular(path)
    except NotRegularError as exc:
        raise TemplateError(f"Invalid template: {exc}") from None


@engine_boundary
def list_templates() -> list[str]:
    """Names of the built-in templates."""
    return sorted(p.name for p in BUILTIN_DIR.iterdir() if (p / AGENT_JSON).is_file())


@engine_boundary
def load_template(
    template: str | os.PathLike[str], locale: str | None = None
) -> TemplateDefinition:
    """Find and validate a template (a built-in name or a folder); writes nothing. ``locale``
    picks localised names and instructions (see :func:`pick_localized`)."""
    text = os.fspath(template)
    plain = isinstance(template, str) and "/" not in text and "\\" not in text
    builtin = plain and (BUILTIN_DIR / text / AGENT_JSON).is_file()
    folder = BUILTIN_DIR / text if builtin else Path(text).expanduser().resolve()
    if not builtin and not folder.is_dir():
        known = ", ".join(list_templates())
        raise TemplateError(
            f'Unknown template "{text}": not a built-in template ({known}) nor a folder'
        )
    spec_path = folder / AGENT_JSON
    try:
        raw = _read_template_bytes(spec_path)
    except FileNotFoundError:
        raise TemplateError(f"Invalid template {folder}: {AGENT_JSON} is missing") from None
    try:
        spec = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise TemplateError(f"Invalid template {spec_path}: not valid JSON ({exc})") from None
    if not isinstance(spec, dict):
        raise TemplateError(f"Invalid template {spec_path}: it must hold a JSON object")
    names = _localized(spec, "name", spec_path, required=True)
    instructions = _localized(spec, "instructions", spec_path, required=False)
    configuration = validate_configuration(spec.get("configuration", {}), spec_path)
    stock = spec.get("stock_soul_sha256", [])
    if not isinstance(stock, list) or not all(
        isinstance(s, str) and _SHA256.match(s.lower()) for s in stock
    ):
        raise TemplateError(
            f"Invalid template {spec_path}: "
            "'stock_soul_sha256' must be a list of sha256 hex strings"
        )
    return TemplateDefinition(
        template_id=text if builtin else str(folder), folder=folder, builtin=builtin,
        name=pick_localized(names, locale), names=names,
        instructions=pick_localized(instructions, locale) if instructions else None,
        configuration=configuration, stock_soul_sha256=tuple(s.lower() for s in stock),
    )


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 4000.0 is the JSON integer 4000
    return value if isinstance(value, int) and value >= 1 else None


# The configuration keys the engine reads: what each must be, and how to check it. Other keys
# are kept as they are (a template may carry settings for its own client).
_CONFIGURATION_RULES = {
    "budget_tokens": ("a positive integer", _positive_int),
    "bootstrap_completed": ("true or false", lambda v: v if isinstance(v, bool) else None),
}


def validate_configuration(configuration: Any, source: object) -> dict[str, Any]:
    """A template's ``configuration``, checked at load: a key the engine reads with the wrong
    type raises :class:`TemplateError` naming every bad key; ``null`` leaves a key unset."""
    if not isinstance(configuration, dict):
        raise TemplateError(f"Invalid template {source}: 'configuration' must be an object")
    checked = dict(configuration)
    problems = []
    for key, (wanted, check) in _CONFIGURATION_RULES.items():
        if checked.get(key) is None:
            checked.pop(key, None)
        elif (normalised := check(checked[key])) is None:
            problems.append(f"'{key}' must be {wanted}, got {json.dumps(checked[key])}")
        else:
            checked[key] = normalised
    if problems:
        raise TemplateError(
            f"Invalid template {source}: invalid configuration: {'; '.join(problems)}"
        )
    return checked


def pick_localized(values: dict[str, str], locale: str | None = None) -> str:
    """One value of a localised map (Cherry Studio's order): the key ``""`` (a plain string),
    the exact ``locale`` (``de_DE.UTF-8`` is ``de-DE``), the first key with its language prefix
    (``zh-TW`` finds ``zh-CN``), ``en-US``, else the first value."""
    if "" in values:
        return values[""]
    wanted = re.split(r"[.@]", locale or DEFAULT_LOCALE)[0].replace("_", "-")
    if wanted in values:
        return values[wanted]
    prefix = wanted.split("-")[0]
    fallback = values.get(DEFAULT_LOCALE, next(iter(values.values())))
    return next((value for key, value in values.items() if key.startswith(prefix)), fallback)


def _localized(spec: dict[str, Any], key: str, path: Path, required: bool) -> dict[str, str]:
    value = spec.get(key)
    if value is None and not required:
        return {}
    if isinstance(value, str) and value.strip():
        return {"": value}
    if isinstance(value, dict) and value and all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in value.items()
    ):
        return dict(value)
    need = "is required and " if required else ""
    raise TemplateError(
        f"Invalid template {path}: '{key}' {need}must be a non-empty string "
        "or a map of locale to non-empty string"
    )


@engine_boundary
def provision(
    template: str | os.PathLike[str], agent: AgentMemory | str | os.PathLike[str],
    locale: str | None = None,
) -> TemplateDefinition:
    """Fill an agent folder (or path) from a template without overwriting what a user wrote:
    all is checked and read first (a link at any destination stops it); SOUL.md and USER.md
    are copied when missing, empty or stock, ``memory/`` files when missing; records it."""
    definition = load_template(template, locale)
    persona = {name: _read_template_file(definition.folder, name) for name in (SOUL, USER)}
    memory_files = _template_memory_files(definition.folder)
    memory = agent if isinstance(agent, AgentMemory) else AgentMemory.open(Path(agent))
    _refuse_links(memory, [n for n, data in persona.items() if data is not None], memory_files)
    written: list[str] = []
    try:
        for name, stock in ((SOUL, definition.stock_soul_sha256), (USER, ())):
            data = persona[name]
            if data is not None and memory.replace_if_stock(name, data, stock):
                written.append(name)
        _copy_missing_memory_files(memory, memory_files, written)
        record = {
            "template": definition.template_id, "builtin": definition.builtin,
            "name": definition.name,
        }
        current = memory.template_info() or {}
        if any(current.get(key) != value for key, value in record.items()):
            # Provisioning again from the same template keeps the record (and its date).
            record["provisioned_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
            memory.write_template_record(record)
    except OSError as exc:  # MemoryIOError included
        if not written:
            raise  # nothing was written: the error as it is
        stopped = (  # saying exactly what was written
            f"Provisioning from the template {definition.template_id!r} stopped after it "
            f"wrote {', '.join(written)}: {exc.strerror or exc}. Nothing else was changed; "
            "provisioning again finishes the job (it never overwrites what is there)"
        )
        raise MemoryIOError(OSError(exc.errno, stopped, exc.filename)) from exc
    return definition


@engine_boundary
def template_for(memory: AgentMemory) -> TemplateDefinition | None:
    """The template an agent was provisioned from, when it is still available and valid."""
    record = memory.template_info()
    if not record or not isinstance(record.get("template"), str):
        return None
    try:
        return load_template(record["template"])
    except TemplateError:
        return None


@engine_boundary
def manifest_path_for(memory: AgentMemory) -> Path | None:
    """The product manifest of the agent's template, or None (no template, or no manifest)."""
    definition = template_for(memory)
    return definition.manifest_path if definition is not None else None


def _read_template_file(folder: Path, canonical: str) -> bytes | None:
    """The template's file ``canonical`` (any case), or None; an I/O error stays one."""
    name = match_name(retry_eintr(os.listdir, folder), canonical)
    if name is None:
        return None
    try:
        return _read_template_bytes(folder / name)
    except FileNotFoundError:
        return None


def _template_memory_files(folder: Path) -> dict[tuple[str, ...], bytes]:
    """Every file under the template's ``memory/``, keyed by its path parts, read now."""
    memory_name = match_name(retry_eintr(os.listdir, folder), MEMORY_DIR)
    if memory_name is None:
        return {}
    root = folder / memory_name
    try:
        st = retry_eintr(os.lstat, root)
    except FileNotFoundError:
        return {}
    if not stat.S_ISDIR(st.st_mode):
        raise TemplateError(f"Invalid template: {root} is {describe(st)}, not a directory")
    found: dict[tuple[str, ...], bytes] = {}

    def walk(directory: Path, parts: tuple[str, ...]) -> None:
        for name in sorted(retry_eintr(os.listdir, directory)):
            path = directory / name
            if stat.S_ISDIR(retry_eintr(os.lstat, path).st_mode):
                walk(path, (*parts, name))
            else:
                found[parts + (name,)] = _read_template_bytes(path)

    walk(root, ())
    return found


def _refuse_links(
    memory: AgentMemory, persona: list[str], memory_files: dict[tuple[str, ...], bytes]
) -> None:
    """Fail before any write when a destination is a link or not a regular file."""
    with Folder.open(memory.path) as agent:
        for name in persona:
            _check_destination(agent, (name,))
        with agent.subfolder(agent.lookup(MEMORY_DIR) or MEMORY_DIR, create=True) as mem:
            for parts in memory_files:
                _check_destination(mem, parts)
        _check_destination(agent, (TEMPLATE_RECORD,))


def _check_destination(folder: Folder, parts: tuple[str, ...]) -> None:
    """Raise when the way to ``parts`` under ``folder`` crosses a link or a wrong type."""
    name = folder.lookup(parts[0])
    if name is None:
        return  # nothing there yet: it will be created
    if len(parts) == 1:
        folder.require_replaceable(name)
        return
    with folder.subfolder(name) as sub:  # refuses a link or a file where a folder belongs
        _check_destination(sub, parts[1:])


def _copy_missing_memory_files(
    memory: AgentMemory, memory_files: dict[tuple[str, ...], bytes], written: list[str]
) -> None:
    """Create each template ``memory/`` file with no case variant yet (named in ``written``),
    under one lock, opening folders one level at a time so a swapped-in link is refused."""
    if not memory_files:
        return
    with locked(memory) as txn:
        for parts, data in memory_files.items():
            if _write_if_missing(txn, txn.memory, parts, data):
                written.append("/".join((MEMORY_DIR, *parts)))


def _write_if_missing(txn: Locked, folder: Folder, parts: tuple[str, ...], data: bytes) -> bool:
    name = folder.lookup(parts[0])
    if len(parts) == 1:
        # A provisioning killed mid-copy left its temp file: only this code knows the name.
        sweep_leftovers(folder, [parts[0]])
        if name is not None:
            folder.require_replaceable(name)
            return False

        def recheck() -> None:
            txn.recheck()
            if not folder.same_as(folder.path):
                raise UnsafePathError(
                    f"Refusing to write: {folder.path} was replaced while writing"
                )

        folder.write_atomic(parts[0], data, recheck)
        return True
    with folder.subfolder(name or parts[0], create=name is None) as sub:
        return _write_if_missing(txn, sub, parts[1:], data)


@engine_boundary
def read_manifest(definition: TemplateDefinition | None) -> dict[str, Any]:
    """Load and check a template's manifest now (never cached); errors (-32603) carry Cherry
    Studio's texts, never a path (schema: ``schemaVersion`` 1, a non-blank version)."""
    unavailable = MemoryToolError("Product manifest is unavailable", INTERNAL_ERROR)
    if definition is None:
        raise unavailable
    try:
        raw = _read_regular(definition.folder / MANIFEST)
    except OSError:
        raise unavailable from None
    try:
        manifest = json.loads(raw.decode("utf-8", errors="replace"), parse_constant=_no_constant)
    except ValueError:
        raise MemoryToolError("Product manifest contains invalid JSON", INTERNAL_ERROR) from None
    if definition.builtin and isinstance(manifest, dict) and manifest.get("generated") is True:
        # Built-in manifests describe this very package, so they are computed from it.
        manifest = package_manifest()
    if not _valid_manifest(manifest):
        raise MemoryToolError("Product manifest schema is invalid", INTERNAL_ERROR)
    return js_ordered(manifest)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity are not JSON


def _valid_manifest(manifest: Any) -> bool:
    if not isinstance(manifest, dict):
        return False
    schema, package = manifest.get("schemaVersion"), manifest.get("package")
    version = package.get("version") if isinstance(package, dict) else None
    # Of JSON values only numbers and true equal 1.
    valid_schema = schema == SCHEMA_VERSION and not isinstance(schema, bool)
    return valid_schema and isinstance(version, str) and bool(js_trim(version))


@engine_boundary
def product_info(memory: AgentMemory, args: dict[str, Any]) -> str:
    """The ``product_info`` tool (as Cherry Studio's): ``{runtimeVersion, manifestVersion}`` with
    ``sections``, or with ``section`` and ``data`` (``manifest`` for ``"all"``), as JSON."""
    from ..__about__ import __version__

    if not isinstance(args, dict):
        raise MemoryToolError("Tool arguments must be a JSON object")
    for key in args:
        if key not in ("source", "section"):
            raise MemoryToolError(f"Unsupported product_info argument: {key}")
    source = args.get("source")
    if not (isinstance(source, str) and source == "manifest"):
        raise MemoryToolError(
            f"Unknown product_info source: {js_string(source, missing='source' not in args)}",
        )
    manifest = read_manifest(template_for(memory))
    head = {"runtimeVersion": __version__, "manifestVersion": manifest["package"]["version"]}
    section = args.get("section", "")
    if section == "":
        # Absent, or empty as strict-mode clients send every property: the overview (the
        # memory tool reads an empty optional string the same way).
        return js_json({**head, "sections": [k for k in manifest if k != "schemaVersion"]})
    if not isinstance(section, str) or not js_trim(section):
        raise MemoryToolError("'section' must be a non-empty string")
    if section == "all":
        return js_json({**head, "section": "all", "manifest": manifest})
    if section in manifest:
        return js_json({**head, "section": section, "data": manifest[section]})
    raise MemoryToolError(f"Unknown product manifest section: {section}")
