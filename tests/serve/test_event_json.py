"""The JSON the server streams and records for an event is ``model_dump_json()``'s
(``Call.note`` calls the serializer directly)."""

from __future__ import annotations

import asyncio
from typing import Any

from rx_agent import ReActAgent, ScriptedModel, Toolkit, ToolUseBlock
from rx_agent.serve._calls import Call, CallRunner
from rx_agent.serve._guard import SessionGuard
from rx_agent.serve._metrics import Metrics
from rx_agent.serve._runs import RunLog
from rx_agent.session import InMemorySessionStore, SessionKey


def echo(text: str) -> str:
    """Echo the text."""
    return f"«{text}» \\ \"quoted\" \u2603"


def test_every_event_is_recorded_as_model_dump_json_gives_it() -> None:
    script: list[Any] = [[ToolUseBlock(id="c1", name="echo", input={"text": "naïve ☃"})],
                         ["The ", "answer ", "\"is\" \n42 ☃."]]
    agent = ReActAgent(name="j", model=ScriptedModel(script), toolkit=Toolkit([echo]))

    async def main() -> None:
        runs = RunLog()
        runner = CallRunner(agent, SessionGuard(InMemorySessionStore(), 30.0, queue=False),
                            runs, Metrics())
        key = SessionKey("u", "s")
        call = Call(runner, None, runs.start("r1", key, "sse"), None, "sse", 0.0, [])  # type: ignore[arg-type]
        events = [e async for e in agent.astream("go ☃")]
        assert len(events) > 10
        for i, event in enumerate(events):
            seq, data = call.note(event)
            assert seq == i
            assert data == event.model_dump_json()
        assert call.result is not None and "42" in call.result.text

    asyncio.run(main())
