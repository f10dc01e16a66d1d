"""The ReAct agent."""

from ._structured import StructuredOutputError
from .react import NoResultError, ReActAgent, ReActAgentBuilder, ResumeError

__all__ = [
    "NoResultError",
    "ReActAgent",
    "ReActAgentBuilder",
    "ResumeError",
    "StructuredOutputError",
]
