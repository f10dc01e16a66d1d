"""``MiddlewareBase.list_tools`` (AgentScope Python): tools a middleware brings, read
once when the agent is built."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from conftest import builder, tool_results

from rx_agent import MiddlewareBase, ScriptedModel, ToolUseBlock, tool


@tool
def echo(text: str) -> str:
    """Say it back."""
    return f"echo: {text}"


class Bringing(MiddlewareBase):
    def __init__(self, *tools: Any) -> None:
        self.tools = tools
        self.reads = 0

    def list_tools(self) -> Sequence[Callable[..., Any]]:
        self.reads += 1
        return self.tools


def test_default_lists_no_tools() -> None:
    assert list(MiddlewareBase().list_tools()) == []
    agent = builder(ScriptedModel(["ok"])).middleware(MiddlewareBase()).build()
    assert len(agent.toolkit) == 0


def test_listed_tools_join_the_toolkit_and_the_model_can_call_them() -> None:
    mw = Bringing(echo)
    model = ScriptedModel([[ToolUseBlock("c1", "echo", {"text": "hi"})], "done", "again"])
    agent = builder(model).middleware(mw).build()
    assert agent.toolkit.get("echo").source == "middleware Bringing"  # type: ignore[union-attr]
    agent.call("go").run()
    agent.call("again").run()
    (result,) = tool_results(model.calls[1].messages)
    assert result.text == "echo: hi"
    assert mw.reads == 1  # at build time only, never on the run path


def test_the_same_instance_twice_is_read_once() -> None:
    mw = Bringing(echo)
    agent = builder(ScriptedModel(["ok"])).middlewares([mw, mw]).build()
    assert mw.reads == 1 and len(agent.middlewares) == 2 and agent.toolkit.names == ["echo"]


def test_a_plain_function_is_listed_as_a_tool() -> None:
    def shout(text: str) -> str:
        """The text in capitals."""
        return text.upper()

    agent = builder(ScriptedModel(["ok"])).middleware(Bringing(shout)).build()
    assert agent.toolkit.names == ["shout"]


def test_bad_list_tools_results_fail_the_build_naming_the_middleware() -> None:
    bad = Bringing()
    bad.list_tools = lambda: "echo"  # type: ignore[method-assign,assignment,return-value]
    with pytest.raises(TypeError, match=r"Bringing\.list_tools\(\) must return a list"):
        builder(ScriptedModel(["ok"])).middleware(bad).build()
    with pytest.raises(TypeError, match=r"Bringing\.list_tools\(\) item #1: cannot register"):
        builder(ScriptedModel(["ok"])).middleware(Bringing(echo, 42)).build()


def test_list_tools_must_stay_a_method() -> None:
    class Attr(MiddlewareBase):
        list_tools = ()  # type: ignore[assignment]

    with pytest.raises(TypeError, match=r"Attr\.list_tools must be a method"):
        builder(ScriptedModel(["ok"])).middleware(Attr()).build()
