"""One way to publish names (rx_agent/_publish.py): each package's lazy table, its
``TYPE_CHECKING`` imports and ``__all__`` agree, read from the source."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from rx_agent import _publish

PACKAGE = Path(__file__).resolve().parents[2] / "rx_agent"

# Every package whose __init__ has a lazy table (``_LAZY``).
LAZY_PACKAGES = ["rx_agent", "rx_agent.session", "rx_agent.builtin", "rx_agent.errors"]
# Every package that publishes names (its __all__).
PUBLISHING = [
    "rx_agent", "rx_agent.a2a", "rx_agent.agent", "rx_agent.builtin", "rx_agent.errors",
    "rx_agent.middleware", "rx_agent.model", "rx_agent.operators", "rx_agent.session",
    "rx_agent.testing", "rx_agent.tool", "rx_agent.tracing",
]


def _source(name: str) -> Path:
    path = PACKAGE.parent / Path(*name.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _package(name: str) -> str:
    return name if _source(name).name == "__init__.py" else name.rpartition(".")[0]


def _resolve(module: str | None, level: int, package: str) -> str:
    if not level:
        return module or ""
    base = package.split(".")
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _imports(name: str) -> tuple[dict[str, str], dict[str, str]]:
    """The module-level imports of ``name``'s source: (eager, under TYPE_CHECKING),
    each ``bound name -> module it comes from`` (``from . import x`` gives x's module)."""
    tree = ast.parse(_source(name).read_text(encoding="utf-8"))
    package = _package(name)
    eager: dict[str, str] = {}
    typing_only: dict[str, str] = {}

    def collect(body: list[ast.stmt], into: dict[str, str]) -> None:
        for node in body:
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                module = _resolve(node.module, node.level, package)
                for alias in node.names:
                    bound = alias.asname or alias.name
                    sub = f"{module}.{alias.name}"
                    into[bound] = sub if _is_module(sub) else module

    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            collect(node.body, typing_only)
    collect(tree.body, eager)
    return eager, typing_only


def _is_module(name: str) -> bool:
    path = PACKAGE.parent / Path(*name.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def _table(module: ModuleType) -> dict[str, str]:
    table: dict[str, str] = module._LAZY
    return {n: _resolve(m.lstrip("."), len(m) - len(m.lstrip(".")), module.__name__)
            for n, m in table.items()}


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_the_type_checking_imports_are_the_lazy_table(name: str) -> None:
    module = importlib.import_module(name)
    _eager, typing_only = _imports(name)
    table = _table(module)
    if name == "rx_agent.errors":
        # The bottom layer imports nothing from above, not even for mypy (the layer
        # test reads TYPE_CHECKING imports too): its module __getattr__ types them.
        assert typing_only == {}
        return
    assert typing_only == table


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_all_is_the_eager_public_imports_and_the_lazy_table(name: str) -> None:
    module = importlib.import_module(name)
    eager, _typing_only = _imports(name)
    tree = ast.parse(_source(name).read_text(encoding="utf-8"))
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    submodules = {n for n, m in _table(module).items() if m == f"{name}.{n}"}
    expected = ({n for n in eager if not n.startswith("_") and n not in {"TYPE_CHECKING", "Any"}}
                | (set(module._LAZY) - submodules) | (defined & set(module.__all__)))
    if name == "rx_agent":
        expected.add("__version__")
    assert sorted(module.__all__) == sorted(expected)
    assert len(set(module.__all__)) == len(module.__all__)


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_every_lazy_name_loads_from_its_module_and_is_listed(name: str) -> None:
    module = importlib.import_module(name)
    for lazy, source in _table(module).items():
        value = getattr(module, lazy)
        found = importlib.import_module(source)
        assert value is (found if found.__name__ == f"{name}.{lazy}" else getattr(found, lazy))
        assert lazy in dir(module)


@pytest.mark.parametrize("name", PUBLISHING)
def test_every_public_name_resolves(name: str) -> None:
    module = importlib.import_module(name)
    for public in module.__all__:
        assert getattr(module, public) is not None, public


def test_an_unknown_name_is_an_attribute_error_naming_the_package() -> None:
    import rx_agent.session

    with pytest.raises(AttributeError, match=r"'rx_agent\.session' has no attribute 'Nope'"):
        rx_agent.session.Nope


def test_publish_shows_a_name_at_the_package_it_is_defined_below() -> None:
    def f() -> None: ...

    f.__module__ = "rx_agent.pkg._private"
    assert _publish.publish(f, "rx_agent.pkg").__module__ == "rx_agent.pkg"
    # A shorter public path (the root's) is kept; a foreign module is left alone.
    assert _publish.publish(f, "rx_agent.pkg.deeper").__module__ == "rx_agent.pkg"
    f.__module__ = "elsewhere"
    assert _publish.publish(f, "rx_agent").__module__ == "elsewhere"
    assert _publish.publish(3, "rx_agent") == 3  # not a class or callable


def test_importing_the_package_loads_no_lazy_module_and_no_extra() -> None:
    code = textwrap.dedent("""
        import sys
        import rx_agent
        heavy = {"httpx", "httpx2", "opentelemetry.sdk", "redis", "mcp", "starlette",
                 "numpy", "rich", "a2a", "sqlite3"}
        lazy = {"rx_agent.a2a", "rx_agent.tracing", "rx_agent.builtin.rag",
                "rx_agent.model.openai", "rx_agent.session._sqlite", "rx_agent.tool.mcp"}
        loaded = sorted((heavy | lazy) & set(sys.modules))
        assert not loaded, loaded
    """)
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
