"""Argument checks shared by ``ReActAgent(...)`` and the builder's setters, and the
conversion of what ``stream`` / ``call`` accept into an :class:`AgentInput`.

Each check raises at once with a message that names the argument, the value and,
where a common slip is recognisable, the fix.
"""

from __future__ import annotations

import difflib
import inspect
import math
from collections.abc import Collection, Iterable, Sequence

from .._record import java_attribute_error, java_name_hint
from .._text import check_value
from ..context import RuntimeContext
from ..event import ExternalExecutionResultEvent, UserConfirmResultEvent
from ..message import ContentBlock, Msg, Role, TextBlock
from ..middleware.base import MiddlewareBase
from ..middleware.inputs import AgentInput
from ..model.base import ChatModel
from ..options import GenerateOptions
from ..permissions import PermissionRule
from ..plugin import Plugin
from ..session import ConflictPolicy, SessionStore
from ..tool.toolkit import Toolkit

__all__ = [
    "AgentInputLike",
    "check_backoff",
    "check_bool",
    "check_conflict_policy",
    "check_ctx",
    "check_failover_listener",
    "check_generate_options",
    "check_middleware",
    "check_middlewares",
    "check_model",
    "check_name",
    "check_plugin",
    "check_plugins",
    "check_positive",
    "check_rules",
    "check_seconds",
    "check_session_store",
    "check_str",
    "check_toolkit",
    "interrupt_message",
    "keyword_hint",
    "normalize",
    "show",
    "unknown_setter",
]

AgentInputLike = (
    Msg | Sequence[Msg] | str | UserConfirmResultEvent | ExternalExecutionResultEvent | None
)
"""What ``stream``/``call`` accept: one ``Msg``, a list of them, a user ``str``, a resume
event, or ``None``."""


def normalize(msgs: AgentInputLike) -> AgentInput:
    if msgs is None:
        return AgentInput(())
    if isinstance(msgs, str):
        content: list[ContentBlock] = (
            [TextBlock._fast({"type": "text", "text": msgs})] if msgs else []
        )
        return AgentInput((Msg.make(Role.USER, content),))
    if isinstance(msgs, Msg):
        return AgentInput((msgs,))
    if isinstance(msgs, (UserConfirmResultEvent, ExternalExecutionResultEvent)):
        return AgentInput((), resume=msgs)
    if isinstance(msgs, Sequence) and not isinstance(msgs, bytes):
        items: list[Msg] = []
        for i, m in enumerate(msgs):
            if not isinstance(m, Msg):
                raise TypeError(f"input message #{i} is a {type(m).__name__}, not a Msg")
            items.append(m)
        return AgentInput(tuple(items))
    raise TypeError(
        "agent input must be a Msg, a list of Msg, a str, a UserConfirmResultEvent, "
        f"an ExternalExecutionResultEvent or None; got {type(msgs).__name__}"
    )


def check_ctx(ctx: RuntimeContext | None, label: str = "ctx") -> RuntimeContext | None:
    if ctx is not None and not isinstance(ctx, RuntimeContext):
        raise TypeError(f"{label} must be a RuntimeContext, not {type(ctx).__name__}")
    return ctx


