"""The ReAct agent."""

from .react import NoResultError, ReActAgent, ReActAgentBuilder

__all__ = ["NoResultError", "ReActAgent", "ReActAgentBuilder"]
