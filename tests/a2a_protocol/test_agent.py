"""``A2AAgent``: a remote agent as a sub-agent, against a server written here with the
``a2a-sdk`` (not ours) and against ``rx-agent serve``'s own, both on 127.0.0.1."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
)
from starlette.applications import Starlette

from rx_agent import (
    A2AAgent,
    CustomEvent,
    GenerateReason,
    NestedEvent,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    Toolkit,
    ToolResultEndEvent,
    ToolResultState,
    ToolUseBlock,
)
from rx_agent.a2a import (
    RemoteAgentAuthError,
    RemoteAgentError,
    RemoteAgentRequestError,
    RemoteAgentTimeoutError,
    RemoteAgentUnavailableError,
    RemoteTaskFailedError,
)
from rx_agent.serve import create_app
from rx_agent.testing import collect

from .conftest import ALICE, TOKENS, EchoModel, SlowModel, wait_for
from .test_server import refund_agent

# -- a storyteller served by the a2a-sdk's own server ------------------------------------------


class Storyteller(AgentExecutor):
    """Tells ``Once upon a time: <input>`` in chunks of one artifact. ``slow ...`` streams
    for seconds (``slow late ...`` after naming its task half a second late); ``fail``
    fails the task; ``stall`` goes silent for 3 s."""

    def __init__(self) -> None:
        self.canceled: list[str] = []
        self.inputs: list[str] = []
        self.contexts: list[str] = []
        self.started = threading.Event()
        self.working = threading.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        self.started.set()
        if context.get_user_input().startswith("slow late"):
            await asyncio.sleep(0.5)  # the client knows no task id for a while
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = context.get_user_input()
        self.inputs.append(text)
        self.contexts.append(task.context_id)
        await updater.start_work(updater.new_agent_message([new_text_part("thinking...")]))
        if text == "fail":
            await updater.failed(updater.new_agent_message([new_text_part(
                "the archive is closed")]))
            return
        if text == "stall":
            await asyncio.sleep(3)
        chunks = ["Once ", "upon ", "a time: ", text]
        if text.startswith("slow"):
            chunks += [f" and {i}" for i in range(200)]
        for i, chunk in enumerate(chunks):
            await updater.add_artifact([new_text_part(chunk)], artifact_id="story",
                                       name="story", append=i > 0,
                                       last_chunk=i == len(chunks) - 1)
            self.working.set()
            if text.startswith("slow"):
                await asyncio.sleep(0.05)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        self.canceled.append(context.task_id)
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def sdk_server(live: Any, executor: AgentExecutor, name: str = "Story Teller") -> Any:
    """An A2A server made only of a2a-sdk parts, on a free loopback port."""
    holder: dict[str, str] = {}

    async def card_with_url(card: AgentCard) -> AgentCard:
        card.supported_interfaces[0].url = holder["url"] + "/"
        return card

    card = AgentCard(
        name=name, description="Tells short stories.", version="1.0",
        supported_interfaces=[AgentInterface(url="http://placeholder/",
                                             protocol_binding="JSONRPC",
                                             protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id="story", name="story", description="a story about anything",
                           tags=["fiction"])])
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(),
                                    agent_card=card)
    app = Starlette(routes=create_agent_card_routes(card, card_modifier=card_with_url)
                    + create_jsonrpc_routes(handler, "/"))
    server = live(app)
    holder["url"] = server.url
    return server


def text_of(events: list[Any]) -> str:
    return "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))


def result_of(events: list[Any]) -> Any:
    return next(e.result for e in events if e.type == "agent_result")


def parent_with(tool: Any, task: str = "a dragon", answer: str = "Here is your story.",
                ) -> tuple[ReActAgent, ScriptedModel]:
    tools = Toolkit()
    tools.register_tool(tool)
    model = ScriptedModel([[ToolUseBlock("c1", tool.name, {"task": task})], answer])
    return ReActAgent(name="lead", model=model, toolkit=tools), model


async def gather(source: Any, timeout: float = 20.0) -> list[Any]:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    items: list[Any] = []

    def settle(error: BaseException | None) -> None:
        if not done.done():
            done.set_exception(error) if error else done.set_result(None)

    subscription = source.subscribe(
        items.append, lambda e: loop.call_soon_threadsafe(settle, e),
        lambda: loop.call_soon_threadsafe(settle, None))
    try:
        await asyncio.wait_for(done, timeout)
    finally:
        subscription.dispose()
    return items


# -- against the a2a-sdk server ------------------------------------------------------------------


def test_the_remote_text_streams_as_text_blocks_and_ends_the_reply(live) -> None:
    server = sdk_server(live, Storyteller())
    remote = A2AAgent(server.url)  # no name: the card's, read now (no loop runs here)
    assert remote.name == "Story Teller"
    events = collect(remote.stream("a dragon"))
    deltas = [e.delta for e in events if isinstance(e, TextBlockDeltaEvent)]
    assert deltas == ["Once ", "upon ", "a time: ", "a dragon"]
    assert [e.type for e in events][:2] == ["agent_start", "custom"]
    assert [e.type for e in events][-2:] == ["agent_result", "agent_end"]
    statuses = [e.value for e in events if isinstance(e, CustomEvent)]
    assert [s["state"] for s in statuses] == ["submitted", "working", "completed"]
    assert statuses[1]["text"] == "thinking..."
    result = result_of(events)
    assert result.text == "Once upon a time: a dragon"
    assert result.generate_reason is GenerateReason.MODEL_STOP
    assert result.metadata["a2a"]["state"] == "completed"
    assert {e.source for e in events} == {"Story Teller"}


def test_as_a_tool_the_remote_events_nest_in_the_parent_stream(live) -> None:
    executor = Storyteller()
    server = sdk_server(live, executor)
    remote = A2AAgent(server.url)
    tool = remote.as_tool()
    assert tool.name == "Story_Teller"
    assert tool.description == "Tells short stories. Skills: story (a story about anything)."
    lead, model = parent_with(tool)
    events = collect(lead.stream("Tell me a story", RuntimeContext(session_id="trip")))
    nested = [e for e in events if isinstance(e, NestedEvent)]
    assert {(e.scope, e.agent, e.tool_call_id) for e in nested} == {
        ("sub_agent", "Story Teller", "c1")}
    assert text_of([e.event for e in nested]) == "Once upon a time: a dragon"
    assert text_of(events) == "Here is your story."  # the parent's own text stays its own
    [end] = [e for e in events if isinstance(e, ToolResultEndEvent)]
    assert end.state is ToolResultState.SUCCESS
    tool_message = model.calls[1].messages[-1]
    assert "Once upon a time: a dragon" in str(tool_message.model_dump())
    # each call of the tool is a fresh remote conversation
    collect(ReActAgent(name="lead2", model=ScriptedModel(
        [[ToolUseBlock("c2", tool.name, {"task": "a cat"})], "ok"]),
        toolkit=_toolkit(tool)).stream("again", RuntimeContext(session_id="trip")))
    assert executor.inputs == ["a dragon", "a cat"]
    assert len(set(executor.contexts)) == 2


def _toolkit(tool: Any) -> Toolkit:
    tools = Toolkit()
    tools.register_tool(tool)
    return tools


def test_later_calls_on_one_session_continue_the_remote_context(live) -> None:
    executor = Storyteller()
    server = sdk_server(live, executor)
    remote = A2AAgent(server.url, name="teller")
    ctx = RuntimeContext(session_id="s1")
    collect(remote.stream("one", ctx))
    collect(remote.stream("two", ctx))
    collect(remote.stream("three", RuntimeContext(session_id="s2")))
    assert executor.contexts[0] == executor.contexts[1] != executor.contexts[2]


async def test_inside_a_loop_the_name_or_connect_is_needed(live) -> None:
    server = sdk_server(live, Storyteller())
    with pytest.raises(ValueError, match=r"pass name=\.\.\., or use `await A2AAgent.connect"):
        A2AAgent(server.url)
    remote = await A2AAgent.connect(server.url)
    assert remote.name == "Story Teller"
    assert remote.card is not None and remote.card.skills[0].id == "story"
    events = await gather(remote.stream("a fox"))
    assert result_of(events).text == "Once upon a time: a fox"


async def test_interrupt_cancels_the_remote_task(live) -> None:
    executor = Storyteller()
    server = sdk_server(live, executor)
    remote = A2AAgent(server.url, name="teller")
    ctx = RuntimeContext(session_id="s")
    call = asyncio.ensure_future(gather(remote.stream("slow story", ctx)))
    await asyncio.to_thread(executor.working.wait, 10)
    assert remote.interrupt(ctx) is True
    events = await call
    result = result_of(events)
    assert result.generate_reason is GenerateReason.INTERRUPTED
    assert executor.canceled == [result.metadata["a2a"]["task_id"]]
    assert remote.interrupt(ctx) is False  # nothing runs any more


async def test_interrupting_the_parent_cancels_the_remote_task(live) -> None:
    executor = Storyteller()
    server = sdk_server(live, executor)
    lead, _ = parent_with(A2AAgent(server.url, name="teller").as_tool(), task="slow story")
    ctx = RuntimeContext(session_id="p")
    call = asyncio.ensure_future(gather(lead.stream("go", ctx)))
    await asyncio.to_thread(executor.working.wait, 10)
    assert lead.interrupt(ctx)
    events = await call
    assert result_of(events).generate_reason is GenerateReason.INTERRUPTED
    await wait_for(lambda: len(executor.canceled) == 1)


async def test_disposed_before_the_peer_named_its_task_the_task_is_canceled_still(
    live,
) -> None:
    executor = Storyteller()
    server = sdk_server(live, executor)
    remote = A2AAgent(server.url, name="teller")
    events: list[Any] = []
    subscription = remote.stream("slow late story").subscribe(events.append)
    await asyncio.to_thread(executor.started.wait, 10)
    subscription.dispose()  # the peer has not answered yet: no task id known
    await wait_for(lambda: len(executor.canceled) == 1)
    assert [e.type for e in events] == ["agent_start"]  # nothing after the disposal


def test_a_failed_remote_task_is_a_typed_error_and_an_error_result_as_a_tool(live) -> None:
    server = sdk_server(live, Storyteller())
    remote = A2AAgent(server.url, name="teller")
    with pytest.raises(RemoteTaskFailedError, match="is failed: the archive is closed") as e:
        collect(remote.stream("fail"))
    assert e.value.state == "failed" and e.value.url == server.url
    lead, model = parent_with(remote.as_tool(), task="fail")
    events = collect(lead.stream("go"))
    [end] = [x for x in events if isinstance(x, ToolResultEndEvent)]
    assert end.state is ToolResultState.ERROR
    assert "the archive is closed" in str(model.calls[1].messages[-1].model_dump())


def test_a_silent_peer_times_out(live) -> None:
    server = sdk_server(live, Storyteller())
    remote = A2AAgent(server.url, name="teller", timeout=0.5)
    with pytest.raises(RemoteAgentTimeoutError, match="did not answer in time"):
        collect(remote.stream("stall"))


def test_an_unreachable_peer_is_unavailable() -> None:
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    remote = A2AAgent(f"http://127.0.0.1:{port}", name="gone", timeout=5)
    with pytest.raises(RemoteAgentUnavailableError, match="cannot be reached") as e:
        collect(remote.stream("hi"))
    assert isinstance(e.value, RemoteAgentError)
    with pytest.raises(RemoteAgentUnavailableError, match="cannot be reached"):
        A2AAgent(f"http://127.0.0.1:{port}")  # reading the card


# -- against our own server --------------------------------------------------------------------


def test_against_rx_agent_serve_with_a_token(live) -> None:
    server = live(create_app(ReActAgent(name="echo", model=EchoModel()), auth=TOKENS))
    remote = A2AAgent(server.url, headers={"Authorization": f"Bearer {ALICE}"})
    assert remote.name == "echo"
    ctx = RuntimeContext(session_id="chat")
    first = collect(remote.stream("hello", ctx))
    assert text_of(first) == "echo 1: hello"
    assert [e.delta for e in first if isinstance(e, TextBlockDeltaEvent)] == [
        "echo 1", ": hello"]
    second = result_of(collect(remote.stream("again", ctx)))
    assert second.text == "echo 3: again"  # the served session kept the conversation
    lead, _ = parent_with(remote.as_tool(), task="hi there")
    nested = [e for e in collect(lead.stream("go")) if isinstance(e, NestedEvent)]
    assert text_of([e.event for e in nested]) == "echo 1: hi there"


def test_a_wrong_token_is_an_auth_error(live) -> None:
    server = live(create_app(ReActAgent(name="echo", model=EchoModel()), auth=TOKENS))
    remote = A2AAgent(server.url, name="echo",
                      headers={"Authorization": "Bearer not-the-token"})
    with pytest.raises(RemoteAgentAuthError, match=r"refused the credentials \(HTTP 401\)"):
        collect(remote.stream("hi"))


async def test_interrupt_reaches_the_served_agent(live) -> None:
    model = SlowModel([f"w{i} " for i in range(200)], 0.05)
    server = live(create_app(ReActAgent(name="slow", model=model)))
    remote = A2AAgent(server.url, name="slow")
    ctx = RuntimeContext(session_id="s")
    call = asyncio.ensure_future(gather(remote.stream("go", ctx)))
    await asyncio.to_thread(model.started.wait, 10)
    await asyncio.sleep(0.2)
    assert remote.interrupt(ctx)
    result = result_of(await call)
    assert result.generate_reason is GenerateReason.INTERRUPTED
    assert await asyncio.to_thread(model.cancelled.wait, 5)


def test_a_paused_peer_asks_and_the_next_message_answers_it(live) -> None:
    server = live(create_app(refund_agent()))
    remote = A2AAgent(server.url)
    ctx = RuntimeContext(session_id="shop")
    asked = result_of(collect(remote.stream("Refund order 1234", ctx)))
    assert asked.generate_reason is GenerateReason.PERMISSION_ASKING
    assert "Approve refund" in asked.text
    with pytest.raises(RemoteAgentRequestError, match="answer yes or no") as e:
        collect(remote.stream("maybe", ctx))
    assert e.value.code == -32602
    done = result_of(collect(remote.stream("yes", ctx)))
    assert done.text == "Done: the order is refunded."
    assert done.metadata["a2a"]["task_id"] == asked.metadata["a2a"]["task_id"]


def test_a_paused_peer_as_a_tool_is_an_error_result(live) -> None:
    server = live(create_app(refund_agent()))
    lead, model = parent_with(A2AAgent(server.url).as_tool(), task="Refund order 1234")
    events = collect(lead.stream("go"))
    [end] = [e for e in events if isinstance(e, ToolResultEndEvent)]
    assert end.state is ToolResultState.ERROR
    assert "paused for a human decision" in str(model.calls[1].messages[-1].model_dump())


# -- arguments ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "error", "words"), [
    ({"url": "ftp://x"}, ValueError, "http:// or https:// URL"),
    ({"name": " "}, ValueError, "name must be a non-empty str"),
    ({"timeout": 0}, ValueError, "timeout must be a positive number"),
    ({"headers": {"X": 1}}, TypeError, "headers must be a mapping of str to str"),
    ({"description": ""}, ValueError, "description must be a non-empty str"),
])
def test_bad_arguments_are_refused_by_name(kwargs, error, words) -> None:
    args = {"url": "http://127.0.0.1:9", "name": "x", **kwargs}
    with pytest.raises(error, match=words):
        A2AAgent(**args)


def test_the_input_must_be_text_or_messages() -> None:
    remote = A2AAgent("http://127.0.0.1:9", name="x")
    with pytest.raises(TypeError, match="takes a str, a Msg or a non-empty list of Msg"):
        remote.stream(None)
    from rx_agent import Msg

    with pytest.raises(ValueError, match="no text or data for the remote agent"):
        remote.stream(Msg("user", [ToolUseBlock("c", "t", {})]))
