"""A stream's frames skip the app's own middleware once the answer started, but never
middleware a user added: it sees (and may rewrite) every frame, on both routes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rx_agent import ReActAgent
from rx_agent.serve import create_app

from .conftest import SlowModel


class Shouting:
    """Added middleware that upper-cases every body chunk and counts them."""

    seen: list[bytes] = []

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def shout(message: Message) -> None:
            if message["type"] == "http.response.body":
                Shouting.seen.append(message.get("body", b""))
                message = {**message, "body": message.get("body", b"").upper()}
            await send(message)

        await self.app(scope, receive, shout)


@pytest.mark.parametrize("route", ["sse", "openai"])
def test_middleware_added_to_the_app_gets_every_frame(live: Any, route: str) -> None:
    agent = ReActAgent(name="assistant", model=SlowModel(["one ", "two ", "three"], 0.05))
    app = create_app(agent)
    app.add_middleware(Shouting)
    Shouting.seen = []
    server = live(app)
    if route == "sse":
        url, body = "/v1/sessions/s1/messages", {"message": "hi"}
    else:
        url, body = "/v1/chat/completions", {"model": "assistant", "stream": True,
                                             "messages": [{"role": "user", "content": "hi"}]}
    with httpx.stream("POST", server.url + url, json=body, timeout=10) as resp:
        assert resp.status_code == 200
        text = resp.read().decode()
    assert len(Shouting.seen) >= 3  # the deltas came apart: one write each, all through it
    assert text == b"".join(Shouting.seen).decode().upper()
    assert "THREE" in text and "three" not in text
