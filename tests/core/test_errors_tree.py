"""The tree of errors in rx_agent/errors.py's docstring is the real class hierarchy, and
every error rx_agent raises on purpose sits under ``RxAgentError`` (issue #25, item 5)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import rx_agent.errors as errors
from rx_agent.errors import RxAgentError

PACKAGE = Path(__file__).resolve().parents[2] / "rx_agent"

# Exception classes outside the tree, and why: none leaves rx_agent.
NOT_RAISED_TO_CALLERS = {
    "Interrupted": "the agent loop's own control flow, caught inside the step",
    "_NoChoice": "private control flow of the model router",
    "_Corrupt": "private control flow of the session schema",
    "ClusterUnavailable": ("the test kit's own signal that PostgreSQL is missing; the test "
                           "and benchmark helpers turn it into a skip"),
    "TemporalUnavailable": ("the test kit's own signal that the temporal CLI is missing; "
                            "the tests' fixture turns it into a skip"),
}

_ENTRY = re.compile(r"^(?P<lead>[ │]*)(?:[├└]── )?(?P<name>[A-Z]\w*)(?: \((?P<bases>[^)]*)\))?")


def _documented() -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """``name -> (parent, built-in bases in parentheses)`` read from the docstring."""
    doc = errors.__doc__ or ""
    lines = doc[doc.index("    RxAgentError\n"):].split("\n\n")[0].splitlines()
    root_column = lines[0].index("RxAgentError")
    tree: dict[str, tuple[str | None, tuple[str, ...]]] = {"RxAgentError": (None, ())}
    parents = ["RxAgentError"]
    for line in lines[1:]:
        if "──" not in line:
            continue  # the description of the entry above, continued
        found = _ENTRY.match(line)
        assert found is not None, line
        depth = (found.start("name") - root_column) // 4
        del parents[depth:]
        bases = tuple(b.strip() for b in (found["bases"] or "").split(",") if b.strip())
        tree[found["name"]] = (parents[-1], bases)
        parents.append(found["name"])
    return tree


def _classes() -> dict[str, list[str]]:
    """Every class defined in rx_agent's source: ``name -> base names``."""
    found: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                found[node.name] = [ast.unparse(b).rpartition(".")[2] for b in node.bases]
    return found


DOCUMENTED = _documented()


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_each_documented_error_has_its_documented_parent_and_builtin_bases(name: str) -> None:
    cls = getattr(errors, name)
    parent, builtins = DOCUMENTED[name]
    if parent is None:
        assert cls.__bases__ == (Exception,)
        return
    assert cls.__bases__[0] is getattr(errors, parent)
    assert tuple(b.__name__ for b in cls.__bases__[1:]) == builtins
    assert all(b.__module__ == "builtins" for b in cls.__bases__[1:])


def test_every_rx_agent_error_in_the_source_is_documented_and_exported() -> None:
    classes = _classes()
    under = {"RxAgentError"}
    grew = True
    while grew:
        more = {n for n, bases in classes.items() if set(bases) & under} - under
        under |= more
        grew = bool(more)
    assert under == set(DOCUMENTED), "update the tree in rx_agent/errors.py"
    assert under <= set(errors.__all__)


def test_every_runtime_subclass_is_documented() -> None:
    for name in errors.__all__:
        getattr(errors, name)  # load them all

    def walk(cls: type) -> set[type]:
        return {cls}.union(*(walk(sub) for sub in cls.__subclasses__()))

    # Subclasses defined by tests (or users) live outside rx_agent.
    ours = {c.__name__ for c in walk(RxAgentError) if c.__module__.startswith("rx_agent")}
    assert ours == set(DOCUMENTED)


def test_every_other_exception_class_is_one_that_never_reaches_a_caller() -> None:
    classes = _classes()
    exceptions = {"Exception", "BaseException", "ValueError", "TypeError", "RuntimeError",
                  "AssertionError", "ConnectionError", "FileNotFoundError", "OSError",
                  "LookupError", "KeyError"}
    grew = True
    while grew:
        more = {n for n, bases in classes.items() if set(bases) & exceptions} - exceptions
        exceptions |= more
        grew = bool(more)
    outside = {n for n in exceptions if n in classes} - set(DOCUMENTED)
    assert outside == set(NOT_RAISED_TO_CALLERS), (
        "derive a new error from RxAgentError (and document it in rx_agent/errors.py), "
        "or say here why it never reaches a caller")
