"""The public names and their constructors (docs/reference/api.md)."""

from __future__ import annotations

import dataclasses
import enum
import importlib

import pytest

import rx_agent
from rx_agent import (
    ActingInput,
    AgentInput,
    AgentState,
    ConfirmResult,
    DataBlock,
    ExtensionPoint,
    GenerateReason,
    HintBlock,
    MiddlewareBase,
    ModelCallInput,
    Msg,
    ReActAgent,
    ReasoningInput,
    RequestStopEvent,
    RuntimeContext,
    ScriptedModel,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

CORE_NAMES = [
    "MiddlewareBase",
    "ExtensionPoint",
    "AgentInput",
    "ReasoningInput",
    "ActingInput",
    "ModelCallInput",
    "RuntimeContext",
    "AgentState",
    "ReActAgent",
    "Msg",
    "TextBlock",
    "ThinkingBlock",
    "ToolUseBlock",
    "ToolResultBlock",
    "HintBlock",
    "DataBlock",
    "GenerateReason",
    "Toolkit",
    "tool",
    "ScriptedModel",
    "parse_event",
    "ConfirmResult",
    "AgentEvent",
    "AgentStartEvent",
    "AgentEndEvent",
    "AgentResultEvent",
    "ModelCallStartEvent",
    "ModelCallEndEvent",
    "TextBlockStartEvent",
    "TextBlockDeltaEvent",
    "TextBlockEndEvent",
    "ThinkingBlockStartEvent",
    "ThinkingBlockDeltaEvent",
    "ThinkingBlockEndEvent",
    "DataBlockStartEvent",
    "DataBlockDeltaEvent",
    "DataBlockEndEvent",
    "ToolCallStartEvent",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolResultStartEvent",
    "ToolResultTextDeltaEvent",
    "ToolResultDataDeltaEvent",
    "ToolResultEndEvent",
    "ToolResultState",
    "ExceedMaxItersEvent",
    "RequireUserConfirmEvent",
    "UserConfirmResultEvent",
    "RequireExternalExecutionEvent",
    "ExternalExecutionResultEvent",
    "RequestStopEvent",
    "AllToolsDeniedEvent",
    "HintBlockEvent",
    "CustomEvent",
]
BUILTIN_NAMES = [
    "OtelTracingMiddleware",
    "FinalAnswerFilterMiddleware",
    "TaskReminderMiddleware",
    "TodoTools",
    "OpenAIChatModel",
]


@pytest.mark.parametrize("name", CORE_NAMES)
def test_core_name_is_importable_from_top_level(name: str) -> None:
    module = importlib.import_module("rx_agent")
    assert getattr(module, name) is not None


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_builtin_name_is_importable_from_top_level(name: str) -> None:
    module = importlib.import_module("rx_agent")
    assert getattr(module, name) is not None


def test_star_import_exposes_every_pinned_name() -> None:
    namespace: dict[str, object] = {}
    exec("from rx_agent import *", namespace)
    missing = [n for n in CORE_NAMES + BUILTIN_NAMES if n not in namespace]
    assert not missing


def test_extension_point_is_an_enum_with_the_seven_points_and_compress() -> None:
    assert issubclass(ExtensionPoint, enum.Enum)
    assert ExtensionPoint.ON_COMPRESS_CONTEXT.value == "on_compress_context"
    assert ExtensionPoint.ON_COMPRESS_CONTEXT.kind == "onion"
    assert {p.name for p in ExtensionPoint} - {"ON_COMPRESS_CONTEXT"} == {
        "ON_AGENT",
        "ON_REASONING",
        "ON_ACTING",
        "ON_MODEL_CALL",
        "ON_SYSTEM_PROMPT",
        "ON_AGENT_STATE_READY",
        "ON_AGENT_FINISH",
    }


def test_generate_reason_is_an_enum_with_the_java_members() -> None:
    assert issubclass(GenerateReason, enum.Enum)
    assert {r.name for r in GenerateReason} == {
        "MODEL_STOP",
        "TOOL_CALLS",
        "STRUCTURED_OUTPUT",
        "TOOL_SUSPENDED",
        "REASONING_STOP_REQUESTED",
        "ACTING_STOP_REQUESTED",
        "PERMISSION_ASKING",
        "MIDDLEWARE_STOP_REQUESTED",
        "ALL_TOOLS_DENIED",
        "INTERRUPTED",
        "MAX_ITERATIONS",
        "TOOL_RETURN_DIRECT",
    }


def test_tool_result_state_has_the_five_states() -> None:
    from rx_agent import ToolResultState

    assert {s.name for s in ToolResultState} == {
        "SUCCESS",
        "ERROR",
        "DENIED",
        "SUSPENDED",
        "INTERRUPTED",
    }


def test_middleware_base_defaults_order_one_and_all_points() -> None:
    mw = MiddlewareBase()
    assert mw.order() == 1
    assert mw.active_points() is None


# -- messages and blocks -----------------------------------------------------------------------


def test_msg_positional_role_and_str_content() -> None:
    msg = Msg("user", "hello")
    assert str(getattr(msg.role, "value", msg.role)) == "user"
    assert msg.text == "hello"
    assert msg.name is None
    assert msg.metadata is None
    assert msg.generate_reason is None
    assert msg.tool_calls == []


def test_msg_positional_name_and_metadata() -> None:
    msg = Msg("assistant", "x", "bob", {"k": 1})
    assert msg.name == "bob"
    assert msg.metadata == {"k": 1}


def test_msg_keyword_construction() -> None:
    msg = Msg(role="system", content="be brief")
    assert msg.text == "be brief"


@pytest.mark.parametrize("role", ["user", "assistant", "system", "tool"])
def test_msg_accepts_every_role(role: str) -> None:
    msg_role = Msg(role, "x").role
    assert getattr(msg_role, "value", msg_role) == role


def test_msg_text_concatenates_only_text_blocks() -> None:
    msg = Msg(
        "assistant",
        [
            TextBlock("a"),
            ThinkingBlock("hidden"),
            TextBlock("b"),
            ToolUseBlock("c1", "add", {"a": 1}),
        ],
    )
    assert msg.text == "ab"


def test_msg_tool_calls_lists_tool_use_blocks_in_order() -> None:
    c1, c2 = ToolUseBlock("c1", "a", {}), ToolUseBlock("c2", "b", {"x": 1})
    msg = Msg("assistant", [TextBlock("t"), c1, c2])
    assert [c.id for c in msg.tool_calls] == ["c1", "c2"]


def test_text_block_positional() -> None:
    assert TextBlock("hi").text == "hi"


def test_thinking_block_positional() -> None:
    assert ThinkingBlock("hmm").thinking == "hmm"


def test_tool_use_block_positional() -> None:
    block = ToolUseBlock("id1", "search", {"q": "x"})
    assert (block.id, block.name, block.input) == ("id1", "search", {"q": "x"})
    assert isinstance(block.input, dict)


def test_tool_result_block_positional_with_state_keyword() -> None:
    from rx_agent import ToolResultState

    block = ToolResultBlock("id1", "search", "found", state=ToolResultState.ERROR)
    assert (block.id, block.name, block.output, block.state) == (
        "id1",
        "search",
        "found",
        ToolResultState.ERROR,
    )


def test_tool_result_block_output_may_be_a_list_of_blocks() -> None:
    block = ToolResultBlock("id1", "search", [TextBlock("a"), TextBlock("b")])
    assert [b.text for b in block.output] == ["a", "b"]


def test_hint_and_data_blocks_exist() -> None:
    assert HintBlock is not None and DataBlock is not None


def test_confirm_result_positional() -> None:
    call = ToolUseBlock("c1", "rm", {"path": "/tmp/x"})
    result = ConfirmResult(call, True)
    assert result.tool_call == call
    assert result.confirmed is True
    assert result.reason is None
    assert result.rules is None


def test_confirm_result_positional_reason() -> None:
    result = ConfirmResult(ToolUseBlock("c1", "rm", {}), False, "no")
    assert (result.confirmed, result.reason) == (False, "no")


def test_request_stop_event_positional() -> None:
    event = RequestStopEvent("budget", GenerateReason.ALL_TOOLS_DENIED)
    assert event.reason == "budget"
    assert event.generate_reason is GenerateReason.ALL_TOOLS_DENIED


def test_request_stop_event_defaults_to_middleware_stop_requested() -> None:
    assert RequestStopEvent("x").generate_reason is GenerateReason.MIDDLEWARE_STOP_REQUESTED


# -- input records -----------------------------------------------------------------------------


def _model() -> ScriptedModel:
    return ScriptedModel([])


def test_input_records_construct_positionally() -> None:
    msgs = [Msg("user", "hi")]
    calls = [ToolUseBlock("c1", "add", {})]
    agent_in = AgentInput(msgs)
    reasoning_in = ReasoningInput(msgs, [], None)
    acting_in = ActingInput(calls)
    model_in = ModelCallInput(msgs, [], None, _model())
    assert list(agent_in.msgs) == msgs
    assert list(reasoning_in.messages) == msgs
    assert list(acting_in.tool_calls) == calls
    assert list(model_in.messages) == msgs
    assert isinstance(model_in.model, ScriptedModel)


@pytest.mark.parametrize(
    ("factory", "field"),
    [
        (lambda: AgentInput([Msg("user", "hi")]), "msgs"),
        (lambda: ReasoningInput([], [], None), "messages"),
        (lambda: ActingInput([]), "tool_calls"),
        (lambda: ModelCallInput([], [], None, _model()), "tools"),
    ],
)
def test_input_records_are_immutable(factory, field: str) -> None:  # type: ignore[no-untyped-def]
    record = factory()
    with pytest.raises((AttributeError, TypeError, ValueError, dataclasses.FrozenInstanceError)):
        setattr(record, field, [])


def test_changed_copy_of_an_input_leaves_the_original() -> None:
    from conftest import changed

    original = AgentInput([Msg("user", "a")])
    copy = changed(original, msgs=[Msg("user", "b")])
    assert [m.text for m in original.msgs] == ["a"]
    assert [m.text for m in copy.msgs] == ["b"]


# -- context and state -------------------------------------------------------------------------


def test_runtime_context_positional_ids() -> None:
    ctx = RuntimeContext("s1", "u1", "r1")
    assert (ctx.session_id, ctx.user_id, ctx.run_id) == ("s1", "u1", "r1")


def test_runtime_context_defaults() -> None:
    ctx = RuntimeContext()
    assert ctx.session_id is None
    assert ctx.user_id is None
    assert ctx.agent_state is None


def test_agent_state_has_live_context_and_ids() -> None:
    state = AgentState(session_id="s", user_id="u")
    assert state.context == []
    assert (state.session_id, state.user_id) == ("s", "u")
    state.context.append(Msg("user", "x"))
    assert state.context[0].text == "x"


# -- agent construction ------------------------------------------------------------------------


def test_agent_keyword_construction() -> None:
    agent = ReActAgent(name="kw", sys_prompt="p", model=_model())
    assert agent.name == "kw"


def test_builder_setters_are_chainable_and_build() -> None:
    from rx_agent import Toolkit

    ctx = RuntimeContext()
    b = ReActAgent.builder()
    for setter, value in [
        ("name", "b"),
        ("sys_prompt", "p"),
        ("model", _model()),
        ("toolkit", Toolkit()),
        ("middleware", MiddlewareBase()),
        ("middlewares", [MiddlewareBase()]),
        ("max_iters", 3),
        ("max_retries", 2),
        ("fallback_model", _model()),
        ("failover_listener", lambda m, e: None),
        ("tool_execution_context", ctx),
    ]:
        returned = getattr(b, setter)(value)
        assert returned is b, f"builder.{setter}() must return the builder"
    agent = b.build()
    assert isinstance(agent, ReActAgent)
    assert len(agent.middlewares) == 2


def test_builder_has_session_store_and_enable_task_list_setters() -> None:
    b = ReActAgent.builder()
    assert callable(b.session_store)
    assert callable(b.enable_task_list)


@pytest.mark.parametrize("n", [0, -1])
def test_builder_max_retries_non_positive_raises_at_the_setter(n: int) -> None:
    b = ReActAgent.builder()
    with pytest.raises(ValueError):
        b.max_retries(n)


def test_agent_without_middleware_has_empty_middlewares_tuple() -> None:
    agent = ReActAgent.builder().name("a").model(_model()).build()
    assert agent.middlewares == ()
    assert isinstance(agent.middlewares, tuple)


def test_agent_keyword_construction_without_middleware_has_empty_middlewares() -> None:
    assert ReActAgent(name="a", model=_model()).middlewares == ()


def test_enable_task_list_adds_its_middleware_visibly() -> None:
    agent = ReActAgent.builder().name("a").model(_model()).enable_task_list(True).build()
    assert [type(m).__name__ for m in agent.middlewares] == ["TaskReminderMiddleware"]


def test_agent_exposes_plan_participants() -> None:
    agent = ReActAgent(name="a", model=_model())
    for point in ExtensionPoint:
        assert tuple(agent.plan.participants(point)) == ()


def test_top_level_all_lists_public_names() -> None:
    exported = set(getattr(rx_agent, "__all__", ()))
    assert set(CORE_NAMES) <= exported


def test_all_input_records_use_one_copy_api() -> None:
    records = [
        AgentInput([]),
        ReasoningInput([], [], None),
        ActingInput([]),
        ModelCallInput([], [], None, _model()),
    ]
    apis = {
        (hasattr(r, "with_"), dataclasses.is_dataclass(r), hasattr(r, "model_copy"))
        for r in records
    }
    assert len(apis) == 1, f"input records do not share one copy API: {apis}"
