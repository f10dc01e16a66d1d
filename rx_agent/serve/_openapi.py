"""The OpenAPI 3.1 document of the endpoints (``GET /openapi.json``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._version import __version__

__all__ = ["openapi"]

_ERROR = {"description": "an error", "content": {"application/json": {"schema": {
    "$ref": "#/components/schemas/Error"}}}}
_SID = {"name": "session_id", "in": "path", "required": True,
        "schema": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@~-]{0,127}$"}}
_STREAM = {
    "200": {
        "description": "The call's events as Server-Sent Events (`event:` is the event's "
        "`type`, `data:` its JSON, `id:` `<run id>.<n>`; an `error` event if the call fails "
        "mid-stream), or with `Accept: application/json` the final Msg. The `X-Run-Id` "
        "header names the run.",
        "content": {"text/event-stream": {"schema": {"type": "string"}},
                    "application/json": {"schema": {"$ref": "#/components/schemas/Msg"}}},
    },
    "400": _ERROR, "401": _ERROR, "409": {**_ERROR, "description": "the session is running "
                                           "a call (Retry-After), or the answer does not fit "
                                           "the pause"},
    "413": _ERROR, "415": _ERROR,
}

_LAST_EVENT_ID = {"name": "Last-Event-ID", "in": "header",
                  "schema": {"type": "string", "description": "<run id>.<n>"}}
_RESUMED = {
    "200": {"description": "Server-Sent Events with the ids of the call's own stream, then "
            "`event: run_end` (`{run_id, status, error}`)",
            "content": {"text/event-stream": {"schema": {"type": "string"}}}},
    "204": {"description": "Last-Event-ID is the run's run_end: nothing follows"},
    "400": _ERROR, "401": _ERROR, "404": _ERROR,
    "410": {**_ERROR, "description": "the run journal no longer holds that event "
            "(retention) or never did"},
    "501": _ERROR,
}


def _op(summary: str, body: dict[str, Any] | None = None, responses: dict[str, Any] | None = None,
        params: list[dict[str, Any]] | None = None, secure: bool = True) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary,
                          "responses": responses or {"200": {"description": "OK"}}}
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": body}}}
    if not secure:
        op["security"] = []
    return op


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def openapi(extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The document; ``extra``: the paths of the protocol routes the app serves."""
    sid = [_SID]
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "rx_agent serve", "version": __version__,
                 "description": "An rx_agent agent over HTTP: post messages, stream events, "
                 "answer human-in-the-loop pauses, inspect sessions."},
        "security": [{"bearer": []}],
        "paths": {
            "/v1/sessions": {"get": _op("The caller's session ids")},
            "/v1/sessions/{session_id}": {
                "get": _op("State, messages, pending calls and recent runs of a session",
                           params=sid, responses={"200": {"description": "the session"},
                                                  "404": _ERROR}),
                "delete": _op("Delete a session", params=sid,
                              responses={"204": {"description": "deleted"}, "404": _ERROR,
                                         "409": _ERROR}),
            },
            "/v1/sessions/{session_id}/messages": {"post": _op(
                "Run a call with new user messages", _ref("MessageBody"), _STREAM, sid)},
            "/v1/sessions/{session_id}/confirm": {"post": _op(
                "Resume a reply paused for confirmation (a UserConfirmResultEvent)",
                _ref("UserConfirmResult"), _STREAM, sid)},
            "/v1/sessions/{session_id}/external-results": {"post": _op(
                "Resume a reply waiting for external tools (an ExternalExecutionResultEvent)",
                _ref("ExternalExecutionResult"), _STREAM, sid)},
            "/v1/sessions/{session_id}/interrupt": {"post": _op(
                "Interrupt the running call (or close a pause)",
                {"type": "object", "properties": {"message": {"type": "string"}}},
                params=sid)},
            "/v1/sessions/{session_id}/runs/{run_id}": {"get": _op(
                "A recent run's events (after ?after=N or Last-Event-ID) and spans",
                params=[_SID, {"name": "run_id", "in": "path", "required": True,
                               "schema": {"type": "string"}},
                        {"name": "after", "in": "query", "schema": {"type": "integer"}}])},
            "/v1/sessions/{session_id}/runs/{run_id}/events": {"get": _op(
                "A run's events as SSE after Last-Event-ID (or ?after=N), live, ending with "
                "its run_end: resume a stream on any worker",
                params=[_SID, {"name": "run_id", "in": "path", "required": True,
                               "schema": {"type": "string"}},
                        {"name": "after", "in": "query", "schema": {"type": "integer"}},
                        _LAST_EVENT_ID],
                responses=_RESUMED)},
            "/v1/sessions/{session_id}/events": {"get": _op(
                "The session's run journal as SSE (every run's events and ends), after "
                "Last-Event-ID, from the oldest kept (?from=start) or from now",
                params=[_SID, {"name": "from", "in": "query",
                               "schema": {"enum": ["start", "now"]}}, _LAST_EVENT_ID],
                responses=_RESUMED)},
            "/v1/plan": {"get": _op("The agent's execution plan (text, Mermaid, points)")},
            "/metrics": {"get": _op("Prometheus metrics of this worker")},
            "/healthz": {"get": _op("Liveness", secure=False)},
            "/openapi.json": {"get": _op("This document", secure=False)},
            "/console": {"get": _op("The web console", secure=False)},
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error"], "properties": {
                    "error": {"type": "object", "required": ["code", "message"],
                              "properties": {"code": {"type": "string"},
                                             "message": {"type": "string"}}}}},
                "Msg": {"type": "object", "required": ["role", "content"], "properties": {
                    "role": {"enum": ["user", "assistant", "system", "tool"]},
                    "content": {"oneOf": [{"type": "string"},
                                          {"type": "array", "items": {"type": "object"}}]},
                    "metadata": {"type": ["object", "null"]}}},
                "MessageBody": {"oneOf": [
                    {"type": "object", "required": ["message"], "additionalProperties": False,
                     "properties": {"message": {"type": "string", "minLength": 1}}},
                    {"type": "object", "required": ["messages"], "additionalProperties": False,
                     "properties": {"messages": {"type": "array", "minItems": 1,
                                                 "items": _ref("Msg")}}}]},
                "UserConfirmResult": {"type": "object",
                                      "required": ["reply_id", "confirm_results"],
                                      "properties": {
                    "type": {"const": "user_confirm_result"},
                    "reply_id": {"type": "string"},
                    "confirm_results": {"type": "array", "items": {
                        "type": "object", "required": ["tool_call", "confirmed"],
                        "properties": {"tool_call": {"type": "object"},
                                       "confirmed": {"type": "boolean"},
                                       "reason": {"type": ["string", "null"]},
                                       "rules": {"type": ["array", "null"]}}}}}},
                "ExternalExecutionResult": {"type": "object",
                                            "required": ["reply_id", "tool_results"],
                                            "properties": {
                    "type": {"const": "external_execution_result"},
                    "reply_id": {"type": "string"},
                    "tool_results": {"type": "array", "items": {"type": "object"}}}},
            },
        },
    }
    doc["paths"].update(extra or {})
    return doc
