"""The ReAct agent."""

from .react import NoResultError, ReActAgent, ReActAgentBuilder, ResumeError

__all__ = ["NoResultError", "ReActAgent", "ReActAgentBuilder", "ResumeError"]
