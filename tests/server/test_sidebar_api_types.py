"""The sidebar's response types match the server's.

``jupyter_agent_memory/server/handlers.py`` declares each REST response as a ``TypedDict``;
``labextension/src/api.ts`` mirrors each as an interface named ``I`` + the same name. Both files
are read as text (no node, no import of the server): every field, whether it is optional, and
its basic type (string, number, boolean, null, arrays, objects, the other mirrored shapes)
must agree. A change on either side that the other does not follow fails here.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HANDLERS = REPO / "jupyter_agent_memory" / "server" / "handlers.py"
API_TS = REPO / "labextension" / "src" / "api.ts"

# Server shapes the sidebar deliberately has no interface for, and why. Each must really be
# absent from api.ts (checked), so this list cannot hide a drifted mirror.
NOT_MIRRORED = {
    # A 409 becomes a ConflictError carrying message, expected and actual.
    "ConflictResponse": "ConflictError",
    # The sidebar offers no forgetting (it is a deliberate, CLI/magic/REST-only act).
    "ForgetResponse": None,
}


@dataclass(frozen=True)
class Field:
    """One field: its name, whether it may be absent, and its normalised type."""

    name: str
    optional: bool
    type: str


Shapes = dict[str, dict[str, Field]]

# -- Python side --------------------------------------------------------------------------------

_PY_SCALARS = {
    "str": "string",
    "int": "number",
    "float": "number",
    "bool": "boolean",
    "Any": "unknown",
    "object": "unknown",
}


def _py_type(node: ast.expr, typed_dicts: set[str]) -> str:
    """The normalised type of a TypedDict annotation."""
    if isinstance(node, ast.Constant) and node.value is None:
        return "null"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        return _py_type(ast.parse(node.value, mode="eval").body, typed_dicts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        members = {_py_type(node.left, typed_dicts), _py_type(node.right, typed_dicts)}
        return " | ".join(sorted(m for part in members for m in part.split(" | ")))
    if isinstance(node, ast.Name):
        if node.id in _PY_SCALARS:
            return _PY_SCALARS[node.id]
        if node.id in typed_dicts:
            return f"I{node.id}"
        if node.id == "dict":
            return "object"
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        outer = node.value.id
        if outer == "list":
            return _array(_py_type(node.slice, typed_dicts))
        if outer == "dict":
            return "object"
        if outer == "Optional":
            return _py_type(
                ast.BinOp(left=node.slice, op=ast.BitOr(), right=ast.Constant(None)), typed_dicts
            )
    raise AssertionError(f"handlers.py: annotation the checker does not know: {ast.unparse(node)}")


def _array(item: str) -> str:
    return f"({item})[]" if " | " in item else f"{item}[]"


def server_shapes(source: str) -> Shapes:
    """Every TypedDict in ``source``: field name -> Field (``total=False`` and
    ``NotRequired[...]`` make a field optional, ``Required[...]`` required again)."""
    tree = ast.parse(source)
    classes = [
        node
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        and any(isinstance(b, ast.Name) and b.id == "TypedDict" for b in node.bases)
    ]
    names = {c.name for c in classes}
    shapes: Shapes = {}
    for cls in classes:
        total = next(
            (
                kw.value.value
                for kw in cls.keywords
                if kw.arg == "total" and isinstance(kw.value, ast.Constant)
            ),
            True,
        )
        fields: dict[str, Field] = {}
        for stmt in cls.body:
            if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
                continue
            annotation, optional = stmt.annotation, not total
            if (
                isinstance(annotation, ast.Subscript)
                and isinstance(annotation.value, ast.Name)
                and annotation.value.id in ("NotRequired", "Required")
            ):
                optional = annotation.value.id == "NotRequired"
                annotation = annotation.slice
            name = stmt.target.id
            fields[name] = Field(name, optional, _py_type(annotation, names))
        shapes[cls.name] = fields
    return shapes


# -- TypeScript side ----------------------------------------------------------------------------

_TS_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_TS_INTERFACE = re.compile(r"\bexport\s+interface\s+(\w+)\s*(?:extends\s+[\w\s,<>]+)?\{")
_TS_MEMBER = re.compile(r"^(?:readonly\s+)?([A-Za-z_$][\w$]*)\s*(\?)?\s*:\s*(.+)$", re.S)
_TS_INDEX = re.compile(r"^\[\s*\w+\s*:\s*string\s*\]\s*:\s*.+$", re.S)
_TS_SCALARS = {"string", "number", "boolean", "null", "unknown", "any"}


def _matching_brace(text: str, start: int) -> int:
    """Index of the ``}`` closing the ``{`` at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise AssertionError("api.ts: unbalanced braces")


def _split_top(text: str, separators: str) -> list[str]:
    """``text`` split on any of ``separators`` outside (), [], {} and <>."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch in separators and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _ts_type(text: str, mirrored: set[str]) -> str:
    """The normalised type of a TS member's type text."""
    members = _split_top(text, "|")
    if len(members) > 1:
        return " | ".join(
            sorted({m for part in members for m in _ts_type(part, mirrored).split(" | ")})
        )
    t = members[0]
    if t.startswith("(") and t.endswith(")"):
        return _ts_type(t[1:-1], mirrored)
    if t.endswith("[]"):
        return _array(_ts_type(t[:-2], mirrored))
    generic = re.fullmatch(r"(Array|Record|ReadonlyArray)\s*<(.*)>", t, re.S)
    if generic:
        if generic.group(1) == "Record":
            return "object"
        return _array(_ts_type(generic.group(2), mirrored))
    if t.startswith("{") and t.endswith("}"):
        return "object"
    if t in _TS_SCALARS:
        return "unknown" if t == "any" else t
    if re.fullmatch(r"I\w+", t):
        # A mirrored shape stays itself; any other interface is an object the server types as
        # dict[str, Any] (a journal entry, a session receipt).
        return t if t in mirrored else "object"
    raise AssertionError(f"api.ts: type the checker does not know: {t!r}")


def sidebar_shapes(source: str, server_names: set[str]) -> Shapes:
    """Every exported interface in ``source``: field name -> Field (index signatures skipped)."""
    text = _TS_COMMENTS.sub("", source)
    mirrored = {f"I{n}" for n in server_names}
    shapes: Shapes = {}
    for match in _TS_INTERFACE.finditer(text):
        open_brace = match.end() - 1
        body = text[open_brace + 1 : _matching_brace(text, open_brace)]
        fields: dict[str, Field] = {}
        for member in _split_top(body, ";\n"):
            if _TS_INDEX.match(member):
                continue
            parsed = _TS_MEMBER.match(member)
            if parsed is None:
                raise AssertionError(f"api.ts {match.group(1)}: member not understood: {member!r}")
            name, question, type_text = parsed.groups()
            fields[name] = Field(name, bool(question), _ts_type(type_text.strip(), mirrored))
        shapes[match.group(1)] = fields
    return shapes


# -- the comparison -----------------------------------------------------------------------------


def differences(server: Shapes, sidebar: Shapes, not_mirrored: dict[str, object]) -> list[str]:
    """Every way the sidebar's interfaces differ from the server's TypedDicts, one line each."""
    found = []
    for name, fields in sorted(server.items()):
        ts_name = f"I{name}"
        if name in not_mirrored:
            if ts_name in sidebar:
                found.append(f"{ts_name} exists but {name} is listed as not mirrored")
            continue
        if ts_name not in sidebar:
            found.append(f"{ts_name}: missing in api.ts (server has {name})")
            continue
        ts_fields = sidebar[ts_name]
        for field in sorted(set(fields) | set(ts_fields)):
            ours, theirs = fields.get(field), ts_fields.get(field)
            if theirs is None:
                found.append(f"{ts_name}.{field}: missing in api.ts")
            elif ours is None:
                found.append(f"{ts_name}.{field}: not in the server's {name}")
            else:
                if ours.optional != theirs.optional:
                    want = "optional" if ours.optional else "required"
                    found.append(f"{ts_name}.{field}: must be {want} as in {name}")
                if ours.type != theirs.type:
                    found.append(
                        f"{ts_name}.{field}: api.ts says {theirs.type}, the server {ours.type}"
                    )
    server_like = {f"I{n}" for n in server}
    for ts_name in sorted(sidebar):
        if ts_name.endswith("Response") and ts_name not in server_like:
            found.append(f"{ts_name}: a response type the server does not declare")
    return found


def _real_shapes() -> tuple[Shapes, Shapes]:
    server = server_shapes(HANDLERS.read_text(encoding="utf-8"))
    return server, sidebar_shapes(API_TS.read_text(encoding="utf-8"), set(server))


# -- tests ---------------------------------------------------------------------------------------


def test_sidebar_response_types_match_the_servers() -> None:
    server, sidebar = _real_shapes()
    assert differences(server, sidebar, NOT_MIRRORED) == []


def test_the_check_covers_every_server_response() -> None:
    server, sidebar = _real_shapes()
    # Every response the sidebar calls is compared, field by field (not vacuously).
    compared = {n for n in server if n not in NOT_MIRRORED}
    assert {
        "AgentsResponse",
        "FactsResponse",
        "FactsSavedResponse",
        "JournalResponse",
        "PromptResponse",
        "PromptSection",
        "HistoryResponse",
        "VersionResponse",
    } <= compared
    assert all(sidebar[f"I{n}"] for n in compared)
    assert set(NOT_MIRRORED) <= set(server), "NOT_MIRRORED names a shape the server dropped"
    # The conflict body is read through ConflictError's fields, which must match the server's.
    assert set(server["ConflictResponse"]) == {"message", "expected", "actual"}
    text = API_TS.read_text(encoding="utf-8")
    assert "readonly expected: string" in text and "readonly actual: string" in text


def test_parsers_read_the_syntax_in_use() -> None:
    server, sidebar = _real_shapes()
    assert server["PromptResponse"]["budget_tokens"] == Field(
        "budget_tokens", False, "null | number"
    )
    assert sidebar["IPromptResponse"]["budget_tokens"] == Field(
        "budget_tokens", False, "null | number"
    )
    assert server["PromptResponse"]["sections"].type == "IPromptSection[]"
    assert sidebar["IPromptResponse"]["sections"].type == "IPromptSection[]"
    assert server["JournalResponse"]["entries"].type == "object[]"
    assert sidebar["IJournalResponse"]["entries"].type == "object[]"  # IJournalEntry[]
    assert sidebar["IJournalQuery"]["limit"] == Field("limit", True, "number | string")


SERVER_SAMPLE = """
from typing import Any, NotRequired, TypedDict

class Item(TypedDict):
    ts: str
    size: int

class ThingResponse(TypedDict):
    name: str
    count: int
    ok: bool
    note: str | None
    items: list[Item]
    extra: dict[str, Any]
    hint: NotRequired[str]

class Partial(TypedDict, total=False):
    a: int
"""

SIDEBAR_SAMPLE = """
/** A doc comment with a { brace } and // slashes. */
export interface IItem {
  ts: string;
  size: number;
}
export interface IEntry { [key: string]: unknown }
export interface IThingResponse {
  name: string; // the name
  count: number;
  ok: boolean;
  note: string | null;
  items: Array<IItem>;
  extra: IEntry;
  hint?: string;
}
export interface IPartial {
  a?: number;
}
"""


def _sample_differences(sidebar_text: str) -> list[str]:
    server = server_shapes(SERVER_SAMPLE)
    return differences(server, sidebar_shapes(sidebar_text, set(server)), {})


def test_matching_sample_has_no_differences() -> None:
    assert _sample_differences(SIDEBAR_SAMPLE) == []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (("  count: number;\n", ""), ["IThingResponse.count: missing in api.ts"]),
        (
            ("  ok: boolean;\n", "  ok: boolean;\n  more: string;\n"),
            ["IThingResponse.more: not in the server's ThingResponse"],
        ),
        (
            ("hint?: string", "hint: string"),
            ["IThingResponse.hint: must be optional as in ThingResponse"],
        ),
        (("  a?: number", "  a: number"), ["IPartial.a: must be optional as in Partial"]),
        (
            ("note: string | null", "note: string"),
            ["IThingResponse.note: api.ts says string, the server null | string"],
        ),
        (
            ("count: number", "count: string"),
            ["IThingResponse.count: api.ts says string, the server number"],
        ),
        (
            ("Array<IItem>", "IItem"),
            ["IThingResponse.items: api.ts says IItem, the server IItem[]"],
        ),
        (
            ("export interface IItem", "export interface IItemRenamed"),
            ["IItem: missing in api.ts (server has Item)"],
        ),
        (
            ("IThingResponse {", "IThingResponse {\n  readonly ok2?: boolean;"),
            ["IThingResponse.ok2: not in the server's ThingResponse"],
        ),
    ],
)
def test_each_kind_of_drift_is_reported(edit: tuple[str, str], expected: list[str]) -> None:
    old, new = edit
    assert old in SIDEBAR_SAMPLE
    assert _sample_differences(SIDEBAR_SAMPLE.replace(old, new, 1)) == expected


def test_a_response_only_the_sidebar_declares_is_reported() -> None:
    extra = SIDEBAR_SAMPLE + "export interface IOtherResponse { x: number }\n"
    assert _sample_differences(extra) == [
        "IOtherResponse: a response type the server does not declare"
    ]


def test_syntax_the_checker_cannot_read_fails_loudly() -> None:
    with pytest.raises(
        AssertionError, match="type the checker does not know: 'Map<string, number>'"
    ):
        sidebar_shapes("export interface IX { m: Map<string, number>; }", set())
    with pytest.raises(AssertionError, match="member not understood"):
        sidebar_shapes("export interface IX { get(): number; }", set())
