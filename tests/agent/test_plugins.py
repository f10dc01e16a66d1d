"""Issue 14.2: plugins (Blade's ``definePlugin``), tool sources and how they merge."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from conftest import add_toolkit, builder, make_agent, of_type, stream_events, tool_results

from rx_agent import (
    MiddlewareBase,
    PermissionRule,
    ReActAgent,
    ScriptedModel,
    TodoTools,
    Toolkit,
    ToolResultEndEvent,
    ToolResultState,
    ToolUseBlock,
    tool,
)
from rx_agent.plugin import Plugin


@tool
def forecast(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _named(name: str) -> Any:
    """A fresh tool called ``name``."""

    def fn() -> str:
        """Answers with its own name."""
        return name

    return tool(name=name)(fn)


class Lists(MiddlewareBase):
    """A middleware bringing tools; counts how often they are asked for."""

    def __init__(self, *tools: Callable[..., Any], order: int = 1) -> None:
        self.tools = tools
        self.reads = 0
        self._order = order

    def order(self) -> int:
        return self._order

    def list_tools(self) -> Sequence[Callable[..., Any]]:
        self.reads += 1
        return self.tools


class Other(Lists):
    pass


class Ranked(MiddlewareBase):
    def __init__(self, label: str, order: int) -> None:
        self.label, self._order = label, order

    def order(self) -> int:
        return self._order


# -- the record --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "7", "web.search_v2-x", "a" * 64, "a-b", "x.y"])
def test_valid_plugin_names(name: str) -> None:
    assert Plugin(name).name == name


@pytest.mark.parametrize(
    "name", ["", "A", "Web", "-a", "a-", ".a", "a_", "a b", "a/b", "a" * 65, "é"]
)
def test_invalid_plugin_names_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(ValueError, match="lowercase letters, digits"):
        Plugin(name)


def test_plugin_name_must_be_a_str() -> None:
    with pytest.raises(TypeError, match="plugin name must be a str"):
        Plugin(3)  # type: ignore[arg-type]


def test_plugin_is_frozen_and_keeps_tuples() -> None:
    mw = Ranked("m", 1)
    plugin = Plugin("p", middlewares=[mw], tools=[forecast])
    assert plugin.middlewares == (mw,) and plugin.tools == (forecast,)
    with pytest.raises(AttributeError):
        plugin.name = "q"  # type: ignore[misc]


def test_plugin_checks_its_middlewares_and_tools_where_declared() -> None:
    with pytest.raises(TypeError, match=r"item #0 .*pass an instance: Ranked\(\)"):
        Plugin("p", middlewares=[Ranked])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"Plugin\('p'\) tools item #1: cannot register int"):
        Plugin("p", tools=[forecast, 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="tools takes a list"):
        Plugin("p", tools="forecast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Plugin\('p'\) tools item #0: tool name '<lambda>'"):
        Plugin("p", tools=[lambda: 1])


# -- registering -------------------------------------------------------------------------------


def test_builder_setters_check_their_arguments() -> None:
    b = ReActAgent.builder()
    with pytest.raises(TypeError, match=r"plugin\(\) takes a Plugin.*use plugins"):
        b.plugin([Plugin("p")])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"use middleware\(mw\)"):
        b.plugin(Ranked("m", 1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"use plugin\(p\) for one"):
        b.plugins(Plugin("p"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"plugins\(\) item #1 must be a Plugin"):
        b.plugins([Plugin("p"), "q"])  # type: ignore[list-item]


def test_keyword_constructor_takes_plugins() -> None:
    plugin = Plugin("weather", tools=[forecast])
    agent = make_agent(ScriptedModel(["ok"]), plugins=[plugin])
    assert agent.plugins == (plugin,)
    assert agent.toolkit.get("forecast") is not None
    with pytest.raises(TypeError, match="plugins item #0 must be a Plugin"):
        make_agent(ScriptedModel(["ok"]), plugins=[forecast])


def test_a_second_plugin_with_the_same_name_fails_at_build_naming_it() -> None:
    b = builder(ScriptedModel(["ok"])).plugin(Plugin("dup")).plugins([Plugin("dup")])
    with pytest.raises(ValueError, match="two plugins are named 'dup'"):
        b.build()


def test_sources_are_recorded_and_the_users_toolkit_is_left_alone() -> None:
    user = add_toolkit()
    agent = (
        builder(ScriptedModel(["ok"])).toolkit(user).enable_task_list()
        .middleware(Lists(_named("listed")))
        .plugin(Plugin("weather", tools=[forecast])).build()
    )
    kit = agent.toolkit
    assert kit is not user
    assert {t.name: t.source for t in kit} == {
        "add": "toolkit", "todo_write": "built-in",
        "listed": "middleware Lists", "forecast": "plugin weather",
    }
    assert user.names == ["add"]  # neither the task list nor a plugin wrote into it
    assert kit.executor is user.executor


def test_without_added_tools_the_agent_uses_the_given_toolkit() -> None:
    user = add_toolkit()
    agent = builder(ScriptedModel(["ok"])).toolkit(user).plugin(Plugin("empty")).build()
    assert agent.toolkit is user


# -- duplicate tool names: every pair of sources -----------------------------------------------


def _build(
    *, toolkit: Toolkit | None = None, tasks: bool = False,
    middlewares: Sequence[MiddlewareBase] = (), plugins: Sequence[Plugin] = (),
) -> ReActAgent:
    b = builder(ScriptedModel(["ok"])).middlewares(middlewares).plugins(plugins)
    if toolkit is not None:
        b = b.toolkit(toolkit)
    return b.enable_task_list(tasks).build()


@pytest.mark.parametrize(
    ("setup", "first", "second"),
    [
        ({"toolkit": Toolkit([_named("x")]), "middlewares": [Lists(_named("x"))]},
         "toolkit", "middleware Lists"),
        ({"toolkit": Toolkit([_named("x")]), "plugins": [Plugin("p", tools=[_named("x")])]},
         "toolkit", "plugin p"),
        ({"tasks": True, "middlewares": [Lists(_named("todo_write"))]},
         "built-in", "middleware Lists"),
        ({"tasks": True, "plugins": [Plugin("p", tools=[_named("todo_write")])]},
         "built-in", "plugin p"),
        ({"middlewares": [Lists(_named("x"))], "plugins": [Plugin("p", tools=[_named("x")])]},
         "middleware Lists", "plugin p"),
        ({"middlewares": [Lists(_named("x")), Other(_named("x"))]},
         "middleware Lists", "middleware Other"),
        ({"plugins": [Plugin("p", middlewares=[Lists(_named("x"))]),
                       Plugin("q", tools=[_named("x")])]},
         "middleware Lists", "plugin q"),
        ({"plugins": [Plugin("p", tools=[_named("x")]), Plugin("q", tools=[_named("x")])]},
         "plugin p", "plugin q"),
    ],
)
def test_a_duplicate_tool_name_fails_at_build_naming_both_sources(
    setup: dict[str, Any], first: str, second: str
) -> None:
    with pytest.raises(ValueError, match=f"provided twice: by {first} and by {second}"):
        _build(**setup)


def test_the_same_tool_twice_in_one_plugin_fails() -> None:
    with pytest.raises(ValueError, match="by plugin p and by plugin p"):
        _build(plugins=[Plugin("p", tools=[forecast, forecast])])


# -- plan order --------------------------------------------------------------------------------


def test_plugin_middlewares_interleave_by_order_after_direct_ones() -> None:
    a, b = Ranked("a", 1), Ranked("b", 5)
    c, d, e = Ranked("c", 1), Ranked("d", 5), Ranked("e", 3)
    agent = (
        builder(ScriptedModel(["ok"])).middleware(a)
        .plugin(Plugin("one", middlewares=[c, d])).middleware(b)
        .plugin(Plugin("two", middlewares=[e])).build()
    )
    assert [m.label for m in agent.middlewares] == ["b", "d", "e", "a", "c"]  # type: ignore[attr-defined]


def test_plugin_middlewares_follow_the_task_list_among_equal_orders() -> None:
    c = Ranked("c", 1)
    agent = _build(tasks=True, plugins=[Plugin("p", middlewares=[c])])
    names = [type(m).__name__ for m in agent.middlewares]
    assert names == ["TaskReminderMiddleware", "Ranked"]


# -- at run time -------------------------------------------------------------------------------


def test_the_model_calls_a_plugin_tool_through_the_loop() -> None:
    model = ScriptedModel([[ToolUseBlock("c1", "forecast", {"city": "Oslo"})], "done"])
    agent = builder(model).plugin(Plugin("weather", tools=[forecast])).build()
    assert agent.call("weather?").run().text == "done"
    assert [s["name"] for s in model.calls[0].tools] == ["forecast"]
    (result,) = tool_results(model.calls[1].messages)
    assert result.state is ToolResultState.SUCCESS and result.text == "sunny in Oslo"


def test_permission_rules_apply_to_plugin_tools() -> None:
    model = ScriptedModel([[ToolUseBlock("c1", "forecast", {"city": "Oslo"})], "done"])
    agent = (
        builder(model).plugin(Plugin("weather", tools=[forecast]))
        .permission_rules([PermissionRule("fore*", "deny", reason="no weather")]).build()
    )
    (end,) = of_type(stream_events(agent, "weather?"), ToolResultEndEvent)
    assert end.state is ToolResultState.DENIED


def test_a_plugin_tools_own_permission_is_kept() -> None:
    denied = tool(name="wipe", description="Wipes everything.", permission="deny")(
        lambda: "wiped")
    model = ScriptedModel([[ToolUseBlock("c1", "wipe", {})], "done"])
    agent = builder(model).plugin(Plugin("danger", tools=[denied])).build()
    (end,) = of_type(stream_events(agent, "go"), ToolResultEndEvent)
    assert end.state is ToolResultState.DENIED


def test_the_task_list_writes_into_the_agents_toolkit_not_the_given_one() -> None:
    user = add_toolkit()
    agent = make_agent(ScriptedModel(["ok"]), toolkit=user, enable_task_list=True)
    assert user.names == ["add"]
    assert agent.toolkit.names == ["add", "todo_write"]


def test_a_todo_write_already_in_the_toolkit_is_reused_by_the_task_list() -> None:
    user = Toolkit()
    user.register_tool(TodoTools())
    agent = make_agent(ScriptedModel(["ok"]), toolkit=user, enable_task_list=True)
    assert agent.toolkit.get("todo_write").source == "toolkit"  # type: ignore[union-attr]
