"""Input records: Java's null-tools normalization and Java names answered with the Python ones."""

from __future__ import annotations

import pytest
from conftest import make_agent

from rx_agent import (
    ActingInput,
    AgentInput,
    ExtensionPoint,
    MiddlewareBase,
    ModelCallInput,
    Msg,
    ReasoningInput,
    ScriptedModel,
    ToolUseBlock,
)
from rx_agent.middleware import AgentFinishOutcome


def test_model_call_input_normalizes_none_tools_to_an_empty_tuple() -> None:
    model = ScriptedModel([])
    assert ModelCallInput([], None, None, model).tools == ()  # type: ignore[arg-type]
    assert ModelCallInput([], [], None, model).with_(tools=None).tools == ()


def test_reasoning_input_normalizes_none_tools_too() -> None:
    assert ReasoningInput([], None, None).tools == ()  # type: ignore[arg-type]


def test_a_java_style_model_call_input_with_null_tools_reaches_the_model() -> None:
    class NoTools(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_MODEL_CALL}

        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            # new ModelCallInput(input.messages(), null, input.options(), input.model())
            return next(ModelCallInput(input.messages, None, input.options, input.model))  # type: ignore[arg-type]

    model = ScriptedModel(["ok"])
    assert make_agent(model, middlewares=[NoTools()]).call_sync("hi").text == "ok"
    assert model.calls[0].tools == ()


def test_other_sequences_are_still_refused() -> None:
    with pytest.raises(TypeError, match=r"ModelCallInput\.messages must be a sequence"):
        ModelCallInput(None, [], None, ScriptedModel([]))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("record", "java", "python"),
    [
        (ActingInput([ToolUseBlock("c1", "add", {})]), "toolCalls", "tool_calls"),
        (ActingInput([]), "getToolCalls", "tool_calls"),
        (AgentInput([Msg("user", "hi")]), "getMsgs", "msgs"),
        (ReasoningInput([], [], None), "getMessages", "messages"),
        (ModelCallInput([], [], None, ScriptedModel([])), "getModel", "model"),
        (AgentFinishOutcome(), "getResult", "result"),
    ],
)
def test_java_names_on_records_suggest_the_python_name(
    record: object, java: str, python: str
) -> None:
    with pytest.raises(AttributeError, match=f"did you mean `{python}`"):
        getattr(record, java)


def test_unknown_names_on_records_keep_the_plain_error() -> None:
    with pytest.raises(AttributeError, match="'ActingInput' object has no attribute 'calls'"):
        ActingInput([]).calls  # type: ignore[attr-defined]
