"""Every route of the REST API as plain data, declared in :mod:`..engine.catalog`."""

from __future__ import annotations

from ..engine.catalog import API_PREFIX, ROUTES

__all__ = ["API_PREFIX", "ROUTES"]
