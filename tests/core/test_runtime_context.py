"""SEMANTICS.md 3.4: RuntimeContext attributes (string and typed keys), ids, thread safety."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from rx_agent import RuntimeContext


@dataclass
class Config:
    level: int


@dataclass
class Other:
    name: str


def test_get_missing_string_key_is_none() -> None:
    assert RuntimeContext().get("nope") is None


def test_put_then_get_string_key() -> None:
    ctx = RuntimeContext()
    ctx.put("request_id", "r-42")
    assert ctx.get("request_id") == "r-42"


def test_put_overwrites() -> None:
    ctx = RuntimeContext()
    ctx.put("k", 1)
    ctx.put("k", 2)
    assert ctx.get("k") == 2


def test_put_none_removes_the_key() -> None:
    ctx = RuntimeContext()
    ctx.put("k", "v")
    ctx.put("k", None)
    assert ctx.get("k") is None


def test_put_none_on_missing_key_is_harmless() -> None:
    ctx = RuntimeContext()
    ctx.put("never", None)
    assert ctx.get("never") is None


def test_typed_key_put_and_get() -> None:
    ctx = RuntimeContext()
    cfg = Config(3)
    ctx.put(Config, cfg)
    assert ctx.get(Config) is cfg


def test_typed_keys_are_separate_per_type() -> None:
    ctx = RuntimeContext()
    ctx.put(Config, Config(1))
    ctx.put(Other, Other("o"))
    assert ctx.get(Config) == Config(1)
    assert ctx.get(Other) == Other("o")


def test_typed_key_put_none_removes() -> None:
    ctx = RuntimeContext()
    ctx.put(Config, Config(1))
    ctx.put(Config, None)
    assert ctx.get(Config) is None


def test_typed_and_string_keys_do_not_collide() -> None:
    ctx = RuntimeContext()
    ctx.put("Config", "a string")
    ctx.put(Config, Config(9))
    assert ctx.get("Config") == "a string"
    assert ctx.get(Config) == Config(9)


def test_run_id_is_generated_when_not_given() -> None:
    a, b = RuntimeContext(), RuntimeContext()
    assert isinstance(a.run_id, str) and a.run_id
    assert a.run_id != b.run_id


def test_given_run_id_is_kept() -> None:
    assert RuntimeContext(run_id="run-1").run_id == "run-1"


def test_keyword_ids() -> None:
    ctx = RuntimeContext(session_id="s", user_id="u", run_id="r")
    assert (ctx.session_id, ctx.user_id, ctx.run_id) == ("s", "u", "r")


def test_agent_state_is_assignable() -> None:
    from rx_agent import AgentState

    ctx = RuntimeContext()
    state = AgentState(session_id="s")
    ctx.agent_state = state
    assert ctx.agent_state is state


def test_concurrent_puts_from_threads_are_all_kept() -> None:
    ctx = RuntimeContext()
    barrier = threading.Barrier(8)

    def writer(n: int) -> None:
        barrier.wait()
        for i in range(500):
            ctx.put(f"k{n}-{i}", i)
            assert ctx.get(f"k{n}-{i}") == i

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(ctx.get(f"k{n}-{i}") == i for n in range(8) for i in range(500))
