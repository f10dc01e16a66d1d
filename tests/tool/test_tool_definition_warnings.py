"""A tool the model cannot call well is pointed out when a toolkit registers it: no
type hints, no description, a default of another type (one the hint refuses is an
error at once)."""

from __future__ import annotations

import warnings
from typing import Annotated, Any

import pytest
from pydantic import Field

from rx_agent import ReActAgent, ScriptedModel, Toolkit, tool
from rx_agent.tool import ToolDefinitionWarning


def _registered(fn: Any) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Toolkit([fn])
    found = [w for w in caught if issubclass(w.category, ToolDefinitionWarning)]
    for w in found:
        assert w.filename == __file__  # points at the registration, not inside rx_agent
    return [str(w.message) for w in found]


def test_a_tool_without_type_hints_is_warned_about() -> None:
    def lookup(city, country="FR"):  # type: ignore[no-untyped-def]
        """Look a city up."""

    assert _registered(lookup) == [
        "tool 'lookup': parameters 'city', 'country' have no type hint, so the model is "
        "told nothing of their types and any JSON value passes: annotate them "
        "(`city: str`, say)"
    ]


def test_a_tool_without_a_docstring_is_warned_about() -> None:
    def lookup(city: str) -> str:
        return city

    assert _registered(lookup) == [
        "tool 'lookup': it has no description (no docstring), so the model knows it by its "
        "name alone: write a docstring, or pass description=..."
    ]


def test_a_description_given_at_registration_is_enough() -> None:
    def lookup(city: str) -> str:
        return city

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Toolkit().register_tool(lookup, description="Look a city up.")


def test_a_default_the_hint_accepts_only_by_conversion_is_warned_about() -> None:
    def page(number: int = "1", tags: list[str] = ()) -> str:  # type: ignore[assignment]
        """One page of results."""
        return ""

    [message] = _registered(page)
    assert message == (
        "tool 'page': parameter 'number' defaults to '1' (str), which its hint int accepts "
        "only by conversion (the function gets '1' itself when the model leaves it out); "
        "parameter 'tags' defaults to () (tuple), which its hint list[str] accepts only by "
        "conversion (the function gets () itself when the model leaves it out)"
    )


def test_a_none_default_under_a_hint_without_none_is_warned_about() -> None:
    def page(number: int = None) -> str:  # type: ignore[assignment]  # noqa: RUF013  # the slip
        """One page of results."""
        return ""

    assert _registered(page) == [
        "tool 'page': parameter 'number' defaults to None, which its hint int does not allow: "
        "write `number: int | None = None`"
    ]


@pytest.mark.parametrize(
    "define",
    [
        "def page(size: int = 'ten') -> str",
        "def page(size: Annotated[int, Field(ge=1)] = 0) -> str",
        "def page(size: int = Field('ten', description='rows')) -> str",
    ],
)
def test_a_default_the_hint_refuses_is_an_error(define: str) -> None:
    namespace: dict[str, Any] = {"Annotated": Annotated, "Field": Field}
    exec(f'{define}:\n    """One page."""\n    return ""', namespace)
    with pytest.raises(TypeError, match=r"^tool 'page': parameter 'size' defaults to .*, "
                                        r"which its hint .* refuses \(default: .*\); give a "
                                        r"default of the hinted type$"):
        tool(namespace["page"])


def test_a_well_defined_tool_registers_silently() -> None:
    @tool
    def page(number: int = 1, size: int | None = None, query: str = "",
             tags: Annotated[list[str], Field(description="filters")] = []) -> str:  # noqa: B006
        """One page of results.

        Args:
            number: which page.
        """
        return ""

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Toolkit([page])
        ReActAgent(name="a", model=ScriptedModel([]), toolkit=Toolkit([page]))


def test_decorating_alone_does_not_warn_registering_does() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @tool
        def bare(x: int) -> int:
            return x

    assert not caught
    assert len(_registered(bare)) == 1
