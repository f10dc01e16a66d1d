"""Toolkit: schemas from type hints, validation, registration forms, execution."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from rx_agent import RuntimeContext, Tool, Toolkit, tool
from rx_agent.tool import ToolArgumentError


def search(query: str, limit: int = 5, mode: Literal["fast", "deep"] = "fast") -> list[str]:
    """Search the web.

    Args:
        query: What to look for.
        limit: How many results
            to return at most.
        mode: Search depth.

    Returns:
        The hits.
    """
    return [query] * limit


def test_schema_from_type_hints_and_docstring() -> None:
    schema = Toolkit([search]).schemas()[0]
    assert schema["name"] == "search"
    assert schema["description"] == "Search the web."
    params = schema["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["query"]
    assert params["additionalProperties"] is False
    assert params["properties"]["query"] == {"type": "string", "description": "What to look for."}
    assert params["properties"]["limit"]["description"] == "How many results to return at most."
    assert params["properties"]["limit"]["default"] == 5
    assert params["properties"]["mode"]["enum"] == ["fast", "deep"]
    assert "title" not in params


class Point(BaseModel):
    x: int
    y: int


def test_unresolvable_hints_are_a_clear_error() -> None:
    def bad(p: Missing) -> None:  # type: ignore[name-defined]  # noqa: F821
        """Bad."""

    with pytest.raises(TypeError, match="cannot read the type hints of tool 'bad'"):
        Toolkit([bad])


def test_annotated_field_descriptions_and_nested_models() -> None:
    def plot(points: list[Point], color: Annotated[str, Field(description="CSS color")]) -> str:
        """Plot points."""
        return color

    params = Toolkit([plot]).schemas()[0]["parameters"]
    assert params["properties"]["color"]["description"] == "CSS color"
    assert "Point" in str(params)
    kwargs = Toolkit([plot]).get("plot").validate(  # type: ignore[union-attr]
        {"points": [{"x": 1, "y": 2}], "color": "red"})
    assert kwargs["points"][0].x == 1


def test_runtime_context_parameter_is_injected_and_hidden() -> None:
    def whoami(ctx: RuntimeContext, greeting: str = "hi") -> str:
        """Who is calling."""
        return f"{greeting} {ctx.user_id}"

    t = Toolkit([whoami]).get("whoami")
    assert t is not None
    assert t.context_params == ("ctx",)
    assert "ctx" not in t.parameters["properties"]


def test_validation_errors_name_the_tool_and_the_fields() -> None:
    t = Toolkit([search]).get("search")
    assert t is not None
    with pytest.raises(ToolArgumentError) as info:
        t.validate({"limit": "many", "extra": 1})
    text = str(info.value)
    assert "search" in text and "query" in text and "limit" in text and "extra" in text
    with pytest.raises(ToolArgumentError, match="JSON object"):
        t.validate(["not", "a", "dict"])  # type: ignore[arg-type]


def test_decorator_forms_keep_the_function_callable() -> None:
    @tool
    def plain(a: int) -> int:
        """Plain."""
        return a + 1

    @tool(name="renamed", description="Custom text", concurrency_safe=True)
    async def fancy(a: int) -> int:
        return a * 2

    assert isinstance(plain, Tool) and plain(1) == 2
    assert asyncio.run(fancy(2)) == 4
    tk = Toolkit([plain, fancy])
    assert tk.names == ["plain", "renamed"]
    renamed = tk.get("renamed")
    assert renamed is not None and renamed.description == "Custom text"
    assert renamed.concurrency_safe and renamed.is_async


def test_register_options_and_errors() -> None:
    tk = Toolkit()
    t = tk.register_tool(search, permission="ask", external=True)
    assert (t.permission, t.external) == ("ask", True)
    with pytest.raises(ValueError, match="already registered"):
        tk.register_tool(search)
    with pytest.raises(ValueError, match="permission"):
        tk.register_tool(plain_fn, permission="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid"):
        tk.register_tool(plain_fn, name="has space")
    with pytest.raises(TypeError):
        tk.register_tool(42)
    tk.remove_tool("search")
    assert "search" not in tk and len(tk) == 0


def plain_fn(x: int) -> int:
    """A function."""
    return x


def test_register_an_object_registers_its_tool_methods_bound() -> None:
    class Counter:
        def __init__(self) -> None:
            self.n = 0

        @tool
        def bump(self, by: int = 1) -> int:
            """Bump the counter."""
            self.n += by
            return self.n

        def not_a_tool(self) -> None:
            """Ignored."""

    counter = Counter()
    tk = Toolkit()
    tk.register_tool(counter)
    assert tk.names == ["bump"]
    bump = tk.get("bump")
    assert bump is not None and "self" not in bump.parameters["properties"]

    async def run() -> object:
        return await bump.invoke({"by": 3}, None)

    assert asyncio.run(run()) == 3 and counter.n == 3


async def test_sync_tools_run_off_the_event_loop_thread() -> None:
    seen: list[int] = []

    def where() -> str:
        """Thread id."""
        seen.append(threading.get_ident())
        return "ok"

    t = Toolkit([where]).get("where")
    assert t is not None
    assert await t.invoke({}, None) == "ok"
    assert seen and seen[0] != threading.get_ident()


async def test_async_generator_tools_stream() -> None:
    async def count(n: int):  # type: ignore[no-untyped-def]
        """Count."""
        for i in range(n):
            yield str(i)

    t = Toolkit([count]).get("count")
    assert t is not None and t.is_async_gen
    out = [chunk async for chunk in t.invoke({"n": 3}, None)]
    assert out == ["0", "1", "2"]


# -- no parameter is silently dropped; odd signatures are callable or refused -------


async def test_names_pydantic_reserves_are_kept_as_parameters() -> None:
    def configure(_token: str, model_config: str, json: int = 2, model_name: str = "m") -> str:
        """Configure.

        Args:
            _token: A private-looking name.
            model_config: A name pydantic keeps for itself.
        """
        return f"{_token}|{model_config}|{json}|{model_name}"

    t = Toolkit([configure]).get("configure")
    assert t is not None
    params = t.parameters
    assert list(params["properties"]) == ["_token", "model_config", "json", "model_name"]
    assert params["required"] == ["_token", "model_config"]
    assert params["properties"]["_token"]["description"] == "A private-looking name."
    assert params["properties"]["json"]["default"] == 2
    kwargs = t.validate({"_token": "t", "model_config": "cfg", "json": 3})
    assert kwargs == {"_token": "t", "model_config": "cfg", "json": 3, "model_name": "m"}
    assert await t.invoke(kwargs, None) == "t|cfg|3|m"
    # Errors and unknown keys use the parameter's own name, never the internal one.
    with pytest.raises(ToolArgumentError) as info:
        t.validate({"model_config": "cfg", "arg_0": "t"})
    assert "_token: Field required" in str(info.value)
    assert "arg_0: Extra inputs are not permitted" in str(info.value)


def test_a_users_alias_on_a_reserved_name_wins() -> None:
    def aliased(_private: Annotated[int, Field(alias="count")] = 1) -> int:
        """Aliased."""
        return _private

    t = tool(aliased)
    assert list(t.parameters["properties"]) == ["count"]
    assert t.validate({"count": 4}) == {"_private": 4}


async def test_positional_only_parameters_are_passed_by_position() -> None:
    def scale(value: int, factor: int = 2, /, *, offset: int = 0) -> int:
        """Scale a value."""
        return value * factor + offset

    async def negate(value: int, /) -> int:
        """Negate."""
        return -value

    def tagged(ctx: RuntimeContext, label: str, /) -> str:
        """A context parameter that is positional-only too."""
        return f"{ctx.user_id}:{label}"

    tk = Toolkit([scale, negate, tagged])
    s, n, g = tk.get("scale"), tk.get("negate"), tk.get("tagged")
    assert s is not None and n is not None and g is not None
    assert s.parameters["required"] == ["value"]
    assert await s.invoke(s.validate({"value": 3, "offset": 1}), None) == 7
    assert await n.invoke(n.validate({"value": 3}), None) == -3
    assert await g.invoke(g.validate({"label": "x"}), RuntimeContext(user_id="u")) == "u:x"


async def test_a_positional_only_tool_method_is_callable_bound() -> None:
    class Box:
        @tool
        def put(self, item: str, /) -> str:
            """Put an item in the box."""
            return f"boxed {item}"

    tk = Toolkit()
    tk.register_tool(Box())
    put = tk.get("put")
    assert put is not None and list(put.parameters["properties"]) == ["item"]
    assert await put.invoke(put.validate({"item": "a"}), None) == "boxed a"


def test_a_type_hint_without_json_schema_is_refused_naming_the_parameter() -> None:
    def connect(host: str, sock: socket.socket) -> str:
        """Connect."""
        return host

    def apply(values: list[int], fn: Callable[[int], int]) -> list[int]:
        """Apply."""
        return values

    with pytest.raises(TypeError, match=r"tool 'connect': parameter 'sock' has a type hint "
                                        r"with no JSON schema \(socket\.socket\)"):
        Toolkit([connect])
    with pytest.raises(TypeError, match=r"tool 'apply': parameter 'fn' has a type hint"):
        tool(apply)


def test_copy_shares_the_tools_and_additions_stay_in_the_copy() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from rx_agent import Toolkit, tool

    @tool
    def one() -> str:
        """One."""
        return "1"

    @tool
    def two() -> str:
        """Two."""
        return "2"

    with ThreadPoolExecutor(1) as pool:
        base = Toolkit([one], executor=pool)
        copy = base.copy()
        copy.register_tool(two)
        assert copy.get("one") is base.get("one") and copy.executor is pool
        assert base.names == ["one"] and copy.names == ["one", "two"]
