"""What a call derives from a toolkit, built once per change of its tools.

Every call offers the model its toolkit's schemas. Building them (a dict per tool)
cost about 0.2 µs per tool per call; a toolkit now keeps one :class:`SchemaView`,
keyed on its version (a new number at each registration, removal or MCP listing
installed, ``Toolkit.version``) and on :func:`schema_edits`, which moves when any
made tool's ``name``, ``description`` or ``parameters`` is replaced. Both come from
one counter, so no two changes anywhere share a number.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from typing import Any, Generic, Protocol, TypeVar

from .._record import CHECK_RECORDS

__all__ = ["SCHEMA_FIELDS", "DerivedViews", "SchemaView", "WatchedSchema", "new_version",
           "schema_edited", "schema_edits"]

_VERSIONS = itertools.count(1)

SCHEMA_FIELDS = frozenset(("name", "description", "parameters"))
"""The fields of ``Tool.schema``: replacing one on a made tool changes what models see."""

_edits = 0


def new_version() -> int:
    """A number no change took before (taken after the change it stands for)."""
    return next(_VERSIONS)


def schema_edited() -> None:
    """A made tool's schema field was replaced: every view is rebuilt on its next read."""
    global _edits
    _edits = next(_VERSIONS)


def schema_edits() -> int:
    return _edits


Schemas = tuple[dict[str, Any], ...]


class Tool(Protocol):
    """What a view reads of a ``Tool`` (this module is below ``toolkit``)."""

    name: str

    @property
    def schema(self) -> dict[str, Any]: ...


class SchemaView:
    """One toolkit's schemas as calls offer them: the same tuple of the same dicts
    while its tools are unchanged (shared, so read-only)."""

    __slots__ = ("copies", "edits", "schemas", "version")

    def __init__(self, version: int = 0, edits: int = -1, schemas: Schemas = ()) -> None:
        self.version = version  # the toolkit version the schemas are of
        self.edits = edits  # schema_edits() when they were built
        self.schemas = schemas
        # RX_AGENT_CHECK_RECORDS (the test suite): copies to catch an edit in place
        # (deep: a model keeps the JSON of the schemas, parameters included).
        self.copies: list[dict[str, Any]] | None = (
            copy.deepcopy(list(schemas)) if CHECK_RECORDS else None)

    def current(self, version: int) -> bool:
        return self.version == version and self.edits == _edits

    def read(self, version: int, tools: Mapping[str, Tool]) -> Schemas:
        """The schemas of ``tools`` at toolkit ``version``, built again only when they
        changed (the length guards against a write that skipped the version)."""
        edits = _edits  # read first: an edit while building is seen on the next read
        if self.version == version and self.edits == edits and len(self.schemas) == len(tools):
            if CHECK_RECORDS:
                self._check()
            return self.schemas
        schemas = self.schemas = tuple(t.schema for t in tools.values())
        self.version, self.edits = version, edits
        self.copies = copy.deepcopy(list(schemas)) if CHECK_RECORDS else None
        return schemas

    def after(self, old: int, new: int, added: Tool | None) -> SchemaView:
        """The view once the toolkit went from version ``old`` to ``new``: one tool
        ``added`` to a current view extends it; any other change empties it."""
        if added is not None and self.current(old):
            return SchemaView(new, self.edits, (*self.schemas, added.schema))
        return SchemaView()

    def copied(self, old: int, new: int) -> SchemaView:
        """The view of a copy of the toolkit (version ``new``): the same tools."""
        if self.current(old):
            return SchemaView(new, self.edits, self.schemas)
        return SchemaView()

    def _check(self) -> None:
        copies = self.copies
        if copies is not None and copies != list(self.schemas):
            name = next(c.get("name") for c, s in zip(copies, self.schemas, strict=True)
                        if c != s)
            raise RuntimeError(
                f"the schema of tool {name!r} was changed in place after a call was given "
                "it; the schemas a call offers are shared (Toolkit.schema_view): a hook "
                "that offers other schemas builds new dicts")


class WatchedSchema:
    """``Tool``'s base: replacing a schema field of a made tool is a schema edit."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        # The first setting of a field is the tool being made, not an edit.
        replaced = name in SCHEMA_FIELDS and name in self.__dict__
        object.__setattr__(self, name, value)
        if replaced:
            schema_edited()


ToolT = TypeVar("ToolT", bound=Tool)


class DerivedViews(Generic[ToolT]):
    """``Toolkit``'s base: its version, and the views calls read, built once per
    change of the tools."""

    _tools: dict[str, ToolT]
    _version: int
    _view: SchemaView

    @property
    def version(self) -> int:
        """A number that changes with every change of the tools (one registered or
        removed, an MCP server's list installed): what calls derive is rebuilt then."""
        return self._version

    def _changed(self, added: ToolT | None = None) -> None:
        """After every change of ``_tools``: a new version (and view)."""
        old, self._version = self._version, new_version()
        self._view = self._view.after(old, self._version, added)

    def _put(self, spec: ToolT) -> None:
        """Add a runtime tool as it is (no name check, no definition warnings)."""
        self._tools[spec.name] = spec
        self._changed(spec)

    def schema_view(self) -> tuple[dict[str, Any], ...]:
        """The schemas a call offers the model: the same tuple of the same dicts,
        call after call, until the tools change (the :attr:`version`, or a tool's
        ``name``, ``description`` or ``parameters`` replaced). Shared, so read-only:
        a hook that offers other schemas builds new dicts."""
        return self._view.read(self._version, self._tools)
