"""Middleware base class, extension points, input records and the execution plan."""

from ._plan import ExecutionPlan, PlanError
from .base import Agent, ExtensionPoint, MiddlewareBase, Next
from .inputs import (
    ActingInput,
    AgentFinishOutcome,
    AgentInput,
    CompressContextInput,
    ModelCallInput,
    ReasoningInput,
    ToolSchema,
)
from .types import Handler, ModelLike, PlanLike, ToolkitLike

__all__ = [
    "ActingInput",
    "Agent",
    "AgentFinishOutcome",
    "AgentInput",
    "CompressContextInput",
    "ExecutionPlan",
    "ExtensionPoint",
    "Handler",
    "MiddlewareBase",
    "ModelCallInput",
    "ModelLike",
    "Next",
    "PlanError",
    "PlanLike",
    "ReasoningInput",
    "ToolSchema",
    "ToolkitLike",
]
