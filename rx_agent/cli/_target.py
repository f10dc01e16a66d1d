"""``MODULE:ATTR``: how ``rx-agent plan`` and ``rx-agent serve`` find the agent.

One loader for both commands, so that they accept the same targets and report the
same mistakes. ``ATTR`` (dots allowed) is one of:

* an agent, used as it is;
* a factory with no required parameter, called with no argument;
* a factory taking the session store: one required positional parameter, or a
  parameter named ``store`` or ``session_store``; it is called with the store (the
  ``--store`` of ``serve``; an in-memory store for ``plan``) and must build the agent
  on it.

A factory may be ``async def``. Every mistake is a :class:`TargetError` whose message
names the target and the problem (and, for a file path or a ``.py`` suffix, the
``MODULE:ATTR`` that was probably meant).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import PurePath, PurePosixPath, PureWindowsPath
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import RxAgentError
from ._base import describe_error

if TYPE_CHECKING:
    from ..session import SessionStore

__all__ = ["STORE_PARAMETERS", "Target", "TargetError", "build_agent", "is_react_agent",
           "load_target"]

STORE_PARAMETERS = ("store", "session_store")
"""Parameter names that make a factory with no required parameter take the store."""

_EXAMPLE = "myapp.agents:build_agent"


class TargetError(RxAgentError, ValueError):
    """A ``MODULE:ATTR`` that names no agent; the message says why (exit status 2)."""


def is_react_agent(obj: Any) -> bool:
    from ..agent import ReActAgent

    return isinstance(obj, ReActAgent)


@dataclass(frozen=True, slots=True)
class Target:
    """What ``MODULE:ATTR`` names: an agent, or a factory (which may take the store)."""

    spec: str
    value: Any
    is_agent: Callable[[Any], bool]
    takes_store: bool = False
    store_keyword: str | None = None  # pass the store by this name, not positionally

    @property
    def agent(self) -> Any | None:
        """The agent itself, when ``ATTR`` is one (``None`` for a factory)."""
        return self.value if self.is_agent(self.value) else None


def load_target(spec: str, *, is_agent: Callable[[Any], bool] = is_react_agent) -> Target:
    """Import ``MODULE`` (the working directory first on ``sys.path``, as with
    ``python -m``) and classify ``ATTR``; nothing is called yet."""
    module_name, attr = _split(spec)
    module = _import(module_name)
    value = _attribute(module, module_name, attr)
    if is_agent(value):
        return Target(spec, value, is_agent)
    if not callable(value):
        raise TargetError(f"{spec} is a {type(value).__name__}, not a ReActAgent or a factory "
                          "that returns one")
    takes_store, keyword = _store_parameter(spec, value)
    return Target(spec, value, is_agent, takes_store, keyword)


def build_agent(target: Target, store: SessionStore | None = None) -> Any:
    """The agent: ``target``'s own, or what its factory returns (awaited when it is a
    coroutine). A factory taking the store gets ``store`` (a new in-memory store when
    ``None``) and must build the agent on it."""
    agent = target.agent
    if agent is not None:
        return agent
    if target.takes_store and store is None:
        from ..session import InMemorySessionStore

        store = InMemorySessionStore()
    call = f"{target.spec}(store)" if target.takes_store else f"{target.spec}()"
    try:
        if not target.takes_store:
            made = target.value()
        elif target.store_keyword is not None:
            made = target.value(**{target.store_keyword: store})
        else:
            made = target.value(store)
        if inspect.isawaitable(made):
            made = _resolve(made)  # an async factory
    except (Exception, SystemExit) as exc:
        raise TargetError(f"calling {call} failed: {describe_error(exc)}") from exc
    if not target.is_agent(made):
        raise TargetError(f"{call} returned a {type(made).__name__}, not a ReActAgent")
    if target.takes_store and getattr(made, "session_store", store) is not store:
        raise TargetError(f"{call} built the agent on another session store; build it on the "
                          "one it is given: ReActAgent(..., session_store=store)")
    return made


# -- MODULE:ATTR -----------------------------------------------------------------------


def _split(spec: str) -> tuple[str, str]:
    # The last colon: a Windows path (C:\app\agents.py:build) has one of its own.
    module_name, sep, attr = spec.rpartition(":")
    module_name, attr = module_name.strip(), attr.strip()
    if not sep or not module_name or not attr:
        raise TargetError(f"expected MODULE:ATTR (for example {_EXAMPLE}), got {spec!r}")
    if "/" in module_name or "\\" in module_name or module_name.endswith(".py"):
        raise TargetError(_path_hint(module_name, attr))
    if "(" in attr:
        name = attr.partition("(")[0]
        raise TargetError(f"ATTR is a name, not a call: write {module_name}:{name} "
                          "(a factory is called for you)")
    return module_name, attr


def _path_hint(module_name: str, attr: str) -> str:
    """What to write instead of a file path (``app/agents.py:build``)."""
    windows = "\\" in module_name or (len(module_name) > 1 and module_name[1] == ":")
    path: PurePath = PureWindowsPath(module_name) if windows else PurePosixPath(module_name)
    stem = path.name.removesuffix(".py")
    if len(path.parts) == 1:
        return (f"MODULE is a module name, not a file: drop .py and write {stem}:{attr}")
    hint = (f"MODULE is a module name, not a file path: write {stem}:{attr} and run from "
            f"{path.parent} (or put it on PYTHONPATH)")
    if not path.is_absolute() and ".." not in path.parts:
        dotted = ".".join([*path.parent.parts, stem])
        hint += f", or {dotted}:{attr} if {path.parent} is a package"
    return hint


def _import(module_name: str) -> ModuleType:
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise TargetError(f"cannot import {module_name!r}: no module named {missing!r} in "
                              f"the current directory ({cwd}) or on sys.path") from exc
        raise TargetError(f"importing {module_name!r} failed: {describe_error(exc)}") from exc
    except (Exception, SystemExit) as exc:  # the module's own code failed
        raise TargetError(f"importing {module_name!r} failed: {describe_error(exc)}") from exc


def _attribute(module: ModuleType, module_name: str, attr: str) -> Any:
    obj: Any = module
    walked = module_name
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            where = f"module {module_name!r}" if obj is module else repr(walked)
            raise TargetError(f"{where} has no attribute {part!r}{_offer(obj, module)}"
                              ) from None
        except Exception as exc:
            raise TargetError(f"reading {module_name}:{attr} failed: {describe_error(exc)}"
                              ) from exc
        walked = f"{walked}{':' if walked == module_name else '.'}{part}"
    return obj


def _offer(obj: Any, module: ModuleType) -> str:
    """`` (it has: a, b)``: the agents and functions ``module`` defines, if ``obj`` is it."""
    if obj is not module:
        return ""
    names = []
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        defined_here = getattr(value, "__module__", None) == module.__name__
        if is_react_agent(value) or (inspect.isfunction(value) and defined_here):
            names.append(name)
    if not names:
        return ""
    shown = ", ".join(sorted(names)[:8]) + (", ..." if len(names) > 8 else "")
    return f" (it has: {shown})"


def _store_parameter(spec: str, factory: Any) -> tuple[bool, str | None]:
    """Whether ``factory`` takes the store, and the keyword to pass it by (if any)."""
    try:
        params = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):  # no signature to read (a builtin): call it bare
        return False, None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in params if p.default is p.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if len(required) > 1:
        names = ", ".join(p.name for p in required)
        raise TargetError(f"{spec} needs the arguments ({names}); a factory takes no "
                          "argument, or one: the session store (def build(store): ...)")
    if required:
        (param,) = required
        if param.kind in positional:
            return True, None
        if param.name in STORE_PARAMETERS:  # def build(*, store)
            return True, param.name
        raise TargetError(f"{spec} needs the keyword argument {param.name!r}; a factory "
                          "takes no argument, or one: the session store (def build(store): "
                          "...)")
    named = next((p for p in params if p.name in STORE_PARAMETERS
                  and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)), None)
    if named is None:
        return False, None
    return True, None if named.kind is named.POSITIONAL_ONLY else named.name


def _resolve(awaitable: Awaitable[Any]) -> Any:
    async def wait() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    # Called from a running loop (a uvicorn worker builds its app inside one): the
    # factory gets a loop of its own on a thread, once, at start-up.
    with ThreadPoolExecutor(1, thread_name_prefix="rx-agent-factory") as pool:
        return pool.submit(asyncio.run, wait()).result()
