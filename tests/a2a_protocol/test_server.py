"""The A2A server (``create_app(a2a=...)``), driven by the ``a2a-sdk`` client: the
agent card, streaming and plain sends, tasks, cancel, and the human-in-the-loop pause
as ``input-required``."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from a2a.helpers import get_data_parts
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskState,
)

from rx_agent import ReActAgent, ScriptedModel, Toolkit, ToolUseBlock
from rx_agent.serve import create_app

from .conftest import (
    ALICE,
    TOKENS,
    EchoModel,
    SlowModel,
    collect_stream,
    kinds,
    send,
    user_message,
    wait_for,
)


def weather(city: str) -> str:
    """Get the weather for a city."""
    return f"sunny in {city}"


def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def weather_agent(**kw: object) -> ReActAgent:
    tools = Toolkit()
    tools.register_tool(weather)
    model = ScriptedModel([[ToolUseBlock("c1", "weather", {"city": "Paris"})],
                           ["It is ", "sunny ", "in Paris."]])
    return ReActAgent(name="weather", model=model, toolkit=tools, **kw)  # type: ignore[arg-type]


def refund_agent(permission: str = "ask", external: bool = False) -> ReActAgent:
    tools = Toolkit()
    if external:
        tools.register_tool(refund, external=True)
    else:
        tools.register_tool(refund, permission=permission)  # type: ignore[arg-type]
    model = ScriptedModel([[ToolUseBlock("r1", "refund", {"order": "1234"})],
                           "Done: the order is refunded."])
    return ReActAgent(name="shop", model=model, toolkit=tools)


# -- the agent card ----------------------------------------------------------------------


def test_the_card_names_the_agent_its_skills_streaming_and_bearer_auth(live) -> None:
    server = live(create_app(weather_agent(), auth=TOKENS))
    card = httpx.get(server.url + "/.well-known/agent-card.json").json()  # public
    assert card["name"] == "weather"
    assert "weather" in card["description"]
    assert card["skills"] == [{"id": "weather", "name": "weather", "tags": ["tool"],
                               "description": "Get the weather for a city."}]
    assert card["capabilities"]["streaming"] is True
    assert {i["protocolVersion"] for i in card["supportedInterfaces"]} == {"1.0", "0.3"}
    assert {i["url"] for i in card["supportedInterfaces"]} == {server.url + "/a2a"}
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    assert card["url"] == server.url + "/a2a"  # what a 0.3 client reads


def test_without_tokens_the_card_asks_for_no_auth_and_without_tools_has_one_skill(live) -> None:
    server = live(create_app(ReActAgent(name="chat", model=ScriptedModel(["hi"]))))
    card = httpx.get(server.url + "/.well-known/agent-card.json").json()
    assert "securitySchemes" not in card and "securityRequirements" not in card
    assert [s["id"] for s in card["skills"]] == ["chat"]


def test_openapi_lists_the_a2a_routes_only_when_they_are_served(live) -> None:
    on = live(create_app(weather_agent()))
    paths = httpx.get(on.url + "/openapi.json").json()["paths"]
    assert "post" in paths["/a2a"] and "get" in paths["/.well-known/agent-card.json"]
    off = live(create_app(weather_agent(), a2a=False))
    assert "/a2a" not in httpx.get(off.url + "/openapi.json").json()["paths"]
    assert httpx.get(off.url + "/.well-known/agent-card.json").status_code == 404
    assert httpx.post(off.url + "/a2a", json={}).status_code == 404


# -- sending -------------------------------------------------------------------------------


async def test_a_streaming_send_gives_status_updates_artifact_chunks_and_completed(
    live, clients
) -> None:
    server = live(create_app(weather_agent(), auth=TOKENS))
    client = await clients(server.url, ALICE)
    responses = await collect_stream(client, user_message("Weather in Paris?"))
    assert kinds(responses) == ["task", "working", "working", "working", "artifact",
                                "artifact", "artifact", "artifact", "completed"]
    task = responses[0].task
    assert task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert task.history[0].parts[0].text == "Weather in Paris?"
    call, result = (get_data_parts(r.status_update.status.message.parts)[0]
                    for r in responses[2:4])
    assert call == {"tool_call": {"id": "c1", "name": "weather", "input": {"city": "Paris"}}}
    assert result["tool_result"]["output"] == "sunny in Paris"
    chunks = [r.artifact_update for r in responses if r.HasField("artifact_update")]
    assert [c.artifact.parts[0].text for c in chunks] == ["It is ", "sunny ", "in Paris.", ""]
    assert [(c.append, c.last_chunk) for c in chunks] == [
        (False, False), (True, False), (True, False), (True, True)]
    assert len({c.artifact.artifact_id for c in chunks}) == 1
    assert {r.status_update.task_id for r in responses[1:] if r.HasField("status_update")} \
        == {task.id}


async def test_a_plain_send_answers_the_finished_task_and_get_task_reads_it(
    live, clients
) -> None:
    server = live(create_app(weather_agent(), auth=TOKENS))
    client = await clients(server.url, ALICE, streaming=False)
    [response] = await collect_stream(client, user_message("Weather in Paris?"))
    task = response.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [a.parts[0].text for a in task.artifacts] == ["It is sunny in Paris."]
    again = await client.get_task(GetTaskRequest(id=task.id))
    assert again.artifacts[0].parts[0].text == "It is sunny in Paris."
    assert [m.parts[0].text for m in again.history] == ["Weather in Paris?",
                                                        "It is sunny in Paris."]
    short = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
    assert [m.parts[0].text for m in short.history] == ["It is sunny in Paris."]
    # the task's context is the session the /v1 API shows
    stored = httpx.get(f"{server.url}/v1/sessions/{task.context_id}",
                       headers={"Authorization": f"Bearer {ALICE}"}).json()
    assert [m["role"] for m in stored["messages"]] == ["user", "assistant", "tool", "assistant"]


async def test_a_second_task_on_the_same_context_continues_the_conversation(
    live, clients
) -> None:
    server = live(create_app(ReActAgent(name="echo", model=EchoModel())))
    client = await clients(server.url, streaming=False)
    [first] = await collect_stream(client, user_message("one"))
    [second] = await collect_stream(client, user_message("two",
                                                         context_id=first.task.context_id))
    assert first.task.artifacts[0].parts[0].text == "echo 1: one"
    assert second.task.artifacts[0].parts[0].text == "echo 3: two"
    assert second.task.id != first.task.id


async def test_polling_a_task_sent_with_return_immediately(live, clients) -> None:
    model = SlowModel(["a", "b", "c"], 0.1)
    server = live(create_app(ReActAgent(name="slow", model=model)))
    client = await clients(server.url, streaming=False, polling=True)
    [response] = await collect_stream(client, user_message("go"))
    assert response.task.status.state == TaskState.TASK_STATE_WORKING
    task_id = response.task.id
    states = []
    while True:
        task = await client.get_task(GetTaskRequest(id=task_id))
        states.append(task.status.state)
        if task.status.state == TaskState.TASK_STATE_COMPLETED:
            break
        await asyncio.sleep(0.05)
    assert TaskState.TASK_STATE_WORKING in states
    assert task.artifacts[0].parts[0].text == "abc"


async def test_list_tasks_filters_by_context(live, clients) -> None:
    server = live(create_app(ReActAgent(name="echo", model=EchoModel())))
    client = await clients(server.url, streaming=False)
    [a] = await collect_stream(client, user_message("one", context_id="ctx-a"))
    [b] = await collect_stream(client, user_message("two", context_id="ctx-b"))
    listed = await client.list_tasks(ListTasksRequest())
    assert [t.id for t in listed.tasks] == [b.task.id, a.task.id]  # newest first
    only_a = await client.list_tasks(ListTasksRequest(context_id="ctx-a"))
    assert [t.id for t in only_a.tasks] == [a.task.id]


# -- cancel, subscribe -----------------------------------------------------------------------


async def test_cancel_interrupts_the_running_call(live, clients) -> None:
    model = SlowModel([f"w{i} " for i in range(100)], 0.05)
    server = live(create_app(ReActAgent(name="slow", model=model), auth=TOKENS))
    client = await clients(server.url, ALICE)
    seen: list[str] = []

    async def read() -> None:
        async for r in client.send_message(send(user_message("go"))):
            seen.append(kinds([r])[0])
            if r.HasField("task"):
                task_ids.append(r.task.id)

    task_ids: list[str] = []
    reader = asyncio.ensure_future(read())
    await wait_for(lambda: "artifact" in seen)
    canceled = await client.cancel_task(CancelTaskRequest(id=task_ids[0]))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    await asyncio.wait_for(reader, 10)
    assert seen[-1] == "canceled"
    assert model.cancelled.wait(5)


async def test_subscribe_to_a_running_task_streams_the_rest(live, clients) -> None:
    model = SlowModel(["a", "b", "c", "d"], 0.15)
    server = live(create_app(ReActAgent(name="slow", model=model)))
    client = await clients(server.url)
    task_ids: list[str] = []

    async def read() -> None:
        async for r in client.send_message(send(user_message("go"))):
            if r.HasField("task"):
                task_ids.append(r.task.id)

    reader = asyncio.ensure_future(read())
    await wait_for(lambda: bool(task_ids) and model.started.is_set())
    followed = [r async for r in client.subscribe(SubscribeToTaskRequest(id=task_ids[0]))]
    await reader
    assert kinds(followed)[0] == "task"
    assert kinds(followed)[-1] == "completed"
    assert "artifact" in kinds(followed)


# -- human in the loop -------------------------------------------------------------------------


async def _paused(client, agent_text: str = "Refund order 1234") -> tuple[str, str, list]:
    responses = await collect_stream(client, user_message(agent_text))
    assert kinds(responses)[-1] == "input_required"
    status = responses[-1].status_update.status
    return responses[0].task.id, responses[0].task.context_id, list(status.message.parts)


@pytest.mark.parametrize("answer", [
    {"data": {"approved": True}}, {"data": {"confirmed": True}}, {"text": "yes"},
    {"text": " Approve. "},
])
async def test_a_permission_ask_is_input_required_and_an_approval_resumes_it(
    live, clients, answer
) -> None:
    server = live(create_app(refund_agent(), auth=TOKENS))
    client = await clients(server.url, ALICE)
    task_id, context_id, parts = await _paused(client)
    assert "refund" in parts[0].text and "yes or no" in parts[0].text
    pending = get_data_parts(parts)[0]["input_required"]
    assert pending["kind"] == "confirm"
    assert pending["tool_calls"] == [{"id": "r1", "name": "refund", "input": {"order": "1234"}}]
    resumed = await collect_stream(client, user_message(
        answer.get("text"), data=answer.get("data"), task_id=task_id, context_id=context_id))
    assert resumed[0].task.id == task_id
    assert kinds(resumed)[-1] == "completed"
    outputs = [get_data_parts(r.status_update.status.message.parts)[0]["tool_result"]
               for r in resumed if r.HasField("status_update")
               and r.status_update.status.HasField("message")]
    assert outputs == [{"id": "r1", "name": "refund", "state": "SUCCESS",
                        "output": "refunded 1234"}]
    task = await client.get_task(GetTaskRequest(id=task_id))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.artifacts[-1].parts[0].text == "Done: the order is refunded."


@pytest.mark.parametrize("answer", [{"text": "no"}, {"text": "DENY"},
                                    {"data": {"approved": False, "reason": "not today"}}])
async def test_a_denial_resumes_the_reply_with_the_call_denied(live, clients, answer) -> None:
    server = live(create_app(refund_agent()))
    client = await clients(server.url)
    task_id, _, _ = await _paused(client)
    resumed = await collect_stream(client, user_message(
        answer.get("text"), data=answer.get("data"), task_id=task_id))
    results = [get_data_parts(r.status_update.status.message.parts)[0]["tool_result"]
               for r in resumed if r.HasField("status_update")
               and r.status_update.status.HasField("message")]
    assert [r["state"] for r in results] == ["DENIED"]
    if "reason" in (answer.get("data") or {}):
        assert results[0]["output"] == "not today"
    assert kinds(resumed)[-1] == "completed"


async def test_external_tools_take_their_results_as_a_data_part(live, clients) -> None:
    server = live(create_app(refund_agent(external=True)))
    client = await clients(server.url)
    task_id, _, parts = await _paused(client)
    assert get_data_parts(parts)[0]["input_required"]["kind"] == "external"
    assert "tool_results" in parts[0].text
    resumed = await collect_stream(client, user_message(
        data={"tool_results": [{"id": "r1", "output": "refunded by the shop"}]},
        task_id=task_id))
    assert kinds(resumed)[-1] == "completed"
    task = await client.get_task(GetTaskRequest(id=task_id))
    assert task.artifacts[-1].parts[0].text == "Done: the order is refunded."


async def test_cancel_of_a_paused_task_closes_the_pause(live, clients) -> None:
    server = live(create_app(refund_agent(), auth=TOKENS))
    client = await clients(server.url, ALICE)
    task_id, context_id, _ = await _paused(client)
    canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    session = httpx.get(f"{server.url}/v1/sessions/{context_id}",
                        headers={"Authorization": f"Bearer {ALICE}"}).json()
    assert session["status"] == "idle" and session["pending"] is None


async def test_a_new_message_on_a_paused_context_cancels_the_waiting_task(
    live, clients
) -> None:
    server = live(create_app(refund_agent()))
    client = await clients(server.url)
    task_id, context_id, _ = await _paused(client)
    other = await collect_stream(client, user_message("never mind", context_id=context_id))
    assert kinds(other)[-1] == "completed"
    old = await client.get_task(GetTaskRequest(id=task_id))
    assert old.status.state == TaskState.TASK_STATE_CANCELED


# -- protocol 0.3 ------------------------------------------------------------------------------


def test_a_0_3_client_is_answered_in_0_3(live) -> None:
    server = live(create_app(weather_agent()))
    answer = httpx.post(server.url + "/a2a", json={
        "jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {"message": {
            "kind": "message", "role": "user", "messageId": "m1",
            "parts": [{"kind": "text", "text": "Weather in Paris?"}]}}}).json()
    task = answer["result"]
    assert answer["id"] == 7 and task["kind"] == "task"
    assert task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"] == [{"kind": "text", "text": "It is sunny in Paris."}]
