"""The A2A routes: the agent card at the well-known path and the JSON-RPC endpoint.

The endpoint applies the server's own rules first (the bearer token, the body limit,
JSON), answering a refusal as a JSON-RPC error object; then the ``a2a-sdk`` dispatcher
parses the request (protocol 1.0, and 0.3 method names through the SDK's adapter)
and calls :class:`~._a2a_handler.A2AHandler`. JSON-RPC errors are HTTP 200, as the
SDK's own server answers them; only a missing or wrong token is HTTP 401 (with
``WWW-Authenticate``), since authentication belongs to HTTP.
"""

from __future__ import annotations

import json
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import JSONParseError
from a2a.server.request_handlers import build_error_response
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    InvalidRequestError,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from a2a.utils.errors import A2AError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message as ASGIMessage

from .._version import __version__
from ._a2a_handler import RECEIVE, USER, A2AHandler
from ._body import read_json
from ._errors import HTTPError
from ._service import Service

__all__ = ["CARD_PATH", "RPC_PATH", "agent_card", "openapi_paths", "routes"]

RPC_PATH = "/a2a"
CARD_PATH = AGENT_CARD_WELL_KNOWN_PATH
_SCOPE_USER = "rx_agent.a2a_user"


def agent_card(service: Service, base_url: str) -> AgentCard:
    """The agent's card: its name, one skill per tool (its name and description),
    streaming, the JSON-RPC endpoint (protocol 1.0 and 0.3) and, with tokens, bearer
    auth. The card is public, so it says nothing of the system prompt."""
    agent = service.agent
    schemas = agent.toolkit.schemas()
    skills = [AgentSkill(id=s["name"], name=s["name"], description=s.get("description") or
                         s["name"], tags=["tool"]) for s in schemas]
    description = f"The agent {agent.name!r}, served by rx_agent."
    if not skills:
        skills = [AgentSkill(id=agent.name, name=agent.name, tags=["chat"],
                             description=f"Talk with {agent.name}.")]
    url = base_url.rstrip("/") + RPC_PATH
    card = AgentCard(
        name=agent.name, description=description, version=__version__,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False,
                                       extended_agent_card=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills,
    )
    if service.auth is not None:
        card.security_schemes["bearer"].CopyFrom(SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="Bearer", description="Authorization: Bearer <token>")))
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return card


class _ContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, plus the user the token named and the disconnect."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[USER] = request.scope.get(_SCOPE_USER)
        context.state[RECEIVE] = request.receive
        return context


def _error(request_id: Any, error: A2AError | JSONParseError, status: int = 200,
           headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(build_error_response(request_id, error), status_code=status,
                        headers=headers)


def _request_id(data: Any) -> str | int | None:
    value = data.get("id") if isinstance(data, dict) else None
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def routes(service: Service) -> list[Route]:
    handler = A2AHandler(service)
    dispatcher = JsonRpcDispatcher(handler, _ContextBuilder(), enable_v0_3_compat=True)
    cards: dict[str, dict[str, Any]] = {}

    async def card(request: Request) -> Response:
        base = str(request.base_url)
        found = cards.get(base)
        if found is None:
            if len(cards) >= 16:  # the base comes from the Host header: keep a few
                cards.clear()
            found = cards[base] = agent_card_to_dict(agent_card(service, base))
        return JSONResponse(found)

    async def rpc(request: Request) -> Response:
        try:
            user = service.user(request)
        except HTTPError as exc:
            service.metrics.error(exc.code, exc.status)
            return _error(None, InvalidRequestError(exc.message, data={"code": exc.code}),
                          exc.status, exc.headers)
        try:
            data = await read_json(request, service.max_body)
        except HTTPError as exc:
            service.metrics.error(exc.code, exc.status)
            if exc.code == "bad_json":
                return _error(None, JSONParseError(message=exc.message))
            return _error(None, InvalidRequestError(exc.message, data={"code": exc.code}))
        if not isinstance(data, dict):
            return _error(None, InvalidRequestError(
                "the body must be one JSON-RPC request object (batches are not supported)"))
        body = json.dumps(data).encode()
        replayed = False

        async def receive() -> ASGIMessage:  # the body once more, for the dispatcher
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await request.receive()

        request.scope[_SCOPE_USER] = user
        return await dispatcher.handle_requests(Request(request.scope, receive))

    return [
        Route(CARD_PATH, card, methods=["GET"]),
        Route(RPC_PATH, rpc, methods=["POST"]),
    ]


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
