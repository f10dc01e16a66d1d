"""AG-UI over real HTTP: every event validates against the ``ag-ui-protocol`` models,
front-end tools round-trip, approvals are interrupts, bad input is a clear 4xx, users
are isolated, and a client that leaves disposes the call."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, TypeAdapter

from rx_agent import (
    InMemorySessionStore,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    SessionKey,
    Toolkit,
    ToolUseBlock,
    tool,
)
from rx_agent.serve import create_app

from .agui_agents import RuleModel, build
from .conftest import SlowModel

ag_ui = pytest.importorskip("ag_ui.core", reason="the agui extra: pip install -e '.[agui]'")

EVENT: TypeAdapter[Any] = TypeAdapter(ag_ui.Event)
PICK_CITY = {"name": "pick_city", "description": "Let the user pick a city on a map",
             "parameters": {"type": "object", "properties": {"region": {"type": "string"}}}}


def _no_extras(model: Any, where: str) -> None:
    """Nothing the protocol does not define (its models keep unknown fields)."""
    if isinstance(model, BaseModel):
        assert not model.model_extra, f"{where} has fields the protocol lacks: {model.model_extra}"
        for name in type(model).model_fields:
            _no_extras(getattr(model, name), f"{where}.{name}")
    elif isinstance(model, list):
        for i, item in enumerate(model):
            _no_extras(item, f"{where}[{i}]")


def parse(body: str) -> list[dict[str, Any]]:
    """The AG-UI events of an SSE body, each validated against the protocol's models."""
    events = []
    for block in body.split("\n\n"):
        data = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
        if not data:
            continue
        event = json.loads("\n".join(data))
        _no_extras(EVENT.validate_python(event), event["type"])
        events.append(event)
    return events


class Client:
    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url + "/v1/agui"
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.runs = 0

    def post(self, body: Any, **kw: Any) -> httpx.Response:
        return httpx.post(self.url, json=body, headers=self.headers, timeout=30, **kw)

    def run(self, thread: str, messages: list[dict[str, Any]], **extra: Any
            ) -> list[dict[str, Any]]:
        self.runs += 1
        resp = self.post({"threadId": thread, "runId": f"run-{self.runs}",
                          "messages": messages, **extra})
        assert resp.status_code == 200, resp.text
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = parse(resp.text)
        assert events[0] == {"type": "RUN_STARTED", "threadId": thread,
                             "runId": f"run-{self.runs}", "protocolVersion": "1.0"}
        assert events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
        return events


def user(text: str, n: int = 0) -> dict[str, Any]:
    return {"id": f"u{n}", "role": "user", "content": text}


ASSISTANT = {"id": "a0", "role": "assistant", "content": "..."}


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


@pytest.fixture
def server(live: Any) -> Any:
    return live(create_app(build, InMemorySessionStore()))


def test_a_run_with_a_server_tool_streams_text_tool_calls_results_and_state(server: Any) -> None:
    events = Client(server.url).run("t1", [user("weather in Paris")])
    assert types(events) == [
        "RUN_STARTED", "STATE_SNAPSHOT",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_ARGS", "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
        "STATE_SNAPSHOT", "RUN_FINISHED"]
    first, start = events[2], events[5]
    # The text and the tool calls of one model call are one assistant message.
    assert start["parentMessageId"] == first["messageId"]
    assert start["toolCallName"] == "get_weather"
    args = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS")
    assert json.loads(args) == {"city": "Paris"}
    result = events[9]
    assert result["toolCallId"] == start["toolCallId"] and result["content"] == "sunny in Paris"
    assert events[10]["messageId"] not in (first["messageId"], result["messageId"])
    assert text(events) == "Let me check.Result: sunny in Paris"
    assert events[-2]["snapshot"] == {"sessionId": "t1", "status": "idle", "tasks": [],
                                      "pending": None}
    finished = events[-1]
    assert "outcome" not in finished  # success
    assert finished["usage"] == [{"provider": "test", "model": "rules", "inputTokens": 20,
                                  "outputTokens": 8, "totalTokens": 28}]
    assert finished["metadata"] == {"generateReason": "MODEL_STOP"}


