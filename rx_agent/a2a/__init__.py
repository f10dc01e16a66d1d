"""Remote agents over the A2A protocol (the ``a2a`` extra).

* :class:`A2AAgent`: an agent served elsewhere (by ``rx-agent serve``, or any A2A
  server), usable wherever a sub-agent is: ``A2AAgent(url).as_tool()``;
* the errors a remote call raises, under :class:`RemoteAgentError`.

The errors import without the extra; ``A2AAgent(...)`` without it raises an
``ImportError`` saying what to install. Serving an agent over A2A is the server's
job: ``rx_agent.serve.create_app`` (``a2a=``).
"""

from __future__ import annotations

from ._agent import A2AAgent
from ._errors import (
    RemoteAgentAuthError,
    RemoteAgentError,
    RemoteAgentRequestError,
    RemoteAgentTimeoutError,
    RemoteAgentUnavailableError,
    RemoteTaskFailedError,
)

__all__ = [
    "A2AAgent",
    "RemoteAgentAuthError",
    "RemoteAgentError",
    "RemoteAgentRequestError",
    "RemoteAgentTimeoutError",
    "RemoteAgentUnavailableError",
    "RemoteTaskFailedError",
]
