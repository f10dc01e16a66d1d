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
    check_ctx,
    check_middleware,
    check_middlewares,
    check_plugin,
    check_plugins,
    check_rules,
    interrupt_message,
    keyword_hint,
    unknown_setter,
)
from ._closing import aclose_toolkit, close_toolkit
from ._config import AgentConfig, FailoverListener, RetryPolicy
from ._durable import is_durable
from ._extensions import enable_tasks
from ._hitl import ResumeError
from ._permission_handler import PermissionHandler
from ._settings import BY_NAME, SETTINGS, check_settings
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
        # The signature is the typed view of agent/_settings.py's table (a test keeps
        # them equal); every value is checked there, once.
        values = dict(locals())
        del values["self"]
        self._setup(check_settings(values))

    @classmethod
    def _from_checked(cls, values: dict[str, Any]) -> ReActAgent:
        """An agent from values the builder's setters already checked; the others
        take the constructor's defaults."""
        agent = cls.__new__(cls)
        agent._setup({**_DEFAULTS, **values})
        return agent

    def _setup(self, s: dict[str, Any]) -> None:
        store = s["session_store"] if s["session_store"] is not None \
            else InMemorySessionStore()
        # Every tool source merged once (the user's toolkit is never changed); plugin
        # middlewares follow the direct ones, so equal orders put them after.
        toolkit, registered = assemble(
            s["toolkit"] if s["toolkit"] is not None else Toolkit(), list(s["middlewares"]),
            s["plugins"], (enable_tasks,) if s["enable_task_list"] else (),
        )
        self._plugins: tuple[Plugin, ...] = s["plugins"]
        initial, maximum = s["retry_backoff"]
        lag = s["loop_lag_threshold"]
        # Everything a run reads, frozen: no setting changes under a call in flight.
        self._config = AgentConfig(
            name=s["name"],
            sys_prompt=s["sys_prompt"],
            model=s["model"],
            toolkit=toolkit,
            plan=ExecutionPlan(registered),
            session_store=store,
            max_iters=s["max_iters"],
            retry=RetryPolicy(max_attempts=s["max_retries"], initial_backoff=initial,
                              max_backoff=maximum),
            fallback_model=s["fallback_model"],
            failover_listener=s["failover_listener"],
            generate_options=s["generate_options"] or GenerateOptions(),
            permission_rules=s["permission_rules"],
            tool_execution_context=s["tool_execution_context"],
            session_wait=s["session_wait"],
            session_lease_ttl=s["session_lease_ttl"],
            conflict_policy=s["conflict_policy"],
            tool_timeout=s["tool_timeout"],
            durable=is_durable(store),
            permission_handler=s["permission_handler"],
            loop_lag=env_threshold() if lag is None else lag or None,
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

    @property
    def permission_handler(self) -> PermissionHandler | None:
        return self._config.permission_handler

    @property
    def session_wait(self) -> float:
        return self._config.session_wait

    @property
    def session_lease_ttl(self) -> float:
        return self._config.session_lease_ttl

    @property
    def conflict_policy(self) -> ConflictPolicy:
        return self._config.conflict_policy

    @property
    def tool_timeout(self) -> float | None:
        return self._config.tool_timeout

    @property
    def loop_lag_threshold(self) -> float | None:
        """The watchdog's threshold in effect (``None``: off)."""
        return self._config.loop_lag

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

    Every setter checks its argument (agent/_settings.py), so a mistake fails at the
    line that made it; ``build()`` does not check again.
    """

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    if not TYPE_CHECKING:  # hidden from type checkers: unknown names stay type errors

        def __getattr__(self, name: str) -> Any:
            raise unknown_setter(self, name, _SETTERS)

    def _set(self, key: str, value: Any) -> ReActAgentBuilder:
        self._values[key] = BY_NAME[key].check(value)
        return self

    def _add(self, key: str, values: tuple[Any, ...]) -> ReActAgentBuilder:
        self._values[key] = (*self._values.get(key, ()), *values)
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
        return self._add("middlewares", (
            check_middleware(middleware, "middleware() takes a MiddlewareBase instance"),))

    def middlewares(self, middlewares: Iterable[MiddlewareBase]) -> ReActAgentBuilder:
        """Append several middlewares, in order."""
        return self._add("middlewares", tuple(check_middlewares(middlewares, "middlewares()")))

    def plugin(self, plugin: Plugin) -> ReActAgentBuilder:
        """Add a plugin: its middlewares join the plan, its tools the toolkit."""
        return self._add("plugins", (check_plugin(plugin, "plugin() takes a Plugin"),))

    def plugins(self, plugins: Iterable[Plugin]) -> ReActAgentBuilder:
        """Add several plugins, in order."""
        return self._add("plugins", tuple(check_plugins(plugins, "plugins()")))

    def max_iters(self, n: int) -> ReActAgentBuilder:
        return self._set("max_iters", n)

    def max_retries(self, n: int) -> ReActAgentBuilder:
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

    def session_wait(self, seconds: float) -> ReActAgentBuilder:
        return self._set("session_wait", seconds)

    def session_lease_ttl(self, seconds: float) -> ReActAgentBuilder:
        return self._set("session_lease_ttl", seconds)

    def tool_timeout(self, seconds: float | None) -> ReActAgentBuilder:
        return self._set("tool_timeout", seconds)

    def loop_lag_threshold(self, seconds: float | None) -> ReActAgentBuilder:
        return self._set("loop_lag_threshold", seconds)

    def conflict_policy(self, policy: ConflictPolicy | str) -> ReActAgentBuilder:
        return self._set("conflict_policy", policy)

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
        return self._add("permission_rules", (rule,))

    def permission_rules(self, rules: Iterable[PermissionRule]) -> ReActAgentBuilder:
        """Add several permission rules, in order."""
        return self._add("permission_rules", check_rules(rules))

    def permission_handler(self, handler: PermissionHandler | None) -> ReActAgentBuilder:
        return self._set("permission_handler", handler)

    def generate_options(self, options: GenerateOptions) -> ReActAgentBuilder:
        return self._set("generate_options", options)

    def retry_backoff(self, initial: float, maximum: float = 8.0) -> ReActAgentBuilder:
        return self._set("retry_backoff", (initial, maximum))

    def build(self) -> ReActAgent:
        missing = [k for k in ("name", "model") if k not in self._values]
        if missing:
            raise ValueError(f"ReActAgent.builder() is missing: {', '.join(missing)}")
        return ReActAgent._from_checked(self._values)


_REACT_INIT = ReActAgent.__init__
_INIT_PARAMS = frozenset(BY_NAME)
_DEFAULTS = {p.name: p.default for p in inspect.signature(ReActAgent.__init__).parameters.values()
             if p.default is not inspect.Parameter.empty}
_SETTERS = frozenset(n for n in vars(ReActAgentBuilder) if not n.startswith("_"))

# The table's documentation on the setters and properties that have none of their own.
for _setting in SETTINGS:
    for _owner in (ReActAgentBuilder, ReActAgent):
        _member = vars(_owner).get(_setting.name)
        if _member is not None and not _member.__doc__:
            _member.__doc__ = _setting.doc
del _setting, _owner, _member

# Java spellings (``sysPrompt``, ``maxIters``, ``getName()``) answer with the Python name.
install_java_names(ReActAgentBuilder)
install_java_names(ReActAgent, tuple(s.name for s in SETTINGS if s.prop))
