"""How a package publishes its names: one table of lazily loaded names, and the
public ``__module__`` of what it exports.

A package's ``__init__`` keeps four things in step (``tests/core/test_publish.py`` checks
them from the source):

* its eager imports, for the names every program needs;
* ``LAZY``, one table ``name -> module`` of the names that load on first access (their
  module pulls an optional extra, or is rarely needed), from which
  :func:`lazy_names` derives the module's ``__getattr__`` and ``__dir__``;
* the ``if TYPE_CHECKING:`` block, the same table as imports, for mypy and the docs;
* ``__all__``, the eager public imports and ``LAZY``'s names, written out as a list
  because mypy (no implicit re-export), ruff and the API docs read it from the source.

A lazy name whose module needs a missing extra raises that module's own
``ImportError``, which names the extra to install.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

__all__ = ["lazy_names", "publish", "publish_all"]

T = TypeVar("T")


def publish(obj: T, package: str) -> T:
    """Show ``obj`` (a class or a function) at ``package`` when it is defined below it.

    Reprs, tracebacks, pickles and the docs then show ``rx_agent.Msg`` rather than the
    private module path. A shorter path already set (the root's) is kept; anything
    that is not a class or callable, or refuses the attribute, is left alone.
    """
    if isinstance(obj, type) or callable(obj):
        module = getattr(obj, "__module__", None)
        if isinstance(module, str) and module.startswith(package + "."):
            with contextlib.suppress(AttributeError, TypeError):  # a builtin, a slot
                obj.__module__ = package
    return obj


def publish_all(namespace: Mapping[str, Any], names: Iterable[str]) -> None:
    """:func:`publish` every loaded name of ``names`` at ``namespace``'s package."""
    package = namespace["__name__"]
    for name in names:
        if name in namespace and not name.startswith("__"):
            publish(namespace[name], package)


def lazy_names(
    namespace: dict[str, Any], lazy: Mapping[str, str], public: Iterable[str] = (), *,
    shorten: bool = True,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose ``lazy`` names (``name ->
    module``, relative to the package or absolute) load on first access.

    A name whose module is the package's submodule of that name (``"operators":
    ".operators"``) is the submodule itself. A loaded name is published
    (:func:`publish`, unless not ``shorten``: a package of public modules) and kept in
    ``namespace``, so it is looked up once. ``public``: names ``dir()`` shows besides
    the namespace's own.
    """
    package: str = namespace["__name__"]
    shown = sorted(set(public) | set(lazy))

    def __getattr__(name: str) -> Any:
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        found = importlib.import_module(module, package)
        value = found if found.__name__ == f"{package}.{name}" else getattr(found, name)
        namespace[name] = publish(value, package) if shorten else value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(shown))

    return __getattr__, __dir__
