"""A support agent with a knowledge base (``RAGMiddleware`` over ``SqliteKnowledge``)
and long-term memory per user (``LongTermMemoryMiddleware`` over
``SqliteLongTermMemory``), both in one SQLite file, offline.

Run: python examples/support_desk.py
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path

from rx_agent import (
    Document,
    LongTermMemoryMiddleware,
    RAGMiddleware,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    SqliteKnowledge,
    SqliteLongTermMemory,
    ToolUseBlock,
)

# --8<-- [start:agent]
HANDBOOK = [
    Document(text="Customers can ask for a refund within 30 days of purchase. Refunds "
                  "are paid back to the original payment method.", source="refunds.md"),
    Document(text="Express shipping arrives the next working day when ordered before "
                  "noon.", source="shipping.md"),
]


def support_agent(model: ScriptedModel, db: Path) -> ReActAgent:
    knowledge = SqliteKnowledge(db)
    memory = SqliteLongTermMemory(db)  # the same file: separate tables
    return ReActAgent(
        name="support",
        sys_prompt="You are a support agent. Answer from the handbook.",
        model=model,
        middlewares=[RAGMiddleware(knowledge, top_k=1), LongTermMemoryMiddleware(memory)],
    )
# --8<-- [end:agent]


def last_input(model: ScriptedModel) -> list[str]:
    """What the injected messages of the model's last call held, one line each."""
    seen = []
    for msg in model.calls[-1].messages:
        if msg.text.startswith("<"):
            tag = msg.text.splitlines()[0]
            items = [re.sub(r"\[m[0-9a-f]+\] ", "", line) for line in msg.text.splitlines()
                     if line.startswith(("[1] source:", "- ["))]
            seen.append(f"{tag} {'; '.join(items)}")
    return seen


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "support.db"
        asyncio.run(SqliteKnowledge(db).add(HANDBOOK))

        # Ada, Monday: the model remembers how she paid and answers from the handbook.
        monday = ScriptedModel([
            [ToolUseBlock("c1", "remember", {"fact": "The user pays by credit card."})],
            "You can ask for a refund within 30 days [1].",
        ])
        ada = RuntimeContext(session_id="monday", user_id="ada")
        reply = support_agent(monday, db).call_sync("Can I still get a refund? I paid by "
                                                    "credit card.", ada)
        print("ada/monday:", reply.text)
        for line in last_input(monday):
            print("  saw:", line)

        # Ada, Friday, a new session: the handbook and her memory are both there.
        friday = ScriptedModel(["Refunds go back to your credit card [1]."])
        reply = support_agent(friday, db).call_sync(
            "Where does my refund go?", RuntimeContext(session_id="friday", user_id="ada"))
        print("ada/friday:", reply.text)
        for line in last_input(friday):
            print("  saw:", line)

        # Bob shares nothing with Ada.
        bob = ScriptedModel(["Express orders arrive the next working day [1]."])
        reply = support_agent(bob, db).call_sync(
            "How fast is express shipping?", RuntimeContext(session_id="friday", user_id="bob"))
        print("bob/friday:", reply.text)
        for line in last_input(bob):
            print("  saw:", line)


if __name__ == "__main__":
    main()
