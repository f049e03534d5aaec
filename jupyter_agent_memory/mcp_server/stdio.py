"""stdio for the MCP server, with an answer for every request.

The SDK's stdio reader parses each line with pydantic, which rejects JSON text holding an
unpaired surrogate escape (``"\\udfff"``); the request is then dropped without a reply and the
client waits until its own timeout. A model can produce such text, so this reader looks at
the few lines that carry a surrogate escape: when Python's own JSON parser accepts one that
holds an unpaired surrogate, the request is parked and replaced by a request for
:data:`PARKED_METHOD` with the same id. The server answers that one (``mcp_server`` registers
the handler): a ``tools/call`` goes to the engine, which refuses the text with its own
``-32602`` message naming the field, and any other method gets a ``-32602`` error. Nothing
with an unpaired surrogate is ever written.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["PARKED_METHOD", "ParkedRequests", "surrogate_safe_stdin"]

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
        if not _SURROGATE_ESCAPE.search(line):
            return None
        try:
            message = json.loads(line)
        except ValueError:
            return None
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            return None  # a notification or a response: nobody waits for an answer
        try:
            json.dumps(message, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            token = next(self._tokens)
            self._requests[token] = message
            stand_in = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "method": PARKED_METHOD,
                "params": {"token": token},
            }
            return json.dumps(stand_in) + "\n"
        return None  # only well-formed pairs: the SDK reads them fine

    def take(self, token: int) -> dict[str, Any] | None:
        """The parked request for ``token`` (once)."""
        return self._requests.pop(token, None)


async def surrogate_safe_stdin(parked: ParkedRequests) -> AsyncIterator[str]:
    """Lines of standard input (UTF-8, undecodable bytes replaced), requests the SDK would
    drop replaced by their stand-ins."""
    import anyio

    # A private duplicate of fd 0, so closing this reader never closes sys.stdin.
    stream = anyio.wrap_file(
        open(os.dup(0), encoding="utf-8", errors="replace", newline="\n", closefd=True)  # noqa: SIM115
    )
    try:
        async for line in stream:
            yield parked.park(line) or line
    finally:
        await stream.aclose()
