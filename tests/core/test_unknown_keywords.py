"""Records refuse keywords they do not have, naming the closest real one; reading
stored JSON stays tolerant (issue 24, item 5)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from rx_agent import (
    AgentResultEvent,
    AgentState,
    ChatUsage,
    CustomEvent,
    GenerateOptions,
    GenerateReason,
    Msg,
    PermissionRule,
    RequestStopEvent,
    Role,
    RuntimeContext,
    TextBlock,
    TextBlockDeltaEvent,
    ToolResultBlock,
    ToolUseBlock,
    parse_event,
)
from rx_agent._record import Record
from rx_agent.middleware.inputs import ActingInput, AgentFinishOutcome, ModelCallInput

CALL = ToolUseBlock("c1", "add", {"a": 1})


@pytest.mark.parametrize(
    ("build", "message"),
    [
        # Java camelCase: the snake_case name, as the builder's setters answer.
        (lambda: RequestStopEvent("why", generateReason=GenerateReason.ALL_TOOLS_DENIED),
         "RequestStopEvent() got an unexpected keyword argument 'generateReason'; "
         "did you mean `generate_reason`?"),
        (lambda: RuntimeContext(userId="u1"),
         "RuntimeContext() got an unexpected keyword argument 'userId'; did you mean `user_id`?"),
        (lambda: AgentState(session_id="s", userId="u1"),
         "AgentState() got an unexpected keyword argument 'userId'; did you mean `user_id`?"),
        (lambda: TextBlockDeltaEvent(replyId="r", block_id="text", delta="x"),
         "'replyId'; did you mean `reply_id`?"),
        (lambda: ActingInput(toolCalls=(CALL,)),
         "ActingInput() got an unexpected keyword argument 'toolCalls'; "
         "did you mean `tool_calls`?"),
        (lambda: ActingInput((CALL,)).with_(toolCalls=()),
         "ActingInput.with_() got an unexpected keyword argument 'toolCalls'; "
         "did you mean `tool_calls`?"),
        (lambda: GenerateOptions(maxTokens=10), "'maxTokens'; did you mean `max_tokens`?"),
        (lambda: GenerateOptions().with_(toolChoice="none"),
         "'toolChoice'; did you mean `tool_choice`?"),
        # A name the class means by another field.
        (lambda: CustomEvent("progress", data={"done": 3}),
         "CustomEvent() got an unexpected keyword argument 'data'; did you mean `value`?"),
        (lambda: Msg("assistant", toolCalls=[CALL]),
         "Msg() got an unexpected keyword argument 'toolCalls'; did you mean `content`? "
         "(`tool_calls` is read-only: it is derived from `content`)"),
        (lambda: Msg("assistant", tool_calls=[CALL]), "did you mean `content`?"),
        (lambda: ToolUseBlock("c1", "add", arguments={"a": 1}),
         "'arguments'; did you mean `input`?"),
        (lambda: ToolResultBlock("c1", "add", result="3"), "'result'; did you mean `output`?"),
        (lambda: ChatUsage(prompt_tokens=3), "'prompt_tokens'; did you mean `input_tokens`?"),
        # A near spelling.
        (lambda: TextBlock(txt="hi"), "'txt'; did you mean `text`?"),
        (lambda: Msg("user", "hi", generate_reasn=GenerateReason.MODEL_STOP),
         "did you mean `generate_reason`?"),
        (lambda: AgentFinishOutcome(results=None), "'results'; did you mean `result`?"),
    ],
)
def test_an_unknown_keyword_names_the_closest_field(build: Callable[[], Any],
                                                    message: str) -> None:
    with pytest.raises(TypeError) as info:
        build()
    assert message in str(info.value)


def test_without_a_close_name_the_error_lists_what_the_class_takes() -> None:
    with pytest.raises(TypeError, match=r"Msg\(\) got an unexpected keyword argument 'userId' "
                       r"\(it takes: content, created_at, generate_reason, id, metadata, name, "
                       r"role, usage\)"):
        Msg("user", "hi", userId="u1")
    with pytest.raises(TypeError, match=r"'trace' \(it takes: attributes, run_id, session_id, "
                       r"user_id\)"):
        RuntimeContext("s", trace="t")


def test_model_call_input_names_agentscope_pythons_current_model() -> None:
    inp = ModelCallInput((), (), GenerateOptions(), object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"'current_model'; did you mean `model`\?"):
        inp.with_(current_model=object())


def test_known_keywords_and_positional_forms_still_work() -> None:
    assert RequestStopEvent("why", GenerateReason.ALL_TOOLS_DENIED).generate_reason \
        is GenerateReason.ALL_TOOLS_DENIED
    assert CustomEvent("progress", {"done": 3}).value == {"done": 3}
    assert Msg(role="assistant", content=[CALL]).tool_calls == [CALL]
    assert RuntimeContext(user_id="u1").user_id == "u1"
    assert ActingInput((CALL,)).with_(tool_calls=[CALL]).tool_calls == (CALL,)


def test_assigning_an_unknown_attribute_is_refused() -> None:
    state = AgentState(session_id="s")
    with pytest.raises(ValueError, match=r'"AgentState" object has no field "userId"; '
                       r"did you mean `user_id`\?"):
        state.userId = "u1"  # type: ignore[attr-defined]
    msg = Msg("user", "hi")
    with pytest.raises(ValueError, match='"Msg" object has no field "contnt"'):
        msg.contnt = []  # type: ignore[attr-defined]
    msg.generate_reason = GenerateReason.MODEL_STOP  # fields still assign
    assert msg.model_extra == {}


# -- reading stays tolerant ----------------------------------------------------------


def test_parse_event_ignores_fields_a_newer_version_added() -> None:
    event = parse_event({"type": "request_stop", "reason": "budget", "severity": "high"})
    assert isinstance(event, RequestStopEvent)
    assert event.reason == "budget"
    assert "severity" not in event.model_dump_json()  # events drop them

    text = AgentResultEvent(result=Msg("assistant", "done")).model_dump_json()
    data = json.loads(text)
    data["trace_id"] = "t1"
    data["result"]["signature"] = "s1"
    data["result"]["content"][0]["cache"] = True
    parsed = parse_event(json.dumps(data))
    assert isinstance(parsed, AgentResultEvent)
    assert parsed.result.text == "done"
    # A message keeps what it does not know (it may be stored again).
    assert parsed.result.model_extra == {"signature": "s1"}
    assert parsed.result.content[0].model_extra == {"cache": True}


def test_stored_records_keep_unknown_fields_through_a_round_trip() -> None:
    stored = {"session_id": "s", "context": [
        {"role": "assistant", "content": [{"type": "text", "text": "hi", "cache": True}],
         "signature": "s1"}],
        "permission_rules": [{"pattern": "fs.*", "decision": "deny", "expires": 5}],
        "budget": {"left": 10}}
    state = AgentState.model_validate(stored)
    assert state.model_extra == {"budget": {"left": 10}}
    again = json.loads(state.model_dump_json())
    assert again["budget"] == {"left": 10}
    assert again["context"][0]["signature"] == "s1"
    assert again["context"][0]["content"][0]["cache"] is True
    assert again["permission_rules"][0]["expires"] == 5
    assert PermissionRule.model_validate(again["permission_rules"][0]).decision == "deny"


def test_the_runtimes_fast_paths_never_check_keywords(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Any, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a fast path went through the checking constructor")

    monkeypatch.setattr(Record, "__init__", refuse)
    from rx_agent.agent._blocks import _delta_make

    block = TextBlock._fast({"type": "text", "text": "hi"})
    msg = Msg.make(Role.ASSISTANT, [block])
    event = RequestStopEvent.make("agent", reason="r")
    delta = _delta_make("agent", "r1", "text", "hi")
    assert msg.text == "hi" and event.reason == "r" and delta.delta == "hi"
    assert msg.model_extra == {} and block.model_extra == {}
    # Validating data does not call it either.
    data = {"role": "user", "content": [{"type": "text", "text": "x"}], "newer": 1}
    assert Msg.model_validate(data).text == "x"


def test_the_generated_constructors_behave_as_the_dataclass_ones() -> None:
    from rx_agent.middleware.inputs import ReasoningInput

    call_tuple = (CALL,)
    assert ActingInput([CALL]).tool_calls == call_tuple  # __post_init__ still runs
    first, second = ReasoningInput(()), ReasoningInput(())
    assert first == second and first.options is not second.options  # a factory per call
    assert ReasoningInput((), None).tools == ()
    assert GenerateOptions(stop=["x"]).stop == ("x",)
    with pytest.raises(TypeError, match=r"ModelCallInput.__init__\(\) missing 2 required "
                       r"arguments: 'options', 'model'"):
        ModelCallInput((), ())  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="takes from"):
        ActingInput(call_tuple, 1)  # type: ignore[call-arg]
    import inspect

    assert str(inspect.signature(ActingInput)) == "(tool_calls: 'tuple[ToolUseBlock, ...]') -> None"
