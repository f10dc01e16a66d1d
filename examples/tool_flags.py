"""Tools that declare their side effects and how an interrupt treats them.

1. ``@tool(side_effect=True)`` in a durable session (a SQLite file): a worker process
   dies while its payment tool runs; the next process does not pay again, and the
   model is told the payment may have gone through.
2. ``@tool(interrupt="finish")``: ``agent.interrupt()`` while the tool runs lets it
   finish and keeps its result; a default tool (``"cancel"``) is cancelled.

Run: python examples/tool_flags.py
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import tempfile
from pathlib import Path

from rx_agent import (
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    session_store_from_url,
    tool,
)

# --8<-- [start:pay]
LEDGER = Path(tempfile.mkdtemp()) / "payments.txt"  # what really happened, per process


@tool(side_effect=True)
def pay(invoice: str) -> str:
    """Pay an invoice (must never happen twice).

    Args:
        invoice: The invoice number.
    """
    with LEDGER.open("a") as out:
        out.write(f"paid {invoice}\n")
    if os.environ.get("CRASH_AFTER_PAYING"):
        os._exit(1)  # the worker dies before the tool returns
    return f"paid {invoice}"
# --8<-- [end:pay]


def worker(url: str, script: list[object]) -> ReActAgent:
    return ReActAgent(name="assistant", model=ScriptedModel(script), toolkit=Toolkit([pay]),
                      session_store=session_store_from_url(url), session_lease_ttl=0.5)


def crashing_worker(url: str, ledger: str) -> None:
    """A worker process that dies inside ``pay``."""
    global LEDGER
    LEDGER = Path(ledger)
    os.environ["CRASH_AFTER_PAYING"] = "1"
    agent = worker(url, [[ToolUseBlock("call-1", "pay", {"invoice": "INV-7"})], "never said"])
    agent.call_sync("Pay invoice INV-7.", RuntimeContext(session_id="billing", user_id="ann"))


def side_effects(url: str) -> None:
    # --8<-- [start:crash]
    child = multiprocessing.get_context("spawn").Process(target=crashing_worker,
                                                         args=(url, str(LEDGER)))
    child.start()
    child.join()
    print("worker exit code:", child.exitcode)

    model = ScriptedModel(["I can't tell whether INV-7 was paid; let me check first."])
    agent = ReActAgent(name="assistant", model=model, toolkit=Toolkit([pay]),
                       session_store=session_store_from_url(url), session_wait=5)
    reply = agent.call_sync("Did it go through?",
                            RuntimeContext(session_id="billing", user_id="ann"))
    (result,) = [r for m in model.calls[0].messages for r in m.tool_results]
    print("the model saw:", result.state.value, "-", result.text.split(":")[0])
    print("payments made:", LEDGER.read_text().splitlines())
    print("reply:", reply.text)
    # --8<-- [end:crash]


RUNNING: list[str] = []  # the tools that started


# --8<-- [start:finish]
@tool(interrupt="finish")
async def save_draft(text: str) -> str:
    """Save the draft (an interrupt waits for it)."""
    RUNNING.append("save_draft")
    await asyncio.sleep(0.2)
    return f"saved {len(text)} characters"


@tool
async def search(query: str) -> str:
    """Search the web (an interrupt cancels it)."""
    RUNNING.append("search")
    await asyncio.sleep(30)
    return "results"


async def interrupts() -> None:
    for call in (ToolUseBlock("c1", "save_draft", {"text": "Dear Bob, ..."}),
                 ToolUseBlock("c2", "search", {"query": "Bob's address"})):
        agent = ReActAgent(name="writer", model=ScriptedModel([[call], "never said"]),
                           toolkit=Toolkit([save_draft, search]))
        ctx = RuntimeContext(session_id="draft")
        reply = asyncio.ensure_future(agent.acall("Save my draft, then look Bob up.", ctx))
        while call.name not in RUNNING:
            await asyncio.sleep(0.01)
        agent.interrupt(ctx)  # while the tool runs
        msg = await reply
        (result,) = [r for m in ctx.agent_state.context for r in m.tool_results]
        print(f"{call.name}: {result.state.value} {result.text!r} "
              f"(reply {msg.generate_reason.value})")
# --8<-- [end:finish]


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        side_effects(f"sqlite:///{Path(folder) / 'sessions.db'}")
    asyncio.run(interrupts())


if __name__ == "__main__":
    main()
