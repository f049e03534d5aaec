"""Tornado handlers of the agent-memory REST API (``/agent-memory/api/``).

Each handler checks the request's shape, runs one engine operation in a worker thread and maps
the engine's errors to status codes. Error bodies are ``{"message": ...}`` with the engine's own
text (a conflict adds ``expected`` and ``actual``). Every verb is authenticated and authorized
against the ``agent-memory`` resource; writes go through jupyter_server's XSRF check.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar
from weakref import WeakValueDictionary

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join

from .. import (
    AgentMemory,
    AgentNotFoundError,
    ContentTooLargeError,
    LockTimeoutError,
    MemoryConflictError,
    MemoryIOError,
    MemoryToolError,
    PromptBuilder,
    SessionNotFoundError,
    UnsafePathError,
    VersionNotFoundError,
    list_agents,
    list_templates,
    provision,
    validate_agent_id,
)
from ..engine.forgetting import forget
from ..engine.sessions import find as find_session
from ..engine.store import FACT, SOUL, USER, check_edit_body
from ..engine.tool import normalize_limit
from ..errors import INVALID_PARAMS
from ..folder import lock_deadline
from ..render import markdown_html
from .config import AgentMemoryServer
from .handover import (
    HANDOVER_PREFIX,
    HandoverError,
    Handovers,
    agent_for,
    ask_kernel,
    reported_folder,
)
from .routes import API_PREFIX

if TYPE_CHECKING:
    from typing_extensions import NotRequired

T = TypeVar("T")

_SETTINGS_KEY = "agent_memory"

# The response shapes are mirrored in labextension/src/api.ts.


class AgentsResponse(TypedDict):
    """``GET agents``."""

    root: str
    default_agent: str
    agents: list[str]
    templates: list[str]


class AgentCreatedResponse(TypedDict):
    """``POST agents`` (201 when the folder was created, 200 when it already existed)."""

    id: str
    path: str
    created: bool
    template: str | None


class FactsResponse(TypedDict):
    """``GET agents/{id}/facts``: ``content`` cut to the view bound (``html`` with it rendered)."""

    agent: str
    path: str
    content: str
    sha256: str
    chars: int
    truncated: bool
    html: NotRequired[str]


class HandoverResponse(TypedDict):
    """``POST handover``: the agent a notebook's kernel uses, by the id every route knows."""

    agent: str
    path: str
    how: str
    agent_id: str | None


class FactsSavedResponse(TypedDict):
    """``PUT agents/{id}/facts``."""

    agent: str
    sha256: str
    previous_sha256: str


class PersonaResponse(TypedDict):
    """``GET agents/{id}/soul`` and ``.../user``."""

    agent: str
    name: str
    path: str
    content: str
    sha256: str
    chars: int
    truncated: bool


class PersonaSavedResponse(TypedDict):
    """``PUT agents/{id}/soul`` and ``.../user``."""

    agent: str
    name: str
    sha256: str
    previous_sha256: str


class ConflictResponse(TypedDict):
    """409 body of ``PUT agents/{id}/facts``."""

    message: str
    expected: str
    actual: str


class JournalResponse(TypedDict):
    """``GET agents/{id}/journal``: matches newest first, with the search's counts."""

    agent: str
    entries: list[dict[str, Any]]
    skipped: int
    scanned: int
    indexed: bool


class JournalAppendedResponse(TypedDict):
    """``POST agents/{id}/journal`` (201)."""

    agent: str
    entry: dict[str, Any]


class PromptSection(TypedDict):
    """One part of the built prompt."""

    name: str
    source: str | None
    chars: int
    tokens: int


class PromptResponse(TypedDict):
    """``GET agents/{id}/prompt``."""

    agent: str
    workspace: str
    text: str
    chars: int
    truncated: bool
    base: str | None
    context: str
    bootstrap: bool
    tokens: int
    memory_tokens: int
    budget_tokens: int | None
    over_budget: bool
    warnings: list[str]
    sections: list[PromptSection]


class HistoryVersion(TypedDict):
    """One stored FACT.md version."""

    ts: str
    sha256: str
    size: int


