"""``ReActAgent``: the builder, the four ways to call, interrupt and sessions."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

from .._record import install_java_names
from ..context import RuntimeContext
from ..message import Msg
from ..middleware._plan import ExecutionPlan
from ..middleware.base import MiddlewareBase
from ..model.base import ChatModel
from ..options import GenerateOptions
from ..permissions import PermissionRule
from ..plugin import Plugin, assemble
from ..session import (
    ANONYMOUS_USER,
    ConflictPolicy,
    InMemorySessionStore,
    SessionKey,
    SessionStore,
)
from ..tool.toolkit import Tool, Toolkit
from ._binding import close_paused
from ._calling import Calling, NoResultError
from ._checks import (
    AgentInputLike,
    check_backoff,
    check_bool,
    check_conflict_policy,
    check_ctx,
    check_failover_listener,
    check_generate_options,
    check_middleware,
    check_middlewares,
    check_model,
    check_name,
    check_plugin,
    check_plugins,
    check_positive,
    check_rules,
    check_seconds,
    check_session_store,
    check_str,
    check_toolkit,
    interrupt_message,
    keyword_hint,
    show,
    unknown_setter,
)
from ._closing import aclose_toolkit, close_toolkit
from ._config import AgentConfig, FailoverListener, RetryPolicy
from ._durable import is_durable
from ._extensions import enable_tasks
from ._hitl import ResumeError
from ._permission_handler import PermissionHandler, check_permission_handler
from ._slots import SessionSlots
from ._subagent import agent_tool
from ._watchdog import env_threshold

__all__ = ["AgentInputLike", "NoResultError", "ReActAgent", "ReActAgentBuilder", "ResumeError"]




class ReActAgent(Calling):
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
        session_wait: float = 30.0,
        session_lease_ttl: float = 30.0,
        conflict_policy: ConflictPolicy | str = ConflictPolicy.FAIL,
        tool_timeout: float | None = None,
        plugins: Iterable[Plugin] = (),
        permission_handler: PermissionHandler | None = None,
        loop_lag_threshold: float | None = None,
    ) -> None:
        check_name(name)
        check_model("model", model)
        if fallback_model is not None:
            check_model("fallback_model", fallback_model)
        check_str("sys_prompt", sys_prompt)
        if toolkit is not None:
            check_toolkit(toolkit)
        check_positive("max_iters", max_iters)
        check_positive("max_retries", max_retries)
        if failover_listener is not None:
            check_failover_listener(failover_listener)
        if session_store is not None:
            check_session_store(session_store)
        if generate_options is not None:
            check_generate_options(generate_options)
        if enable_task_list is not False:
            check_bool("enable_task_list", enable_task_list)
        initial, maximum = check_backoff(retry_backoff)
        registered = check_middlewares(middlewares, "middlewares")
        added = tuple(check_plugins(plugins, "plugins"))
        rules = check_rules(permission_rules)
        if permission_handler is not None:
            check_permission_handler(permission_handler)

        store = session_store if session_store is not None else InMemorySessionStore()
        # Every tool source merged once (the user's toolkit is never changed); plugin
        # middlewares follow the direct ones, so equal orders put them after.
        toolkit, registered = assemble(
            toolkit if toolkit is not None else Toolkit(), registered, added,
            (enable_tasks,) if enable_task_list else (),
        )
        self._plugins = added
        # Everything a run reads, frozen: no setting changes under a call in flight.
        self._config = AgentConfig(
            name=name,
            sys_prompt=sys_prompt,
            model=model,
            toolkit=toolkit,
            plan=ExecutionPlan(registered),
            session_store=store,
            max_iters=max_iters,
            retry=RetryPolicy(max_attempts=max_retries, initial_backoff=initial,
                              max_backoff=maximum),
            fallback_model=fallback_model,
            failover_listener=failover_listener,
            generate_options=generate_options or GenerateOptions(),
            permission_rules=rules,
            tool_execution_context=check_ctx(tool_execution_context, "tool_execution_context"),
            session_wait=check_seconds("session_wait", session_wait, positive=False),
            session_lease_ttl=check_seconds("session_lease_ttl", session_lease_ttl,
                                            positive=True),
            conflict_policy=check_conflict_policy(conflict_policy),
            tool_timeout=None if tool_timeout is None
            else check_seconds("tool_timeout", tool_timeout, positive=True),
            durable=is_durable(store),
            permission_handler=permission_handler,
            loop_lag=env_threshold() if loop_lag_threshold is None
            else check_seconds("loop_lag_threshold", loop_lag_threshold, positive=False) or None,
        )
        self._slots = SessionSlots()

    if not TYPE_CHECKING:  # hidden from type checkers: unknown names stay type errors

        def __new__(cls, *args: Any, **kwargs: Any) -> ReActAgent:
            # Java-style keywords (``sysPrompt=``) get the Python name in the error.
            if kwargs and cls.__init__ is _REACT_INIT:
                for key in kwargs:
                    if key not in _INIT_PARAMS:
                        hint = keyword_hint(key, _INIT_PARAMS, ReActAgentBuilder)
                        raise TypeError(
                            f"ReActAgent() got an unexpected keyword argument {key!r}"
                            + (f"; did you mean `{hint}`?" if hint else "")
                        )
            return super().__new__(cls)

    @staticmethod
    def builder() -> ReActAgentBuilder:
        """A fluent builder with snake_case setters (Java's ``ReActAgent.builder()``)."""
        return ReActAgentBuilder()

    # -- read-only views -----------------------------------------------------------

    @property
    def config(self) -> AgentConfig:
        """Every setting of this agent, frozen at build time."""
        return self._config

    @property
    def name(self) -> str:
        return self._config.name

    @property
    def model(self) -> ChatModel:
        return self._config.model

    @property
    def toolkit(self) -> Toolkit:
        return self._config.toolkit

    @property
    def plan(self) -> ExecutionPlan:
        """The frozen execution plan (``print(agent.plan)`` shows it)."""
        return self._config.plan

    @property
    def middlewares(self) -> tuple[MiddlewareBase, ...]:
        """Every registered middleware in plan order, silent ones included."""
        return self._config.plan.middlewares

    @property
    def plugins(self) -> tuple[Plugin, ...]:
        """The plugins given at build time, in registration order."""
        return self._plugins

    @property
    def sys_prompt(self) -> str:
        return self._config.sys_prompt

    @property
    def max_iters(self) -> int:
        return self._config.max_iters

    @property
    def max_retries(self) -> int:
        """Total attempts per model call."""
        return self._config.retry.max_attempts

    @property
    def retry_backoff(self) -> tuple[float, float]:
        retry = self._config.retry
        return retry.initial_backoff, retry.max_backoff

    @property
    def fallback_model(self) -> ChatModel | None:
        return self._config.fallback_model

    @property
    def failover_listener(self) -> FailoverListener | None:
        return self._config.failover_listener

    @property
    def tool_execution_context(self) -> RuntimeContext | None:
        return self._config.tool_execution_context

    @property
    def session_store(self) -> SessionStore:
        return self._config.session_store

    @property
    def generate_options(self) -> GenerateOptions:
        return self._config.generate_options

    @property
    def permission_rules(self) -> tuple[PermissionRule, ...]:
        return self._config.permission_rules

    # -- control -------------------------------------------------------------------

    def interrupt(self, ctx: RuntimeContext | None = None, msg: Msg | str | None = None) -> bool:
        """End the running call of ``ctx``'s session with ``INTERRUPTED``.

        Thread-safe, and callable from inside a middleware. Returns whether a call was
        running (or a paused session was closed). Pending tool calls get synthesized
        results. ``msg`` (Java's ``interrupt(Msg)``; a ``str`` is a user message) is
        stored in the context with the interrupted reply, just before its final
        message, so the next reply's model sees why the user stopped it.
        """
        check_ctx(ctx)
        note = interrupt_message(msg)
        session = (ctx.session_id if ctx is not None else None) or self.name
        user = (ctx.user_id if ctx is not None else None) or ANONYMOUS_USER
        key = SessionKey(user, session)
        run = self._slots.active(key)
        if run is not None:
            run.request_interrupt(note)
            return True
        config = self._config
        return close_paused(self._slots, self.session_store, key, note,
                            lease_ttl=config.session_lease_ttl if config.durable else None)

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        inherit_middlewares: bool = False,
    ) -> Tool:
        """This agent as a tool of another (``task: str`` in, its final reply out).

        Each call is one reply in a session slot derived from the parent call; the
        parent's context attributes are visible to it; its events reach the parent's
        stream as ``NestedEvent(scope="sub_agent")``; interrupt and disposal cross
        both ways. ``inherit_middlewares=True`` also runs the parent's model-call and
        tool middlewares around its own. ``name`` defaults to the agent's name.
        """
        return agent_tool(self, name, description, inherit_middlewares)

    # -- closing: MCP connections of its tools (agent/_closing.py) -----------------

    def close(self) -> None:
        """Close what the agent's tools hold open (MCP connections); waits for it.
        Not inside a running loop: use ``await agent.aclose()`` there."""
        close_toolkit(self._config.toolkit, "agent")

    async def aclose(self) -> None:
        """Close what the agent's tools hold open (MCP connections)."""
        await aclose_toolkit(self._config.toolkit)

    def __enter__(self) -> ReActAgent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> ReActAgent:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return (
            f"ReActAgent(name={self.name!r}, model={self.model!r}, "
            f"middlewares={len(self.middlewares)})"
        )


