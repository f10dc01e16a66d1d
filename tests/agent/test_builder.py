"""The builder and keyword construction: every setter checks its argument at the setter,
and Java's camelCase names answer with the Python ones (issue 10, item 15)."""

from __future__ import annotations

from typing import Any

import pytest

from rx_agent import (
    GenerateOptions,
    MiddlewareBase,
    PermissionRule,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
)
from rx_agent.session import InMemorySessionStore


def _model() -> ScriptedModel:
    return ScriptedModel(["ok"])


@pytest.mark.parametrize(
    ("setter", "args", "error", "message"),
    [
        ("name", (42,), TypeError, "name must be a str, got int 42"),
        ("name", ("  ",), ValueError, "non-empty"),
        ("sys_prompt", (None,), TypeError, "sys_prompt must be a str, got NoneType"),
        ("model", ("gpt-4o",), TypeError, r"ChatModel.*OpenAIChatModel\('gpt-4o'\)"),
        ("model", (ScriptedModel,), TypeError, r"pass an instance: ScriptedModel\(\.\.\.\)"),
        ("fallback_model", ("gpt-4o-mini",), TypeError, "fallback_model must be a ChatModel"),
        ("toolkit", ([print],), TypeError, r"Toolkit\(\[fn, \.\.\.\]\)"),
        ("middleware", ("audit",), TypeError,
         "middleware\\(\\) takes a MiddlewareBase instance, got str 'audit'$"),
        ("middleware", (MiddlewareBase,), TypeError, r"pass an instance: MiddlewareBase\(\)"),
        ("middleware", ([MiddlewareBase()],), TypeError, r"use middlewares\(\[\.\.\.\]\)"),
        ("middlewares", (MiddlewareBase(),), TypeError,
         r"middlewares\(\) takes a list .*use middleware\(mw\) for one"),
        ("middlewares", ("ab",), TypeError, "takes a list of MiddlewareBase instances, got str"),
        ("middlewares", ([MiddlewareBase(), "x"],), TypeError, "item #1 .*got str 'x'"),
        ("max_iters", (0,), ValueError, "max_iters must be > 0"),
        ("max_iters", ("3",), TypeError, "max_iters must be an int"),
        ("max_retries", (True,), TypeError, "max_retries must be an int"),
        ("failover_listener", ("log",), TypeError, "callable as fn\\(model, error\\)"),
        ("failover_listener", (lambda error: None,), TypeError, "fn\\(primary_model, error\\)"),
        ("tool_execution_context", ({"k": 1},), TypeError, "must be a RuntimeContext, got dict"),
        ("enable_task_list", ("yes",), TypeError, "enable_task_list must be True or False"),
        ("session_store", (object(),), TypeError, "load\\(key\\) and save\\(key, state\\)"),
        ("session_store", (InMemorySessionStore,), TypeError, "pass an instance"),
        ("generate_options", ({"temperature": 0},), TypeError,
         r"GenerateOptions\(\*\*\{\.\.\.\}\)"),
        ("permission_rules", (PermissionRule(pattern="*", decision="deny"),), TypeError,
         r"use permission_rule\(\.\.\.\) for one"),
        ("permission_rules", (["*"],), TypeError, "takes PermissionRule, not str"),
        ("retry_backoff", (-1, "x"), ValueError, "initial must be finite and >= 0, got -1"),
        ("retry_backoff", (0.1, "x"), TypeError, "maximum must be a number of seconds, got str"),
        ("retry_backoff", (float("nan"),), ValueError, "initial must be finite"),
    ],
)
def test_setters_check_their_argument_at_the_setter(
    setter: str, args: tuple[Any, ...], error: type[Exception], message: str
) -> None:
    builder = ReActAgent.builder()
    with pytest.raises(error, match=message):
        getattr(builder, setter)(*args)


def test_valid_setters_still_chain_and_build() -> None:
    agent = (
        ReActAgent.builder()
        .name("a")
        .sys_prompt("p")
        .model(_model())
        .fallback_model(_model())
        .toolkit(Toolkit())
        .middleware(MiddlewareBase())
        .middlewares(m for m in [MiddlewareBase()])
        .max_iters(2)
        .max_retries(1)
        .failover_listener(lambda model, error: None)
        .tool_execution_context(RuntimeContext())
        .enable_task_list(False)
        .session_store(InMemorySessionStore())
        .generate_options(GenerateOptions(temperature=0.0))
        .permission_rule("rm_*", "deny")
        .permission_rules([PermissionRule(pattern="ls", decision="allow")])
        .retry_backoff(0, 1)
        .build()
    )
    assert len(agent.middlewares) == 2
    assert agent.retry_backoff == (0.0, 1.0)
    assert [r.pattern for r in agent.permission_rules] == ["rm_*", "ls"]
    assert agent.call_sync("hi").text == "ok"


def test_a_listener_taking_varargs_is_accepted() -> None:
    ReActAgent.builder().failover_listener(lambda *args: None)


@pytest.mark.parametrize(
    ("java", "python"),
    [
        ("sysPrompt", "sys_prompt"),
        ("maxIters", "max_iters"),
        ("maxRetries", "max_retries"),
        ("toolExecutionContext", "tool_execution_context"),
        ("enableTaskList", "enable_task_list"),
        ("fallbackModel", "fallback_model"),
        ("failoverListener", "failover_listener"),
        ("permissionRules", "permission_rules"),
    ],
)
def test_java_setter_names_on_the_builder_suggest_the_python_name(java: str, python: str) -> None:
    with pytest.raises(AttributeError) as info:
        getattr(ReActAgent.builder(), java)
    assert str(info.value) == (
        f"ReActAgentBuilder has no attribute {java!r}; did you mean `{python}`?"
    )


def test_java_names_on_the_agent_suggest_the_python_name() -> None:
    agent = ReActAgent(name="a", model=_model())
    with pytest.raises(AttributeError, match=r"did you mean `name`\? \(an attribute"):
        agent.getName()  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="did you mean `sys_prompt`"):
        agent.sysPrompt  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="'ReActAgent' object has no attribute 'foo'"):
        agent.foo  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="did you mean `max_iters`"):
        agent.maxIters = 3  # type: ignore[attr-defined]  # would otherwise be read by nobody
    assert "maxIters" not in dir(agent) and "getName" not in dir(agent)


def test_java_keywords_in_construction_suggest_the_python_name() -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'sysPrompt'; "
                                        r"did you mean `sys_prompt`\?"):
        ReActAgent(name="a", model=_model(), sysPrompt="p")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="did you mean `max_iters`"):
        ReActAgent(name="a", model=_model(), maxIters=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'colour'$"):
        ReActAgent(name="a", model=_model(), colour="red")  # type: ignore[call-arg]


def test_keyword_construction_checks_like_the_setters() -> None:
    with pytest.raises(TypeError, match=r"OpenAIChatModel\('gpt-4o'\)"):
        ReActAgent(name="a", model="gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"middlewares takes a list .*use middleware\(mw\)"):
        ReActAgent(name="a", model=_model(), middlewares=MiddlewareBase())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retry_backoff initial"):
        ReActAgent(name="a", model=_model(), retry_backoff=(-1.0, 2.0))


def test_a_subclass_with_its_own_keywords_still_builds() -> None:
    class Named(ReActAgent):
        def __init__(self, greeting: str, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.greeting = greeting

    agent = Named(greeting="hello", name="a", model=_model())
    assert agent.greeting == "hello"
