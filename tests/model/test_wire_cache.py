"""The wire forms a model keeps between calls (rx_agent/model/_wire_cache.py): what a
call sends is what encoding every message afresh gives, an unchanged message is not
encoded again, and an edited or replaced one is."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import reactivex.operators as ops

from rx_agent import ReActAgent, Toolkit
from rx_agent._rx import await_observable
from rx_agent.message import (
    DataBlock,
    HintBlock,
    Msg,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolResultState,
    ToolUseBlock,
)
from rx_agent.model import ScriptedModel, UsageChunk
from rx_agent.model._anthropic_format import anthropic_message, anthropic_message_json
from rx_agent.model._http_model import HTTPChatModel
from rx_agent.model._openai_format import openai_message, openai_message_json
from rx_agent.model._wire_cache import CONVERSATIONS, ToolsCache, WireCache, dumps
from rx_agent.model.anthropic import AnthropicChatModel
from rx_agent.model.openai import OpenAIChatModel
from rx_agent.options import GenerateOptions

from .anthropic_server import AnthropicServer, MessageReply
from .anthropic_server import text as anthropic_text
from .openai_server import OpenAIServer, Reply, text

WEATHER = {"name": "get_weather", "description": "Weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
NOWHERE = "http://127.0.0.1:9"  # never connected to: these tests build bodies only


def conversation() -> list[Msg]:
    """Every kind of block, tool runs with media, and consecutive turns of one role
    (which Anthropic's format merges)."""
    return [
        Msg("system", "Be brief."),
        Msg("user", [TextBlock(text="What is in "), DataBlock("image/png", "iVBORw0K")]),
        Msg("assistant", [ThinkingBlock(thinking="hm"), TextBlock(text="Let me check."),
                          ToolUseBlock(id="c1", name="get_weather", input={"city": "Oslo"}),
                          ToolUseBlock(id="c2", name="clock", input={}, raw_input="{bad")]),
        Msg("tool", [ToolResultBlock(id="c1", name="get_weather", output="sunny"),
                     ToolResultBlock(id="c2", name="clock", state=ToolResultState.ERROR,
                                     output=[TextBlock(text="12:00"),
                                             DataBlock("image/png", "AAAA")])]),
        Msg("user", [HintBlock(hint="Answer now.")]),
        Msg("user", "Thanks"),
        Msg("assistant", [ThinkingBlock(thinking="only thinking")]),  # nothing to send
        Msg("assistant", "Done."),
        Msg("system", "A late system note."),
        Msg("assistant", "More."),
    ]


MODELS: list[Callable[[], HTTPChatModel]] = [
    lambda: OpenAIChatModel("m", base_url=NOWHERE),
    lambda: AnthropicChatModel("m", base_url=NOWHERE),
]


def sent(model: HTTPChatModel, messages: Sequence[Msg],
         tools: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The body a call of ``model`` sends (from the kept wire forms)."""
    body: dict[str, Any] = json.loads(model._call_payload(messages, tools, None))
    return body


@pytest.fixture(params=["openai", "anthropic"])
def chat(request: pytest.FixtureRequest) -> HTTPChatModel:
    return MODELS[0 if request.param == "openai" else 1]()


# ------------------------------------------------------------------ the same bodies


def test_a_call_sends_what_encoding_afresh_gives(chat: HTTPChatModel) -> None:
    msgs = conversation()
    fresh = chat.request_body(msgs, [WEATHER])
    for _ in range(2):  # byte for byte, encoding every message or none
        assert chat._call_payload(msgs, [WEATHER], None) == json.dumps(
            fresh, ensure_ascii=False).encode()
    assert sent(chat, msgs, [WEATHER]) == fresh
    # Again (every wire form kept): the same; merged Anthropic turns did not grow the
    # kept turns they were made of.
    assert sent(chat, msgs, [WEATHER]) == fresh
    assert sent(chat, msgs, [WEATHER]) == chat.request_body(msgs, [WEATHER])


def test_each_prefix_of_a_growing_conversation(chat: HTTPChatModel) -> None:
    msgs = conversation()
    for end in range(1, len(msgs) + 1):
        assert sent(chat, msgs[:end]) == chat.request_body(msgs[:end])


def test_request_body_is_fresh_so_changing_it_changes_no_call(chat: HTTPChatModel) -> None:
    msgs = conversation()
    before = sent(chat, msgs)
    body = chat.request_body(msgs)
    body["messages"][0]["content"] = "changed by a debugging user"
    body["messages"].clear()
    assert sent(chat, msgs) == before


def test_a_subclass_that_overrides_request_body_is_what_a_call_sends() -> None:
    class Tagged(OpenAIChatModel):
        def request_body(self, messages: Sequence[Msg], tools: Sequence[Any] = (),
                         options: GenerateOptions | None = None) -> dict[str, Any]:
            body = super().request_body(messages, tools, options)
            body["metadata"] = {"tag": "mine"}
            return body

    assert json.loads(Tagged("m", base_url=NOWHERE)._call_payload(
        [Msg("user", "hi")], (), None))["metadata"] == {"tag": "mine"}


# ------------------------------------------------------------------ hits and misses


class Counting:
    """An encoder that counts what it encodes."""

    def __init__(self, encode: Callable[[Msg], Any]) -> None:
        self.encode = encode
        self.seen: list[Msg] = []

    def __call__(self, msg: Msg) -> Any:
        self.seen.append(msg)
        return self.encode(msg)


@pytest.mark.parametrize("encode", [openai_message, anthropic_message, openai_message_json,
                                    anthropic_message_json])
def test_an_unchanged_message_is_encoded_once(encode: Callable[[Msg], Any]) -> None:
    counting = Counting(encode)
    cache = WireCache(counting)
    msgs = conversation()
    first = cache.values(msgs)
    assert counting.seen == msgs
    again = cache.values(msgs)
    assert len(counting.seen) == len(msgs)  # nothing encoded
    assert all(a is b for a, b in zip(first, again, strict=True))  # the same objects
    grown = [*msgs, Msg("user", "next")]
    cache.values(grown)
    assert counting.seen[len(msgs):] == [grown[-1]]  # only the new one


def test_a_model_encodes_an_unchanged_message_once(chat: HTTPChatModel) -> None:
    msgs = conversation()
    cache = chat._wire_messages
    counting = Counting(cache.compute)
    cache.compute = counting
    sent(chat, msgs)
    sent(chat, [*msgs, Msg("user", "one more")])
    assert counting.seen[: len(msgs)] == msgs
    assert len(counting.seen) == len(msgs) + 1 and counting.seen[-1].text == "one more"


def edits() -> list[tuple[str, Callable[[list[Msg]], None]]]:
    def text_of_a_block(msgs: list[Msg]) -> None:
        block = msgs[-1].content[0]
        assert isinstance(block, TextBlock)
        block.text = "Changed."

    def block_appended(msgs: list[Msg]) -> None:
        msgs[-1].content.append(TextBlock(text=" And more."))

    def block_replaced(msgs: list[Msg]) -> None:
        msgs[1].content[0] = TextBlock(text="What is on ")

    def content_assigned(msgs: list[Msg]) -> None:
        msgs[5].content = [TextBlock(text="Thank you")]

    def role_changed(msgs: list[Msg]) -> None:
        msgs[5].role = Role.ASSISTANT

    def call_arguments_in_place(msgs: list[Msg]) -> None:
        call = msgs[2].content[2]
        assert isinstance(call, ToolUseBlock)
        call.input["city"] = "Bergen"

    def nested_result_block(msgs: list[Msg]) -> None:
        result = msgs[3].content[1]
        assert isinstance(result, ToolResultBlock) and isinstance(result.output, list)
        inner = result.output[0]
        assert isinstance(inner, TextBlock)
        inner.text = "13:00"

    def result_state(msgs: list[Msg]) -> None:
        result = msgs[3].content[1]
        assert isinstance(result, ToolResultBlock)
        result.state = ToolResultState.SUCCESS

    def message_replaced(msgs: list[Msg]) -> None:
        msgs[7] = Msg("assistant", "Finished.")

    def message_removed(msgs: list[Msg]) -> None:
        del msgs[4]

    def system_prompt(msgs: list[Msg]) -> None:
        msgs[0] = Msg("system", "Be verbose.")

    def system_prompt_in_place(msgs: list[Msg]) -> None:
        msgs[0].content = [TextBlock(text="Be verbose.")]

    return [(f.__name__, f) for f in (
        text_of_a_block, block_appended, block_replaced, content_assigned, role_changed,
        call_arguments_in_place, nested_result_block, result_state, message_replaced,
        message_removed, system_prompt, system_prompt_in_place)]


@pytest.mark.parametrize(("what", "edit"), edits(), ids=[w for w, _ in edits()])
def test_an_edited_or_replaced_message_is_sent_as_it_is_now(
        chat: HTTPChatModel, what: str, edit: Callable[[list[Msg]], None]) -> None:
    msgs = conversation()
    # As sent (Anthropic's body holds a call's input dict itself, which the edit changes).
    before = json.loads(json.dumps(sent(chat, msgs)))
    edit(msgs)
    after = sent(chat, msgs)
    assert after == chat.request_body(msgs), what
    # The edit shows (a tool result's state is not part of OpenAI's format).
    assert after != before or (what, type(chat)) == ("result_state", OpenAIChatModel)


def test_a_mutated_message_is_encoded_again_and_only_it() -> None:
    counting = Counting(openai_message)
    cache = WireCache(counting)
    msgs = conversation()
    cache.values(msgs)
    block = msgs[5].content[0]
    assert isinstance(block, TextBlock)
    block.text = "Thank you!"
    (wire,) = [w for m, w in zip(msgs, cache.values(msgs), strict=True) if m is msgs[5]]
    assert counting.seen[len(msgs):] == [msgs[5]]
    assert wire[3] == {"role": "user", "content": "Thank you!"}


def test_the_system_prompt_changing_every_call_keeps_the_conversation() -> None:
    counting = Counting(anthropic_message)
    cache = WireCache(counting)
    rest = conversation()[1:]
    cache.values([Msg("system", "prompt 1"), *rest])
    assert len(cache) == 1
    cache.values([Msg("system", "prompt 2"), *rest])
    assert len(cache) == 1  # keyed on the first non-system message
    assert len(counting.seen) == 2 * 1 + len(rest)  # the new prompt only


# ------------------------------------------------------------------ conversations


def test_at_most_64_conversations_are_kept() -> None:
    cache = WireCache(openai_message)
    held = [[Msg("user", f"conversation {i}")] for i in range(CONVERSATIONS + 10)]
    for msgs in held:
        cache.values(msgs)
    assert len(cache) == CONVERSATIONS
    # The least recently used left: the first ones are encoded again.
    counting = Counting(openai_message)
    cache.compute = counting
    cache.values(held[-1])
    cache.values(held[0])
    assert counting.seen == [held[0][0]]


def test_a_finished_conversation_lets_its_cache_go() -> None:
    cache = WireCache(openai_message)
    msgs = [Msg("user", "hello"), Msg("assistant", "hi")]
    conversation_cache = cache.conversation(msgs)
    assert conversation_cache is not None
    cache.values(msgs)
    assert conversation_cache.entries
    del msgs
    gc.collect()
    assert not conversation_cache.entries  # emptied when its first message went
    others = [[Msg("user", f"other {i}")] for i in range(CONVERSATIONS)]
    for other in others:  # and dropped when room is needed
        cache.values(other)
    assert len(cache) == CONVERSATIONS
    assert all(c.first() is not None for c in cache._by_first.values())


def test_entries_of_messages_gone_from_the_conversation_are_dropped() -> None:
    cache = WireCache(openai_message)
    first = Msg("user", "the start")
    for i in range(200):  # a context compressed to two messages every call
        cache.values([first, Msg("assistant", f"summary {i}")])
    conversation_cache = cache.conversation([first])
    assert conversation_cache is not None
    assert len(conversation_cache.entries) <= 2 * 2 + 32 + 1


def test_only_system_messages_are_encoded_without_a_cache() -> None:
    cache = WireCache(openai_message)
    assert [w[3] for w in cache.values([Msg("system", "alone")])] == [
        {"role": "system", "content": "alone"}]
    assert len(cache) == 0


# ------------------------------------------------------------------------- tools


def test_tool_schemas_handed_again_are_encoded_once() -> None:
    calls: list[Sequence[Any]] = []

    def encode(tools: Sequence[Any]) -> list[Any]:
        calls.append(tools)
        return [dict(t) for t in tools]

    cache = ToolsCache(encode)
    tools = (dict(WEATHER),)
    first = cache.get(tools)
    assert cache.get(tools) is first and len(calls) == 1
    tools[0]["description"] = "Changed in place."  # the same tuple, an edited dict
    assert cache.get(tools)[0]["description"] == "Changed in place."
    other = (dict(WEATHER), {"name": "clock", "description": "", "parameters": {}})
    assert len(cache.get(other)) == 2 and len(calls) == 3
    listed = [dict(WEATHER)]  # a list may change in place: never kept
    cache.get(listed)
    listed.append({"name": "clock", "description": "", "parameters": {}})
    assert len(cache.get(listed)) == 2 and len(calls) == 5


def test_a_model_sends_the_tools_of_each_call(chat: HTTPChatModel) -> None:
    msgs = [Msg("user", "hi")]
    one = (dict(WEATHER),)
    two = (*one, {"name": "clock", "description": "The time.", "parameters": {}})
    for tools in (one, two, one, ()):
        assert sent(chat, msgs, tools) == chat.request_body(msgs, tools)


# -------------------------------------------------------------- over the network


async def test_an_edit_between_calls_reaches_the_openai_server() -> None:
    server = OpenAIServer().start()
    model = OpenAIChatModel("m", base_url=server.url, api_key="sk-test")
    try:
        server.script(Reply([text("one")]), Reply([text("two")]))
        msgs = [Msg("system", "Be brief."), Msg("user", "What is 2+2?")]
        await await_observable(model.stream(msgs).pipe(ops.to_list()))
        block = msgs[1].content[0]
        assert isinstance(block, TextBlock)
        block.text = "What is 3+3?"  # a middleware edits the stored message in place
        await await_observable(model.stream(msgs).pipe(ops.to_list()))
    finally:
        await model.aclose()
        server.stop()
    first, second = (r.body["messages"] for r in server.requests)
    assert first[1] == {"role": "user", "content": "What is 2+2?"}
    assert second[1] == {"role": "user", "content": "What is 3+3?"}


async def test_an_edit_between_calls_reaches_the_anthropic_server() -> None:
    server = AnthropicServer().start()
    model = AnthropicChatModel("m", base_url=server.url, api_key="k")
    try:
        server.script(MessageReply([anthropic_text("one")]),
                      MessageReply([anthropic_text("two")]))
        msgs = [Msg("user", "What is 2+2?"), Msg("assistant", "4"), Msg("user", "Sure?")]
        await await_observable(model.stream(msgs).pipe(ops.to_list()))
        msgs[2] = Msg("user", "Certain?")  # replaced
        msgs[1].content.append(TextBlock(text=", I think"))  # edited in place
        await await_observable(model.stream(msgs).pipe(ops.to_list()))
    finally:
        await model.aclose()
        server.stop()
    second = server.requests[1].body["messages"]
    assert second[1] == {"role": "assistant", "content": [
        {"type": "text", "text": "4"}, {"type": "text", "text": ", I think"}]}
    assert second[2] == {"role": "user", "content": [{"type": "text", "text": "Certain?"}]}


# ----------------------------------------------------------- the scripted model


def prompt_tokens(model: ScriptedModel, msgs: Sequence[Msg]) -> int:
    chunks = list(model._chunks(msgs, ["ok"]))
    (usage,) = [c for c in chunks if isinstance(c, UsageChunk)]
    return usage.usage.input_tokens


@pytest.mark.parametrize("padding", [0, 40], ids=["short, read again", "long, kept"])
def test_the_scripted_usage_estimate_follows_edits(padding: int) -> None:
    model = ScriptedModel([])
    msgs = [Msg("user", "x" * 400), Msg("assistant", [ThinkingBlock(thinking="y" * 400)]),
            *[Msg("user", "") for _ in range(padding)]]
    assert prompt_tokens(model, msgs) == 200
    assert prompt_tokens(model, msgs) == 200
    block = msgs[0].content[0]
    assert isinstance(block, TextBlock)
    block.text = "x" * 4000
    assert prompt_tokens(model, msgs) == 1100
    msgs.append(Msg("user", "z" * 40))
    assert prompt_tokens(model, msgs) == 1110
    assert len(model._lengths) == (1 if padding else 0)


# ------------------------------------------------------------------------- JSON


@pytest.mark.parametrize("value", [
    {"text": "héllo ✓ \u2028 \"quoted\"", "n": 1, "x": 1.5, "big": 10**30, "ok": True,
     "none": None, "nested": [{"a": []}, {}], "nan": float("nan"), "inf": float("-inf")},
    "plain", [], 0,
])
def test_dumps_is_json_dumps(value: Any) -> None:
    assert dumps(value) == json.dumps(value, ensure_ascii=False)


def test_dumps_refuses_what_json_dumps_refuses() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match="Circular reference"):
        dumps(loop)
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        dumps({"s": {1}})
    assert dumps({"after": "errors"}) == '{"after": "errors"}'  # nothing left behind


async def test_the_server_sees_the_toolkit_as_it_is_at_each_call() -> None:
    def echo(value: int) -> str:
        """Echo a number."""
        return str(value)

    def clock() -> str:
        """The time."""
        return "noon"

    server = OpenAIServer().start()
    model = OpenAIChatModel("m", base_url=server.url, api_key="sk-test")
    try:
        server.script(*[Reply([text(f"answer {i}")]) for i in range(5)])
        agent = ReActAgent(name="a", model=model, toolkit=Toolkit([echo]))
        await agent.acall("one")
        await agent.acall("two")  # unchanged: the kept JSON
        agent.toolkit.register_tool(clock)
        await agent.acall("three")
        spec = agent.toolkit.get("clock")
        assert spec is not None
        spec.description = "What time it is."
        await agent.acall("four")
        agent.toolkit.remove_tool("echo")
        await agent.acall("five")
    finally:
        await model.aclose()
        server.stop()
    seen = [[(t["function"]["name"], t["function"]["description"])
             for t in r.body["tools"]] for r in server.requests]
    assert seen == [
        [("echo", "Echo a number.")],
        [("echo", "Echo a number.")],
        [("echo", "Echo a number."), ("clock", "The time.")],
        [("echo", "Echo a number."), ("clock", "What time it is.")],
        [("clock", "What time it is.")],
    ]
