"""``ReActAgent``: the builder, the four ways to call, interrupt and sessions."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, Literal

from reactivex import Observable
from reactivex import abc as rxabc

from .._rx import (
    DirectObservable,
    aiter_observable,
    running_loop,
    runtime_loop,
    subscribe_direct,
)
from ..context import AgentState, RuntimeContext
from ..event import (
    AgentEvent,
    AgentResultEvent,
    ExternalExecutionResultEvent,
    PermissionRule,
    UserConfirmResultEvent,
)
from ..message import Msg, Role, TextBlock
from ..middleware.base import MiddlewareBase
from ..middleware.inputs import AgentInput
from ..middleware.plan import ExecutionPlan
from ..model.base import ChatModel
from ..options import GenerateOptions
from ..session import ANONYMOUS_USER, InMemorySessionStore, SessionKey, SessionStore
from ..tool.toolkit import Toolkit
from ._hitl import ResumeError, close_pending
from ._model_call import backoff_delay
from ._run import Run
from ._slots import SessionSlots

__all__ = ["AgentInputLike", "NoResultError", "ReActAgent", "ReActAgentBuilder", "ResumeError"]

AgentInputLike = (
    Msg | Sequence[Msg] | str | UserConfirmResultEvent | ExternalExecutionResultEvent | None
)
"""What ``stream``/``call`` accept: one ``Msg``, a list of them, a user ``str``, a resume
event, or ``None``."""

FailoverListener = Callable[[ChatModel, BaseException], Any]


class NoResultError(RuntimeError):
    """A call completed without an ``AgentResultEvent`` (a middleware dropped it)."""


def _normalize(msgs: AgentInputLike) -> AgentInput:
    if msgs is None:
        return AgentInput(())
    if isinstance(msgs, str):
        content = [TextBlock._fast({"type": "text", "text": msgs})] if msgs else []
        return AgentInput((Msg.make(Role.USER, content),))
    if isinstance(msgs, Msg):
        return AgentInput((msgs,))
    if isinstance(msgs, (UserConfirmResultEvent, ExternalExecutionResultEvent)):
        return AgentInput((), resume=msgs)
    if isinstance(msgs, Sequence) and not isinstance(msgs, bytes):
        items: list[Msg] = []
        for i, m in enumerate(msgs):
            if not isinstance(m, Msg):
                raise TypeError(f"input message #{i} is a {type(m).__name__}, not a Msg")
            items.append(m)
        return AgentInput(tuple(items))
    raise TypeError(
        "agent input must be a Msg, a list of Msg, a str, a UserConfirmResultEvent, "
        f"an ExternalExecutionResultEvent or None; got {type(msgs).__name__}"
    )


def _check_ctx(ctx: RuntimeContext | None) -> RuntimeContext | None:
    if ctx is not None and not isinstance(ctx, RuntimeContext):
        raise TypeError(f"ctx must be a RuntimeContext, not {type(ctx).__name__}")
    return ctx


class ReActAgent:
    """A reasoning-and-acting agent with a frozen middleware plan.

    Build it with keywords (``ReActAgent(name=..., model=...)``) or with
    ``ReActAgent.builder()...build()``. The plan is computed once here.
    """

    def __init__(
        self,
        name: str,
        model: ChatModel,
        sys_prompt: str = "",
        toolkit: Toolkit | None = None,
        middlewares: Iterable[MiddlewareBase] = (),
        *,
        max_iters: int = 10,
        max_retries: int = 3,
        fallback_model: ChatModel | None = None,
        failover_listener: FailoverListener | None = None,
        tool_execution_context: RuntimeContext | None = None,
        enable_task_list: bool = False,
        session_store: SessionStore | None = None,
        generate_options: GenerateOptions | None = None,
        retry_backoff: tuple[float, float] = (0.25, 8.0),
        permission_rules: Iterable[PermissionRule] = (),
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError("agent name must be a non-empty str")
        if not isinstance(model, ChatModel):
            raise TypeError(f"model must be a ChatModel, not {type(model).__name__}")
        if fallback_model is not None and not isinstance(fallback_model, ChatModel):
            raise TypeError(
                f"fallback_model must be a ChatModel, not {type(fallback_model).__name__}"
            )
        if not isinstance(sys_prompt, str):
            raise TypeError(f"sys_prompt must be a str, not {type(sys_prompt).__name__}")
        if toolkit is not None and not isinstance(toolkit, Toolkit):
            raise TypeError(f"toolkit must be a Toolkit, not {type(toolkit).__name__}")
        _check_positive("max_iters", max_iters)
        _check_positive("max_retries", max_retries)
        if failover_listener is not None and not callable(failover_listener):
            raise TypeError("failover_listener must be callable")
        if session_store is not None and not isinstance(session_store, SessionStore):
            raise TypeError("session_store must have load(key) and save(key, state)")
        initial, maximum = retry_backoff
        if initial < 0 or maximum < 0:
            raise ValueError("retry_backoff values must be >= 0")

        self._name = name
        self._model = model
        self.sys_prompt = sys_prompt
        self._toolkit = toolkit if toolkit is not None else Toolkit()
        registered = list(middlewares)
        if enable_task_list:
            from ..builtin.tasks import TaskReminderMiddleware, TodoTools

            if "todo_write" not in self._toolkit:
                self._toolkit.register_tool(TodoTools())
            registered.append(TaskReminderMiddleware())
        self._plan = ExecutionPlan(registered)
        self.max_iters = max_iters
        self.max_retries = max_retries
        self.fallback_model = fallback_model
        self.failover_listener = failover_listener
        self.tool_execution_context = _check_ctx(tool_execution_context)
        self.session_store: SessionStore = (
            session_store if session_store is not None else InMemorySessionStore()
        )
        self.generate_options = generate_options or GenerateOptions()
        self.retry_backoff = (float(initial), float(maximum))
        self.permission_rules: tuple[PermissionRule, ...] = tuple(permission_rules)
        for rule in self.permission_rules:
            if not isinstance(rule, PermissionRule):
                raise TypeError(f"permission_rules takes PermissionRule, not {type(rule).__name__}")
        self._slots = SessionSlots()

    @staticmethod
    def builder() -> ReActAgentBuilder:
        """A fluent builder with snake_case setters (Java's ``ReActAgent.builder()``)."""
        return ReActAgentBuilder()

    # -- read-only views -----------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> ChatModel:
        return self._model

    @property
    def toolkit(self) -> Toolkit:
        return self._toolkit

    @property
    def plan(self) -> ExecutionPlan:
        """The frozen execution plan (``print(agent.plan)`` shows it)."""
        return self._plan

    @property
    def middlewares(self) -> tuple[MiddlewareBase, ...]:
        """Every registered middleware in plan order, silent ones included."""
        return self._plan.middlewares

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        return backoff_delay(attempt, *self.retry_backoff, retry_after)

    # -- calling -------------------------------------------------------------------

    def stream(
        self, msgs: AgentInputLike = None, ctx: RuntimeContext | None = None
    ) -> Observable[AgentEvent]:
        """A cold Observable of the call's events; each subscription is one execution.

        Subscribe from any thread: inside a running asyncio loop the call runs on that
        loop; elsewhere on the runtime's own loop.
        """
        inp = _normalize(msgs)
        _check_ctx(ctx)

        def subscribe(
            observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
        ) -> rxabc.DisposableBase:
            return Run(self, ctx, inp).subscribe(observer, scheduler)

        return DirectObservable(subscribe)

    def call(
        self, msgs: AgentInputLike = None, ctx: RuntimeContext | None = None
    ) -> Observable[Msg]:
        """A cold Observable of the final message (one item)."""
        events = self.stream(msgs, ctx)

        def subscribe(observer: rxabc.ObserverBase[Msg], scheduler: Any = None) -> Any:
            result: list[Msg] = []

            def on_next(event: AgentEvent) -> None:
                if type(event) is AgentResultEvent or isinstance(event, AgentResultEvent):
                    result[:] = [event.result]

            def on_completed() -> None:
                if not result:
                    observer.on_error(NoResultError(
                        f"agent {self.name!r} completed without an AgentResultEvent "
                        "(did an on_agent middleware drop it?)"))
                    return
                observer.on_next(result[0])
                observer.on_completed()

            return subscribe_direct(events, on_next, observer.on_error, on_completed)

        return DirectObservable(subscribe)

    async def acall(self, msgs: AgentInputLike = None, ctx: RuntimeContext | None = None) -> Msg:
        """Run one call on the running loop and return the final message.

        Cancelling the awaiting task disposes the call."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Msg] = loop.create_future()
        box: list[Msg] = []

        def on_error(exc: Exception) -> None:
            if not future.done():
                future.set_exception(exc)

        def on_completed() -> None:
            if not future.done():
                future.set_result(box[-1])

        subscription = subscribe_direct(self.call(msgs, ctx), box.append, on_error, on_completed)
        try:
            return await future
        finally:
            subscription.dispose()

    def astream(
        self, msgs: AgentInputLike = None, ctx: RuntimeContext | None = None
    ) -> AsyncIterator[AgentEvent]:
        """``async for event in agent.astream(...)``; leaving the loop early disposes."""
        return aiter_observable(self.stream(msgs, ctx))

    def call_sync(self, msgs: AgentInputLike = None, ctx: RuntimeContext | None = None) -> Msg:
        """Block this thread until the call ends; not for use inside a running loop."""
        if running_loop() is not None:
            raise RuntimeError(
                "call_sync() would block the running event loop; use `await agent.acall()`"
            )
        done = threading.Event()
        outcome: list[Any] = []

        def on_error(exc: Exception) -> None:
            outcome[:] = [None, exc]
            done.set()

        def on_next(msg: Msg) -> None:
            outcome[:] = [msg, None]

        subscription = subscribe_direct(self.call(msgs, ctx), on_next, on_error, done.set)
        try:
            while not done.wait(0.1):  # a timeout keeps Ctrl-C responsive
                pass
        except BaseException:
            subscription.dispose()
            raise
        msg, error = outcome
        if error is not None:
            raise error
        assert isinstance(msg, Msg)
        return msg

    # -- control -------------------------------------------------------------------

    def interrupt(self, ctx: RuntimeContext | None = None) -> bool:
        """End the running call of ``ctx``'s session with ``INTERRUPTED``.

        Thread-safe, and callable from inside a middleware. Returns whether a call was
        running. Pending tool calls get synthesized results.
        """
        _check_ctx(ctx)
        session = (ctx.session_id if ctx is not None else None) or self.name
        user = (ctx.user_id if ctx is not None else None) or ANONYMOUS_USER
        key = SessionKey(user, session)
        run = self._slots.active(key)
        if run is not None:
            run.request_interrupt()
            return True
        return self._close_paused(key)

    def _close_paused(self, key: SessionKey) -> bool:
        """Interrupting a paused session closes its pending calls (INTERRUPTED)."""
        loaded = self.session_store.load(key)
        if loaded is not None and not isinstance(loaded, AgentState):
            # An asynchronous store: finish on the runtime loop, under the slot.
            close_coro = self._close_paused_async(key, loaded)
            asyncio.run_coroutine_threadsafe(close_coro, runtime_loop())
            return True
        state = loaded
        if state is None or state.pending is None:
            return False
        token = object()
        if not self._slots.try_acquire(key, token):
            return False  # a call took the slot meanwhile; it closes or resumes the pause
        try:
            close_pending(state)
            saved = self.session_store.save(key, state)
            if saved is not None:
                asyncio.run_coroutine_threadsafe(_await(saved), runtime_loop())
        finally:
            self._slots.release(key, token)
        return True

    async def _close_paused_async(self, key: SessionKey, loaded: Any) -> None:
        token = object()
        await self._slots.acquire(key, token)
        try:
            state = await loaded
            if state is not None and state.pending is not None:
                close_pending(state)
                saved = self.session_store.save(key, state)
                if saved is not None:
                    await saved
        finally:
            self._slots.release(key, token)

    def __repr__(self) -> str:
        return (
            f"ReActAgent(name={self.name!r}, model={self.model!r}, "
            f"middlewares={len(self.middlewares)})"
        )


async def _await(awaitable: Any) -> None:
    await awaitable


def _check_positive(label: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{label} must be an int, not {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{label} must be > 0, got {value}")


class ReActAgentBuilder:
    """Fluent builder: ``ReActAgent.builder().name("a").model(m).build()``."""

    def __init__(self) -> None:
        self._kwargs: dict[str, Any] = {}
        self._middlewares: list[MiddlewareBase] = []

    def _set(self, key: str, value: Any) -> ReActAgentBuilder:
        self._kwargs[key] = value
        return self

    def name(self, name: str) -> ReActAgentBuilder:
        return self._set("name", name)

    def sys_prompt(self, prompt: str) -> ReActAgentBuilder:
        return self._set("sys_prompt", prompt)

    def model(self, model: ChatModel) -> ReActAgentBuilder:
        return self._set("model", model)

    def toolkit(self, toolkit: Toolkit) -> ReActAgentBuilder:
        return self._set("toolkit", toolkit)

    def middleware(self, middleware: MiddlewareBase) -> ReActAgentBuilder:
        """Append one middleware (the same instance twice is two layers)."""
        self._middlewares.append(middleware)
        return self

    def middlewares(self, middlewares: Iterable[MiddlewareBase]) -> ReActAgentBuilder:
        """Append several middlewares, in order."""
        self._middlewares.extend(middlewares)
        return self

    def max_iters(self, n: int) -> ReActAgentBuilder:
        _check_positive("max_iters", n)
        return self._set("max_iters", n)

    def max_retries(self, n: int) -> ReActAgentBuilder:
        """Total attempts per model call (default 3); ``n <= 0`` is a ``ValueError``."""
        _check_positive("max_retries", n)
        return self._set("max_retries", n)

    def fallback_model(self, model: ChatModel) -> ReActAgentBuilder:
        return self._set("fallback_model", model)

    def failover_listener(self, listener: FailoverListener) -> ReActAgentBuilder:
        return self._set("failover_listener", listener)

    def tool_execution_context(self, ctx: RuntimeContext) -> ReActAgentBuilder:
        return self._set("tool_execution_context", ctx)

    def enable_task_list(self, enabled: bool = True) -> ReActAgentBuilder:
        return self._set("enable_task_list", enabled)

    def session_store(self, store: SessionStore) -> ReActAgentBuilder:
        return self._set("session_store", store)

    def permission_rule(
        self,
        pattern: str,
        decision: Literal["allow", "ask", "deny"],
        *,
        when: Callable[[dict[str, Any]], bool] | None = None,
        reason: str | None = None,
    ) -> ReActAgentBuilder:
        """Add a permission rule: a tool-name glob, optionally a predicate over the
        arguments, and the decision (``"allow"``, ``"ask"`` or ``"deny"``)."""
        rule = PermissionRule(pattern=pattern, decision=decision, when=when, reason=reason)
        rules = list(self._kwargs.get("permission_rules", ()))
        rules.append(rule)
        return self._set("permission_rules", rules)

    def permission_rules(self, rules: Iterable[PermissionRule]) -> ReActAgentBuilder:
        existing = list(self._kwargs.get("permission_rules", ()))
        return self._set("permission_rules", [*existing, *rules])

    def generate_options(self, options: GenerateOptions) -> ReActAgentBuilder:
        return self._set("generate_options", options)

    def retry_backoff(self, initial: float, maximum: float = 8.0) -> ReActAgentBuilder:
        """Seconds before the first retry (doubling, with jitter) and the cap."""
        return self._set("retry_backoff", (initial, maximum))

    def build(self) -> ReActAgent:
        missing = [k for k in ("name", "model") if k not in self._kwargs]
        if missing:
            raise ValueError(f"ReActAgent.builder() is missing: {', '.join(missing)}")
        return ReActAgent(middlewares=list(self._middlewares), **self._kwargs)
