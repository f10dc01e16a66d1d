"""``create_app``: an agent as a Starlette ASGI app."""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from ..agent import ReActAgent
from ..session import InMemorySessionStore, RunJournal, SessionStore
from ._auth import TokenAuth
from ._body import DEFAULT_MAX_BODY
from ._calls import RAW_SEND
from ._errors import CrashAnswer, HTTPError, error_response, log
from ._openai_api import openapi_paths as openai_paths
from ._openai_api import routes as openai_routes
from ._openapi import openapi
from ._service import Service
from ._spans import install_feed

__all__ = ["create_app"]

STATIC = Path(__file__).parent / "static"

AgentFactory = Callable[[SessionStore], ReActAgent]


class _App(Starlette):
    """Starlette, handing the server's own ``send`` to the call streams (:data:`RAW_SEND`)
    while the middleware is only the app's own: middleware added later
    (``app.add_middleware``) may rewrite bodies, and then every frame goes through it."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and len(self.user_middleware) == 1:  # CrashAnswer
            scope[RAW_SEND] = send
        await super().__call__(scope, receive, send)


def _agent_and_store(
    agent_or_factory: ReActAgent | AgentFactory, session_store: SessionStore | None
) -> tuple[ReActAgent, SessionStore]:
    if isinstance(agent_or_factory, ReActAgent):
        agent = agent_or_factory
        if session_store is not None and session_store is not agent.session_store:
            raise ValueError(
                "create_app() got an agent and a different session_store: an agent's store "
                "is fixed when it is built; pass a factory (store -> agent) instead, or "
                "build the agent with that store")
        return agent, agent.session_store
    if not callable(agent_or_factory):
        raise TypeError("create_app() takes a ReActAgent or a factory (session store -> "
                        f"ReActAgent), not {type(agent_or_factory).__name__}")
    store = session_store if session_store is not None else InMemorySessionStore()
    made = agent_or_factory(store)
    if not isinstance(made, ReActAgent):
        raise TypeError(f"the agent factory returned a {type(made).__name__}, not a ReActAgent")
    if made.session_store is not store:
        raise ValueError("the agent factory must build the agent with the session store it "
                         "is given (ReActAgent(..., session_store=store))")
    return made, store


def _authenticator(
    auth: Mapping[str, str] | Callable[[str], str | None] | None,
) -> Callable[[str], str | None] | None:
    if auth is None:
        return None
    if isinstance(auth, Mapping):
        return TokenAuth(auth)
    if callable(auth):
        return auth
    raise TypeError("auth must be None, a mapping of token -> user id, or a callable "
                    f"(token -> user id or None), not {type(auth).__name__}")


def _protocol(name: str, module: str, package: str, *, required: bool) -> Any:
    """The module of a protocol's routes, or ``None`` when its extra is missing (an
    ``ImportError`` naming the extra when ``required``)."""
    try:
        return importlib.import_module(f"rx_agent.serve.{module}")
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != package:
            raise
        if required:
            raise ImportError(f"create_app({name}=True) needs the {name} extra ({exc.name} "
                              f"is missing): pip install 'rx-agent[{name}]' (from a "
                              f"checkout: pip install -e '.[{name}]')") from exc
        logging.getLogger("rx_agent.serve").debug(
            "%s routes are off: the %s extra is not installed", name, name)
        return None


def create_app(
    agent_or_factory: ReActAgent | AgentFactory,
    session_store: SessionStore | None = None,
    auth: Mapping[str, str] | Callable[[str], str | None] | None = None,
    *,
    queue: bool = False,
    max_body: int = DEFAULT_MAX_BODY,
    tracer_provider: Any = None,
    console: bool = True,
    openai: bool = True,
    a2a: bool | None = None,
    agui: bool | None = None,
    journal: RunJournal | bool | None = None,
    keep_running: bool = False,
) -> Starlette:
    """Serve an agent over HTTP: an ASGI app (Starlette) to run on uvicorn.

    Args:
        agent_or_factory: a ``ReActAgent`` (its own session store is used), or a
            factory called once with the session store, returning the agent built
            on it (so ``rx-agent serve --store URL`` can choose the store).
        session_store: the store for a factory (default: in memory). Use a Redis or
            SQLite store to serve one session from several worker processes.
        auth: bearer tokens: a mapping of token -> user id (compared in constant
            time), or a callable ``token -> user id | None``. The user id scopes every
            session, so a caller never reaches another user's. ``None``: no auth,
            every caller is the anonymous user (for a loopback-only server).
        queue: a post to a session that is running a call waits its turn instead
            of getting ``409`` with ``Retry-After``.
        max_body: the largest request body in bytes (default 1 MiB); larger is 413.
        tracer_provider: an OpenTelemetry SDK ``TracerProvider`` whose spans the
            console shows per run (default: the global one, when it is an SDK one).
        console: serve the web console at ``/console``.
        openai: serve the OpenAI-compatible routes (``/v1/chat/completions``,
            ``/v1/responses``, ``/v1/models``; docs/protocols.md).
        a2a: serve the A2A protocol (the agent card at
            ``/.well-known/agent-card.json``, JSON-RPC at ``/a2a``; docs/protocols.md).
            ``None``: when the ``a2a`` extra is installed; ``True``: required
            (``ImportError`` without it).
        agui: serve AG-UI at ``POST /v1/agui`` (docs/protocols.md). ``None``: when the
            ``agui`` extra is installed; ``True``: required (``ImportError`` without it).
        journal: where each call's events go, so that a client reconnecting with
            ``Last-Event-ID`` to any worker resumes
            (``GET /v1/sessions/{id}/runs/{run}/events``; docs/serving.md). ``None``
            (default): the store's run journal (``store.journal()``, shared by the
            workers of a durable store), or one in this worker's memory for a store
            without one; a :class:`~rx_agent.session.RunJournal`: that one; ``False``:
            none.
        keep_running: a call whose client disconnects runs on to its end (its events
            go to the journal, for a reconnect) instead of being disposed. Needs a
            journal.

    A call that fails answers ``500`` (or an SSE ``error`` event) naming only the
    exception's type; its traceback, with the session and run id, is logged at
    ``ERROR`` on the ``rx_agent.serve`` logger. ``rx-agent serve`` prints it to stderr
    (``--log-level``); under your own uvicorn, give that logger a handler before
    starting it, e.g. ``logging.basicConfig(level=logging.INFO)`` (uvicorn's own
    logging config leaves the root logger alone).
    """
    if keep_running and journal is False:
        raise ValueError("keep_running=True needs a journal (a reconnect reads the rest of "
                         "the call from it); drop journal=False")
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise ValueError(f"max_body must be a positive number of bytes, got {max_body!r}")
    agent, store = _agent_and_store(agent_or_factory, session_store)
    service = Service(agent, store, _authenticator(auth), queue=bool(queue),
                      max_body=max_body, feed=install_feed(tracer_provider), journal=journal,
                      keep_running=bool(keep_running))

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "agent": agent.name})

    protocols: list[Route] = []
    paths: dict[str, Any] = {}
    if openai:
        protocols += openai_routes(service)
        paths.update(openai_paths())
    # The routes of a protocol with an extra: on when it is installed (None), required
    # (True) or off (False).
    for name, module, package, wanted in (("a2a", "_a2a_server", "a2a", a2a),
                                          ("agui", "_agui", "ag_ui", agui)):
        if wanted is not None and not isinstance(wanted, bool):
            raise TypeError(f"{name} must be True, False or None, not {wanted!r}")
        if wanted is False:
            continue
        found = _protocol(name, module, package, required=wanted is True)
        if found is not None:
            protocols += found.routes(service)
            paths.update(found.openapi_paths())
    document = openapi(paths)

    async def openapi_json(request: Request) -> Response:
        return JSONResponse(document)

    async def console_page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-cache"})

    async def to_console(request: Request) -> Response:
        return RedirectResponse("/console")

    async def favicon(request: Request) -> Response:  # browsers ask for it on every page
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml",
                            headers={"cache-control": "max-age=86400"})

    session = "/v1/sessions/{session_id}"
    routes: list[Route | Mount] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/openapi.json", openapi_json, methods=["GET"]),
        Route("/metrics", service.metrics_text, methods=["GET"]),
        Route("/v1/plan", service.plan, methods=["GET"]),
        Route("/v1/sessions", service.list_sessions, methods=["GET"]),
        Route(session, service.get_session, methods=["GET"]),
        Route(session, service.delete_session, methods=["DELETE"]),
        Route(session + "/messages", service.post_messages, methods=["POST"]),
        Route(session + "/confirm", service.post_confirm, methods=["POST"]),
        Route(session + "/external-results", service.post_external, methods=["POST"]),
        Route(session + "/interrupt", service.interrupt, methods=["POST"]),
        Route(session + "/runs/{run_id}", service.get_run, methods=["GET"]),
        Route(session + "/runs/{run_id}/events", service.get_run_events, methods=["GET"]),
        Route(session + "/events", service.get_session_events, methods=["GET"]),
        *protocols,
    ]
    if console:
        routes += [
            Route("/", to_console, methods=["GET"]),
            Route("/console", console_page, methods=["GET"]),
            Route("/favicon.ico", favicon, methods=["GET"]),
            Mount("/console/static", StaticFiles(directory=STATIC), name="console"),
        ]

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPError)
        service.metrics.error(exc.code, exc.status)
        return error_response(exc)

    async def on_starlette_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        message = (f"no endpoint {request.method} {request.url.path}"
                   if exc.status_code in (404, 405) else str(exc.detail))
        error = HTTPError(exc.status_code, code, message, exc.headers)
        service.metrics.error(error.code, error.status)
        return error_response(error)

    async def on_crash(request: Request, exc: Exception) -> Response:
        session_id = request.scope.get("path_params", {}).get("session_id")
        log.error("%s %s failed (session %r)", request.method, request.url.path, session_id,
                  exc_info=exc, extra={"session_id": session_id, "run_id": None})
        service.metrics.error("internal_error", 500)
        return error_response(HTTPError(
            500, "internal_error", f"the server failed ({type(exc).__name__}); the server "
            "log has the details"))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        service.metrics.close()

    app = _App(routes=routes, lifespan=lifespan, exception_handlers={
        HTTPError: on_http_error,
        StarletteHTTPException: on_starlette_error,
    }, middleware=[Middleware(CrashAnswer, on_crash=on_crash)])
    app.state.service = service
    logging.getLogger("rx_agent.serve").debug("serving agent %r", agent.name)
    return app