class HistoryResponse(TypedDict):
    """``GET agents/{id}/history``."""

    agent: str
    versions: list[HistoryVersion]


class VersionResponse(TypedDict):
    """``GET agents/{id}/history/{sha}``."""

    agent: str
    sha256: str
    content: str


class SessionsResponse(TypedDict):
    """``GET agents/{id}/sessions``: receipts of recorded session starts, newest first."""

    agent: str
    sessions: list[dict[str, Any]]


class SessionResponse(TypedDict):
    """``GET agents/{id}/sessions/{sid}``: the receipt and the prompt (cut to the view bound)."""

    agent: str
    receipt: dict[str, Any]
    text: str
    chars: int
    truncated: bool


class SessionDiffResponse(TypedDict):
    """``GET agents/{id}/sessions/{sid}/diff/{other}`` ("" when the prompts were identical)."""

    agent: str
    first: str
    second: str
    diff: str


class SessionOrigin(TypedDict):
    """Where one line of a recorded prompt came from (``source`` None: builder text)."""

    section: str
    source: str | None
    version: str | None
    line: int | None
    text: str
    description: str


class SessionWhyResponse(TypedDict):
    """``GET agents/{id}/sessions/{sid}/why?text=...``: every line holding ``text``."""

    agent: str
    session_id: str
    text: str
    origins: list[SessionOrigin]


class ForgetResponse(TypedDict):
    """``POST agents/{id}/forget``: the engine's receipt, which never holds the text."""

    agent: str
    receipt: dict[str, Any]


class ApiError(tornado.web.HTTPError):
    """An HTTP error whose JSON body is ``{"message": message, **extra}``."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        # tornado %-formats log_message when logging: escape it so any text is safe.
        super().__init__(status, log_message=message.replace("%", "%%"))
        self.message = message
        self.extra = extra


# I/O failures a client can act on, by errno: what the request asked for cannot be done here.
_OS_STATUS = {
    errno.ENAMETOOLONG: 400, errno.ENOENT: 404, errno.ENOSPC: 507, errno.EDQUOT: 507,
    **dict.fromkeys((errno.EACCES, errno.EPERM, errno.EROFS, errno.EISDIR, errno.ENOTDIR), 403),
}

# Engine errors with a status of their own: a refused path, text too large, a lock held too long.
_KIND_STATUS = ((UnsafePathError, 403), (ContentTooLargeError, 413), (LockTimeoutError, 503))


def _engine_error(exc: MemoryToolError) -> ApiError:
    """An engine exception as a status code (else 500) with the engine's message."""
    if isinstance(exc, MemoryConflictError):
        return ApiError(409, exc.message, expected=exc.expected, actual=exc.actual)
    for kind, status in _KIND_STATUS:
        if isinstance(exc, kind):
            return ApiError(status, exc.message)
    if isinstance(exc, MemoryIOError):
        return ApiError(_OS_STATUS.get(exc.errno or 0, 500), exc.message)
    return ApiError(400 if exc.code == INVALID_PARAMS else 500, exc.message)


def _api(method: Callable[..., Any]) -> Callable[..., Any]:
    """A handler verb that is ``@tornado.web.authenticated`` and ``@authorized``."""
    return tornado.web.authenticated(authorized(method))


