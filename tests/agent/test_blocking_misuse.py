"""A blocking ``run()`` on the loop's own thread fails clearly instead of hanging
(issue #10, item 12)."""

from __future__ import annotations

import asyncio

import pytest
import reactivex.operators as ops
from conftest import make_agent

from rx_agent import ScriptedModel


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a.call("hi"),
        lambda a: a.stream("hi"),
        lambda a: a.stream("hi").pipe(ops.to_list()),
        lambda a: a.call("hi").pipe(ops.map(lambda m: m.text)),
    ],
    ids=["call", "stream", "stream-piped", "call-piped"],
)
async def test_run_inside_async_code_raises_instead_of_hanging(make: object) -> None:
    agent = make_agent(ScriptedModel(["one", "two"]))
    observable = make(agent)  # type: ignore[operator]
    with pytest.raises(RuntimeError, match=r"would block the running event loop"):
        observable.run()
    # Nothing ran: the agent still answers with the first scripted reply.
    msg = await asyncio.wait_for(agent.acall("hi"), 3)
    assert msg.text == "one"


def test_run_from_plain_code_still_works() -> None:
    agent = make_agent(ScriptedModel(["one", "two"]))
    assert agent.call("hi").run().text == "one"
    events = agent.stream("hi").pipe(ops.to_list()).run()
    assert events[-1].type == "agent_end"
