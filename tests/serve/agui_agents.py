"""An agent for the AG-UI tests: a rule-based model that uses each kind of tool.

* "weather in X": calls the server's ``get_weather`` tool, then answers from it;
* "pick a city": calls the front end's ``pick_city`` tool (when the run offers it);
* "refund N": calls ``refund``, which asks for approval;
* "plan": writes a two-task list with ``todo_write``;
* "think": streams thinking before its answer; "slow": 60 words, 50 ms apart;
* anything else: ``echo <n>: <text>`` (``n``: the messages the model saw, its system
  prompt included).

Nothing here imports pytest.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from rx_agent import Msg, ReActAgent, SessionStore, Toolkit, tool
from rx_agent.message import ChatUsage, Role
from rx_agent.model import (
    AsyncChatModel,
    ModelChunk,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageChunk,
)
from rx_agent.options import GenerateOptions

__all__ = ["RuleModel", "build"]


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city's name.
    """
    return f"sunny in {city}"


@tool
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: The order number.
    """
    return f"refunded order {order}"


def _call(n: int, name: str, args: dict[str, Any]) -> list[ModelChunk]:
    text = json.dumps(args)
    # Arguments in two fragments, as providers stream them.
    return [ToolCallChunk(index=0, id=f"call-{n}", name=name, arguments=text[:5]),
            ToolCallChunk(index=0, arguments=text[5:], done=True)]


class RuleModel(AsyncChatModel):
    name = "rules"
    provider = "test"

    def __init__(self) -> None:
        self.seen_tools: list[list[str]] = []

    async def astream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]],
                      options: GenerateOptions) -> AsyncIterator[ModelChunk]:
        self.seen_tools.append([t["name"] for t in tools])
        names = {t["name"] for t in tools}
        # The task list's reminder is the last message of a round: look past it.
        said = [m for m in messages if not (m.metadata or {}).get("rx_agent.reminder")]
        last = said[-1]
        n = len(said)
        chunks: list[ModelChunk] = []
        text = last.text
        if last.role is Role.TOOL:
            result = " ".join(str(getattr(b, "output", "")) for b in last.content)
            chunks.append(TextChunk(f"Result: {result}"))
        elif (m := re.search(r"weather in (\w+)", text)) is not None:
            chunks += [TextChunk("Let me check."), *_call(n, "get_weather", {"city": m[1]})]
        elif "pick a city" in text and "pick_city" in names:
            chunks += _call(n, "pick_city", {"region": "Europe"})
        elif (m := re.search(r"refund (\w+)", text)) is not None:
            chunks += _call(n, "refund", {"order": m[1]})
        elif text.startswith("plan") and "todo_write" in names:
            chunks += _call(n, "todo_write", {"todos": [
                {"content": "Pack", "status": "in_progress"},
                {"content": "Travel", "status": "pending"}]})
        elif text.startswith("think"):
            chunks += [ThinkingChunk("Hmm, "), ThinkingChunk("let me see."),
                       TextChunk("Thought about it.")]
        elif text.startswith("fail"):
            yield TextChunk("partial")
            raise RuntimeError("the model broke at /srv/secret/path")
        elif text.startswith("slow"):
            for i in range(60):
                yield TextChunk(f"w{i} ")
                await asyncio.sleep(0.05)
        else:
            words = f"echo {n}: {text}".split(" ")
            chunks += [TextChunk(w if i == 0 else " " + w) for i, w in enumerate(words)]
        for chunk in chunks:
            yield chunk
        yield UsageChunk(ChatUsage(input_tokens=10, output_tokens=4))


def build(store: SessionStore) -> ReActAgent:
    toolkit = Toolkit([get_weather])
    toolkit.register_tool(refund, permission="ask")
    return (ReActAgent.builder().name("helper").model(RuleModel()).toolkit(toolkit)
            .session_store(store).enable_task_list(True).build())
