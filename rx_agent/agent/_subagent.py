"""``agent.as_tool()``: one agent as a tool of another.

Each call of the tool is one reply of the sub-agent, in a session slot of its own
derived from the parent call (``{parent session}/{tool name}/{tool call id}``), with
a context that reads the parent's attributes underneath its own. Its events reach
the parent's stream as :class:`~rx_agent.NestedEvent` (``scope="sub_agent"``) between
the call's ``ToolResultStartEvent`` and ``ToolResultEndEvent``; its final text is the
result the parent's model reads.

Interrupt and disposal cross in both directions: interrupting or disposing the
parent's call cancels the tool, which disposes the sub-agent's stream (its state is
saved as on any disposal); a sub-agent reply that ends ``INTERRUPTED`` (someone
interrupted its session) gives an ``INTERRUPTED`` result and interrupts the parent's
call.

With ``inherit_middlewares=True`` the sub-agent also runs the parent's model-call and
tool middlewares (Blade passes its model and tool middleware to sub-agents), outside
its own; the sub-agent's tools and system prompt stay its own.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import OrderedDict
from collections.abc import Collection
from typing import Any, Protocol, cast

from ..context import RuntimeContext
from ..event import AgentEvent, AgentResultEvent, NestedEvent
from ..message import GenerateReason, Msg, Role, ToolResultBlock, ToolResultState
from ..middleware._plan import ExecutionPlan
from ..middleware.base import ExtensionPoint, MiddlewareBase
from ..tool._call import current_tool_call
from ..tool._caller import CallerTools
from ..tool.toolkit import Tool
from ._config import AgentConfig


class SubAgent(Protocol):
    """What a sub-agent tool uses of any agent (a local one, or a remote ``A2AAgent``)."""

    @property
    def name(self) -> str: ...
    def stream(self, msgs: Any = None, ctx: RuntimeContext | None = None) -> Any: ...


class ReActAgent(SubAgent, Protocol):
    """What it uses of a local agent (``react.ReActAgent``, which imports this module):
    the system prompt for the description, the plan for ``inherit_middlewares``."""

    @property
    def sys_prompt(self) -> str: ...
    @property
    def config(self) -> AgentConfig: ...

__all__ = ["INHERITED_POINTS", "SubAgent", "agent_tool"]

INHERITED_POINTS = frozenset({ExtensionPoint.ON_MODEL_CALL, ExtensionPoint.ON_ACTING})
"""The points at which ``inherit_middlewares=True`` runs the parent's middlewares."""

_PAUSED = {GenerateReason.PERMISSION_ASKING, GenerateReason.TOOL_SUSPENDED}
_DERIVED_KEPT = 16

_NO_CALLER_TOOLS = CallerTools(())


def agent_tool(
    agent: SubAgent, name: str | None, description: str | None, inherit_middlewares: bool
) -> Tool:
    """The tool that runs ``agent`` (see the module docs)."""
    if not isinstance(inherit_middlewares, bool):
        raise TypeError(f"inherit_middlewares must be a bool, got {inherit_middlewares!r}")
    if description is not None and (not isinstance(description, str) or not description.strip()):
        raise ValueError("description must be a non-empty str")
    tool_name = name if name is not None else agent.name
    # Per parent plan (by identity; plans are slotted, so no weak keys), a few kept.
    derived: OrderedDict[int, tuple[ExecutionPlan, SubAgent]] = OrderedDict()

    def runner(parent_plan: ExecutionPlan | None) -> SubAgent:
        if not inherit_middlewares or parent_plan is None or not parent_plan.middlewares:
            return agent
        hit = derived.get(id(parent_plan))
        if hit is not None and hit[0] is parent_plan:
            derived.move_to_end(id(parent_plan))
            return hit[1]
        sub = _with_parent_middlewares(cast(ReActAgent, agent), parent_plan)
        derived[id(parent_plan)] = (parent_plan, sub)
        if len(derived) > _DERIVED_KEPT:
            derived.popitem(last=False)
        return sub

    async def run(task: str) -> ToolResultBlock:
        handle = current_tool_call()
        owner = handle.owner if handle is not None else None
        parent_ctx: RuntimeContext | None = owner.tool_ctx if owner is not None else None
        call_id = handle.id if handle is not None else "direct"
        parent_session = (parent_ctx.session_id or parent_ctx.run_id) if parent_ctx else "direct"
        ctx = RuntimeContext(session_id=f"{parent_session}/{tool_name}/{call_id}",
                             user_id=parent_ctx.user_id if parent_ctx else None)
        ctx = ctx._with_fallback(parent_ctx)
        # The caller's own tools (a front end's) are the outer call's: the sub-agent
        # cannot hand a call to them back to the caller.
        ctx.put(CallerTools, _NO_CALLER_TOOLS)
        parent_plan = getattr(owner.agent, "plan", None) if owner is not None else None
        sub = runner(parent_plan if isinstance(parent_plan, ExecutionPlan) else None)
        result = await _reply(sub, ctx, Msg(role=Role.USER, content=task), handle)
        reason = result.generate_reason
        text = result.text
        if reason is GenerateReason.INTERRUPTED:
            if owner is not None:
                owner.request_interrupt()
            return ToolResultBlock(call_id, tool_name, text or "The sub-agent was interrupted.",
                                   ToolResultState.INTERRUPTED)
        if reason in _PAUSED:
            return ToolResultBlock(
                call_id, tool_name,
                f"Error: the sub-agent {agent.name!r} paused for a human decision "
                f"({reason.value}), which a sub-agent run as a tool cannot wait for.",
                ToolResultState.ERROR)
        return ToolResultBlock(call_id, tool_name, text or "(the sub-agent gave no answer)")

    return Tool(run, name=tool_name,
                description=description if description is not None else _description(agent))


