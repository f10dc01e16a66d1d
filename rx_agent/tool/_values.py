"""Values around a tool call: a timeout setting checked, a return value as text."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

__all__ = ["check_timeout", "tool_output_text"]


def check_timeout(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a tool timeout is a number of seconds or None, got {value!r}")
    if not 0 < value < float("inf"):
        raise ValueError(f"a tool timeout must be finite and > 0 seconds, got {value!r}")
    return float(value)


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
