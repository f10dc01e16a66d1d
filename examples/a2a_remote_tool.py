"""A remote agent as a tool: `A2AAgent(url).as_tool()`.

A weather agent runs as its own A2A service (here `create_app` on a free loopback port;
in practice another process, host or framework). The local lead agent asks it through a
tool: the remote agent's streamed text reaches the lead's stream as `NestedEvent`s, like
a local sub-agent's, and its final reply is the tool's result. Offline: ScriptedModels
play both models.

Needs the a2a and serve extras (from a checkout): pip install -e '.[a2a,serve]'

Run: python examples/a2a_remote_tool.py
"""

from __future__ import annotations

import socket
import threading
import time

from rx_agent import (
    A2AAgent,
    NestedEvent,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    Toolkit,
    ToolUseBlock,
)
from rx_agent.testing import collect


def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city's name.
    """
    return f"sunny and 21 °C in {city}"


def weather_service() -> str:
    """The remote side: a weather agent behind A2A; its base URL."""
    import uvicorn

    from rx_agent.serve import create_app

    tools = Toolkit()
    tools.register_tool(get_weather)
    agent = ReActAgent(name="weather", model=ScriptedModel([
        [ToolUseBlock("w1", "get_weather", {"city": "Paris"})],
        ["It is ", "sunny and 21 °C ", "in Paris."],
    ]), toolkit=tools)
    with socket.socket() as s:  # a free loopback port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(agent, auth={"lead-token-01": "lead"}),
                                           host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    return f"http://127.0.0.1:{port}"


def main() -> None:
    url = weather_service()
    # --8<-- [start:remote]
    weather = A2AAgent(url, headers={"Authorization": "Bearer lead-token-01"}, timeout=30)
    print("remote:", weather.name, "|", weather.description)

    tools = Toolkit()
    tools.register_tool(weather.as_tool())  # task: str in, the remote's final reply out
    lead = ReActAgent(name="lead", toolkit=tools, model=ScriptedModel([
        [ToolUseBlock("c1", "weather", {"task": "What is the weather in Paris?"})],
        "Pack sunglasses: it is sunny in Paris.",
    ]))
    events = collect(lead.stream("Should I pack sunglasses for Paris?",
                                 RuntimeContext(session_id="trip")))
    # --8<-- [end:remote]
    nested = [e for e in events if isinstance(e, NestedEvent)]
    remote_text = "".join(e.event.delta for e in nested
                          if isinstance(e.event, TextBlockDeltaEvent))
    own_text = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
    print("remote said:", remote_text)
    print("nested events from", {e.agent for e in nested}, "for call",
          {e.tool_call_id for e in nested})
    print("lead says:", own_text)


if __name__ == "__main__":
    main()
