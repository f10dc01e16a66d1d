"""The A2A switch of ``create_app(a2a=...)``: the routes when the ``a2a`` extra is
installed (``None``), required (``True``) or off (``False``), and their OpenAPI
entries. The routes themselves live in ``_a2a_server`` (which needs ``a2a-sdk``)."""

from __future__ import annotations

import logging
from typing import Any

from starlette.routing import Route

from ._service import Service

__all__ = ["openapi_paths", "routes"]

log = logging.getLogger("rx_agent.serve")

INSTALL = "pip install 'rx-agent[a2a]' (from a checkout: pip install -e '.[a2a]')"


def routes(service: Service, enabled: bool | None) -> list[Route]:
    """The A2A routes, or none when switched off (or, for ``None``, not installed)."""
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"a2a must be True, False or None, not {enabled!r}")
    if enabled is False:
        return []
    try:
        from . import _a2a_server
    except ImportError as exc:
        if enabled:
            raise ImportError(f"create_app(a2a=True) needs the a2a extra ({exc.name} is "
                              f"missing): {INSTALL}") from exc
        log.debug("A2A routes off: the a2a extra is not installed (%s)", exc.name)
        return []
    return _a2a_server.routes(service)


def openapi_paths() -> dict[str, Any]:
    """The A2A routes in ``/openapi.json``."""
    return {
        "/.well-known/agent-card.json": {"get": {
            "summary": "The A2A agent card: name, skills (the agent's tools), streaming, "
                       "the JSON-RPC endpoint and its auth scheme",
            "security": [], "responses": {"200": {"description": "the agent card"}}}},
        "/a2a": {"post": {
            "summary": "A2A JSON-RPC 2.0 (protocol 1.0 with the A2A-Version: 1.0 header; "
                       "0.3 method names without it): SendMessage, SendStreamingMessage, "
                       "GetTask, ListTasks, CancelTask, SubscribeToTask",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["jsonrpc", "method"], "properties": {
                    "jsonrpc": {"const": "2.0"}, "id": {"type": ["string", "integer"]},
                    "method": {"type": "string"}, "params": {"type": "object"}}}}}},
            "parameters": [{"name": "A2A-Version", "in": "header",
                            "schema": {"type": "string", "example": "1.0"}}],
            "responses": {
                "200": {"description": "a JSON-RPC result or error object; for the "
                        "streaming methods, Server-Sent Events each carrying one",
                        "content": {"application/json": {}, "text/event-stream": {}}},
                "401": {"description": "missing or invalid bearer token (a JSON-RPC "
                        "error object)"}}}},
    }
