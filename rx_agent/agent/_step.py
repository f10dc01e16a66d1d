"""The step protocol: a call is a run of steps, each returning what comes next.

A :class:`Step` does one thing of a call (:mod:`._machine` has them all) and returns
:class:`Continue` with the next step or :class:`End` with the reply's final message.
A driver (:mod:`._driver`) runs them and does the checks between two steps. The two
effects a call has on the world, one attempt of a model call and one tool call, go
through functions the call's scope holds (:func:`stream_model`, a
:class:`ToolRunner`), so a driver can run them elsewhere while the steps stay as
they are.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, ClassVar, Protocol, final

from reactivex import Observable

from ..context import RuntimeContext
from ..message import Msg, ToolResultBlock, ToolUseBlock
from ..middleware.inputs import ModelCallInput
from ..middleware.types import ModelLike
from ..tool._call import CallOwner
from ..tool._run import Emit, Starting
from ..tool.toolkit import Toolkit

__all__ = ["Continue", "End", "Outcome", "Step", "ToolRunner", "count", "stream_model"]


class Step:
    """One step of a call. :meth:`run` does the step's work and returns what comes
    next; it never checks for an interrupt, a stop request, a checkpoint or the round
    limit: the driver does that between two steps, once.

    A step that waits for something (a hook chain's stream, a handler) is an ``async
    def run``; one that does not returns its outcome directly (no coroutine per step
    on the hot path), and the driver awaits only what is awaitable."""

    __slots__ = ()

    name: ClassVar[str] = "step"
    """What records and traces call the step."""
    checked: ClassVar[bool] = True
    """Whether the driver's checks run before this step (resuming records what the
    caller brought even when the reply was interrupted meanwhile)."""

    def run(self, loop: Any) -> Outcome | Awaitable[Outcome]:
        """The step's work (``loop``: the call's ``ReActLoop``): its outcome, or an
        awaitable of it."""
        raise NotImplementedError

    def cut(self, loop: Any) -> Msg | None:
        """The call is interrupted during this step or right after it: close what the
        step left open; the message the interrupted reply keeps, if any."""
        return None

    def answer(self) -> Msg | None:
        """What a stop request right after this step may end the reply with."""
        return None

    def finishing(self) -> bool:
        """An interrupt arrived while this step runs: whether it must go on instead of
        being cut (a batch whose ``interrupt="finish"`` tool runs). It ends by itself,
        and the driver then closes the reply as interrupted."""
        return False

    def describe(self, loop: Any) -> str:
        """A short summary of the step's input (for records; not on the hot path)."""
        return ""


@final
class Continue:
    """Go on with ``next``. ``save``: the step changed the state a durable session
    keeps (a checkpoint is due); ``round``: ``next`` begins a new round."""

    __slots__ = ("next", "round", "save")

    def __init__(self, next: Step, save: bool = False, round: bool = False) -> None:
        self.next = next
        self.save = save
        self.round = round


@final
class End:
    """The reply ends with ``msg`` (stored in the context unless it is a pause)."""

    __slots__ = ("msg",)

    def __init__(self, msg: Msg) -> None:
        self.msg = msg


Outcome = Continue | End


def count(n: int, what: str) -> str:
    """``"1 message"``, ``"2 messages"``: for :meth:`Step.describe`."""
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def stream_model(model: ModelLike, mci: ModelCallInput) -> Observable[Any]:
    """One attempt of a model call: the model's chunk stream (the default effect)."""
    return model.stream(mci.messages, mci.tools, mci.options)


class ToolRunner(Protocol):
    """How a batch runs one tool call: :func:`rx_agent.tool.execute`'s signature (the
    default effect)."""

    def __call__(self, toolkit: Toolkit, call: ToolUseBlock, ctx: RuntimeContext | None,
                 emit: Emit, source: str | None, reply_id: str, timeout: float | None = None,
                 owner: CallOwner | None = None,
                 starting: Starting | None = None) -> Awaitable[ToolResultBlock]: ...
