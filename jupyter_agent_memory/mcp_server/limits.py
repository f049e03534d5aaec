"""The Streamable HTTP server's resource limits, as plain data (no SDK or server imports, so
the command line can show the defaults cheaply)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HttpLimits"]


@dataclass(frozen=True)
class HttpLimits:
    """What one Streamable HTTP server holds for its clients at most.

    ``max_sessions`` open sessions in all (503 past that) and ``max_sessions_per_client`` per
    client address (429); a session with no request in flight (no call, no open GET stream)
    for ``session_idle_timeout`` seconds is closed; a request's line and headers must arrive
    within ``request_timeout`` seconds of the connection opening or the previous response, and
    its body within ``request_timeout`` seconds more (408); ``max_connections`` open sockets
    (503 past that)."""

    max_sessions: int = 128
    max_sessions_per_client: int = 32
    session_idle_timeout: float = 300.0
    request_timeout: float = 10.0
    max_connections: int = 512

    def __post_init__(self) -> None:
        for name in ("max_sessions", "max_sessions_per_client", "max_connections"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")
        for name in ("session_idle_timeout", "request_timeout"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value < float("inf")):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
