"""Values around a tool call: a timeout setting and the interrupt and side-effect
flags checked, a return value as text."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel

__all__ = ["INTERRUPT_MODES", "InterruptMode", "check_interrupt", "check_side_effect",
           "check_timeout", "tool_output_text"]

InterruptMode = Literal["cancel", "finish"]
"""What ``agent.interrupt()`` does to a running call of the tool: cancel it (the
default), or let it finish and keep its result."""
INTERRUPT_MODES: tuple[InterruptMode, ...] = ("cancel", "finish")


def check_timeout(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a tool timeout is a number of seconds or None, got {value!r}")
    if not 0 < value < float("inf"):
        raise ValueError(f"a tool timeout must be finite and > 0 seconds, got {value!r}")
    return float(value)


def check_side_effect(name: str | None, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{_whose(name)}side_effect must be True or False, got {value!r}")
    return value


def check_interrupt(name: str | None, value: object) -> InterruptMode:
    if value == "cancel" and isinstance(value, str):
        return "cancel"
    if value == "finish" and isinstance(value, str):
        return "finish"
    raise ValueError(f"{_whose(name)}interrupt must be 'cancel' (an interrupt cancels a "
                     "running call, the default) or 'finish' (it lets the call finish and "
                     f"keeps its result), got {value!r}")


def _whose(name: str | None) -> str:
    return f"tool {name!r}: " if name else ""


def tool_output_text(value: Any) -> str:
    """A tool's return value as text for the model."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
