"""RuntimeContext attributes (string and typed keys), ids, thread safety
(docs/concepts/context.md)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

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


# -- Java's typed lookups (issue 10, item 9) ---------------------------------------------------


class Store:
    """A base type tools ask for."""


class FileStore(Store):
    pass


class LocalFileStore(FileStore):
    pass


class MemoryStore(Store):
    pass


def test_get_runtime_context_returns_the_context_itself() -> None:
    ctx = RuntimeContext()
    assert ctx.get(RuntimeContext) is ctx


def test_a_runtime_context_stored_explicitly_wins_over_itself() -> None:
    ctx, other = RuntimeContext(), RuntimeContext()
    ctx.put(RuntimeContext, other)
    assert ctx.get(RuntimeContext) is other


def test_a_supertype_finds_the_only_value_stored_under_a_subtype() -> None:
    ctx = RuntimeContext()
    files = FileStore()
    ctx.put(FileStore, files)
    assert ctx.get(Store) is files
    assert ctx.get(FileStore) is files
    assert ctx.get(MemoryStore) is None


def test_an_exact_key_wins_over_a_subtype() -> None:
    ctx = RuntimeContext()
    exact, files = Store(), FileStore()
    ctx.put(FileStore, files)
    ctx.put(Store, exact)
    assert ctx.get(Store) is exact


def test_the_most_derived_subtype_wins_on_one_line_of_descent() -> None:
    ctx = RuntimeContext()
    local, files = LocalFileStore(), FileStore()
    ctx.put(FileStore, files)
    ctx.put(LocalFileStore, local)
    assert ctx.get(Store) is local


def test_unrelated_subtypes_give_the_first_stored() -> None:
    ctx = RuntimeContext()
    memory, files = MemoryStore(), FileStore()
    ctx.put(MemoryStore, memory)
    ctx.put(FileStore, files)
    assert ctx.get(Store) is memory


def test_string_keys_are_not_matched_by_type() -> None:
    ctx = RuntimeContext()
    ctx.put("store", FileStore())
    assert ctx.get(Store) is None


def test_a_subtype_lookup_reaches_the_fallback_context_after_exact_keys() -> None:
    base = RuntimeContext()
    base_files, own_exact = FileStore(), Store()
    base.put(FileStore, base_files)
    view = RuntimeContext()._with_fallback(base)
    assert view.get(Store) is base_files
    view.put(Store, own_exact)
    assert view.get(Store) is own_exact
    assert view.get(RuntimeContext) is view


def test_java_getters_on_the_context_suggest_the_attribute() -> None:
    ctx = RuntimeContext(session_id="s")
    with pytest.raises(AttributeError, match=r"did you mean `session_id`\? \(an attribute"):
        ctx.getSessionId()  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="did you mean `agent_state`"):
        ctx.getAgentState()  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="'RuntimeContext' object has no attribute 'nope'"):
        ctx.nope  # type: ignore[attr-defined]
