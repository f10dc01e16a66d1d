"""Agents as a service: an HTTP/SSE server on Starlette and uvicorn (the ``serve`` extra).

* :func:`create_app`: any agent (or a factory taking a session store) as an ASGI app;
* ``rx-agent serve MODULE:ATTR``: the same app on uvicorn, one or many workers.

Layout: ``_app`` builds the routes, ``_service`` holds the endpoint handlers,
``_calls`` runs one call per request (SSE or JSON), ``_guard`` keeps one call per
session (409 or queue), ``_auth`` maps bearer tokens to user ids, ``_body`` reads and
checks request bodies, ``_errors`` turns every failure into a JSON answer, ``_runs``
remembers recent calls (replay, the console's timeline), ``_metrics`` counts for
Prometheus, ``_spans`` feeds OpenTelemetry spans to the console, ``_openapi``
describes the endpoints, ``_cli`` is the command. ``_openai_api`` (with
``_openai_request``, ``_openai_chunks``, ``_openai_responses``, ``_openai_input``)
serves the OpenAI-compatible routes; ``_agui`` serves AG-UI (the ``agui`` extra;
``_agui_input`` reads a ``RunAgentInput``, ``_agui_events`` writes the events).
"""

from __future__ import annotations

try:
    import prometheus_client  # noqa: F401
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised with the extra missing
    raise ImportError(
        f"rx_agent.serve needs the serve extra ({exc.name} is missing): "
        "pip install 'rx-agent[serve]' (from a checkout: pip install -e '.[serve]')"
    ) from exc

from .. import _publish
from ._app import create_app
from ._auth import TokenAuth

__all__ = ["TokenAuth", "create_app"]

_publish.publish_all(globals(), __all__)
