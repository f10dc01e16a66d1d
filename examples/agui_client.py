"""An AG-UI client: a front end's runs against `POST /v1/agui`, offline.

It starts an agent on a free loopback port and plays a front end: it keeps the
thread's messages, offers a front-end tool (`pick_city`, which the "browser" runs),
answers an approval interrupt with `resume`, and reads the state snapshots. Events
are parsed with the `ag-ui-protocol` package's models (the `agui` extra).

    rx-agent serve examples.agui_client:build    # the same agent for a real front end

Run: python examples/agui_client.py
"""

from __future__ import annotations

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


@tool
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: The order number.
    """
    return f"order {order} refunded"


class OfflineModel(AsyncChatModel):
    """Calls a tool when asked to (the weather, a city picked by the user, a refund) and
    then answers from its result."""

    name = "offline"
    provider = "example"

    async def astream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]],
                      options: GenerateOptions) -> AsyncIterator[ModelChunk]:
        last = messages[-1]
        text = last.text
        n = len(messages)
        if last.role.value == "tool":
            result = " ".join(str(getattr(b, "output", "")) for b in last.content)
            yield TextChunk(f"{result[:1].upper()}{result[1:]}.")
        elif (asked := re.search(r"weather in (\w+)", text)) is not None:
            yield ToolCallChunk(0, f"call-{n}", "get_weather",
                                json.dumps({"city": asked[1]}), done=True)
        elif "pick" in text and any(t["name"] == "pick_city" for t in tools):
            yield ToolCallChunk(0, f"call-{n}", "pick_city", '{"region": "Europe"}', done=True)
        elif (order := re.search(r"refund (\d+)", text)) is not None:
            yield ToolCallChunk(0, f"call-{n}", "refund", json.dumps({"order": order[1]}),
                                done=True)
        else:
            yield TextChunk(f"You said: {text}")
        yield UsageChunk(ChatUsage(input_tokens=10 * n, output_tokens=8))


# --8<-- [start:agent]
def build(store: SessionStore) -> ReActAgent:
    """The agent: a server tool, and a refund that needs the user's approval."""
    toolkit = Toolkit([get_weather])
    toolkit.register_tool(refund, permission="ask")
    return ReActAgent(name="shop", model=OfflineModel(), toolkit=toolkit, session_store=store)
# --8<-- [end:agent]


def main() -> None:
    import uvicorn

    from rx_agent import InMemorySessionStore
    from rx_agent.serve import create_app

    app = create_app(build, InMemorySessionStore(), auth={"front-end-token": "alice"})
    with socket.socket() as s:  # a free loopback port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    front_end(f"http://127.0.0.1:{port}/v1/agui", "front-end-token")
    server.should_exit = True


# --8<-- [start:client]
def front_end(url: str, token: str) -> None:
    import httpx
    from ag_ui.core import Event, RunAgentInput, Tool, ToolMessage, UserMessage
    from pydantic import TypeAdapter

    events_of: TypeAdapter[Any] = TypeAdapter(Event)
    pick_city = Tool(name="pick_city", description="Let the user pick a city on a map",
                     parameters={"type": "object", "properties": {"region": {"type": "string"}}})
    messages: list[Any] = []  # the thread as the front end keeps it
    counter = iter(range(1, 100))

    def remember(events: list[Any]) -> None:
        """Add the run's assistant messages and tool results to the thread, as an AG-UI
        client does: text and tool calls under their message id, arguments appended."""
        made: dict[str, dict[str, Any]] = {}

        def message(message_id: str) -> dict[str, Any]:
            if message_id not in made:
                made[message_id] = {"id": message_id, "role": "assistant", "content": ""}
                messages.append(made[message_id])
            return made[message_id]

        calls: dict[str, dict[str, Any]] = {}
        for e in events:
            if e.type == "TEXT_MESSAGE_CONTENT":
                message(e.message_id)["content"] += e.delta
            elif e.type == "TOOL_CALL_START":
                call = calls[e.tool_call_id] = {"id": e.tool_call_id, "type": "function",
                                                "function": {"name": e.tool_call_name,
                                                             "arguments": ""}}
                message(e.parent_message_id).setdefault("toolCalls", []).append(call)
            elif e.type == "TOOL_CALL_ARGS":
                calls[e.tool_call_id]["function"]["arguments"] += e.delta
            elif e.type == "TOOL_CALL_RESULT":
                messages.append({"id": e.message_id, "role": "tool",
                                 "toolCallId": e.tool_call_id, "content": e.content})

    def run(**extra: Any) -> list[Any]:
        body = RunAgentInput(thread_id="thread-1", run_id=f"run-{next(counter)}",
                             messages=messages, tools=[pick_city], state=None, context=[],
                             forwarded_props={}, **extra)
        with httpx.stream("POST", url, headers={"Authorization": f"Bearer {token}"},
                          content=body.model_dump_json(by_alias=True),
                          timeout=30) as resp:
            resp.raise_for_status()
            events = [events_of.validate_json(line[6:]) for line in resp.iter_lines()
                      if line.startswith("data: ")]
        remember(events)
        return events

    messages.append(UserMessage(id="u1", content="What is the weather in Paris?"))
    events = run()
    print("run 1:", " ".join(e.type for e in events))
    print("  tool:", next(e.content for e in events if e.type == "TOOL_CALL_RESULT"))
    print("  text:", messages[-1]["content"])

    messages.append(UserMessage(id="u2", content="Let me pick a city."))
    events = run()
    finished = events[-1]
    asked = next(e for e in events if e.type == "TOOL_CALL_START")
    print(f"run 2: the agent calls the front end's {asked.tool_call_name}; pending:",
          finished.outcome.pending_tool_call_ids)
    # The "browser" runs its tool and starts the next run with the result.
    messages.append(ToolMessage(id="t1", tool_call_id=asked.tool_call_id, content="Rome"))
    run()
    print("run 3: text:", messages[-1]["content"])

    messages.append(UserMessage(id="u3", content="Please refund 1234."))
    events = run()
    (interrupt,) = events[-1].outcome.interrupts
    print(f"run 4: {events[-1].outcome.type} ({interrupt.reason}): {interrupt.message}")
    events = run(resume=[{"interruptId": interrupt.id, "status": "resolved",
                          "payload": {"approved": True}}])
    print("run 5: text:", messages[-1]["content"])
    state = next(e.snapshot for e in reversed(events) if e.type == "STATE_SNAPSHOT")
    print("state:", json.dumps(state))
# --8<-- [end:client]


if __name__ == "__main__":
    main()