def show(value: object) -> str:
    """``type value`` for an error message, the repr kept short."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def check_name(name: object) -> None:
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {show(name)}")
    if not name.strip():
        raise ValueError("agent name must be a non-empty str")


def check_str(label: str, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{label} must be a str, got {show(value)}")


def check_bool(label: str, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{label} must be True or False, got {show(value)}")


def check_model(label: str, model: object) -> None:
    if isinstance(model, ChatModel):
        return
    hint = ""
    if isinstance(model, str):
        hint = f"; for an OpenAI-compatible endpoint pass OpenAIChatModel({model!r})"
    elif isinstance(model, type) and issubclass(model, ChatModel):
        hint = f"; pass an instance: {model.__name__}(...)"
    raise TypeError(f"{label} must be a ChatModel, got {show(model)}{hint}")


def check_toolkit(toolkit: object) -> None:
    if isinstance(toolkit, Toolkit):
        return
    hint = ""
    if isinstance(toolkit, (list, tuple)) or callable(toolkit):
        hint = "; wrap the tools in one: Toolkit([fn, ...])"
    raise TypeError(f"toolkit must be a Toolkit, got {show(toolkit)}{hint}")


def check_failover_listener(listener: object) -> None:
    if not callable(listener):
        raise TypeError(
            f"failover_listener must be callable as fn(model, error), got {show(listener)}"
        )
    try:
        inspect.signature(listener).bind(None, None)
    except TypeError:
        raise TypeError(
            "failover_listener is called as fn(primary_model, error); "
            f"{getattr(listener, '__name__', type(listener).__name__)} does not take those "
            "two arguments"
        ) from None
    except ValueError:  # not introspectable (a builtin): trust it
        pass


def check_session_store(store: object) -> None:
    # A class has load and save too: the Protocol check alone would let it through.
    if isinstance(store, type) or not isinstance(store, SessionStore):
        hint = "; pass an instance" if isinstance(store, type) else ""
        raise TypeError(
            f"session_store must have load(key) and save(key, state), got {show(store)}{hint}"
        )


def check_generate_options(options: object) -> None:
    if not isinstance(options, GenerateOptions):
        hint = "; write GenerateOptions(**{...})" if isinstance(options, dict) else ""
        raise TypeError(f"generate_options must be a GenerateOptions, got {show(options)}{hint}")


def check_backoff(value: object) -> tuple[float, float]:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"retry_backoff must be (initial, maximum) seconds, got {show(value)}")
    out = []
    for label, seconds in zip(("initial", "maximum"), value, strict=True):
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError(f"retry_backoff {label} must be a number of seconds, got "
                            f"{show(seconds)}")
        if not seconds >= 0 or math.isinf(seconds):  # also refuses NaN
            raise ValueError(f"retry_backoff {label} must be finite and >= 0, got {seconds!r}")
        out.append(float(seconds))
    return out[0], out[1]


def check_middleware(value: object, where: str) -> MiddlewareBase:
    if isinstance(value, MiddlewareBase):
        return value
    if isinstance(value, type) and issubclass(value, MiddlewareBase):
        problem = f"the class {value.__name__}; pass an instance: {value.__name__}()"
    elif isinstance(value, (list, tuple, set, frozenset)):
        problem = f"a {type(value).__name__}; use middlewares([...]) for several"
    else:
        problem = show(value)
    raise TypeError(f"{where}, got {problem}")


def _sequence(values: object, label: str, one: type, single: str, many: str) -> list[object]:
    """``values`` as a list, refusing one ``one`` instance or a non-iterable."""
    if isinstance(values, one):
        raise TypeError(f"{label} takes a list of {single}")
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"{label} takes a list of {many}, got {show(values)}")
    return list(values)


def check_middlewares(values: object, label: str) -> list[MiddlewareBase]:
    items = _sequence(values, label, MiddlewareBase,
                      "middlewares; use middleware(mw) for one", "MiddlewareBase instances")
    return [
        check_middleware(mw, f"{label} item #{i} must be a MiddlewareBase instance")
        for i, mw in enumerate(items)
    ]


def check_rules(values: object) -> tuple[PermissionRule, ...]:
    if isinstance(values, PermissionRule):
        raise TypeError("permission_rules takes a list; use permission_rule(...) for one")
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"permission_rules takes a list of PermissionRule, got {show(values)}")
    rules = tuple(values)
    for rule in rules:
        if not isinstance(rule, PermissionRule):
            raise TypeError(f"permission_rules takes PermissionRule, not {type(rule).__name__}")
    return rules


def check_positive(label: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{label} must be an int, not {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{label} must be > 0, got {value}")


def check_seconds(label: str, value: object, *, positive: bool) -> float:
    """A finite number of seconds (``> 0`` when ``positive``, else ``>= 0``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{label} must be a number of seconds, got {show(value)}")
    if math.isnan(value) or math.isinf(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{label} must be finite and {bound} seconds, got {value!r}")
    return float(value)


def check_conflict_policy(value: object) -> ConflictPolicy:
    if isinstance(value, ConflictPolicy):
        return value
    if isinstance(value, str):
        try:
            return ConflictPolicy(value.upper())
        except ValueError:
            pass
    names = ", ".join(f"ConflictPolicy.{p.name}" for p in ConflictPolicy)
    raise ValueError(f"conflict_policy must be one of {names}, got {show(value)}")


def interrupt_message(msg: object) -> Msg | None:
    """The message ``agent.interrupt(ctx, msg)`` records: a ``Msg``, or a ``str`` as a
    user message; refused when it could not be stored."""
    if msg is None:
        return None
    if isinstance(msg, str):
        msg = Msg.make(Role.USER, [TextBlock._fast({"type": "text", "text": msg})])
    if not isinstance(msg, Msg):
        raise TypeError(f"interrupt(ctx, msg): msg must be a Msg or a str, got {show(msg)}")
    check_value(msg, "the interrupt message")
    return msg


def check_plugin(value: object, where: str) -> Plugin:
    if isinstance(value, Plugin):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        problem = f"a {type(value).__name__}; use plugins([...]) for several"
    elif isinstance(value, MiddlewareBase):
        problem = f"a middleware ({show(value)}); use middleware(mw), or wrap it in a Plugin"
    else:
        problem = show(value)
    raise TypeError(f"{where}, got {problem}")


def check_plugins(values: object, label: str) -> list[Plugin]:
    items = _sequence(values, label, Plugin, "plugins; use plugin(p) for one", "Plugin")
    return [check_plugin(p, f"{label} item #{i} must be a Plugin") for i, p in enumerate(items)]


# Keywords other agent libraries use (AgentScope Python's ``system_prompt``, a
# ``tools`` list) and what they are called here: (constructor form, builder form).
_SLIPS: dict[str, tuple[str, str]] = {
    "system_prompt": ("sys_prompt", "sys_prompt"),
    "systemPrompt": ("sys_prompt", "sys_prompt"),
    "instructions": ("sys_prompt", "sys_prompt"),
    "prompt": ("sys_prompt", "sys_prompt"),
    "tools": ("toolkit=Toolkit([...])", "toolkit(Toolkit([...]))"),
    "middleware": ("middlewares", "middleware"),
    "plugin": ("plugins", "plugin"),
    "max_iterations": ("max_iters", "max_iters"),
    "fallback": ("fallback_model", "fallback_model"),
}


def keyword_hint(key: str, params: Collection[str], builder: type) -> str | None:
    """The constructor keyword an unknown ``key`` means: another library's name, a
    Java spelling (as ``builder`` knows them) or a near miss."""
    slip = _SLIPS.get(key)
    if slip is not None:
        return slip[0]
    hint = java_name_hint(builder, key)
    if hint is not None and hint in params:
        return hint
    close = difflib.get_close_matches(key, params, n=1, cutoff=0.8)
    return close[0] if close else None


def unknown_setter(builder: object, name: str, setters: Collection[str]) -> AttributeError:
    """The error for ``builder.name``, which the builder lacks (or spells the Java way)."""
    cls = type(builder)
    java = inspect.getattr_static(cls, name, None)
    if java is not None and name in getattr(cls, "_java_names", ()):
        return java_attribute_error(builder, name, java.python)
    slip = _SLIPS.get(name)
    close = difflib.get_close_matches(name, setters, n=1, cutoff=0.8) \
        if slip is None and not name.startswith("_") else []
    hint = slip[1] if slip is not None else (close[0] if close else None)
    return AttributeError(f"{cls.__name__!r} object has no attribute {name!r}"
                          + (f"; did you mean `{hint}`?" if hint else ""))