async def _reply(sub: SubAgent, ctx: RuntimeContext, msg: Msg, handle: Any) -> Msg:
    """Run one reply of ``sub``, forwarding its events; its final message."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Msg] = loop.create_future()
    result: list[Msg] = []

    def on_next(event: AgentEvent) -> None:
        if type(event) is AgentResultEvent:
            result.append(event.result)
        if handle is not None:
            handle.emit(NestedEvent.make(handle.source, scope="sub_agent", event=event,
                                         agent=sub.name, tool_call_id=handle.id))

    def settle(fn: Any, *args: Any) -> None:
        if not done.done():
            fn(*args)

    def on_error(exc: Exception) -> None:
        loop.call_soon_threadsafe(settle, done.set_exception, exc)

    def on_completed() -> None:
        if result:
            loop.call_soon_threadsafe(settle, done.set_result, result[-1])
        else:
            loop.call_soon_threadsafe(settle, done.set_exception,
                                      RuntimeError(f"sub-agent {sub.name!r} gave no result"))

    subscription = sub.stream([msg], ctx).subscribe(on_next, on_error, on_completed)
    try:
        return await done
    finally:
        subscription.dispose()  # a cancelled tool (parent interrupted or disposed) included


def _description(agent: SubAgent) -> str:
    prompt = str(getattr(agent, "sys_prompt", "")).strip()
    first = prompt.splitlines()[0] if prompt else ""
    about = f" Its instructions begin: {first[:200]}" if first else ""
    return (f"Ask the agent {agent.name!r} to carry out a task; it answers with its final "
            f"reply.{about}")


# -- inherited middlewares -----------------------------------------------------------


class _Inherited(MiddlewareBase):
    """A parent's middleware as the sub-agent runs it: at the inherited points only.

    Its hooks are the plan's prepared (form-adapted) hooks of the original, so a
    ctx-less or ``async def`` original behaves as it does in the parent."""

    def __init__(self, inner: MiddlewareBase, points: Collection[ExtensionPoint],
                 hooks: dict[str, Any]) -> None:
        self._inner = inner
        self._points = frozenset(points)
        self.__dict__.update(hooks)

    def order(self) -> int:
        return self._inner.order()

    def active_points(self) -> Collection[ExtensionPoint]:
        return self._points

    def __repr__(self) -> str:
        return f"inherited {self._inner!r}"


_CLASSES: dict[type, type[_Inherited]] = {}


def _adapter_class(cls: type) -> type[_Inherited]:
    # Named after the original so the sub-agent's plan shows the middleware's own name.
    found = _CLASSES.get(cls)
    if found is None:
        found = _CLASSES[cls] = type(cls.__name__, (_Inherited,), {"__module__": cls.__module__})
    return found


def _with_parent_middlewares(agent: ReActAgent, parent: ExecutionPlan) -> ReActAgent:
    adapted: list[MiddlewareBase] = []
    for mw in parent.middlewares:
        points = [p for p in INHERITED_POINTS if mw in parent.participants(p)]
        if not points:
            continue
        hooks = {p.value: getattr(mw, p.value) for p in points}
        adapted.append(_adapter_class(type(mw))(mw, points, hooks))
    if not adapted:
        return agent
    clone = object.__new__(type(agent))
    clone.__dict__.update(agent.__dict__)  # the same slots and store: one set of sessions
    config = agent.config
    plan = ExecutionPlan([*adapted, *config.plan.middlewares])
    clone.__dict__["_config"] = dataclasses.replace(config, plan=plan)
    return clone
