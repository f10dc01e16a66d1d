"""Serve an agent over HTTP: Server-Sent Events, a JSON answer, the web console.

`build(store)` is the factory `rx-agent serve` loads; it runs offline (a small
rule-based model stands in for a real one):

    rx-agent serve examples.serve_app:build --token my-secret-token
    # then open http://127.0.0.1:8000/console#token=my-secret-token

Run as a script, it starts the same app on a free loopback port, posts two
messages with httpx and prints what came back.

Run: python examples/serve_app.py
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from rx_agent import OtelTracingMiddleware, ReActAgent, SessionStore, Toolkit, tool
from rx_agent.message import ChatUsage, Msg
from rx_agent.model import AsyncChatModel, ModelChunk, TextChunk, ToolCallChunk, UsageChunk
from rx_agent.options import GenerateOptions


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city's name.
    """
    return f"sunny and 21 °C in {city}"


class OfflineModel(AsyncChatModel):
    """Calls get_weather when asked about a city's weather, then answers from its result;
    otherwise says what it heard. Words arrive 20 ms apart, like a real stream."""

    name = "offline"
    provider = "example"

    async def astream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]],
                      options: GenerateOptions) -> AsyncIterator[ModelChunk]:
        last = messages[-1]
        asked = re.search(r"weather in (\w+)", last.text, re.IGNORECASE)
        if last.role.value == "user" and asked:
            yield ToolCallChunk(index=0, id=f"call-{len(messages)}", name="get_weather",
                                arguments=json.dumps({"city": asked.group(1)}), done=True)
        else:
            answer = (f"It is {_result(last)}." if last.role.value == "tool"
                      else f"You said: {last.text}")
            for i, word in enumerate(answer.split(" ")):
                await asyncio.sleep(0.02)
                yield TextChunk(word if i == 0 else " " + word)
        yield UsageChunk(ChatUsage(input_tokens=10 * len(messages), output_tokens=8))


def _result(msg: Msg) -> str:
    return " ".join(str(getattr(b, "output", "")) for b in msg.content)


# --8<-- [start:factory]
def build(store: SessionStore) -> ReActAgent:
    """The factory `rx-agent serve examples.serve_app:build` calls with the session store
    (--store URL, default in memory)."""
    return ReActAgent(name="weather", model=OfflineModel(), toolkit=Toolkit([get_weather]),
                      middlewares=[OtelTracingMiddleware()], session_store=store)
# --8<-- [end:factory]


def main() -> None:
    import httpx
    import uvicorn

    from rx_agent import InMemorySessionStore
    from rx_agent.serve import create_app

    # --8<-- [start:serve]
    app = create_app(build, InMemorySessionStore(), auth={"my-secret-token": "alice"})
    with socket.socket() as s:  # a free loopback port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    # --8<-- [end:serve]

    # --8<-- [start:client]
    base = f"http://127.0.0.1:{port}/v1/sessions/trip"
    auth = {"Authorization": "Bearer my-secret-token"}
    types: list[str] = []
    text = ""
    with httpx.stream("POST", base + "/messages", headers=auth,
                      json={"message": "What is the weather in Paris?"}) as resp:
        for line in resp.iter_lines():  # SSE: "event: <type>", "data: <event JSON>"
            if line.startswith("event: ") and line[7:] not in types[-1:]:
                types.append(line[7:])
            elif line.startswith("data: ") and '"text_block_delta"' in line:
                text += json.loads(line[6:])["delta"]
    print("events:", " ".join(types))
    print("streamed:", text)
    answer = httpx.post(base + "/messages", json={"message": "Thanks!"},
                        headers={**auth, "Accept": "application/json"})
    print("reply:", Msg.model_validate(answer.json()).text)
    session = httpx.get(base, headers=auth).json()
    print("stored:", [m["role"] for m in session["messages"]])
    print("without a token:", httpx.get(base).status_code)
    # --8<-- [end:client]
    server.should_exit = True


if __name__ == "__main__":
    main()
