"""Java names on records and events answer with the Python name (issue 10, item 15)."""

from __future__ import annotations

import copy
import pickle

import pytest

from rx_agent import (
    AgentState,
    Msg,
    TextBlock,
    TextBlockDeltaEvent,
    ToolUseBlock,
)


@pytest.mark.parametrize(
    ("obj", "java", "python"),
    [
        (Msg("assistant", "hi"), "toolCalls", "tool_calls"),
        (Msg("assistant", "hi"), "generateReason", "generate_reason"),
        (Msg("assistant", "hi"), "getContent", "content"),
        (ToolUseBlock("c1", "add", {}), "getInput", "input"),
        (TextBlockDeltaEvent(reply_id="r", block_id="text", delta="x"), "replyId", "reply_id"),
        (TextBlockDeltaEvent(reply_id="r", block_id="text", delta="x"), "getBlockId", "block_id"),
        (AgentState(session_id="s"), "getContext", "context"),
        (AgentState(session_id="s"), "userId", "user_id"),
    ],
)
def test_java_names_suggest_the_python_attribute(obj: object, java: str, python: str) -> None:
    with pytest.raises(AttributeError, match=f"has no attribute '{java}'; did you mean `{python}`"):
        getattr(obj, java)


def test_a_getter_name_says_the_python_name_is_an_attribute() -> None:
    with pytest.raises(AttributeError, match=r"read `\.text`, without a call"):
        Msg("user", "hi").getText()  # type: ignore[attr-defined]


def test_names_without_a_python_counterpart_keep_the_plain_error() -> None:
    with pytest.raises(AttributeError, match="'Msg' object has no attribute 'getFoo'"):
        Msg("user", "hi").getFoo()  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="'TextBlock' object has no attribute 'nope'"):
        TextBlock("x").nope  # type: ignore[attr-defined]


def test_models_still_copy_and_pickle() -> None:
    msg = Msg("user", "hi")
    assert copy.deepcopy(msg) == msg
    assert pickle.loads(pickle.dumps(msg)) == msg
    state = AgentState(session_id="s", context=[msg])
    assert pickle.loads(pickle.dumps(state)).context[0].text == "hi"
