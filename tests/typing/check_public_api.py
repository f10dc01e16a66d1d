"""Type-checked (not run) by ``nox -s lint``: the documented usage must type-check
under ``mypy --strict``, positional constructors included."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactivex import Observable
from reactivex import operators as ops

from rx_agent import (
    ActingInput,
    AgentEvent,
    ConfirmResult,
    CustomEvent,
    ExtensionPoint,
    GenerateReason,
    MiddlewareBase,
    ModelCallInput,
    Msg,
    ReActAgent,
    RequestStopEvent,
    RuntimeContext,
    ScriptedModel,
    TextBlock,
    ThinkingBlock,
    Toolkit,
    ToolResultBlock,
    ToolResultState,
    ToolUseBlock,
    UserConfirmResultEvent,
    tool,
)
from rx_agent.builtin.router import ChatModelCandidate, ModelRouterMiddleware
from rx_agent.middleware import Agent
from rx_agent.model.classifier import (
    BinaryQuestion,
    ChoiceAnswer,
    ChoiceQuestion,
    ClassifierModelBase,
    ClassifierResponse,
    ClassifierState,
    ScoreQuestion,
)
from rx_agent.tool import Tool, ToolMiddleware, ToolNext, answer

text = TextBlock("hi")
call = ToolUseBlock("c1", "weather", {"city": "Paris"})
result = ToolResultBlock("c1", "weather", "sunny", ToolResultState.SUCCESS)
msg = Msg("user", "hello")
msg2 = Msg("assistant", [text, ThinkingBlock("hmm"), call])
stop = RequestStopEvent("All tools denied by user", GenerateReason.ALL_TOOLS_DENIED)
confirm = UserConfirmResultEvent("r1", [ConfirmResult(call, True)])
custom = CustomEvent("progress", {"percent": 50})


@tool
def weather(city: str) -> str:
    """Weather in a city."""
    return city


class Timing(MiddlewareBase):
    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_MODEL_CALL, ExtensionPoint.ON_ACTING}

    def on_model_call(
        self, agent: Agent, ctx: RuntimeContext, input: ModelCallInput, next: Any
    ) -> Observable[AgentEvent]:
        result: Observable[AgentEvent] = next(input.with_(messages=input.messages))
        return result.pipe(ops.do_action(on_completed=lambda: None))

    def on_acting(
        self, agent: Agent, ctx: RuntimeContext, input: ActingInput, next: Any
    ) -> Observable[AgentEvent]:
        result: Observable[AgentEvent] = next(input)
        return result


agent = (
    ReActAgent.builder()
    .name("typed")
    .model(ScriptedModel(["ok"]))
    .toolkit(Toolkit([weather]))
    .middleware(Timing())
    .max_retries(2)
    .build()
)
final: Msg = agent.call_sync("hi", RuntimeContext(session_id="s"))
events: Observable[AgentEvent] = agent.stream([msg])


# A permission handler (plain or async) answers with a bool, a str, a ConfirmResult or None.
def approve(call: ToolUseBlock, ctx: RuntimeContext) -> bool | None:
    return True if call.name == "weather" else None


async def approve_async(call: ToolUseBlock, ctx: RuntimeContext) -> ConfirmResult:
    return ConfirmResult(call, False, reason="no")


guarded = ReActAgent(name="guarded", model=ScriptedModel(["ok"]), permission_handler=approve)
guarded2 = ReActAgent.builder().name("g").model(ScriptedModel(["ok"])) \
    .permission_handler(approve_async).build()


# AgentScope Python's classifier models route a ModelRouterMiddleware.
class Classifier(ClassifierModelBase):
    async def __call__(
        self,
        state: ClassifierState,
        questions: Mapping[str, BinaryQuestion | ChoiceQuestion | ScoreQuestion],
        **kwargs: Any,
    ) -> ClassifierResponse:
        choice = ChoiceAnswer(choice="fast", confidence=0.9, probabilities={"fast": 0.9})
        return ClassifierResponse(model=self.model, content={"chat_model": choice})


routed = ModelRouterMiddleware(Classifier("c"), [ChatModelCandidate("fast", ScriptedModel([]))])


# A tool's own middlewares: typed with the protocol, attached both ways.
def audit(tool: Tool, ctx: RuntimeContext | None, call: ToolUseBlock,
          next: ToolNext) -> Observable[AgentEvent]:
    if call.input.get("city") == "nowhere":
        return answer(call, "no such city", ToolResultState.ERROR)
    return next(call.model_copy(update={"input": {"city": "Paris"}}))


checked: ToolMiddleware = audit


@tool(middlewares=[checked])
def audited(city: str) -> str:
    """Weather in a city, audited."""
    return city


twice: Tool = audited.with_middleware(audit)


async def direct() -> ToolResultBlock:
    return await twice.execute({"city": "Lyon"}, RuntimeContext(), emit=lambda e: None)
