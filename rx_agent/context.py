"""Per-call context (:class:`RuntimeContext`) and per-session state (:class:`AgentState`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from pydantic import ConfigDict, Field

from ._keywords import unknown_keyword_error
from ._record import StoredRecord, install_java_names, new_id
from .message import Msg, ToolUseBlock
from .permissions import PermissionRule

__all__ = ["AgentState", "PendingToolCalls", "RuntimeContext"]

T = TypeVar("T")
_MISSING: Any = object()


class PendingToolCalls(StoredRecord):
    """Tool calls a paused reply waits on (user confirmation or external execution)."""

    reply_id: str
    kind: Literal["confirm", "external"]
    tool_calls: list[ToolUseBlock] = Field(description="The calls waiting for an answer.")
    batch: list[ToolUseBlock] = Field(
        description="Every unresolved call of the paused batch, in call order (the "
        "waiting ones and those that run once the reply resumes)."
    )


class AgentState(StoredRecord):
    """What an agent remembers about one session; persisted by the session store.

    ``context`` is the live conversation (every message in order). ``data`` is a
    JSON-serialisable scratch space for middlewares (namespaced by key). A stored state
    with fields this version does not know (written by a newer one) loads, and keeps
    them when it is saved again.
    """

    model_config = ConfigDict(validate_assignment=False)

    session_id: str
    user_id: str | None = None
    context: list[Msg] = Field(default_factory=list)
    pending: PendingToolCalls | None = None
    permission_rules: list[PermissionRule] = Field(
        default_factory=list, description="Rules the user asked to remember (HITL)."
    )
    data: dict[str, Any] = Field(default_factory=dict)

    if TYPE_CHECKING:  # keyword-only, as the fields (``extra`` would widen it to **kwargs)

        def __init__(
            self,
            *,
            session_id: str,
            user_id: str | None = ...,
            context: list[Msg] = ...,
            pending: PendingToolCalls | None = ...,
            permission_rules: list[PermissionRule] = ...,
            data: dict[str, Any] = ...,
        ) -> None: ...


# One lock for the attributes of every context: each critical section is one dict
# operation, so sharing it costs nothing measurable, and a call (which copies its
# caller's context) does not allocate a lock per context.
_ATTRS_LOCK = threading.RLock()
_CONTEXT_KEYWORDS = frozenset({"session_id", "user_id", "run_id", "attributes"})


class RuntimeContext:
    """Per-call context shared by every hook and tool of one call.

    Carries ``session_id``, ``user_id``, ``run_id`` (generated when not given), the
    call's :class:`AgentState` and attributes: string keys (``ctx.put("k", v)``) and
    typed keys (``ctx.put(MyConfig, cfg)``; ``ctx.get(MyConfig)``). ``put(k, None)``
    removes a key. All methods are thread-safe.
    """

    __slots__ = ("_attrs", "_base", "_lock", "agent_state", "run_id", "session_id", "user_id")

    if TYPE_CHECKING:

        def __init__(
            self,
            session_id: str | None = None,
            user_id: str | None = None,
            run_id: str | None = None,
            *,
            attributes: dict[str | type[Any], Any] | None = None,
        ) -> None: ...

    else:

        def __init__(self, session_id=None, user_id=None, run_id=None, *, attributes=None,
                     **unknown):
            if unknown:  # ``userId=...``: a TypeError naming ``user_id``
                raise unknown_keyword_error(RuntimeContext, unknown, _CONTEXT_KEYWORDS)
            self._setup(session_id, user_id, run_id, attributes)

    def _setup(
        self,
        session_id: str | None,
        user_id: str | None,
        run_id: str | None,
        attributes: dict[str | type[Any], Any] | None,
    ) -> None:
        for label, value in (("session_id", session_id), ("user_id", user_id)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"RuntimeContext {label} must be a str, not {type(value).__name__}")
        self.session_id = session_id or None
        self.user_id = user_id or None
        self.run_id: str = run_id or new_id()
        self.agent_state: AgentState | None = None
        self._lock = _ATTRS_LOCK
        self._attrs: dict[str | type[Any], Any] = {}
        self._base: RuntimeContext | None = None
        for key, value in (attributes or {}).items():
            self.put(key, value)

    @overload
    def get(self, key: type[T], default: T | None = None) -> T | None: ...
    @overload
    def get(self, key: str, default: Any = None) -> Any: ...
    def get(self, key: str | type[Any], default: Any = None) -> Any:
        """The value under ``key`` (a string or a type), or ``default``.

        A type finds, in this order: the value stored under exactly that type (here,
        then in a fallback context), the context itself for ``RuntimeContext``, and
        then a value stored under a subclass (as Java's ``get(Class)`` does): the most
        derived one when several are on one line of descent, else the first stored.
        """
        with self._lock:
            value = self._attrs.get(key, _MISSING)
        if value is not _MISSING:
            return value
        if self._base is not None:
            value = self._base._exact(key)
            if value is not _MISSING:
                return value
        if isinstance(key, type):  # only on a miss: string lookups pay nothing
            if key is RuntimeContext:
                return self
            if self._attrs or self._base is not None:
                value = self._assignable(key)
                if value is not _MISSING:
                    return value
        return default

    def _exact(self, key: str | type[Any]) -> Any:
        with self._lock:
            value = self._attrs.get(key, _MISSING)
        if value is _MISSING and self._base is not None:
            return self._base._exact(key)
        return value

    def _assignable(self, wanted: type[Any]) -> Any:
        """A value stored under a proper subclass of ``wanted`` (see :meth:`get`)."""
        with self._lock:
            typed = [(k, v) for k, v in self._attrs.items() if isinstance(k, type)]
        best: Any = _MISSING
        best_type: type[Any] | None = None
        for stored, value in typed:
            try:
                fits = stored is not wanted and issubclass(stored, wanted)
            except TypeError:  # e.g. a non-runtime Protocol
                continue
            if not fits or not isinstance(value, wanted):
                continue
            if best_type is None or (stored is not best_type and issubclass(stored, best_type)):
                best, best_type = value, stored
        if best is _MISSING and self._base is not None:
            return self._base._assignable(wanted)
        return best

    def put(self, key: str | type[Any], value: Any) -> None:
        """Store ``value`` under ``key``; ``None`` removes the key.

        A typed key must be given an instance of that type.
        """
        if isinstance(key, type):
            if value is not None and not isinstance(value, key):
                raise TypeError(
                    f"ctx.put({key.__name__}, ...) needs a {key.__name__}, "
                    f"got {type(value).__name__}"
                )
        elif not isinstance(key, str):
            raise TypeError(f"context keys are str or type, not {type(key).__name__}")
        with self._lock:
            if value is None:
                self._attrs.pop(key, None)
            else:
                self._attrs[key] = value

    def __contains__(self, key: object) -> bool:
        with self._lock:
            if key in self._attrs:
                return True
        return self._base is not None and key in self._base

    def keys(self) -> Iterator[str | type[Any]]:
        with self._lock:
            return iter(list(self._attrs))

    @property
    def attributes(self) -> dict[str | type[Any], Any]:
        """A snapshot copy of all attributes (a fallback context's underneath)."""
        merged = self._base.attributes if self._base is not None else {}
        with self._lock:
            merged.update(self._attrs)
        return merged

    def copy(self) -> RuntimeContext:
        """A copy with the same ids and attributes (values are shared, not copied)."""
        # Not through the constructor: these values were checked when self was made.
        new = RuntimeContext.__new__(RuntimeContext)
        new.session_id, new.user_id, new.run_id = self.session_id, self.user_id, self.run_id
        new._lock = self._lock
        with self._lock:
            new._attrs = dict(self._attrs)
        new.agent_state = self.agent_state
        new._base = self._base  # a fallback context stays readable underneath
        return new

    def _with_fallback(self, base: RuntimeContext | None) -> RuntimeContext:
        """A view of this context that reads ``base``'s attributes underneath ours.

        Writes go to this context's attributes (shared, not copied), so what a tool
        puts is seen by later hooks; ``base`` is only read.
        """
        if base is None:
            return self
        view = RuntimeContext.__new__(RuntimeContext)
        view.session_id, view.user_id, view.run_id = self.session_id, self.user_id, self.run_id
        view.agent_state = self.agent_state
        view._lock = self._lock
        view._attrs = self._attrs
        view._base = base
        return view

    def __repr__(self) -> str:
        keys = ", ".join(k if isinstance(k, str) else k.__name__ for k in self.keys())
        return (
            f"RuntimeContext(session_id={self.session_id!r}, user_id={self.user_id!r}, "
            f"run_id={self.run_id!r}, attributes=[{keys}])"
        )


# Java's getSessionId() / getAgentState() answer with the Python attribute.
install_java_names(RuntimeContext)
