"""The package's layering (docs/internals.md, "Architecture"): every module imports
only its own layer and the ones below, and no import cycle exists anywhere.

Read from the source alone (every import statement counts, ``TYPE_CHECKING`` and
function-level ones included), so a cycle cannot hide behind a lazy import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rx_agent"

# From the ground up. A module belongs to the first layer whose prefix matches.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("data", ("rx_agent._version", "rx_agent._record", "rx_agent._keywords",
              "rx_agent._event_base", "rx_agent._event_hitl", "rx_agent._text", "rx_agent._rx",
              "rx_agent._publish", "rx_agent._history",
              "rx_agent.message", "rx_agent.permissions", "rx_agent.event", "rx_agent.options",
              "rx_agent.errors")),
    ("context", ("rx_agent.context", "rx_agent.session")),
    ("middleware", ("rx_agent.middleware",)),
    ("models and tools", ("rx_agent.model", "rx_agent.tool", "rx_agent.plugin")),
    ("agent", ("rx_agent.agent",)),
    ("built-ins", ("rx_agent.builtin", "rx_agent.tracing", "rx_agent.operators",
                   "rx_agent.testing", "rx_agent.a2a", "rx_agent.temporal")),
    ("CLI and server", ("rx_agent.cli", "rx_agent._demo", "rx_agent.__main__",
                        "rx_agent.serve")),
]


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            # ``from . import mod`` depends on ``mod``, not on the package's __init__.
            named = [f"{prefix}.{a.name}" for a in node.names]
            targets = [t for t in named if t in MODULES] or [prefix]
        for target in targets:
            known = target
            while known and known not in MODULES:
                known = known.rpartition(".")[0]
            if known and known != name:
                found.add(known)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(name: str) -> int:
    for rank, (_label, prefixes) in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return rank
    raise AssertionError(f"{name} belongs to no layer: add it to LAYERS in {__file__}")


def test_every_module_has_a_layer() -> None:
    for name in MODULES:
        if name != "rx_agent":
            _layer(name)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n != "rx_agent"))
def test_imports_run_downward_only(name: str) -> None:
    mine = _layer(name)
    upward = sorted(
        f"{dep} ({LAYERS[_layer(dep)][0]})"
        for dep in GRAPH[name]
        if dep != "rx_agent" and _layer(dep) > mine
    )
    assert not upward, f"{name} ({LAYERS[mine][0]}) imports from above: {upward}"


def test_no_module_imports_the_package_root() -> None:
    # ``from rx_agent import X`` inside the package ties a module to everything.
    offenders = sorted(n for n, deps in GRAPH.items() if n != "rx_agent" and "rx_agent" in deps
                       and not n.startswith(("rx_agent.cli", "rx_agent._demo",
                                             "rx_agent.__main__")))
    assert not offenders, offenders


def test_no_import_cycle() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
            if w == "rx_agent":
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in sorted(GRAPH):
        if name not in index and name != "rx_agent":
            visit(name)
    assert not cycles, f"import cycles: {cycles}"


def test_no_module_is_over_500_lines() -> None:
    big = sorted(
        (n, len(p.read_text(encoding="utf-8").splitlines()))
        for n, p in MODULES.items()
        if len(p.read_text(encoding="utf-8").splitlines()) > 500
    )
    assert not big, f"modules over 500 lines (split along a seam): {big}"
