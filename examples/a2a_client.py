"""An rx_agent agent over the A2A protocol, spoken to with the official `a2a-sdk` client.

The shop agent is served by `create_app` (the same app `rx-agent serve` runs), here on a
free loopback port. The client reads the agent card, streams a task (the reply's text
arrives as artifact chunks), meets a pause for approval (`input-required`), answers it
with "yes", and reads the finished task back. Offline: a ScriptedModel plays the model.

Needs the a2a and serve extras (from a checkout): pip install -e '.[a2a,serve]'

Run: python examples/a2a_client.py
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid

from rx_agent import ReActAgent, ScriptedModel, Toolkit, ToolUseBlock


def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: The order number.
    """
    return f"order {order} refunded"


def build() -> ReActAgent:
    tools = Toolkit()
    tools.register_tool(refund, permission="ask")  # a person approves every refund
    model = ScriptedModel([
        ["Order 1234 ", "ships ", "tomorrow."],
        [ToolUseBlock("c1", "refund", {"order": "1234"})],
        "Done: order 1234 is refunded.",
    ])
    return ReActAgent(name="shop", model=model, toolkit=tools)


def serve(app: object) -> str:
    import uvicorn

    with socket.socket() as s:  # a free loopback port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,  # type: ignore[arg-type]
                                           log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    return f"http://127.0.0.1:{port}"


# --8<-- [start:client]
async def talk(url: str) -> None:
    import httpx
    from a2a.client import ClientConfig, create_client
    from a2a.helpers import get_message_text
    from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

    def ask(text: str, task_id: str = "", context_id: str = "") -> SendMessageRequest:
        return SendMessageRequest(message=Message(
            message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)],
            task_id=task_id, context_id=context_id))

    def state(value: int) -> str:
        return TaskState.Name(value).removeprefix("TASK_STATE_").lower()

    auth = {"Authorization": "Bearer shop-token-1"}
    async with httpx.AsyncClient(headers=auth) as http:
        client = await create_client(url, ClientConfig(httpx_client=http))
        card = httpx.get(url + "/.well-known/agent-card.json").json()
        print("card:", card["name"], "| skills:", [s["id"] for s in card["skills"]],
              "| streaming:", card["capabilities"]["streaming"])

        # A streamed task: status updates, then the reply's text in artifact chunks.
        states, chunks = [], []
        async for event in client.send_message(ask("Where is order 1234?")):
            if event.HasField("task"):
                context_id = event.task.context_id  # the session: later tasks continue it
            elif event.HasField("status_update"):
                states.append(state(event.status_update.status.state))
            elif event.HasField("artifact_update"):
                chunks.append(event.artifact_update.artifact.parts[0].text)
        print("streamed:", [c for c in chunks if c], "| states:", states)

        # A tool that needs approval pauses the task: input-required, with the question.
        async for event in client.send_message(ask("Refund it, please.",
                                                   context_id=context_id)):
            if event.HasField("task"):
                task_id = event.task.id
            elif event.HasField("status_update"):
                status = event.status_update.status
        print(state(status.state) + ":", get_message_text(status.message).splitlines()[0])

        # The answer goes to the same task: "yes" (or a data part {"approved": true}).
        async for event in client.send_message(ask("yes", task_id=task_id)):
            if event.HasField("status_update"):
                status = event.status_update.status
        task = await client.get_task(GetTaskRequest(id=task_id))
        print("answered:", state(task.status.state), "|",
              task.artifacts[-1].parts[0].text)
        await client.close()
# --8<-- [end:client]


def main() -> None:
    from rx_agent.serve import create_app

    url = serve(create_app(build(), auth={"shop-token-1": "alice"}))
    asyncio.run(talk(url))


if __name__ == "__main__":
    main()
