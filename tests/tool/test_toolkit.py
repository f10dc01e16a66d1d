"""Toolkit: schemas from type hints, validation, registration forms, execution."""

from __future__ import annotations

import asyncio
import threading
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
