"""Plugins (the Blade SDK's ``definePlugin``) and the merging of every tool source.

A :class:`Plugin` is a named bundle of middlewares and tools, registered with
``builder.plugin(p)``. When the agent is built, :func:`assemble` merges the tools of
every source into the one toolkit the agent runs with, in this order: the toolkit
given to the agent (source ``"toolkit"``), the built-ins (``"built-in"``), each
middleware's :meth:`~rx_agent.middleware.base.MiddlewareBase.list_tools`
(``"middleware ClassName"``), then each plugin's tools (``"plugin NAME"``). A name
taken twice fails the build naming both sources: a later tool never replaces an
earlier one. The user's :class:`Toolkit` is never changed; the agent gets its own
merged copy when anything is added to it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .middleware.base import MiddlewareBase
from .tool.toolkit import Tool, Toolkit

__all__ = ["Plugin", "assemble"]

_NAME_RE = re.compile(r"[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?")
_NAME_RULE = (
    "1-64 lowercase letters, digits, '.', '_' or '-', starting and ending with a "
    "letter or digit"
)


def _items(value: object, label: str) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{label} takes a list, got {type(value).__name__} {value!r}")
    return tuple(value)


def _resolve(item: object, where: str) -> list[Tool]:
    """The tool(s) ``item`` registers as (an object may hold several ``@tool`` methods),
    checked now so that a bad tool fails where it was declared."""
    probe = Toolkit()
    try:
        probe.register_tool(item)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{where}: {exc}") from exc
    return list(probe)


@dataclass(frozen=True, slots=True)
class Plugin:
    """A named bundle of middlewares and tools (Blade's ``definePlugin``).

    ``Plugin("weather", middlewares=[...], tools=[...])``. The name is 1-64 lowercase
    letters, digits, ``.``, ``_`` or ``-``, starting and ending alphanumeric, and
    unique per agent. Its middlewares join the agent's plan (sorted by ``order()``;
    among equal orders after the directly registered ones, plugins in registration
    order); its tools join the agent's toolkit with the source ``"plugin NAME"`` and
    obey the permission rules like any other tool.
    """

    name: str
    middlewares: Sequence[MiddlewareBase] = ()
    tools: Sequence[Tool | Callable[..., Any]] = ()
    _specs: tuple[Tool, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        name = self.name
        if not isinstance(name, str):
            raise TypeError(f"a plugin name must be a str, got {type(name).__name__} {name!r}")
        if not _NAME_RE.fullmatch(name):
            raise ValueError(f"plugin name {name!r} is invalid: use {_NAME_RULE}")
        middlewares = _items(self.middlewares, f"Plugin({name!r}) middlewares")
        for i, mw in enumerate(middlewares):
            if not isinstance(mw, MiddlewareBase):
                hint = (f"; pass an instance: {mw.__name__}()"
                        if isinstance(mw, type) and issubclass(mw, MiddlewareBase) else "")
                raise TypeError(
                    f"Plugin({name!r}) middlewares item #{i} must be a MiddlewareBase "
                    f"instance, got {type(mw).__name__} {mw!r}{hint}"
                )
        tools = _items(self.tools, f"Plugin({name!r}) tools")
        specs = [
            spec
            for i, item in enumerate(tools)
            for spec in _resolve(item, f"Plugin({name!r}) tools item #{i}")
        ]
        object.__setattr__(self, "middlewares", middlewares)
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "_specs", tuple(specs))


class _Merge:
    """The agent's toolkit, copied from the user's on the first addition."""

    def __init__(self, base: Toolkit) -> None:
        self.base = base
        self.own: Toolkit | None = None

    def toolkit(self) -> Toolkit:
        if self.own is None:
            self.own = self.base.copy()
        return self.own

    def add(self, specs: Iterable[Tool], source: str) -> None:
        for spec in specs:
            kit = self.toolkit()
            taken = kit.get(spec.name)
            if taken is not None:
                raise ValueError(
                    f"tool name {spec.name!r} is provided twice: by {taken.source} and by "
                    f"{source}; a later tool never replaces an earlier one, so rename one"
                )
            spec.source = source
            kit._put(spec)

    def builtins(self, install: Callable[[Toolkit], MiddlewareBase]) -> MiddlewareBase:
        kit = self.toolkit()
        before = set(kit.names)
        middleware = install(kit)
        for name in kit.names:
            if name not in before:
                tool = kit.get(name)
                assert tool is not None
                tool.source = "built-in"
        return middleware


def _listed(mw: MiddlewareBase) -> list[Tool]:
    label = type(mw).__name__
    method = getattr(mw, "list_tools", None)
    if not callable(method):
        raise TypeError(
            f"{label}.list_tools must be a method `def list_tools(self) -> Sequence[...]`, "
            f"got {type(method).__name__} {method!r}"
        )
    listed = method()  # read exactly once
    if isinstance(listed, (str, bytes)) or not isinstance(listed, Iterable):
        raise TypeError(f"{label}.list_tools() must return a list of tools, got "
                        f"{type(listed).__name__} {listed!r}")
    return [
        spec
        for i, item in enumerate(listed)
        for spec in _resolve(item, f"{label}.list_tools() item #{i}")
    ]


def assemble(
    toolkit: Toolkit,
    direct: Sequence[MiddlewareBase],
    plugins: Sequence[Plugin],
    builtins: Sequence[Callable[[Toolkit], MiddlewareBase]] = (),
) -> tuple[Toolkit, list[MiddlewareBase]]:
    """The toolkit and the middlewares (in registration order) an agent runs with.

    Middlewares: ``direct``, then the built-ins', then each plugin's. ``toolkit`` is
    returned as is when nothing adds a tool; otherwise a merged copy is.
    """
    names: set[str] = set()
    for plugin in plugins:
        if plugin.name in names:
            raise ValueError(f"two plugins are named {plugin.name!r}; plugin names are "
                             "unique per agent")
        names.add(plugin.name)
    merge = _Merge(toolkit)
    middlewares = list(direct)
    middlewares.extend(merge.builtins(install) for install in builtins)
    for plugin in plugins:
        middlewares.extend(plugin.middlewares)
    seen: set[int] = set()
    for mw in middlewares:
        if id(mw) not in seen:  # the same instance twice is two layers, one tool set
            seen.add(id(mw))
            merge.add(_listed(mw), f"middleware {type(mw).__name__}")
    for plugin in plugins:
        merge.add(plugin._specs, f"plugin {plugin.name}")
    return (merge.own if merge.own is not None else toolkit), middlewares