def test_thinking_is_reasoning_events_and_the_task_list_is_state(server: Any) -> None:
    client = Client(server.url)
    events = client.run("t1", [user("think")])
    assert types(events)[2:8] == ["REASONING_START", "REASONING_MESSAGE_START",
                                  "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT",
                                  "REASONING_MESSAGE_END", "REASONING_END"]
    assert "".join(e["delta"] for e in events
                   if e["type"] == "REASONING_MESSAGE_CONTENT") == "Hmm, let me see."
    assert text(events) == "Thought about it."

    events = client.run("t1", [user("think"), ASSISTANT, user("plan", 1)])
    tasks = [{"content": "Pack", "status": "in_progress"},
             {"content": "Travel", "status": "pending"}]
    snapshots = [e["snapshot"] for e in events if e["type"] == "STATE_SNAPSHOT"]
    # At the start, right after todo_write's result, and at the end.
    assert [s["tasks"] for s in snapshots] == [[], tasks, tasks]
    assert [s["status"] for s in snapshots] == ["running", "running", "idle"]
    i = types(events).index("TOOL_CALL_RESULT")
    assert events[i + 1]["type"] == "STATE_SNAPSHOT"


def test_front_end_tools_end_the_run_and_their_results_resume_it(live: Any) -> None:
    agent = build(InMemorySessionStore())
    model = agent.model
    assert isinstance(model, RuleModel)
    client = Client(live(create_app(agent)).url)
    history = [user("pick a city")]
    events = client.run("t1", history, tools=[PICK_CITY])
    assert "pick_city" in model.seen_tools[-1] and "get_weather" in model.seen_tools[-1]
    start = next(e for e in events if e["type"] == "TOOL_CALL_START")
    assert start["toolCallName"] == "pick_city"
    assert "TOOL_CALL_RESULT" not in types(events)  # the client runs it
    assert events[-1]["outcome"] == {"type": "success",
                                     "pendingToolCallIds": [start["toolCallId"]]}
    assert events[-2]["snapshot"]["status"] == "paused"
    assert events[-2]["snapshot"]["pending"] == {
        "kind": "tool_results", "replyId": events[-2]["snapshot"]["pending"]["replyId"],
        "toolCalls": [{"id": start["toolCallId"], "name": "pick_city",
                       "arguments": {"region": "Europe"}}]}
    # The agent's own toolkit did not keep the front end's tool.
    assert "pick_city" not in agent.toolkit

    call = {"id": start["toolCallId"], "type": "function",
            "function": {"name": "pick_city", "arguments": '{"region": "Europe"}'}}
    history += [{"id": start["parentMessageId"], "role": "assistant", "toolCalls": [call]},
                {"id": "tm1", "role": "tool", "toolCallId": start["toolCallId"],
                 "content": "Rome"}]
    events = client.run("t1", history, tools=[PICK_CITY])
    assert text(events) == "Result: Rome"
    assert "outcome" not in events[-1] and events[-2]["snapshot"]["status"] == "idle"


def test_front_end_tool_results_that_do_not_fit_the_pause_are_refused(server: Any) -> None:
    client = Client(server.url)
    events = client.run("t1", [user("pick a city")], tools=[PICK_CITY])
    call_id = events[-1]["outcome"]["pendingToolCallIds"][0]

    def answer(*tool_messages: dict[str, Any], extra: tuple[Any, ...] = ()) -> httpx.Response:
        return client.post({"threadId": "t1", "runId": "r", "tools": [PICK_CITY],
                            "messages": [ASSISTANT, *tool_messages, *extra]})

    wrong = answer({"id": "x", "role": "tool", "toolCallId": "nope", "content": "Rome"})
    assert wrong.status_code == 409
    assert "answers tool call 'nope', which the thread is not waiting on" in wrong.text
    both = answer({"id": "x", "role": "tool", "toolCallId": call_id, "content": "Rome"},
                  extra=(user("and more"),))
    assert both.status_code == 400 and "cannot add new messages as well" in both.text
    twice = answer(*[{"id": f"x{i}", "role": "tool", "toolCallId": call_id, "content": "R"}
                     for i in range(2)])
    assert twice.status_code == 400 and "must answer each pending call once" in twice.text