class _State:
    """What the handlers share: settings, workspace, worker pool, gates, handovers, builder."""

    def __init__(self, config: AgentMemoryServer, workspace: Path) -> None:
        self.config = config
        self.workspace = workspace
        # Our own bounded pool: engine work never queues behind other extensions' jobs.
        self.executor = ThreadPoolExecutor(max_workers=config.worker_threads,
                                           thread_name_prefix="agent-memory")
        # Each agent may use a quarter of the workers, so writers waiting for one agent's lock
        # never take every thread. A gate lives while requests hold or await it.
        self.per_agent = max(1, config.worker_threads // 4)
        self.gates: WeakValueDictionary[str, asyncio.Semaphore] = WeakValueDictionary()
        self.handovers = Handovers()
        self._builder: PromptBuilder | None = None
        # The builder caches files and prompts; builds run in worker threads, one at a time.
        self._builder_lock = threading.Lock()

    def build_prompt(self, mem: AgentMemory) -> Any:
        """Build ``mem``'s prompt with the server's root directory as the workspace."""
        with self._builder_lock:
            if self._builder is None:
                self._builder = PromptBuilder(
                    tool_name=self.config.tool_name,
                    budget_tokens=self.config.prompt_budget_tokens or None,
                )
            # As a session builds it (template settings apply); budget warnings go in the reply.
            return self._builder.build_session(mem, workspace=self.workspace, warn=False)


#: Characters of a file or prompt a view sends unless ``max_chars`` says otherwise (~100 KB).
DEFAULT_VIEW_CHARS = 100_000


def bounded_text(text: str, bound: int | None) -> tuple[str, bool]:
    """``text`` cut to at most ``bound`` characters (None: whole), and whether it was cut."""
    if bound is None or len(text) <= bound:
        return text, False
    return text[:bound], True


class AgentMemoryHandler(APIHandler):
    """Base class: JSON errors with the engine's message, agent lookup, body parsing."""

    auth_resource = "agent-memory"  # checked by the server's authorizer

    @property
    def state(self) -> _State:
        """The extension's shared state (set up by :func:`setup_handlers`)."""
        return self.settings[_SETTINGS_KEY]

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Write ``{"message": ...}`` (plus conflict details) instead of an HTML page."""
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, ApiError):
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"message": exc.message, **exc.extra}))
            return
        super().write_error(status_code, **kwargs)

    def reply(self, payload: Any, status: int = 200) -> None:
        """Finish with a JSON body."""
        self.set_status(status)
        self.finish(json.dumps(payload))

    async def run(self, func: Callable[[], T], writes_to: str | None = None) -> T:
        """Run blocking engine work in the extension's pool; engine errors become ApiError.
        Writes to one agent (``writes_to``) may wait for its lock, so they share its gate."""
        state = self.state
        loop = asyncio.get_running_loop()
        try:
            if writes_to is None:
                return await loop.run_in_executor(state.executor, func)
            # One deadline for the whole write: the slot and lock waits together stay within it.
            timeout = state.config.lock_timeout
            deadline = time.monotonic() + timeout
            gate = state.gates.setdefault(writes_to, asyncio.Semaphore(state.per_agent))
            try:
                await asyncio.wait_for(gate.acquire(), timeout)
            except asyncio.TimeoutError:
                raise LockTimeoutError(f"{writes_to}/memory/.lock", timeout) from None
            try:  # as a decorator, lock_deadline bounds the lock waits inside func
                return await loop.run_in_executor(state.executor, lock_deadline(deadline)(func))
            finally:
                gate.release()
        except MemoryToolError as exc:  # the engine's one error family (I/O included)
            raise _engine_error(exc) from exc
        except HandoverError as exc:
            raise ApiError(exc.status, exc.message) from None

    async def on_agent(
        self, agent_id: str, work: Callable[[AgentMemory], T], write: bool = False
    ) -> T:
        """``work`` on the existing agent through :meth:`run` (a ``write`` waits for its slot)."""
        return await self.run(lambda: work(self.open_agent(agent_id)), agent_id if write else None)

    def json_body(self, fields: tuple[str, ...] | None = None) -> dict[str, Any]:
        """The request body as a JSON object; 413 over the size limit, 400 when malformed.
        With ``fields``, any other key is refused: a misspelt field must never be ignored."""
        limit = self.state.config.max_body_bytes
        size = len(self.request.body or b"")
        if size > limit:
            raise ApiError(413, f"Request body is {size} bytes; the limit is {limit} bytes "
                                "(AgentMemoryServer.max_body_bytes)")
        try:
            data = json.loads(self.request.body or b"")
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError(400, f"Request body is not valid JSON: {exc}") from None
        except RecursionError:
            raise ApiError(400, "Request body is not valid JSON: nested too deeply") from None
        if not isinstance(data, dict):
            raise ApiError(400, "Request body must be a JSON object")
        unknown = sorted(set(data) - set(fields)) if fields is not None else []
        if unknown:
            raise ApiError(400, f"Unknown field{'s' if len(unknown) > 1 else ''} "
                                f"{', '.join(repr(name) for name in unknown)} in the request; "
                                f"expected {', '.join(fields or ())}")
        return data

    def view_bound(self) -> int | None:
        """``max_chars`` (absent: :data:`DEFAULT_VIEW_CHARS`; ``0`` or ``all``: None, all)."""
        raw = self.get_query_argument("max_chars", None)
        if raw is None:
            return DEFAULT_VIEW_CHARS
        value = raw.strip()
        if value.lower() == "all":
            return None
        if not value.isdigit() or not value.isascii():
            raise ApiError(400, "'max_chars' must be a whole number of characters (0 for all) "
                                f"or 'all'; got {raw!r}")
        digits = value.lstrip("0")
        # More digits than any text has characters (int() refuses too many): the whole text.
        return int(digits) if digits and len(digits) <= 15 else None

    def agent_id(self, raw: object) -> str:
        """A valid agent id (else 400): an engine id, ``@folder/below/the/server/root`` or a
        handed-over folder's ``~`` and 16 hex digits."""
        if isinstance(raw, str) and raw.startswith(PATH_AGENT_PREFIX):
            _path_agent_parts(raw)
            return raw
        if isinstance(raw, str) and raw.startswith(HANDOVER_PREFIX):
            if not _HANDLE.fullmatch(raw):
                raise ApiError(400, f'Invalid handed-over agent "{raw}": "~" and 16 hex digits')
            return raw
        try:
            return validate_agent_id(raw)
        except MemoryToolError as exc:
            raise _engine_error(exc) from None

    def open_agent(self, agent_id: str) -> AgentMemory:
        """Open an existing agent (blocking); 404 when missing: a mistyped URL creates nothing."""
        state = self.state
        timeout = state.config.lock_timeout
        if agent_id.startswith(PATH_AGENT_PREFIX):
            folder = _below_workspace(state.workspace, agent_id)
        elif agent_id.startswith(HANDOVER_PREFIX):
            folder = state.handovers.path_of(agent_id)
            if not folder.is_dir():
                raise ApiError(
                    404, f"The handed-over agent folder {folder} is gone (deleted or moved)"
                )
        else:
            root = state.config.resolved_root()
            try:
                return AgentMemory.open_id(agent_id, root, create=False, lock_timeout=timeout)
            except AgentNotFoundError:
                raise ApiError(404, f'Agent "{agent_id}" does not exist under {root}') from None
        return AgentMemory.open(folder, create=False, lock_timeout=timeout)


#: An agent id starting with this names a folder below the server's root, by relative path.
PATH_AGENT_PREFIX = "@"
_HANDLE = re.compile(r"~[0-9a-f]{16}")


def _path_agent_parts(agent_id: str) -> list[str]:
    """The path components of an ``@relative/path`` agent id; 400 unless it stays inside."""
    relative = agent_id[len(PATH_AGENT_PREFIX) :]
    parts = relative.split("/")
    if "\\" in relative or "\x00" in relative or any(p in ("", ".", "..") for p in parts):
        raise ApiError(400, f'Invalid agent folder "{relative}": give a folder path relative to '
                            "the server's root, without '.', '..', empty parts or backslashes")
    return parts


def _below_workspace(workspace: Path, agent_id: str) -> Path:
    """The existing folder an ``@relative/path`` agent id names; 403 for a link on the way."""
    parts = _path_agent_parts(agent_id)
    relative = "/".join(parts)
    folder = workspace.joinpath(*parts)
    if not os.path.lexists(folder):
        raise ApiError(404, f'No folder "{relative}" under the server\'s root {workspace}')
    if os.path.realpath(folder) != os.path.join(os.path.realpath(workspace), *parts):
        raise ApiError(403, f'Refusing "{relative}": a link on the way leads out of the folder')
    if not folder.is_dir():
        raise ApiError(403, f'"{relative}" is not a folder')
    return folder


class AgentsHandler(AgentMemoryHandler):
    """``GET`` lists agents and templates; ``POST {id, template?}`` creates an agent."""

    @_api
    async def get(self) -> None:
        """List agent ids under the root, the default agent, and built-in template names."""
        config = self.state.config

        def work() -> AgentsResponse:
            root = config.resolved_root()
            return {"root": str(root), "default_agent": config.resolved_default_agent(),
                    "agents": list_agents(root),
                    "templates": [str(name) for name in list_templates()]}

        self.reply(await self.run(work))

    @_api
    async def post(self) -> None:
        """Create (idempotently) an agent, provisioning a built-in template when named."""
        body = self.json_body()
        agent_id = self.agent_id(body.get("id"))
        template = body.get("template")
        if template is not None and not isinstance(template, str):
            raise ApiError(400, "'template' must be a template name (a string) or null")
        template = template or None
        config = self.state.config

        def work() -> AgentCreatedResponse:
            if template is not None and template not in list_templates():
                names = ", ".join(str(name) for name in list_templates()) or "none"
                raise ApiError(400, f'Unknown template "{template}"; available: {names}')
            root = config.resolved_root()
            existed = os.path.lexists(root / agent_id)
            mem = AgentMemory.open_id(agent_id, root, lock_timeout=config.lock_timeout)
            if template is not None:
                provision(template, mem)
            return {"id": agent_id, "path": str(mem.path), "created": not existed,
                    "template": template}

        result = await self.run(work, agent_id)
        self.reply(result, 201 if result["created"] else 200)


class FactsHandler(AgentMemoryHandler):
    """``GET`` a memory file (FACT.md here; SOUL.md, USER.md in the subclasses) with its sha256;
    ``PUT {content, expected_sha256}`` replaces it, compare-and-swap (409 on a conflict)."""

    file_name = FACT

    def _named(self) -> dict[str, str]:
        # The persona files share one route shape, so their bodies name the file.
        return {} if self.file_name == FACT else {"name": self.file_name}

    @_api
    async def get(self, agent: str) -> None:
        """The text (up to ``max_chars``), its sha256 and, for ``render=html``, FACT.md's HTML."""
        agent_id = self.agent_id(agent)
        bound = self.view_bound()
        render = self.get_query_argument("render", None) if self.file_name == FACT else None
        if render not in (None, "html"):
            raise ApiError(400, f"'render' must be 'html' or left out; got {render!r}")

        def work(mem: AgentMemory) -> dict[str, Any]:
            read = {FACT: mem.read_facts, SOUL: mem.read_soul, USER: mem.read_user}
            content, sha = read[self.file_name]()
            shown, truncated = bounded_text(content, bound)
            reply = {"agent": agent_id, **self._named(),
                     "path": str(mem.file_path(self.file_name)), "content": shown,
                     "sha256": sha, "chars": len(content), "truncated": truncated}
            if render == "html":  # the sidebar shows what %fact shows: one renderer
                reply["html"] = markdown_html(shown)
            return reply

        self.reply(await self.on_agent(agent_id, work))

    @_api
    async def put(self, agent: str) -> None:
        """Replace the file; with ``expected_sha256`` it is compare-and-swap (409 on mismatch)."""
        agent_id = self.agent_id(agent)
        body = self.json_body(("content", "expected_sha256"))
        content: Any = body.get("content")  # any JSON value: the engine checks it
        expected = body.get("expected_sha256")
        # Checked here: the engine would report a non-string as a conflict.
        if expected is not None and not isinstance(expected, str):
            raise ApiError(400, "'expected_sha256' must be a sha256 hex string or null")

        def work(mem: AgentMemory) -> dict[str, Any]:
            if self.file_name == FACT and isinstance(content, str):
                # People edit here: an empty buffer is refused (SOUL.md, USER.md may be empty).
                check_edit_body(content)
            write = {FACT: mem.update_facts, SOUL: mem.write_soul, USER: mem.write_user}
            written = write[self.file_name](content, expected_sha256=expected)
            return {"agent": agent_id, **self._named(), "sha256": written.sha256,
                    "previous_sha256": written.previous_sha256}

        self.reply(await self.on_agent(agent_id, work, write=True))


class SoulHandler(FactsHandler):
    """SOUL.md: ``GET`` it with its sha256, ``PUT`` it with compare-and-swap."""

    file_name = SOUL


class UserHandler(FactsHandler):
    """USER.md: ``GET`` it with its sha256, ``PUT`` it with compare-and-swap."""

    file_name = USER


class _View(AgentMemoryHandler):
    """A ``GET`` on one agent: ``view`` gets the URL's ids and the checked ``query_names``."""

    query_names: tuple[str, ...] = ()
    #: ``view(mem, agent_id, **ids_and_query)``, run in a worker thread: the reply's body.
    view: Callable[..., Any]

    @_api
    async def get(self, agent: str, **ids: Any) -> None:
        """Reply with :meth:`view` of the existing agent."""
        agent_id = self.agent_id(agent)
        for name in self.query_names:
            bound = name == "max_chars"
            ids[name] = self.view_bound() if bound else self.get_query_argument(name, None)
        self.reply(await self.on_agent(agent_id, lambda mem: self.view(mem, agent_id, **ids)))


class JournalHandler(_View):
    """``GET`` searches the journal (newest first, engine rules); ``POST {text, tags}`` appends."""

    query_names = ("query", "tag", "limit", "since", "until")

    def view(self, mem: AgentMemory, agent_id: str, query: str | None, tag: str | None,
             limit: str | None, since: str | None, until: str | None) -> JournalResponse:
        result = mem.search(query=query or "", tag=tag or "", limit=normalize_limit(limit),
                            since=since or None, until=until or None)
        return {"agent": agent_id, "entries": list(result), "skipped": result.skipped,
                "scanned": result.scanned, "indexed": result.indexed}

    @_api
    async def post(self, agent: str) -> None:
        """Append ``text`` with optional ``tags``; returns the stored entry (201)."""
        agent_id = self.agent_id(agent)
        body = self.json_body()
        text: Any = body.get("text")  # any JSON value: the engine checks it
        # The memory tool's rule: anything but an array means no tags.
        tags = body["tags"] if isinstance(body.get("tags"), list) else []
        entry = await self.on_agent(agent_id, lambda mem: mem.append(text, tags=tags), write=True)
        reply: JournalAppendedResponse = {"agent": agent_id, "entry": entry}
        self.reply(reply, 201)


class PromptHandler(_View):
    """``GET`` the system prompt the agent would get in the server's root directory: ``text``,
    ``base`` and ``context`` cut to ``max_chars``; sizes and sections of the whole prompt."""

    query_names = ("max_chars",)

    def view(self, mem: AgentMemory, agent_id: str, max_chars: int | None) -> PromptResponse:
        prompt = self.state.build_prompt(mem)
        shown, truncated = bounded_text(prompt.text, max_chars)
        base, context = prompt.base, prompt.context
        if truncated:
            # Cut both where the text (base, a blank line, context) is cut: never sent twice.
            if base is None:
                context = shown
            else:
                base, context = shown[: len(base)], shown[len(base) + 2 :]
        return {
            "agent": agent_id, "workspace": str(self.state.workspace), "text": shown,
            "chars": len(prompt.text), "truncated": truncated, "base": base,
            "context": context, "bootstrap": bool(prompt.bootstrap),
            "tokens": int(prompt.tokens), "memory_tokens": int(prompt.memory_tokens),
            "budget_tokens": prompt.budget_tokens, "over_budget": bool(prompt.over_budget),
            "warnings": list(prompt.warnings), "sections": prompt.section_dicts(),
        }


class HandoverHandler(AgentMemoryHandler):
    """``POST {kernel_id}``: ask that kernel where its active agent is (see :mod:`.handover`)."""

    #: Seconds to wait for the kernel's answer (it queues behind a running cell).
    kernel_timeout = 10.0

    @_api
    async def post(self) -> None:
        """Reply with the id the agent is known by; a folder outside both roots gets a handle.
        Asking runs code in the kernel, so the caller must also be allowed to execute there."""
        kernel_id = self.json_body(("kernel_id",)).get("kernel_id")
        if not isinstance(kernel_id, str) or not kernel_id:
            raise ApiError(400, "'kernel_id' must be the id of a running kernel")
        if not self.authorizer.is_authorized(self, self.current_user, "execute", "kernels"):
            raise ApiError(403, "Asking a kernel needs permission to execute code in kernels")
        state = self.state
        try:
            answer = await ask_kernel(self.kernel_manager, kernel_id, self.kernel_timeout)
            folder = reported_folder(answer)
        except HandoverError as exc:
            raise ApiError(exc.status, exc.message) from None
        reported_id = answer.get("agent_id")
        reported_id = reported_id if isinstance(reported_id, str) else None

        def work() -> HandoverResponse:
            agent, how = agent_for(folder, reported_id, state.config.resolved_root(),
                                   state.workspace, state.handovers)
            return {"agent": agent, "path": str(folder), "how": how, "agent_id": reported_id}

        self.reply(await self.run(work))


class HistoryHandler(_View):
    """``GET`` the stored FACT.md versions, newest first, as ``{ts, sha256, size}``."""

    def view(self, mem: AgentMemory, agent_id: str) -> dict[str, Any]:
        return {"agent": agent_id, "versions": mem.history()}


class VersionHandler(_View):
    """``GET`` the text of one stored FACT.md version by full sha256 or unique prefix."""

    def view(self, mem: AgentMemory, agent_id: str, sha: str) -> VersionResponse:
        try:
            full, content = mem.history_version(sha)
        except VersionNotFoundError as exc:
            # Malformed or ambiguous ids stay 400; the message is the engine's either way.
            raise ApiError(404, exc.message) from None
        return {"agent": agent_id, "sha256": full, "content": content}


def _receipt(mem: AgentMemory, session_id: str) -> dict[str, Any]:
    """The receipt of ``session_id`` (or a prefix); 404 when a well-formed id matches none
    (malformed and ambiguous ids stay 400 with the engine's message)."""
    try:
        return find_session(mem, session_id)
    except SessionNotFoundError as exc:
        raise ApiError(404, exc.message) from None


class SessionsHandler(_View):
    """``GET`` the receipts of recorded session starts, newest first."""

    def view(self, mem: AgentMemory, agent_id: str) -> SessionsResponse:
        return {"agent": agent_id, "sessions": mem.sessions()}


class SessionHandler(_View):
    """``GET`` one recorded session by id or prefix: its receipt and prompt (to ``max_chars``)."""

    query_names = ("max_chars",)

    def view(
        self, mem: AgentMemory, agent_id: str, sid: str, max_chars: int | None
    ) -> SessionResponse:
        receipt = _receipt(mem, sid)
        text = mem.session_prompt(receipt["session_id"])
        shown, truncated = bounded_text(text, max_chars)
        return {"agent": agent_id, "receipt": receipt, "text": shown, "chars": len(text),
                "truncated": truncated}


class SessionDiffHandler(_View):
    """``GET`` a unified diff from one recorded session's prompt to another's."""

    def view(self, mem: AgentMemory, agent_id: str, sid: str, other: str) -> SessionDiffResponse:
        first = _receipt(mem, sid)["session_id"]
        second = _receipt(mem, other)["session_id"]
        diff = mem.diff_sessions(first, second)
        return {"agent": agent_id, "first": first, "second": second, "diff": diff}


class SessionWhyHandler(_View):
    """``GET ?text=...``: where each line of a recorded prompt holding ``text`` came from."""

    query_names = ("text",)

    def view(
        self, mem: AgentMemory, agent_id: str, sid: str, text: str | None
    ) -> SessionWhyResponse:
        session_id = _receipt(mem, sid)["session_id"]
        origins: list[SessionOrigin] = [
            {"section": origin.section, "source": origin.source, "version": origin.version,
             "line": origin.line, "text": origin.text, "description": str(origin)}
            for origin in mem.why(session_id, text or "")
        ]
        return {"agent": agent_id, "session_id": session_id, "text": text or "",
                "origins": origins}


#: The fields a forget request may hold (anything else is refused): their types, defaults and
#: what they must be. Booleans only: a string "false" must not pass as a true dry_run.
_FORGET_FIELDS: dict[str, tuple[Any, Any, str]] = {
    "text": ((str, type(None)), None, "a string or null"),
    "pattern": ((str, type(None)), None, "a string or null"),
    "secrets": (bool, False, "true or false"),
    "dry_run": (bool, False, "true or false"),
    "reason": (str, "", "a string"),
}


class ForgetHandler(AgentMemoryHandler):
    """``POST {text | pattern | secrets, dry_run, reason}`` forgets everywhere, then verifies."""

    @_api
    async def post(self, agent: str) -> None:
        """Remove a text, every match of a pattern, or every stored credential (200 with the
        receipt; ``receipt.verified`` false means a copy was still found, in ``remaining``)."""
        agent_id = self.agent_id(agent)
        # Forgetting cannot be undone: a misspelt "dry_run" must not make a rehearsal real.
        body = self.json_body(tuple(_FORGET_FIELDS))
        args: dict[str, Any] = {}
        for name, (kind, default, what) in _FORGET_FIELDS.items():
            args[name] = body.get(name, default)
            if not isinstance(args[name], kind):
                raise ApiError(400, f"'{name}' must be {what}")
        text = args.pop("text")
        if (text is not None) + (args["pattern"] is not None) + args["secrets"] != 1:
            raise ApiError(400, "Give exactly one of 'text', 'pattern' or 'secrets': true")
        receipt = await self.on_agent(agent_id, lambda mem: forget(mem, text, **args), write=True)
        reply: ForgetResponse = {"agent": agent_id, "receipt": receipt}
        self.reply(reply)


_AGENT = r"(?P<agent>[^/]+)"
_SID = r"(?P<sid>[^/]+)"

#: (URL regex below the base URL, handler), in the order of ``ROUTES``.
HANDLERS: list[tuple[str, type[AgentMemoryHandler]]] = [
    (f"{API_PREFIX}/agents", AgentsHandler),
    (f"{API_PREFIX}/agents/{_AGENT}/facts", FactsHandler),
    (f"{API_PREFIX}/agents/{_AGENT}/journal", JournalHandler),
    (f"{API_PREFIX}/agents/{_AGENT}/prompt", PromptHandler),
    (f"{API_PREFIX}/agents/{_AGENT}/history", HistoryHandler),
    (f"{API_PREFIX}/agents/{_AGENT}/history/(?P<sha>[^/]+)", VersionHandler),
    (f"{API_PREFIX}/agents/{_AGENT}/sessions", SessionsHandler),
    (f"{API_PREFIX}/agents/{_AGENT}/sessions/{_SID}", SessionHandler),
    (f"{API_PREFIX}/agents/{_AGENT}/sessions/{_SID}/diff/(?P<other>[^/]+)", SessionDiffHandler),
    (f"{API_PREFIX}/agents/{_AGENT}/sessions/{_SID}/why", SessionWhyHandler),
    (f"{API_PREFIX}/agents/{_AGENT}/forget", ForgetHandler),
    (f"{API_PREFIX}/agents/{_AGENT}/soul", SoulHandler),
    (f"{API_PREFIX}/agents/{_AGENT}/user", UserHandler),
    (f"{API_PREFIX}/handover", HandoverHandler),
]


class NotFoundHandler(AgentMemoryHandler):
    """Any other path under the API prefix: a JSON 404 like every other error, not HTML."""

    def _missing(self, *args: Any) -> None:
        raise ApiError(404, f"No such agent-memory API route: {self.request.path}")

    get = post = put = delete = patch = _api(_missing)


def setup_handlers(serverapp: Any) -> None:
    """Register the handlers on ``serverapp.web_app`` under its base URL."""
    web_app = serverapp.web_app
    config = AgentMemoryServer(parent=serverapp)
    workspace = Path(os.path.abspath(os.path.expanduser(serverapp.root_dir)))
    web_app.settings[_SETTINGS_KEY] = _State(config, workspace)
    base_url = web_app.settings["base_url"]
    routes = [*HANDLERS, (f"{API_PREFIX}(?:/.*)?", NotFoundHandler)]  # the fallback last
    web_app.add_handlers(
        ".*$", [(url_path_join(base_url, pattern), handler) for pattern, handler in routes]
    )
    serverapp.log.info("jupyter_agent_memory: REST API at %s (agents root %s)",
                       url_path_join(base_url, API_PREFIX), config.resolved_root())
