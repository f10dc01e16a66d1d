"""Bad input and limits on the A2A routes: JSON-RPC error objects with messages that
name the problem (never a 500 or a traceback), the protocol's task-not-found error,
one user never reaching another's task, and a client that disconnects disposing its
call."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    InvalidParamsError,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskNotFoundError,
    TaskState,
    UnsupportedOperationError,
)

from rx_agent import ReActAgent, ScriptedModel
from rx_agent.model import ModelServerError
from rx_agent.serve import create_app

from .conftest import (
    ALICE,
    BOB,
    TOKENS,
    EchoModel,
    SlowModel,
    collect_stream,
    kinds,
    user_message,
    wait_for,
)
from .test_server import refund_agent

V1 = {"A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}"}


def rpc(url: str, body: object, headers: dict[str, str] | None = None,
        **kw: object) -> httpx.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(url + "/a2a", content=raw, headers={
        "content-type": "application/json", **(V1 if headers is None else headers)},
        **kw)  # type: ignore[arg-type]


def error_of(response: httpx.Response) -> dict[str, object]:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["jsonrpc"] == "2.0" and "result" not in body, body
    assert "Traceback" not in response.text
    return body["error"]  # type: ignore[no-any-return]


def send_body(params: object, method: str = "SendMessage", id_: object = 1) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


HELLO = {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hi"}]}}


@pytest.fixture
def echo_server(live):
    return live(create_app(ReActAgent(name="echo", model=EchoModel()), auth=TOKENS,
                           max_body=4096))


# -- malformed requests ----------------------------------------------------------------------


def test_json_that_does_not_parse_is_a_parse_error(echo_server) -> None:
    error = error_of(rpc(echo_server.url, b'{"jsonrpc": "2.0", "id": 1, "method": '))
    assert error["code"] == -32700
    assert "not valid JSON" in str(error["message"])


@pytest.mark.parametrize(("body", "code", "words"), [
    ([send_body(HELLO)], -32600, "batches are not supported"),
    ("hello", -32600, "one JSON-RPC request object"),
    ({"jsonrpc": "1.0", "id": 1, "method": "SendMessage"}, -32600, "'jsonrpc' must be"),
    (send_body(HELLO, method="message/sendd"), -32601, "Method not found"),
    (send_body({"message": {"role": "ROLE_USER"}}), -32602,
     "message.message_id: field is required"),
    (send_body({"message": {"role": "ROLE_USER", "messageId": "m", "parts": []}}), -32602,
     "message.parts"),
    (send_body({"message": {"role": "ROLE_AGENT", "messageId": "m", "parts": [{"text": "x"}]}}),
     -32602, "ROLE_USER"),
    (send_body({"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "x"}],
                            "contextId": "no/slashes"}}), -32602, "contextId: session id"),
    (send_body({"message": "hi"}), -32602, "message.message_id"),
])
def test_malformed_requests_get_json_rpc_errors_that_say_why(echo_server, body, code,
                                                              words) -> None:
    response = rpc(echo_server.url, body)
    error = error_of(response)
    assert error["code"] == code
    assert words in json.dumps(error)


def test_a_body_over_the_limit_is_refused_before_it_is_read(echo_server) -> None:
    big = send_body({"message": {"role": "ROLE_USER", "messageId": "m",
                                 "parts": [{"text": "x" * 10_000}]}})
    error = error_of(rpc(echo_server.url, big))
    assert error["code"] == -32600
    assert "limit of 4096" in str(error["message"]) or "the limit is 4096" in str(
        error["message"])


def test_a_request_without_the_version_header_is_taken_as_0_3(echo_server) -> None:
    error = error_of(rpc(echo_server.url, send_body(HELLO),
                         headers={"Authorization": f"Bearer {ALICE}"}))
    assert error["code"] == -32009  # the 1.0 method name needs A2A-Version: 1.0
    assert "'0.3' is not supported" in str(error["message"])


def test_push_notifications_and_the_extended_card_are_refused_by_name(echo_server) -> None:
    push = error_of(rpc(echo_server.url, send_body(
        {"taskId": "t", "url": "http://127.0.0.1:9/hook"},
        method="CreateTaskPushNotificationConfig")))
    assert push["code"] == -32003 and "push notifications are not supported" in str(
        push["message"])
    card = error_of(rpc(echo_server.url, send_body({}, method="GetExtendedAgentCard")))
    assert card["code"] == -32007


# -- auth --------------------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, "not-a-known-token"])
def test_a_missing_or_wrong_token_is_401_with_a_json_rpc_error(echo_server, token) -> None:
    headers = {"A2A-Version": "1.0"} | ({"Authorization": f"Bearer {token}"} if token else {})
    response = rpc(echo_server.url, send_body(HELLO), headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert "bearer token" in body["error"]["message"]


# -- tasks: unknown ids and other users ---------------------------------------------------------


async def test_an_unknown_task_id_is_the_protocol_s_task_not_found(echo_server, clients) -> None:
    client = await clients(echo_server.url, ALICE)
    with pytest.raises(TaskNotFoundError, match="there is no task 'nope'"):
        await client.get_task(GetTaskRequest(id="nope"))
    with pytest.raises(TaskNotFoundError):
        await client.cancel_task(CancelTaskRequest(id="nope"))
    with pytest.raises(TaskNotFoundError):
        await collect_stream(client, user_message("yes", task_id="nope"))
    error = error_of(rpc(echo_server.url, send_body({"id": "nope"}, method="GetTask")))
    assert error["code"] == -32001


async def test_another_user_s_task_is_never_reachable(live, clients) -> None:
    server = live(create_app(refund_agent(), auth=TOKENS))
    alice, bob = await clients(server.url, ALICE), await clients(server.url, BOB)
    responses = await collect_stream(alice, user_message("Refund order 1234",
                                                         context_id="shared-name"))
    task = responses[0].task
    assert kinds(responses)[-1] == "input_required"
    for attempt in (
        bob.get_task(GetTaskRequest(id=task.id)),
        bob.cancel_task(CancelTaskRequest(id=task.id)),
        collect_stream(bob, user_message("yes", task_id=task.id)),
        collect_stream(bob, user_message("yes", task_id=task.id, context_id="shared-name")),
        _drain(bob.subscribe(SubscribeToTaskRequest(id=task.id))),
    ):
        with pytest.raises(TaskNotFoundError, match=f"there is no task '{task.id}'"):
            await attempt
    assert (await bob.list_tasks(ListTasksRequest())).tasks == []
    # bob's own message on the same context id is bob's own session, not alice's
    theirs = await collect_stream(bob, user_message("hello", context_id="shared-name"))
    assert theirs[0].task.id != task.id
    # alice's task is untouched: still waiting, and hers to answer
    again = await alice.get_task(GetTaskRequest(id=task.id))
    assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert [t.id for t in (await alice.list_tasks(ListTasksRequest())).tasks] == [task.id]


async def _drain(stream) -> None:
    async for _ in stream:
        pass


# -- answers and states -------------------------------------------------------------------------


async def test_an_answer_that_is_neither_yes_nor_no_says_what_the_task_waits_for(
    live, clients
) -> None:
    server = live(create_app(refund_agent()))
    client = await clients(server.url)
    responses = await collect_stream(client, user_message("Refund order 1234"))
    task_id = responses[0].task.id
    with pytest.raises(InvalidParamsError, match=r"waits for approval of refund: answer yes "
                       r"or no"):
        await collect_stream(client, user_message("maybe later", task_id=task_id))
    with pytest.raises(InvalidParamsError, match='"approved" must be true or false'):
        await collect_stream(client, user_message(data={"approved": "sure"}, task_id=task_id))
    task = await client.get_task(GetTaskRequest(id=task_id))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED  # nothing changed
    done = await collect_stream(client, user_message("yes", task_id=task_id))
    assert kinds(done)[-1] == "completed"


async def test_external_results_that_do_not_fit_are_refused_by_name(live, clients) -> None:
    server = live(create_app(refund_agent(external=True)))
    client = await clients(server.url)
    responses = await collect_stream(client, user_message("Refund order 1234"))
    task_id = responses[0].task.id
    with pytest.raises(InvalidParamsError, match="waits for the results of external tools"):
        await collect_stream(client, user_message("yes", task_id=task_id))
    with pytest.raises(InvalidParamsError, match="tool_results"):
        await collect_stream(client, user_message(data={"tool_results": []}, task_id=task_id))
    with pytest.raises(InvalidParamsError, match="r9"):  # the agent's own check: wrong id
        await collect_stream(client, user_message(
            data={"tool_results": [{"id": "r9", "output": "x"}]}, task_id=task_id))


async def test_a_finished_task_takes_no_more_messages(echo_server, clients) -> None:
    client = await clients(echo_server.url, ALICE)
    responses = await collect_stream(client, user_message("hi"))
    task = responses[0].task
    with pytest.raises(UnsupportedOperationError, match="is completed and takes no more "
                       "messages"):
        await collect_stream(client, user_message("again", task_id=task.id))
    with pytest.raises(Exception, match="already completed"):
        await client.cancel_task(CancelTaskRequest(id=task.id))
    with pytest.raises(UnsupportedOperationError, match="nothing more to stream"):
        await _drain(client.subscribe(SubscribeToTaskRequest(id=task.id)))


async def test_a_busy_context_is_refused_with_the_reason(live, clients) -> None:
    model = SlowModel(["a "] * 40, 0.05)
    server = live(create_app(ReActAgent(name="slow", model=model)))
    client = await clients(server.url)
    first = asyncio.ensure_future(collect_stream(client, user_message("go", context_id="c1")))
    await wait_for(model.started.is_set)
    with pytest.raises(UnsupportedOperationError, match="session 'c1' is running a call"):
        await collect_stream(client, user_message("me too", context_id="c1"))
    assert kinds(await first)[-1] == "completed"


@pytest.mark.parametrize("script", [
    [["Let me see", ModelServerError("upstream is down")]],  # after its first words
    [ModelServerError("upstream is down")],  # before any
])
async def test_a_model_that_fails_fails_the_task_with_its_reason(live, clients,
                                                                  script) -> None:
    agent = ReActAgent(name="flaky", model=ScriptedModel(script), max_retries=1)
    server = live(create_app(agent))
    client = await clients(server.url)
    responses = await collect_stream(client, user_message("hi"))
    assert kinds(responses)[-1] == "failed"
    reason = responses[-1].status_update.status.message.parts[0].text
    assert "upstream is down" in reason and "Traceback" not in reason
    task = await client.get_task(GetTaskRequest(id=responses[0].task.id))
    assert task.status.state == TaskState.TASK_STATE_FAILED


# -- disconnects -------------------------------------------------------------------------------


def _raw_stream(url: str, body: dict[str, object]) -> socket.socket:
    """Start a streaming request on a bare socket (closed by the test mid-stream)."""
    host, port = url.removeprefix("http://").split(":")
    raw = json.dumps(body).encode()
    sock = socket.create_connection((host, int(port)))
    sock.sendall(b"POST /a2a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"A2A-Version: 1.0\r\nAccept: text/event-stream\r\n"
                 + f"Content-Length: {len(raw)}\r\n\r\n".encode() + raw)
    return sock


@pytest.mark.parametrize("method", ["SendStreamingMessage", "SendMessage"])
async def test_a_client_that_disconnects_disposes_the_call(live, clients, method) -> None:
    model = SlowModel([f"w{i} " for i in range(200)], 0.05)
    server = live(create_app(ReActAgent(name="slow", model=model)))
    sock = _raw_stream(server.url, send_body({"message": {
        "role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "go"}],
        "contextId": "left"}}, method=method))
    await wait_for(model.started.is_set)
    if method == "SendStreamingMessage":
        assert b"artifactUpdate" in sock.recv(65536) or b"artifactUpdate" in sock.recv(65536)
    started = time.monotonic()
    sock.close()
    assert await asyncio.to_thread(model.cancelled.wait, 5), "the model stream ran on"
    assert time.monotonic() - started < 3
    client = await clients(server.url)
    [task] = (await client.list_tasks(ListTasksRequest(context_id="left"))).tasks
    assert task.status.state == TaskState.TASK_STATE_CANCELED
    assert "disconnected" in task.status.message.parts[0].text
    model.chunks = ["free again"]  # the session is free for the next call
    after = await collect_stream(client, user_message("again", context_id="left"))
    assert kinds(after)[-1] == "completed"


async def test_over_0_3_too_another_user_s_task_is_not_found(live) -> None:
    server = live(create_app(ReActAgent(name="echo", model=EchoModel()), auth=TOKENS))

    def call(token: str, method: str, params: dict[str, object]) -> dict[str, object]:
        return httpx.post(server.url + "/a2a", headers={"Authorization": f"Bearer {token}"},
                          json={"jsonrpc": "2.0", "id": 1, "method": method,
                                "params": params}).json()

    sent = call(ALICE, "message/send", {"message": {
        "kind": "message", "role": "user", "messageId": "m1",
        "parts": [{"kind": "text", "text": "hi"}]}})
    task_id = sent["result"]["id"]
    assert call(ALICE, "tasks/get", {"id": task_id})["result"]["status"]["state"] == "completed"
    error = call(BOB, "tasks/get", {"id": task_id})["error"]
    assert error["code"] == -32001 and task_id in error["message"]
