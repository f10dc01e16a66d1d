"""``rx-agent serve``: load ``MODULE:ATTR``, build the app, run uvicorn (1..N workers).

With ``--workers N`` uvicorn starts N processes; each imports
``rx_agent.serve._cli:worker_app`` and builds its own app from the settings the parent
put in ``RX_AGENT_SERVE_CONFIG`` (JSON). Workers share sessions only through a
durable store, so more than one worker needs ``--store redis://...`` (or SQLite on
one host), or an agent built on such a store. The parent also gives them a private
``PROMETHEUS_MULTIPROC_DIR``, so any worker's ``/metrics`` covers all of them.
"""

from __future__ import annotations

import contextlib
import gc
import ipaddress
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from starlette.applications import Starlette

from ..agent import ReActAgent
from ..cli._logging import configure_logging
from ..cli._target import TargetError, build_agent, load_target
from ..errors import RxAgentError
from ..session import InMemorySessionStore, SessionStore
from ._app import create_app
from ._body import DEFAULT_MAX_BODY
from ._metrics import MULTIPROC_ENV
from ._spans import install_global_provider

__all__ = ["CONFIG_ENV", "ServeConfig", "ServeError", "build_app", "run", "worker_app"]

CONFIG_ENV = "RX_AGENT_SERVE_CONFIG"

log = logging.getLogger("rx_agent.serve")


class ServeError(RxAgentError, ValueError):
    """A setting ``rx-agent serve`` cannot run with (reported as one line)."""


@dataclass(frozen=True)
class ServeConfig:
    target: str
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    store: str | None = None
    tokens: dict[str, str] | None = None
    queue: bool = False
    max_body: int = DEFAULT_MAX_BODY
    log_level: str = "info"
    openai: bool = True
    a2a: bool | None = None
    agui: bool | None = None
    engine: str = "local"  # "temporal": each call a workflow (rx_agent.temporal)
    temporal: str = "127.0.0.1:7233"
    task_queue: str = "rx-agent"
    keep_running: bool = False


def _open_store(url: str | None) -> SessionStore:
    if url is None:
        return InMemorySessionStore()
    from ..session import session_store_from_url

    try:
        return session_store_from_url(url)
    except (ValueError, ImportError) as exc:
        raise ServeError(f"--store: {exc}") from exc


def _agent(config: ServeConfig) -> tuple[ReActAgent, SessionStore | None]:
    """The agent and the store for ``create_app`` (the rules of ``cli/_target.py``)."""
    try:
        target = load_target(config.target)
        if target.agent is not None:
            if config.store is not None:
                raise ServeError(f"{config.target} is an agent, built with its own session "
                                 "store; --store needs ATTR to be a factory taking the store "
                                 "(def build(store): return ReActAgent(..., session_store=store))")
            return target.agent, None
        if not target.takes_store:
            if config.store is not None:
                raise ServeError(f"{config.target}() takes no session store, so --store cannot "
                                 "apply; give it a parameter: def build(store): ...")
            return build_agent(target), None
        store = _open_store(config.store)
        return build_agent(target, store), store
    except TargetError as exc:
        raise ServeError(str(exc)) from exc


def _on_temporal(agent: ReActAgent, config: ServeConfig) -> ReActAgent:
    """``--engine temporal``: the agent with each call started as a workflow."""
    try:
        from ..temporal import TemporalUnavailableError
        from ..temporal._engine import check_reachable, temporal_engine
    except ImportError as exc:
        raise ServeError(f"--engine temporal: {exc}") from exc
    try:
        check_reachable(config.temporal)
    except TemporalUnavailableError as exc:
        raise ServeError(str(exc)) from exc
    return temporal_engine(agent, config.temporal, config.task_queue)


def build_app(config: ServeConfig) -> Starlette:
    target, store = _agent(config)
    if config.engine == "temporal":
        target = _on_temporal(target, config)
    install_global_provider()  # after the user's module: its own provider wins
    try:
        app = create_app(target, store, auth=config.tokens, queue=config.queue,
                         max_body=config.max_body, openai=config.openai, a2a=config.a2a,
                         agui=config.agui, keep_running=config.keep_running)
    except (TypeError, ValueError) as exc:
        raise ServeError(str(exc)) from exc
    service = app.state.service
    if config.workers > 1 and not service.guard.shared:
        raise ServeError(
            f"--workers {config.workers} needs a session store the workers share: pass "
            "--store redis://host:6379/0 (or sqlite:///file.db on one host) with a factory "
            f"target, or build the agent on one (its store is {type(service.store).__name__})")
    return app


def worker_app() -> Starlette:
    """The app of one uvicorn worker process (``factory=True``)."""
    raw = os.environ.get(CONFIG_ENV)
    if not raw:
        raise ServeError(f"{CONFIG_ENV} is not set: start workers with `rx-agent serve`")
    app = build_app(ServeConfig(**json.loads(raw)))
    _tune_collector()  # as run() does for one worker
    return app


def _tune_collector() -> None:
    """What the process loaded and built so far lives as long as it does: out of the
    collector's sight, a full collection no longer walks the ~100k objects of the
    imports (under load they were most of its time, a tenth of the server's CPU). A
    young collection every 50,000 allocations instead of 700: a stream's objects
    live a call long, so most were walked several times for nothing."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check(config: ServeConfig, *, no_auth: bool) -> None:
    if config.tokens is None and not no_auth and not _loopback(config.host):
        raise ServeError(f"refusing to serve on {config.host} without a token: pass --token "
                         "(or $RX_AGENT_TOKEN) or --tokens FILE, or --no-auth if a proxy in "
                         "front authenticates")
    if config.workers < 1:
        raise ServeError(f"--workers must be at least 1, got {config.workers}")


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def run(config: ServeConfig, *, no_auth: bool = False) -> None:
    import uvicorn

    check(config, no_auth=no_auth)
    # Before the user's module loads, so its records are shown too; uvicorn applies
    # the same schema again in every worker process.
    log_config = configure_logging(config.log_level, config.tokens or (), uvicorn=True)
    app = build_app(config)  # in the parent too: a bad target fails here, once
    agent = app.state.service.agent
    log.info("serving agent %r: the console is at %s/console", agent.name,
             _url(config.host, config.port))
    if config.workers == 1:
        _tune_collector()
        uvicorn.run(app, host=config.host, port=config.port, log_level=config.log_level,
                    log_config=log_config)
        return
    os.environ[CONFIG_ENV] = json.dumps(asdict(config))
    with _metrics_dir():
        uvicorn.run("rx_agent.serve._cli:worker_app", factory=True, host=config.host,
                    port=config.port, workers=config.workers, log_level=config.log_level,
                    log_config=log_config)


@contextlib.contextmanager
def _metrics_dir() -> Iterator[None]:
    """A private ``PROMETHEUS_MULTIPROC_DIR`` for the workers (they import
    prometheus_client after it is set, so ``/metrics`` sums them all), removed at exit.
    One the user set is used as it is and kept."""
    if os.environ.get(MULTIPROC_ENV):
        yield
        return
    directory = tempfile.mkdtemp(prefix="rx-agent-metrics-")
    os.environ[MULTIPROC_ENV] = directory
    try:
        yield
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(directory, ignore_errors=True)
