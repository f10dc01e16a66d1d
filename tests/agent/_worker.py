"""Worker processes for the durable-session tests (imported by ``spawn`` children).

A worker serves requests over a pipe (:func:`serve`): each runs agent calls against
a store named by a :data:`Spec` and answers with plain picklable values. Tests hold
a few long-lived workers (:class:`Worker`), so each case pays for calls, not for
interpreter start-up, and can kill or pause one mid-call.

Gates make a call stop at a known point until the test lets it go: the ``gate``
tool, or :class:`ModelGate` before the call's first model call. A gate writes
``<dir>/<name>.started`` and waits for ``<dir>/<name>.go``.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from rx_agent import (
    AgentResultEvent,
    ConfirmResult,
    ExtensionPoint,
    MiddlewareBase,
    Msg,
    PermissionRule,
    ReActAgent,
    RequireUserConfirmEvent,
    RuntimeContext,
    ScriptedModel,
    SessionRecoveredEvent,
    Toolkit,
    ToolResultBlock,
    ToolUseBlock,
    UserConfirmResultEvent,
)
from rx_agent.session import RedisSessionStore, SessionKey, SqliteSessionStore

Spec = tuple[str, str, str]
"""``(kind, where, prefix)``: ``("sqlite", path, "")`` or ``("redis", url, prefix)``."""

SPAWN = multiprocessing.get_context("spawn")
GATE_TIMEOUT = 30.0


def open_store(spec: Spec) -> Any:
    kind, where, prefix = spec
    if kind == "sqlite":
        return SqliteSessionStore(where)
    if kind == "postgres":
        from rx_agent.session import PostgresSessionStore

        return PostgresSessionStore(where, prefix=prefix)
    return RedisSessionStore(where, prefix=prefix)


# -- gates ---------------------------------------------------------------------------------


def wait_gate(gates: str, name: str) -> None:
    (Path(gates) / f"{name}.started").touch()
    go = Path(gates) / f"{name}.go"
    deadline = time.monotonic() + GATE_TIMEOUT
    while not go.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gate {name!r} was never opened")
        time.sleep(0.005)


def wait_started(gates: Path, name: str, timeout: float = 20.0) -> None:
    started = gates / f"{name}.started"
    deadline = time.monotonic() + timeout
    while not started.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gate {name!r} was never reached")
        time.sleep(0.005)


def open_gate(gates: Path, name: str) -> None:
    (gates / f"{name}.go").touch()


def open_every_gate(gates: Path) -> None:
    """Let every call waiting at a gate in ``gates`` go (after a test failed early)."""
    for started in gates.glob("*.started"):
        open_gate(gates, started.name.removesuffix(".started"))


class ModelGate(MiddlewareBase):
    """Holds the call's first model call at gate ``name`` (on the loop, not blocking it)."""

    def __init__(self, gates: str, name: str) -> None:
        self.gates, self.name, self.passed = gates, name, False

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_MODEL_CALL}

    async def on_model_call(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        if not self.passed:
            self.passed = True
            (Path(self.gates) / f"{self.name}.started").touch()
            go = Path(self.gates) / f"{self.name}.go"
            deadline = time.monotonic() + GATE_TIMEOUT
            while not go.exists() and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
        return next(input)


def make_toolkit(gates: str, runs: str) -> Toolkit:
    def gate(name: str) -> str:
        """Wait until the test opens the gate."""
        wait_gate(gates, name)
        return f"{name} passed"

    def delete_file(path: str) -> str:
        """Delete a file (asks first)."""
        with open(runs, "a", encoding="utf-8") as out:
            out.write(f"{os.getpid()} {path}\n")
        return f"deleted {path}"

    def record(text: str) -> str:
        """Write a line down (a side effect)."""
        with open(runs, "a", encoding="utf-8") as out:
            out.write(f"{os.getpid()} {text}\n")
        return f"recorded {text}"

    def pay(name: str, wait: bool = True) -> str:
        """Pay (a side effect that must not happen twice), then wait at gate ``name``."""
        with open(runs, "a", encoding="utf-8") as out:
            out.write(f"{os.getpid()} pay {name}\n")
        if wait:
            wait_gate(gates, name)
        return f"paid {name}"

    toolkit = Toolkit()
    toolkit.register_tool(gate)
    toolkit.register_tool(record)
    toolkit.register_tool(delete_file, permission="ask")
    toolkit.register_tool(pay, side_effect=True)
    return toolkit


# -- one call ------------------------------------------------------------------------------


def describe(msg: Msg) -> str:
    """``role: content`` with tool blocks as ``call:<id>`` / ``result:<id>:<STATE>``."""
    parts = []
    for block in msg.content:
        if isinstance(block, ToolUseBlock):
            parts.append(f"call:{block.id}")
        elif isinstance(block, ToolResultBlock):
            parts.append(f"result:{block.id}:{block.state.value}")
        else:
            parts.append(getattr(block, "text", block.type))
    return f"{msg.role.value}: {' '.join(parts)}"


@dataclass
class CallReport:
    """What one call did, as the worker saw it."""

    events: list[str] = field(default_factory=list)
    recovered: list[tuple[str, list[str]]] = field(default_factory=list)
    """``(session_id, tool_call_ids)`` of each ``SessionRecoveredEvent``."""
    reply: str | None = None
    error: BaseException | None = None
    confirm: tuple[str, list[ToolUseBlock]] | None = None
    """``(reply_id, tool_calls)`` of a ``RequireUserConfirmEvent``."""
    seen: list[list[str]] = field(default_factory=list)
    """What the model got in each of its calls (:func:`describe`; the system prompt left out)."""
    seconds: float = 0.0


def _picklable(exc: BaseException) -> BaseException:
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def run_stream(agent: ReActAgent, inp: Any, ctx: RuntimeContext, model: ScriptedModel,
               timeout: float = 30.0) -> CallReport:
    report = CallReport()
    done = threading.Event()
    items: list[Any] = []

    def on_error(exc: Exception) -> None:
        report.error = exc
        done.set()

    start = time.monotonic()
    subscription = agent.stream(inp, ctx).subscribe(items.append, on_error, done.set)
    if not done.wait(timeout):
        subscription.dispose()
        report.error = TimeoutError(f"the call did not end within {timeout} s")
    report.seconds = time.monotonic() - start
    for event in items:
        report.events.append(type(event).__name__)
        if isinstance(event, SessionRecoveredEvent):
            report.recovered.append((event.session_id, list(event.tool_call_ids)))
        elif isinstance(event, AgentResultEvent):
            report.reply = event.result.text
        elif isinstance(event, RequireUserConfirmEvent):
            report.confirm = (event.reply_id, list(event.tool_calls))
    report.seen = [[describe(m) for m in call.messages if m.role.value != "system"]
                   for call in model.calls]
    if report.error is not None:
        report.error = _picklable(report.error)
    return report


class Worker:
    """One long-lived worker process, driven over a pipe."""

    def __init__(self) -> None:
        self.conn, child = SPAWN.Pipe()
        self.proc = SPAWN.Process(target=serve, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self._ready = False
        self.sent = 0

    @property
    def pid(self) -> int:
        assert self.proc.pid is not None
        return self.proc.pid

    def _wait_ready(self) -> None:
        if not self._ready:
            if not self.conn.poll(60):
                raise TimeoutError("the worker did not start")
            assert self.conn.recv() == "ready"
            self._ready = True

    def send(self, op: str, **kwargs: Any) -> None:
        self._wait_ready()
        self.sent += 1
        self.conn.send((self.sent, op, kwargs))

    def result(self, timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            if not self.conn.poll(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"worker {self.pid} gave no answer within {timeout} s")
            number, status, value = self.conn.recv()
            if number == self.sent:  # older answers belong to a test that failed early
                break
        if status == "error":
            raise RuntimeError(f"worker {self.pid} failed:\n{value}")
        return value

    def run(self, op: str, timeout: float = 30.0, **kwargs: Any) -> Any:
        self.send(op, **kwargs)
        return self.result(timeout)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.is_alive():
            os.kill(self.pid, sig)
            self.proc.join(10)

    def stop(self) -> None:
        if self.proc.is_alive():
            with contextlib.suppress(OSError):  # it died meanwhile
                self.conn.send(None)
            self.proc.join(10)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(5)
        self.conn.close()


# -- what a worker does --------------------------------------------------------------------


class _Process:
    """Per-process state: stores opened once per spec (their caches and pools kept)."""

    def __init__(self) -> None:
        self.stores: dict[Spec, Any] = {}

    def store(self, spec: Spec) -> Any:
        if spec not in self.stores:
            self.stores[spec] = open_store(spec)
        return self.stores[spec]

    def call(
        self,
        spec: Spec,
        session: str,
        text: str | None = None,
        script: list[Any] | None = None,
        *,
        user: str = "u",
        confirm: tuple[str, list[tuple[ToolUseBlock, bool]], list[PermissionRule]] | None = None,
        ttl: float = 30.0,
        wait: float = 30.0,
        policy: str = "FAIL",
        gates: str = "",
        runs: str = "",
        model_gate: str | None = None,
        timeout: float = 30.0,
        ask: tuple[str, ...] = (),
    ) -> CallReport:
        """One call: ``text`` (or a confirmation) on ``session``, the model playing ``script``;
        the tools named in ``ask`` ask for confirmation."""
        model = ScriptedModel(script or [])
        middlewares = [ModelGate(gates, model_gate)] if model_gate else []
        agent = ReActAgent(
            name="agent", model=model, toolkit=make_toolkit(gates, runs),
            middlewares=middlewares, session_store=self.store(spec), session_wait=wait,
            session_lease_ttl=ttl, conflict_policy=policy, retry_backoff=(0.0, 0.0),
            permission_rules=[PermissionRule(name, "ask") for name in ask])
        inp: Any = text
        if confirm is not None:
            reply_id, decisions, rules = confirm
            inp = UserConfirmResultEvent(reply_id=reply_id, confirm_results=[
                ConfirmResult(call, ok, rules=rules or None) for call, ok in decisions])
        return run_stream(agent, inp, RuntimeContext(session_id=session, user_id=user),
                          model, timeout)

    def bulk(self, spec: Spec, worker: int, sessions: list[str], rounds: list[int],
             user: str = "bulk") -> tuple[int, list[str]]:
        """For each round, one call on every session (in the given order): the message
        ``"<session> w<worker> r<round>"``, answered ``"re <message>"``. Returns the
        calls made and the errors met."""
        texts = [f"{s} w{worker} r{r}" for r in rounds for s in sessions]
        model = ScriptedModel([f"re {t}" for t in texts])
        agent = ReActAgent(name="agent", model=model, session_store=self.store(spec),
                           session_wait=60.0, retry_backoff=(0.0, 0.0))
        errors = []
        for text in texts:
            session = text.split(" ", 1)[0]
            try:
                agent.call_sync(text, RuntimeContext(session_id=session, user_id=user))
            except Exception as exc:
                errors.append(f"{text}: {type(exc).__name__}: {exc}")
        return len(texts), errors


def serve(conn: Connection) -> None:
    """A worker's main loop: ``(number, op, kwargs)`` in, ``(number, "ok", value)`` or
    ``(number, "error", traceback)`` out; ``None`` ends it."""
    me = _Process()
    ops: dict[str, Callable[..., Any]] = {"call": me.call, "bulk": me.bulk}
    conn.send("ready")
    while True:
        try:
            request = conn.recv()
        except EOFError:
            break
        if request is None:
            break
        number, op, kwargs = request
        try:
            conn.send((number, "ok", ops[op](**kwargs)))
        except Exception:
            conn.send((number, "error", traceback.format_exc()))
    for store in me.stores.values():
        store.close()


class Pool:
    """Long-lived workers, started together (their start-up overlaps), plus spares for
    tests that kill one."""

    def __init__(self, size: int) -> None:
        self.workers = [Worker() for _ in range(size)]
        self.spares = [Worker()]

    def get(self, n: int) -> Worker:
        if not self.workers[n].proc.is_alive():
            self.workers[n].stop()
            self.workers[n] = Worker()
        return self.workers[n]

    def fresh(self) -> Worker:
        """A worker the caller owns (to kill it), replaced by a new spare at once."""
        self.spares.append(Worker())
        return self.spares.pop(0)

    def close(self) -> None:
        for worker in self.workers + self.spares:
            worker.stop()


def one_call(**kwargs: Any) -> CallReport:
    """One call in a fresh process that exits afterwards (a restart between calls)."""
    worker = Worker()
    try:
        report: CallReport = worker.run("call", **kwargs)
    finally:
        worker.stop()
    assert worker.proc.exitcode == 0, worker.proc.exitcode
    return report


def key(session: str, user: str = "u") -> SessionKey:
    return SessionKey(user, session)