class ReActAgentBuilder:
    """Fluent builder: ``ReActAgent.builder().name("a").model(m).build()``.

    Every setter checks its argument, so a mistake fails at the line that made it.
    """

    def __init__(self) -> None:
        self._kwargs: dict[str, Any] = {}
        self._middlewares: list[MiddlewareBase] = []
        self._plugins: list[Plugin] = []

    if not TYPE_CHECKING:  # hidden from type checkers: unknown names stay type errors

        def __getattr__(self, name: str) -> Any:
            raise unknown_setter(self, name, _SETTERS)

    def _set(self, key: str, value: Any) -> ReActAgentBuilder:
        self._kwargs[key] = value
        return self

    def name(self, name: str) -> ReActAgentBuilder:
        check_name(name)
        return self._set("name", name)

    def sys_prompt(self, prompt: str) -> ReActAgentBuilder:
        check_str("sys_prompt", prompt)
        return self._set("sys_prompt", prompt)

    def model(self, model: ChatModel) -> ReActAgentBuilder:
        check_model("model", model)
        return self._set("model", model)

    def toolkit(self, toolkit: Toolkit) -> ReActAgentBuilder:
        check_toolkit(toolkit)
        return self._set("toolkit", toolkit)

    def middleware(self, middleware: MiddlewareBase) -> ReActAgentBuilder:
        """Append one middleware (the same instance twice is two layers)."""
        self._middlewares.append(
            check_middleware(middleware, "middleware() takes a MiddlewareBase instance")
        )
        return self

    def middlewares(self, middlewares: Iterable[MiddlewareBase]) -> ReActAgentBuilder:
        """Append several middlewares, in order."""
        self._middlewares.extend(check_middlewares(middlewares, "middlewares()"))
        return self

    def plugin(self, plugin: Plugin) -> ReActAgentBuilder:
        """Add a plugin: its middlewares join the plan, its tools the toolkit."""
        self._plugins.append(check_plugin(plugin, "plugin() takes a Plugin"))
        return self

    def plugins(self, plugins: Iterable[Plugin]) -> ReActAgentBuilder:
        """Add several plugins, in order."""
        self._plugins.extend(check_plugins(plugins, "plugins()"))
        return self

    def max_iters(self, n: int) -> ReActAgentBuilder:
        check_positive("max_iters", n)
        return self._set("max_iters", n)

    def max_retries(self, n: int) -> ReActAgentBuilder:
        """Total attempts per model call (default 3); ``n <= 0`` is a ``ValueError``."""
        check_positive("max_retries", n)
        return self._set("max_retries", n)

    def fallback_model(self, model: ChatModel) -> ReActAgentBuilder:
        check_model("fallback_model", model)
        return self._set("fallback_model", model)

    def failover_listener(self, listener: FailoverListener) -> ReActAgentBuilder:
        """``listener(primary_model, error)`` is called when a call switches to the
        fallback model; its exceptions are logged and ignored."""
        check_failover_listener(listener)
        return self._set("failover_listener", listener)

    def tool_execution_context(self, ctx: RuntimeContext) -> ReActAgentBuilder:
        if not isinstance(ctx, RuntimeContext):
            raise TypeError(f"tool_execution_context must be a RuntimeContext, got {show(ctx)}")
        return self._set("tool_execution_context", ctx)

    def enable_task_list(self, enabled: bool = True) -> ReActAgentBuilder:
        check_bool("enable_task_list", enabled)
        return self._set("enable_task_list", enabled)

    def session_store(self, store: SessionStore) -> ReActAgentBuilder:
        check_session_store(store)
        return self._set("session_store", store)

    def session_wait(self, seconds: float) -> ReActAgentBuilder:
        """Seconds a call waits for a durable session another worker is serving
        (default 30), then fails with ``SessionBusyError``."""
        return self._set("session_wait", check_seconds("session_wait", seconds,
                                                       positive=False))

    def session_lease_ttl(self, seconds: float) -> ReActAgentBuilder:
        """Seconds a durable session's lease lives unless renewed (default 30; renewed
        at a third of it while a call runs): how soon a crashed worker's session frees."""
        return self._set("session_lease_ttl", check_seconds("session_lease_ttl", seconds,
                                                            positive=True))

    def tool_timeout(self, seconds: float | None) -> ReActAgentBuilder:
        """Seconds one tool call may take when its tool sets no ``timeout`` (Java's
        tool execution timeout); past it the call is cancelled and the model gets an
        error result, and the loop goes on."""
        if seconds is not None:
            seconds = check_seconds("tool_timeout", seconds, positive=True)
        return self._set("tool_timeout", seconds)

    def loop_lag_threshold(self, seconds: float | None) -> ReActAgentBuilder:
        """Seconds the event loop may stall during a call before the agent logs a
        warning naming the tool or hook that blocked it (a ``time.sleep`` in an async
        tool, say); ``0`` turns it off. Default: the ``RX_AGENT_LOOP_LAG`` environment
        variable, else off."""
        if seconds is not None:
            seconds = check_seconds("loop_lag_threshold", seconds, positive=False)
        return self._set("loop_lag_threshold", seconds)

    def conflict_policy(self, policy: ConflictPolicy | str) -> ReActAgentBuilder:
        """What a save does when a newer writer saved first (default ``FAIL``)."""
        return self._set("conflict_policy", check_conflict_policy(policy))

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
        return self._set("permission_rules", [*existing, *check_rules(rules)])

    def permission_handler(self, handler: PermissionHandler | None) -> ReActAgentBuilder:
        """``fn(call, ctx)``, asked about each "ask" tool call while the reply runs
        (Blade's ``permissionHandler``): ``True``/``False``, ``"allow"``/``"deny"``, a
        ``ConfirmResult``, or ``None``/``"ask"`` to pause for a human as without it.
        See docs/hitl.md."""
        if handler is not None:
            check_permission_handler(handler)
        return self._set("permission_handler", handler)

    def generate_options(self, options: GenerateOptions) -> ReActAgentBuilder:
        check_generate_options(options)
        return self._set("generate_options", options)

    def retry_backoff(self, initial: float, maximum: float = 8.0) -> ReActAgentBuilder:
        """Seconds before the first retry (doubling, with jitter) and the cap."""
        return self._set("retry_backoff", check_backoff((initial, maximum)))

    def build(self) -> ReActAgent:
        missing = [k for k in ("name", "model") if k not in self._kwargs]
        if missing:
            raise ValueError(f"ReActAgent.builder() is missing: {', '.join(missing)}")
        return ReActAgent(middlewares=list(self._middlewares), plugins=list(self._plugins),
                          **self._kwargs)



_REACT_INIT = ReActAgent.__init__
_INIT_PARAMS = frozenset(inspect.signature(ReActAgent.__init__).parameters) - {"self"}
_SETTERS = frozenset(n for n in vars(ReActAgentBuilder) if not n.startswith("_"))

# Java spellings (``sysPrompt``, ``maxIters``, ``getName()``) answer with the Python name.
install_java_names(ReActAgentBuilder)
install_java_names(
    ReActAgent,
    ("sys_prompt", "max_iters", "max_retries", "fallback_model", "failover_listener",
     "tool_execution_context", "session_store", "generate_options", "retry_backoff",
     "permission_rules"),
)