def test_a_front_end_tool_may_not_shadow_an_agent_tool(server: Any) -> None:
    resp = Client(server.url).post({
        "threadId": "t1", "runId": "r1", "messages": [user("hi")],
        "tools": [{"name": "get_weather", "description": "the browser's own"}]})
    assert resp.status_code == 400
    assert resp.json()["error"] == {"code": "bad_run_input", "message": (
        "tools: 'get_weather' is the name of one of the agent's own tools (which run on the "
        "server); give the front-end tool another name")}
    bad = Client(server.url).post({"threadId": "t1", "runId": "r1", "messages": [user("hi")],
                                   "tools": [{"name": "no spaces", "description": ""}]})
    assert bad.status_code == 400 and "tool name 'no spaces' is invalid" in bad.text


def _approval(client: Client, thread: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    events = client.run(thread, [user("refund 42")])
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    return events, outcome["interrupts"][0]


def test_an_approval_pause_is_an_interrupt_and_resume_approves_it(server: Any) -> None:
    client = Client(server.url)
    events, interrupt = _approval(client, "t1")
    start = next(e for e in events if e["type"] == "TOOL_CALL_START")
    pending = events[-2]["snapshot"]["pending"]
    assert pending["kind"] == "approval"
    assert interrupt == {
        "id": pending["replyId"], "reason": "tool_approval",
        "message": 'Approve this tool call: refund({"order": "42"})',
        "toolCallId": start["toolCallId"],
        "responseSchema": interrupt["responseSchema"],
        "metadata": {"toolCalls": [{"id": start["toolCallId"], "name": "refund",
                                    "arguments": {"order": "42"}}]}}
    assert interrupt["responseSchema"]["required"] == ["approved"]

    # A run with nothing new reports the thread and the same pause (a reloaded page
    # catches up).
    again = client.run("t1", [user("refund 42"), ASSISTANT])
    assert types(again) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT",
                            "RUN_FINISHED"]
    assert again[-1]["outcome"]["interrupts"] == [interrupt]
    stored = again[1]["messages"]
    assert [(m["role"], m.get("content")) for m in stored] == [("user", "refund 42"),
                                                               ("assistant", None)]
    assert stored[1]["toolCalls"] == [{"id": start["toolCallId"], "type": "function",
                                       "function": {"name": "refund",
                                                    "arguments": '{"order": "42"}'}}]

    events = client.run("t1", [user("refund 42"), ASSISTANT], resume=[{
        "interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}])
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == start["toolCallId"]
    assert result["content"] == "refunded order 42" and "metadata" not in result
    assert text(events) == "Result: refunded order 42"
    assert "outcome" not in events[-1]


def test_a_denial_with_the_confirmed_alias_and_a_reason_reaches_the_model(server: Any) -> None:
    client = Client(server.url)
    _, interrupt = _approval(client, "t1")
    events = client.run("t1", [ASSISTANT], resume=[{
        "interruptId": interrupt["id"], "status": "resolved",
        "payload": {"confirmed": False, "reason": "not today"}}])
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == "not today" and result["metadata"] == {"state": "DENIED"}
    assert text(events) == "Result: not today"


def test_a_cancelled_interrupt_denies_and_the_legacy_resume_prop_works(server: Any) -> None:
    client = Client(server.url)
    _, interrupt = _approval(client, "t1")
    events = client.run("t1", [ASSISTANT], resume=[
        {"interruptId": interrupt["id"], "status": "cancelled"}])
    assert next(e for e in events if e["type"] == "TOOL_CALL_RESULT")["metadata"] == {
        "state": "DENIED"}
    # Before AG-UI 1.0's resume field, clients sent forwardedProps.command.resume.
    _approval(client, "t2")
    events = client.run("t2", [ASSISTANT],
                        forwardedProps={"command": {"resume": {"approved": True}}})
    assert text(events) == "Result: refunded order 42"


def test_resume_input_that_does_not_fit_is_refused_with_the_reason(server: Any) -> None:
    client = Client(server.url)

    def resume(thread: str, entries: list[Any], messages: Any = (ASSISTANT,)
               ) -> httpx.Response:
        return client.post({"threadId": thread, "runId": "r", "messages": list(messages),
                            "resume": entries})

    not_paused = resume("fresh", [{"interruptId": "x", "status": "resolved"}], [user("hi")])
    assert not_paused.status_code == 409
    assert not_paused.json()["error"]["message"] == (
        "thread 'fresh' has no pending interrupt to resume")
    _, interrupt = _approval(client, "t1")
    iid = interrupt["id"]
    cases = {
        "x": ([{"interruptId": "x", "status": "resolved", "payload": {"approved": True}}],
              f"resume must hold one entry answering interrupt {iid!r} (the pending "
              "approval), got 'x'"),
        "yes": ([{"interruptId": iid, "status": "resolved", "payload": "yes"}],
                'resume[0].payload must be an object like {"approved": true}, got "yes"'),
        "flag": ([{"interruptId": iid, "status": "resolved", "payload": {"approved": "y"}}],
                 'resume[0].payload must be an object with "approved": true or false'),
        "extra": ([{"interruptId": iid, "status": "resolved",
                    "payload": {"approved": True, "why": 1}}],
                  "resume[0].payload has unknown field(s) 'why'"),
        "calls": ([{"interruptId": iid, "status": "resolved",
                    "payload": {"approved": True, "calls": {"c9": False}}}],
                  "resume[0].payload.calls names tool call(s) 'c9' that are not pending"),
        "status": ([{"interruptId": iid, "status": "done"}], "resume.0.status"),
    }
    for name, (entries, message) in cases.items():
        resp = resume("t1", entries)
        assert resp.status_code == 400, name
        assert resp.json()["error"]["code"] == "bad_run_input", name
        assert message in resp.json()["error"]["message"], (name, resp.text)
    with_messages = resume("t1", [{"interruptId": iid, "status": "resolved",
                                   "payload": {"approved": True}}], [ASSISTANT, user("hm")])
    assert with_messages.status_code == 400
    assert "cannot add messages" in with_messages.text
    # None of it touched the pause.
    assert client.run("t1", [ASSISTANT])[-1]["outcome"]["interrupts"] == [interrupt]


def test_a_new_thread_takes_the_request_history_and_a_stored_one_only_the_new_messages(
    server: Any,
) -> None:
    client = Client(server.url)
    call = {"id": "c1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    history = [{"id": "s", "role": "system", "content": "Be brief."}, user("hello"),
               {"id": "a1", "role": "assistant", "content": "hi", "toolCalls": [call]},
               {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "cold"},
               {"id": "a2", "role": "assistant", "content": "It is cold."},
               user("thanks", 2)]
    # The model saw its system prompt and all six messages of the imported history.
    assert text(client.run("imported", history)) == "echo 7: thanks"
    again = client.run("imported", [*history, ASSISTANT, user("bye", 3)])
    assert text(again) == "echo 9: bye"  # the prompt, the stored 7 and the new one

    open_call = client.post({"threadId": "other", "runId": "r",
                             "messages": [user("x"), {**history[2], "content": None}]})
    assert open_call.status_code == 400
    assert open_call.json()["error"]["message"] == (
        "tool call(s) 'c1' have no tool message with their result; a new thread's history "
        "must answer every tool call")
    stray = client.post({"threadId": "other", "runId": "r", "messages": [history[3]]})
    assert stray.status_code == 400 and "which no earlier assistant message made" in stray.text
    ends = client.post({"threadId": "other", "runId": "r", "messages": [user("x"), ASSISTANT]})
    assert ends.status_code == 400 and "the last message is the assistant's" in ends.text


@pytest.mark.parametrize(("body", "status", "code", "message"), [
    ("{not json", 400, "bad_json", "the body is not valid JSON"),
    ("[1, 2]", 400, "bad_run_input", "the body must be an AG-UI RunAgentInput JSON object"),
    ('{"threadId": "t1", "messages": []}', 400, "bad_run_input",
     "the body is not a RunAgentInput: runId: Field required"),
    ('{"threadId": "t1", "runId": "r", "messages": [{"id": "m", "role": "robot"}]}', 400,
     "bad_run_input", "the body is not a RunAgentInput: messages.0: Input tag 'robot'"),
    ('{"threadId": "t1", "runId": "r", "messages": [{"role": "user", "content": "hi"}]}',
     400, "bad_run_input", "messages.0.user.id: Field required"),
    ('{"threadId": "a/b", "runId": "r", "messages": []}', 400, "bad_run_input",
     "threadId is the session id: session id 'a/b' is not valid"),
    ('{"threadId": "t1", "runId": "", "messages": []}', 400, "bad_run_input",
     "runId must be 1 to 256 characters"),
    ('{"threadId": "t1", "runId": "r", "messages": []}', 400, "bad_run_input",
     "messages holds nothing to run on: a new thread needs a user message"),
    ('{"threadId": "t1", "runId": "r", "messages": [{"id": "m", "role": "user", '
     '"content": ""}]}', 400, "bad_run_input", "messages[0] (user) has no content"),
    ('{"threadId": "t1", "runId": "r", "messages": [{"id": "m", "role": "user", "content": '
     '[{"type": "image", "source": {"type": "file", "value": "file-1"}}]}]}', 400,
     "bad_run_input", "messages[0].content[0]: a image part with a file source"),
])
def test_a_malformed_run_input_is_a_clear_400(server: Any, body: str, status: int, code: str,
                                              message: str) -> None:
    resp = httpx.post(server.url + "/v1/agui", content=body,
                      headers={"Content-Type": "application/json"})
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert error["code"] == code and message in error["message"], error
    assert "Traceback" not in resp.text


def test_the_server_limits_apply(live: Any) -> None:
    server = live(create_app(build, InMemorySessionStore(), max_body=2000))
    big = httpx.post(server.url + "/v1/agui", json={
        "threadId": "t", "runId": "r", "messages": [user("x" * 3000)]})
    assert big.status_code == 413 and big.json()["error"]["code"] == "body_too_large"
    form = httpx.post(server.url + "/v1/agui", content=b"threadId=t",
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert form.status_code == 415
    assert httpx.get(server.url + "/v1/agui").status_code == 405


def test_a_model_failure_mid_run_is_run_error_without_a_traceback(server: Any) -> None:
    client = Client(server.url)
    events = client.run("t1", [user("fail now")])
    assert types(events)[-3:] == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "RUN_ERROR"]
    error = events[-1]
    assert error["code"] == "internal_error"
    assert error["message"] == ("the call failed with RuntimeError; the server log has the "
                                "details")
    # The thread is usable afterwards.
    assert text(client.run("t1", [user("fail now"), ASSISTANT, user("hi", 1)])).startswith(
        "echo")


def test_two_tokens_two_users_and_no_way_into_the_other_users_thread(live: Any) -> None:
    store = InMemorySessionStore()
    server = live(create_app(build, store, auth={"alice-token-1": "alice",
                                                 "bob-token-22": "bob"}))
    alice, bob = Client(server.url, "alice-token-1"), Client(server.url, "bob-token-22")
    assert Client(server.url).post({"threadId": "t", "runId": "r",
                                    "messages": [user("hi")]}).status_code == 401
    assert Client(server.url, "wrong-token-3").post({}).status_code == 401
    _, interrupt = _approval(alice, "shared")
    # Bob's "shared" is his own thread: empty, not paused, and his run stays his.
    denied = bob.post({"threadId": "shared", "runId": "r", "messages": [ASSISTANT],
                       "resume": [{"interruptId": interrupt["id"], "status": "resolved",
                                   "payload": {"approved": True}}]})
    assert denied.status_code == 409 and "no pending interrupt" in denied.text
    assert text(bob.run("shared", [user("hello")])) == "echo 2: hello"  # prompt + his
    alice_state = store.load(SessionKey("alice", "shared"))
    bob_state = store.load(SessionKey("bob", "shared"))
    assert alice_state is not None and alice_state.pending is not None
    assert bob_state is not None and bob_state.pending is None
    assert bob_state.context[0].text == "hello"
    assert text(alice.run("shared", [ASSISTANT], resume=[{
        "interruptId": interrupt["id"], "status": "resolved",
        "payload": {"approved": True}}])) == "Result: refunded order 42"


def test_a_client_that_disconnects_disposes_the_call(live: Any) -> None:
    slow = SlowModel(["a", "b", "c", "d", "e", "f"], delay=0.5)
    store = InMemorySessionStore()
    server = live(create_app(ReActAgent(name="slow", model=slow, session_store=store)))
    with httpx.stream("POST", server.url + "/v1/agui", json={
            "threadId": "t1", "runId": "r1", "messages": [user("tell me")]}) as resp:
        run_id = resp.headers["x-run-id"]
        for line in resp.iter_lines():
            if '"TEXT_MESSAGE_CONTENT"' in line:
                break  # the first delta arrived: hang up mid-stream
    assert slow.closed.wait(2), "the model stream was not closed after the disconnect"
    assert slow.cancelled.is_set() and slow.sent < len(slow.chunks)
    deadline = time.monotonic() + 3
    while True:
        run = httpx.get(server.url + f"/v1/sessions/t1/runs/{run_id}").json()
        if run["status"] == "disconnected" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert run["status"] == "disconnected" and run["kind"] == "agui"
    slow.chunks = ["ok"]
    events = Client(server.url).run("t1", [user("tell me"), ASSISTANT, user("again", 1)])
    assert text(events) == "ok"


def test_an_interrupted_run_finishes_cancelled(live: Any) -> None:
    gate = threading.Event()
    slow = SlowModel(["a", "b"], delay=0.0, gate=gate)
    server = live(create_app(ReActAgent(name="slow", model=slow)))
    out: list[list[dict[str, Any]]] = []
    thread = threading.Thread(target=lambda: out.append(Client(server.url).run(
        "t1", [user("go")])))
    thread.start()
    assert slow.started.wait(5)
    busy = Client(server.url).post({"threadId": "t1", "runId": "r9", "messages": [user("x")]})
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "session_busy"
    assert httpx.post(server.url + "/v1/sessions/t1/interrupt").json() == {"interrupted": True}
    gate.set()
    thread.join(10)
    assert out[0][-1]["outcome"] == {"type": "cancelled"}
    assert out[0][-1]["metadata"] == {"generateReason": "INTERRUPTED"}


def test_the_route_is_in_openapi_and_can_be_switched_off(live: Any, monkeypatch: Any) -> None:
    on = live(create_app(build, InMemorySessionStore()))
    paths = httpx.get(on.url + "/openapi.json").json()["paths"]
    assert "post" in paths["/v1/agui"]
    off = live(create_app(build, InMemorySessionStore(), agui=False))
    assert "/v1/agui" not in httpx.get(off.url + "/openapi.json").json()["paths"]
    assert httpx.post(off.url + "/v1/agui", json={}).status_code == 404
    # Without the extra: off by default, an ImportError naming it when required.
    for name in [m for m in sys.modules if m.startswith(("rx_agent.serve._agui", "ag_ui"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ag_ui", None)
    quiet = live(create_app(build, InMemorySessionStore()))
    assert "/v1/agui" not in httpx.get(quiet.url + "/openapi.json").json()["paths"]
    with pytest.raises(ImportError, match=r"pip install 'rx-agent\[agui\]'"):
        create_app(build, InMemorySessionStore(), agui=True)


def test_rx_agent_serve_no_agui_switches_the_route_off(monkeypatch: Any) -> None:
    from rx_agent.cli import main
    from rx_agent.serve import _cli

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent))
    seen: list[Any] = []
    monkeypatch.setattr(_cli, "run", lambda config, no_auth=False: seen.append(config))
    assert main(["serve", "serve.agui_agents:build"]) == 0
    assert main(["serve", "serve.agui_agents:build", "--no-agui"]) == 0
    assert [c.agui for c in seen] == [None, False]
    routes = [{getattr(r, "path", "") for r in _cli.build_app(c).routes} for c in seen]
    assert "/v1/agui" in routes[0] and "/v1/agui" not in routes[1]


def test_tools_and_middleware_read_the_run_input_from_the_context(live: Any) -> None:
    @tool
    def theme(ctx: RuntimeContext) -> str:
        """The front end's theme."""
        run = ctx.get(ag_ui.RunAgentInput)
        assert run is not None
        return f"{run.forwarded_props['theme']} / {run.state['page']} / {run.context[0].value}"

    model = ScriptedModel([[ToolUseBlock("c1", "theme", {})], "done"])
    agent = ReActAgent(name="a", model=model, toolkit=Toolkit([theme]))
    events = Client(live(create_app(agent)).url).run(
        "t1", [user("which theme?")], forwardedProps={"theme": "dark"},
        state={"page": "/cart"}, context=[{"description": "locale", "value": "en-GB"}])
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == "dark / /cart / en-GB"
