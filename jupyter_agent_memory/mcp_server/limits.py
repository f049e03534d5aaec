"""The Streamable HTTP server's resource limits, as plain data (cheap for the command line)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HttpLimits"]


@dataclass(frozen=True)
class HttpLimits:
    """What one Streamable HTTP server holds at most: ``max_sessions`` open sessions (503),
    ``max_sessions_per_client`` per client address (429), sessions idle (no request in flight)
    up to ``session_idle_timeout`` s, ``request_timeout`` s for a request's head, then as long
    for its body (408), and ``max_connections`` open sockets (503)."""

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
