"""Talk to an rx_agent agent with the official `openai` SDK (the OpenAI-compatible routes).

An offline agent (a small rule-based model, and a `get_weather` tool that it runs on
the server) is served on a free loopback port; the client then:

* asks a question (the agent's own tool runs on the server: no tool call reaches the
  client), as one completion and streamed;
* offers a tool of its own, `show_map`: the agent's call to it comes back as
  `tool_calls`, the client runs it and sends the result, and the agent goes on;
* keeps a conversation on the server with the `X-Session-Id` header.

Run: python examples/openai_client.py
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

from rx_agent import ReActAgent, SessionStore, Toolkit, tool
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
    """Calls get_weather for "weather in X" and, when the client offers it, show_map for
    "map of X"; answers from a tool's result; otherwise says what it heard."""

    name = "offline"
    provider = "example"

    async def astream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]],
                      options: GenerateOptions) -> AsyncIterator[ModelChunk]:
        last = messages[-1]
        weather = re.search(r"weather in (\w+)", last.text, re.IGNORECASE)
        where = re.search(r"map of (\w+)", last.text, re.IGNORECASE)
        offered = {t["name"] for t in tools}
        if last.role.value == "user" and weather:
            yield ToolCallChunk(index=0, id=f"call-{len(messages)}", name="get_weather",
                                arguments=json.dumps({"city": weather.group(1)}), done=True)
        elif last.role.value == "user" and where and "show_map" in offered:
            yield ToolCallChunk(index=0, id=f"call-{len(messages)}", name="show_map",
                                arguments=json.dumps({"city": where.group(1)}), done=True)
        else:
            results = [b.text for b in last.tool_results]
            answer = (results[0][:1].upper() + results[0][1:] + "."
                      if last.role.value == "tool" and results else f"You said: {last.text}")
            for i, word in enumerate(answer.split(" ")):
                await asyncio.sleep(0.01)
                yield TextChunk(word if i == 0 else " " + word)
        yield UsageChunk(ChatUsage(input_tokens=10 * len(messages), output_tokens=8))


def build(store: SessionStore) -> ReActAgent:
    """`rx-agent serve examples.openai_client:build` serves the same agent."""
    return ReActAgent(name="weather", model=OfflineModel(), toolkit=Toolkit([get_weather]),
                      session_store=store)


def serve() -> tuple[Any, int]:
    import uvicorn

    from rx_agent import InMemorySessionStore
    from rx_agent.serve import create_app

    app = create_app(build, InMemorySessionStore(), auth={"my-secret-token": "alice"})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    return server, port


def show_map(city: str) -> str:
    """The client's own tool: it runs here, in the client."""
    return f"a map of {city} is on the screen"


def main() -> None:
    server, port = serve()
    # --8<-- [start:client]
    from openai import OpenAI

    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="my-secret-token")
    print("models:", [m.id for m in client.models.list()])

    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    answer = client.chat.completions.create(model="weather", messages=ask)
    print("answer:", answer.choices[0].message.content)

    stream = client.chat.completions.create(model="weather", messages=ask, stream=True,
                                            stream_options={"include_usage": True})
    pieces, usage = [], None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        usage = chunk.usage or usage
    print("streamed:", "".join(pieces), f"({len(pieces)} pieces,",
          f"{usage.total_tokens if usage else 0} tokens)")
    # --8<-- [end:client]

    # --8<-- [start:tools]
    tools = [{"type": "function", "function": {
        "name": "show_map", "description": "Show a map of a city on the user's screen.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}]
    messages: list[Any] = [{"role": "user", "content": "Show me a map of Rome"}]
    first = client.chat.completions.create(model="weather", messages=messages, tools=tools)
    message = first.choices[0].message
    print("finish_reason:", first.choices[0].finish_reason)
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls or []:
        args = json.loads(call.function.arguments)
        print(f"the client runs {call.function.name}({args})")
        messages.append({"role": "tool", "tool_call_id": call.id,
                         "content": show_map(**args)})
    final = client.chat.completions.create(model="weather", messages=messages, tools=tools)
    print("after the tool:", final.choices[0].message.content)
    # --8<-- [end:tools]

    # --8<-- [start:session]
    session = {"X-Session-Id": "trip"}
    client.chat.completions.create(model="weather", extra_headers=session, messages=[
        {"role": "user", "content": "What is the weather in Oslo?"}])
    client.chat.completions.create(model="weather", extra_headers=session, messages=[
        {"role": "user", "content": "Thanks!"}])
    import httpx

    stored = httpx.get(f"http://127.0.0.1:{port}/v1/sessions/trip",
                       headers={"Authorization": "Bearer my-secret-token"}).json()
    print("stored:", [m["role"] for m in stored["messages"]])
    # --8<-- [end:session]
    server.should_exit = True


if __name__ == "__main__":
    main()
