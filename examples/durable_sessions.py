"""Durable sessions in one SQLite file: a restart, a crashed worker, a busy session,
and a confirmation answered by another worker.

Each "worker" below opens its own store on the same file and builds its own agent,
as separate processes would; the file lives in a temporary directory.

Run: python examples/durable_sessions.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from rx_agent import (
    AgentState,
    ConfirmResult,
    Msg,
    ReActAgent,
    RequireUserConfirmEvent,
    RuntimeContext,
    ScriptedModel,
    SessionBusyError,
    SessionKey,
    SessionRecoveredEvent,
    Toolkit,
    ToolResultBlock,
    ToolUseBlock,
    UserConfirmResultEvent,
    session_store_from_url,
    tool,
)

REFUNDS: list[str] = []


@tool(permission="ask")
def refund(order: str) -> str:
    """Refund an order (asks the user first).

    Args:
        order: The order number.
    """
    REFUNDS.append(order)
    return f"refunded {order}"


def alice(session: str = "support-42") -> RuntimeContext:
    return RuntimeContext(session_id=session, user_id="alice")


def show(state: AgentState | None) -> list[str]:
    assert state is not None
    lines = []
    for m in state.context:
        parts = [f"{b.name}({b.input})" if isinstance(b, ToolUseBlock)
                 else f"{b.state.value}: {b.output}" if isinstance(b, ToolResultBlock)
                 else m.text for b in m.content]
        lines.append(f"{m.role.value}: {' '.join(parts)}")
    return lines


# --8<-- [start:worker]
def worker(url: str, script: list[Any], **options: Any) -> ReActAgent:
    """One worker's agent: its own store object on the shared database."""
    return ReActAgent(name="assistant", model=ScriptedModel(script),
                      toolkit=Toolkit([refund]), session_store=session_store_from_url(url),
                      **options)
# --8<-- [end:worker]


async def restart(url: str) -> None:
    # --8<-- [start:restart]
    first = worker(url, ["Noted: order 1234."])
    await first.acall("My order number is 1234.", alice())
    await first.session_store.aclose()  # the process ends

    second = worker(url, ["Your order is 1234."])  # a new process, the same file
    reply = await second.acall("What was my order number?", alice())
    seen = second.model.calls[0].messages
    print(f"after a restart: {reply.text!r}, the model saw {len(seen)} messages")
    # --8<-- [end:restart]
    await second.session_store.aclose()


async def recovery(url: str) -> None:
    # --8<-- [start:recovery]
    # What a worker killed while its tool ran leaves behind: a tool call, no result.
    store = session_store_from_url(url)
    await store.asave(SessionKey("alice", "crashed"), AgentState(
        session_id="crashed", user_id="alice", context=[
            Msg("user", "Refund order 1234."),
            Msg("assistant", [ToolUseBlock("r1", "refund", {"order": "1234"})]),
        ]))

    agent = worker(url, ["The refund did not finish. Shall I try again?"])
    async for event in agent.astream("Is my refund done?", alice("crashed")):
        if isinstance(event, SessionRecoveredEvent):
            print("recovered:", event.tool_call_ids)
    for line in show(await store.aload(SessionKey("alice", "crashed"))):
        print("  " + line)
    # --8<-- [end:recovery]
    await store.aclose()
    await agent.session_store.aclose()


async def busy(url: str) -> None:
    # --8<-- [start:busy]
    store = session_store_from_url(url)
    held = await store.aacquire_lease(SessionKey("alice", "support-42"), "another-worker",
                                      ttl=30, wait=0)
    agent = worker(url, ["never said"], session_wait=0.2)
    try:
        await agent.acall("Anyone there?", alice())
    except SessionBusyError as exc:
        print(f"busy: {exc.session_id} (held by {exc.holder})")
    await store.arelease_lease(held)
    # --8<-- [end:busy]
    await store.aclose()
    await agent.session_store.aclose()


async def confirm_elsewhere(url: str) -> None:
    # --8<-- [start:hitl]
    asking = worker(url, [[ToolUseBlock("r2", "refund", {"order": "1234"})]])
    ask = None
    async for event in asking.astream("Please refund order 1234.", alice("refund")):
        if isinstance(event, RequireUserConfirmEvent):
            ask = event
    assert ask is not None
    print(f"worker A asks before {ask.tool_calls[0].name}, refunds so far: {REFUNDS}")

    # The user's answer reaches another worker: it resumes from the stored state.
    answering = worker(url, ["Order 1234 is refunded."])
    answer = UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=[
        ConfirmResult(ask.tool_calls[0], confirmed=True)])
    reply = await answering.acall(answer, alice("refund"))
    print(f"worker B: {reply.text!r}, refunds: {REFUNDS}")
    # --8<-- [end:hitl]
    await asking.session_store.aclose()
    await answering.session_store.aclose()


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # --8<-- [start:url]
        url = f"sqlite:///{Path(tmp) / 'sessions.db'}"  # sqlite:////tmp/.../sessions.db
        # --8<-- [end:url]
        await restart(url)
        await recovery(url)
        await busy(url)
        await confirm_elsewhere(url)


if __name__ == "__main__":
    asyncio.run(main())
