"""``MODULE:ATTR`` is read by one loader (``rx_agent/cli/_target.py``): ``rx-agent plan``
and ``rx-agent serve`` accept the same targets and report the same mistakes."""

from __future__ import annotations

import asyncio
import itertools
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from rx_agent import InMemorySessionStore, ReActAgent, SqliteSessionStore
from rx_agent.cli import main
from rx_agent.cli._target import TargetError, build_agent, load_target

FACTORIES = textwrap.dedent(
    """
    from rx_agent import ReActAgent, ScriptedModel

    def _make(name, store=None):
        if store is None:
            return ReActAgent(name=name, model=ScriptedModel(["hi"]))
        return ReActAgent(name=name, model=ScriptedModel(["hi"]), session_store=store)

    agent = _make("fixed")

    def bare():
        return _make("bare")

    async def async_bare():
        return _make("async_bare")

    def with_store(store):
        return _make("with_store", store)

    async def async_with_store(store):
        return _make("async_with_store", store)

    def keyword_store(*, session_store):
        return _make("keyword_store", session_store)

    def optional_store(model_name="x", store=None):
        return _make("optional_store", store)

    class Holder:
        inner = agent

    # Mistakes
    number = 7

    def ignores_store(store):
        return _make("ignores_store")

    def two_args(a, b):
        return _make("two")

    def keyword_arg(*, model):
        return _make("kw")

    def explodes():
        raise RuntimeError("no agent today")

    def wrong_type():
        return "an agent, honest"

    async def async_wrong_type(store):
        return 42
    """
)

_counter = itertools.count()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A directory (the working directory) with modules of agents; yields the name of
    the module with the factories, unique per test so that imports never go stale."""
    name = f"factories_{next(_counter)}"
    modules = {
        name: FACTORIES,
        f"{name}_broken": "raise RuntimeError('config missing')\n",
        f"{name}_exits": "import sys\nsys.exit(3)\n",
        f"{name}_needs_dep": "import no_such_dependency_xyz\n",
    }
    for module, source in modules.items():
        (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RX_AGENT_TOKEN", raising=False)
    yield name
    for module in modules:
        sys.modules.pop(module, None)


GOOD = ["agent", "bare", "async_bare", "with_store", "async_with_store", "keyword_store",
        "optional_store", "Holder.inner"]


def _expected_name(attr: str) -> str:
    return "fixed" if attr in ("agent", "Holder.inner") else attr


@pytest.mark.parametrize("attr", GOOD)
def test_plan_loads_every_kind_of_target(
    project: str, attr: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", f"{project}:{attr}", "--no-color"]) == 0, capsys.readouterr().err
    assert f"Execution plan of {_expected_name(attr)!r}" in capsys.readouterr().out


@pytest.mark.parametrize("attr", GOOD)
def test_serve_loads_every_kind_of_target(project: str, attr: str) -> None:
    pytest.importorskip("starlette", reason="rx-agent serve needs the serve extra")
    from rx_agent.serve._cli import ServeConfig, build_app

    app = build_app(ServeConfig(target=f"{project}:{attr}"))
    agent = app.state.service.agent
    assert agent.name == _expected_name(attr)
    assert app.state.service.store is agent.session_store


@pytest.mark.parametrize("attr", ["with_store", "async_with_store", "keyword_store",
                                  "optional_store"])
def test_serve_gives_a_store_taking_factory_its_store(
    project: str, attr: str, tmp_path: Path
) -> None:
    pytest.importorskip("starlette", reason="rx-agent serve needs the serve extra")
    from rx_agent.serve._cli import ServeConfig, build_app

    app = build_app(ServeConfig(target=f"{project}:{attr}", store="sqlite:///s.db"))
    store = app.state.service.agent.session_store
    assert isinstance(store, SqliteSessionStore) and store.path == tmp_path / "s.db"
    store.close()


def test_plan_builds_a_store_taking_factory_on_an_in_memory_store(project: str) -> None:
    target = load_target(f"{project}:with_store")
    assert target.takes_store and target.agent is None
    agent = build_agent(target)
    assert isinstance(agent, ReActAgent)
    assert isinstance(agent.session_store, InMemorySessionStore)


def test_an_async_factory_works_inside_a_running_loop(project: str) -> None:
    # A uvicorn worker builds its app (worker_app) inside the server's event loop.
    async def inside() -> list[str]:
        names = []
        for attr in ("async_bare", "async_with_store"):
            names.append(build_agent(load_target(f"{project}:{attr}")).name)
        return names

    assert asyncio.run(inside()) == ["async_bare", "async_with_store"]


BAD = {
    "{m}.py:agent": "MODULE is a module name, not a file: drop .py and write {m}:agent",
    "app/{m}.py:build": "write {m}:build and run from app (or put it on PYTHONPATH), or "
                        "app.{m}:build if app is a package",
    "/srv/app/{m}.py:build": "write {m}:build and run from /srv/app",
    "{m}:bare()": "ATTR is a name, not a call: write {m}:bare",
    "{m}": "expected MODULE:ATTR",
    "{m}:": "expected MODULE:ATTR",
    "no_such_module_abc:agent": "cannot import 'no_such_module_abc': no module named "
                                "'no_such_module_abc' in the current directory",
    "{m}:missing": "module '{m}' has no attribute 'missing' (it has: agent, async_bare,",
    "{m}:Holder.nothing": "'{m}:Holder' has no attribute 'nothing'",
    "{m}:number": "{m}:number is a int, not a ReActAgent or a factory",
    "{m}:two_args": "{m}:two_args needs the arguments (a, b); a factory takes no argument, "
                    "or one: the session store",
    "{m}:keyword_arg": "needs the keyword argument 'model'",
    "{m}:ignores_store": "{m}:ignores_store(store) built the agent on another session store",
    "{m}:explodes": "calling {m}:explodes() failed: RuntimeError: no agent today",
    "{m}:wrong_type": "{m}:wrong_type() returned a str, not a ReActAgent",
    "{m}:async_wrong_type": "{m}:async_wrong_type(store) returned a int, not a ReActAgent",
    "{m}_broken:agent": "importing '{m}_broken' failed: RuntimeError: config missing",
    "{m}_exits:agent": "importing '{m}_exits' failed: SystemExit: 3",
    "{m}_needs_dep:agent": "importing '{m}_needs_dep' failed: ModuleNotFoundError: No module "
                           "named 'no_such_dependency_xyz'",
}


@pytest.mark.parametrize("command", ["plan", "serve"])
@pytest.mark.parametrize("spec", list(BAD))
def test_both_commands_report_the_same_mistake_with_status_2(
    project: str, command: str, spec: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if command == "serve":
        pytest.importorskip("starlette", reason="rx-agent serve needs the serve extra")
    message = BAD[spec].format(m=project)
    assert main([command, spec.format(m=project)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("rx-agent: error: ") and captured.err.count("\n") == 1
    assert message in captured.err, captured.err


def test_the_loader_raises_a_value_error_naming_the_target(project: str) -> None:
    with pytest.raises(TargetError, match=f"^calling {project}:explodes\\(\\) failed"):
        build_agent(load_target(f"{project}:explodes"))
    assert issubclass(TargetError, ValueError)
