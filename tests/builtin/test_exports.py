"""Every built-in is importable from ``rx_agent.builtin`` (issue #25, item 5)."""

from __future__ import annotations

import importlib
import pkgutil

import rx_agent.builtin as builtin
from rx_agent.tracing import OtelTracingMiddleware


def test_every_class_of_a_builtin_module_is_exported_from_the_package() -> None:
    missing = []
    for info in pkgutil.iter_modules(builtin.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"rx_agent.builtin.{info.name}")
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type) and getattr(builtin, name, None) is not value:
                missing.append(f"{info.name}.{name}")
    assert not missing, f"add to rx_agent/builtin/__init__.py: {missing}"


def test_the_tracing_middleware_is_listed_with_the_builtins() -> None:
    assert builtin.OtelTracingMiddleware is OtelTracingMiddleware
    assert "OtelTracingMiddleware" in builtin.__all__
