"""stdio for the MCP server. A request with an unpaired surrogate escape (the SDK's reader
drops it) is parked and replaced by a :data:`PARKED_METHOD` request with the same id;
``initialize`` is answered before the SDK has loaded, then replayed to it (:class:`SkipReply`)."""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any, TextIO

__all__ = [
    "CAPABILITIES", "HANDSHAKE_VERSIONS", "PARKED_METHOD", "ParkedRequests", "SkipReply",
    "early_reply", "initialize_request", "surrogate_safe_stdin",
]

log = logging.getLogger(__name__)

PARKED_METHOD = "agent-memory/unpaired-surrogate"
# Any \uD800-\uDFFF escape; pairs (an escaped emoji) match too and are let through below.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF][0-9a-fA-F]{2}")


class ParkedRequests:
    """Requests the SDK could not parse, by token, until the server answers them."""

    def __init__(self) -> None:
        self._requests: dict[int, dict[str, Any]] = {}
        self._tokens = itertools.count(1)

    def park(self, line: str) -> str | None:
        """The stand-in line for ``line``, or None when ``line`` needs no help."""
        message = _request(line) if _SURROGATE_ESCAPE.search(line) else None
        if message is None:
            return None
        try:
            json.dumps(message, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            token = next(self._tokens)
            self._requests[token] = message
            stand_in = {"jsonrpc": "2.0", "id": message["id"], "method": PARKED_METHOD}
            return json.dumps({**stand_in, "params": {"token": token}}) + "\n"
        return None  # only well-formed pairs: the SDK reads them fine

    def take(self, token: int) -> dict[str, Any] | None:
        """The parked request for ``token`` (once)."""
        return self._requests.pop(token, None)


def _request(line: str) -> dict[str, Any] | None:
    """``line`` parsed when it is a request (not a notification or a response), else None."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if isinstance(message, dict) and "id" in message and "method" in message:
        return message
    return None


async def surrogate_safe_stdin(
    parked: ParkedRequests, source: TextIO, first: str = ""
) -> AsyncIterator[str]:
    """``first`` (a line already read), then the lines of ``source``, each request the SDK
    would drop replaced by its stand-in. Closes ``source`` at the end."""
    import anyio

    stream = anyio.wrap_file(source)
    try:
        if first:
            yield parked.park(first) or first
        async for line in stream:
            yield parked.park(line) or line
    finally:
        await stream.aclose()


#: What ``initialize`` can ask for: the SDK's ``HANDSHAKE_PROTOCOL_VERSIONS`` (a closed list).
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
#: What the server's handlers make the SDK declare in the handshake.
CAPABILITIES: dict[str, Any] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": True},
    "tools": {"listChanged": True},
}
_CLIENT_INFO_TEXT = ("name", "version", "title", "description", "websiteUrl")


def initialize_request(line: str) -> tuple[int | str, dict[str, Any]] | None:
    """``(id, params)`` when ``line`` is a plain ``initialize`` request the SDK accepts as
    it is, else None (anything unusual is left to the SDK)."""
    message = None if _SURROGATE_ESCAPE.search(line) else _request(line)
    if message is None or message.get("jsonrpc") != "2.0" or message["method"] != "initialize":
        return None
    request_id, params = message["id"], message.get("params")
    if not isinstance(params, dict):
        return None
    info, capabilities = params.get("clientInfo"), params.get("capabilities")
    plain = (
        isinstance(request_id, (int, str))
        and not isinstance(request_id, bool)
        and isinstance(params.get("protocolVersion"), str)
        and isinstance(capabilities, dict)
        and all(isinstance(value, dict) for value in capabilities.values())
        and isinstance(info, dict)
        and {"name", "version"} <= set(info)
        and all(key in _CLIENT_INFO_TEXT and isinstance(v, str) for key, v in info.items())
    )
    return (request_id, params) if plain else None


def early_reply(
    request_id: int | str, params: Mapping[str, Any], server_info: Mapping[str, str],
    instructions: str,
) -> dict[str, Any]:
    """The answer the SDK (with this server's handlers) gives ``initialize``: the requested
    protocol version when it is a handshake version, else the latest one."""
    requested = params.get("protocolVersion")
    version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    result = {
        "capabilities": CAPABILITIES, "protocolVersion": version,
        "serverInfo": dict(server_info), "instructions": instructions,
    }
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


class SkipReply:
    """A write stream for the SDK that drops its answer to the replayed ``initialize`` (logged
    when it differs from ``sent``, what the client has) and forwards the rest to ``stream``."""

    def __init__(self, stream: Any, sent: dict[str, Any]) -> None:
        self.stream = stream
        self.sent: dict[str, Any] | None = sent

    async def send(self, item: Any) -> None:
        """Send ``item`` on, unless it is the answer already given."""
        sent, message = self.sent, getattr(item, "message", None)
        answers = hasattr(message, "result") or hasattr(message, "error")  # not a request
        if sent is not None and answers and getattr(message, "id", None) == sent["id"]:
            self.sent = None
            assert message is not None
            answer = json.loads(message.model_dump_json(by_alias=True, exclude_unset=True))
            if answer != sent:
                log.warning(
                    "the MCP SDK answers initialize differently from the early answer the "
                    "client got: %s, not %s", json.dumps(answer)[:2000], json.dumps(sent)[:2000]
                )
            return
        await self.stream.send(item)

    async def aclose(self) -> None:
        """Close the underlying stream."""
        await self.stream.aclose()

    async def __aenter__(self) -> SkipReply:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
