"""Middleware base class, extension points, input records and the execution plan."""

from .base import Agent, ExtensionPoint, MiddlewareBase, Next
from .inputs import (
    ActingInput,
    AgentFinishOutcome,
    AgentInput,
    ModelCallInput,
    ReasoningInput,
    ToolSchema,
)
from .plan import ExecutionPlan, PlanError

__all__ = [
    "ActingInput",
    "Agent",
    "AgentFinishOutcome",
    "AgentInput",
    "ExecutionPlan",
    "ExtensionPoint",
    "MiddlewareBase",
    "ModelCallInput",
    "Next",
    "PlanError",
    "ReasoningInput",
    "ToolSchema",
]
