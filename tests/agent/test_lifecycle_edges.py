"""Lifecycle edges outside the spec's main paths."""

from __future__ import annotations

import asyncio

from rx_agent import ReActAgent, RuntimeContext, ScriptedModel


def test_disposing_after_the_callers_loop_closed_still_frees_the_session() -> None:
    agent = ReActAgent(name="a", model=ScriptedModel(["first", "second"], delay=0.05))
    ctx = RuntimeContext(session_id="s")
    holder = {}

    async def start_and_leave() -> None:
        holder["sub"] = agent.stream("hi", ctx).subscribe(lambda e: None, lambda e: None)
        await asyncio.sleep(0.01)

    asyncio.run(start_and_leave())  # the loop closes with the call mid-stream
    holder["sub"].dispose()
    # The slot was released and the state saved: the session takes the next call.
    assert agent.call_sync("again", RuntimeContext(session_id="s")).text == "second"


def test_models_stream_from_plain_threads_on_the_runtime_loop() -> None:
    from collections.abc import AsyncIterator
    from typing import Any

    from reactivex import operators as ops

    from rx_agent import Msg
    from rx_agent.model import AsyncChatModel, ModelChunk, TextChunk

    class Two(AsyncChatModel):
        async def astream(self, messages: Any, tools: Any, options: Any
                          ) -> AsyncIterator[ModelChunk]:
            for text in ("a", "b"):
                yield TextChunk(text)

    question = [Msg("user", "x")]
    assert Two().stream(question).pipe(ops.to_list()).run() == [TextChunk("a"), TextChunk("b")]
    chunks = ScriptedModel([["x", "y"]], delay=0.01).stream(question).pipe(ops.to_list()).run()
    assert [c.text for c in chunks if isinstance(c, TextChunk)] == ["x", "y"]
