"""A confirm-and-resume conversation without a CLI: the agent asks before it sends
an email, the "user" edits the recipient and approves, and the reply goes on.

Run: python examples/hitl_confirm.py
"""

from __future__ import annotations

import asyncio

from rx_agent import (
    AgentResultEvent,
    ConfirmResult,
    ReActAgent,
    RequireUserConfirmEvent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolResultEndEvent,
    ToolUseBlock,
    UserConfirmResultEvent,
    tool,
)

SENT: list[str] = []


@tool(permission="ask")
async def send_email(to: str, subject: str) -> str:
    """Send an email.

    Args:
        to: Recipient address.
        subject: Subject line.
    """
    SENT.append(f"{to}: {subject}")
    return f"sent to {to}"


async def main() -> None:
    model = ScriptedModel([
        [ToolUseBlock(id="e1", name="send_email",
                      input={"to": "boss@example.com", "subject": "Weekly report"})],
        "The weekly report is on its way.",
    ])
    agent = ReActAgent(name="mailer", model=model, toolkit=Toolkit([send_email]),
                       sys_prompt="You send emails for the user.")
    ctx = RuntimeContext(session_id="alice-mail", user_id="alice")

    ask: RequireUserConfirmEvent | None = None
    async for event in agent.astream("Send my weekly report", ctx):
        if isinstance(event, RequireUserConfirmEvent):
            ask = event
        elif isinstance(event, AgentResultEvent):
            print(f"1st reply ends with {event.result.generate_reason}")
    assert ask is not None
    call = ask.tool_calls[0]
    print(f"agent asks to run {call.name}({call.input})")

    # The user fixes the recipient, approves, and remembers nothing.
    edited = call.model_copy(update={"input": {**call.input, "to": "team@example.com"}})
    answer = UserConfirmResultEvent(reply_id=ask.reply_id,
                                    confirm_results=[ConfirmResult(edited, True)])
    async for event in agent.astream(answer, ctx):
        if isinstance(event, ToolResultEndEvent):
            print(f"tool {event.tool_call_name} ended: {event.state}")
        elif isinstance(event, AgentResultEvent):
            print(f"2nd reply: {event.result.text!r} ({event.result.generate_reason})")
    print(f"sent: {SENT}")


if __name__ == "__main__":
    asyncio.run(main())
