"""The per-call RuntimeContext copy (docs/concepts/context.md)."""

from __future__ import annotations

from conftest import add_toolkit, call_add, make_agent, stream_events

from rx_agent import AgentState, MiddlewareBase, RuntimeContext, ScriptedModel


class Spy(MiddlewareBase):
    """Records the ctx object every hook receives."""

    def __init__(self) -> None:
        self.contexts: list = []

    def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        self.contexts.append(ctx)
        ctx.put("written_by_on_agent", "yes")
        return next(input)

    def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        self.contexts.append(ctx)
        return next(input)

    def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        self.contexts.append(ctx)
        return next(input)

    def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        self.contexts.append(ctx)
        return next(input)

    def on_system_prompt(self, agent, ctx, current_prompt):  # type: ignore[no-untyped-def]
        self.contexts.append(ctx)
        return current_prompt

    def on_agent_state_ready(self, agent, ctx, state, input_messages):  # type: ignore[no-untyped-def]
        self.contexts.append(ctx)

    def on_agent_finish(self, agent, ctx, outcome):  # type: ignore[no-untyped-def]
        self.contexts.append(ctx)


def _run_with(ctx: RuntimeContext | None) -> Spy:
    spy = Spy()
    model = ScriptedModel([[call_add()], "done"])
    stream_events(make_agent(model, toolkit=add_toolkit(), middlewares=[spy]), "hi", ctx)
    return spy


def test_every_hook_sees_the_same_per_call_context() -> None:
    spy = _run_with(RuntimeContext(session_id="s"))
    assert len(spy.contexts) >= 7
    assert all(c is spy.contexts[0] for c in spy.contexts)


def test_hooks_work_on_a_copy_not_the_callers_object() -> None:
    caller = RuntimeContext(session_id="s", user_id="u", run_id="r")
    spy = _run_with(caller)
    assert spy.contexts[0] is not caller


def test_copy_carries_the_callers_ids_and_attributes() -> None:
    caller = RuntimeContext(session_id="s", user_id="u", run_id="r")
    caller.put("request_id", "req-1")
    seen: list = []

    class Reads(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            seen.append((ctx.session_id, ctx.user_id, ctx.run_id, ctx.get("request_id")))
            return next(input)

    stream_events(make_agent(ScriptedModel(["ok"]), middlewares=[Reads()]), "hi", caller)
    assert seen == [("s", "u", "r", "req-1")]


def test_hook_writes_do_not_leak_into_the_callers_context() -> None:
    caller = RuntimeContext(session_id="s")
    _run_with(caller)
    assert caller.get("written_by_on_agent") is None


def test_caller_gets_agent_state_back() -> None:
    caller = RuntimeContext(session_id="s")
    spy = _run_with(caller)
    assert isinstance(caller.agent_state, AgentState)
    assert caller.agent_state is spy.contexts[0].agent_state
    assert caller.agent_state.context[-1].text == "done"


def test_a_write_by_one_hook_is_visible_to_later_hooks() -> None:
    seen: list = []

    class Writer(MiddlewareBase):
        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            ctx.put("trace_id", "t-123")
            return next(input)

    class Reader(MiddlewareBase):
        def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            seen.append(("reasoning", ctx.get("trace_id")))
            return next(input)

        def on_agent_finish(self, agent, ctx, outcome):  # type: ignore[no-untyped-def]
            seen.append(("finish", ctx.get("trace_id")))

    stream_events(make_agent(ScriptedModel(["ok"]), middlewares=[Writer(), Reader()]))
    assert seen == [("reasoning", "t-123"), ("finish", "t-123")]


def test_typed_attribute_written_by_a_hook_is_visible_later() -> None:
    class Budget:
        def __init__(self, n: int) -> None:
            self.n = n

    seen: list = []

    class Writer(MiddlewareBase):
        def on_agent_state_ready(self, agent, ctx, state, input_messages):  # type: ignore[no-untyped-def]
            ctx.put(Budget, Budget(5))

    class Reader(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            seen.append(ctx.get(Budget).n)
            return next(input)

    stream_events(make_agent(ScriptedModel(["ok"]), middlewares=[Writer(), Reader()]))
    assert seen == [5]


def test_without_a_caller_context_session_defaults_to_agent_name_and_run_id_is_set() -> None:
    spy = Spy()
    stream_events(make_agent(ScriptedModel(["ok"]), name="helper", middlewares=[spy]), "hi")
    ctx = spy.contexts[0]
    assert ctx.session_id == "helper"
    assert isinstance(ctx.run_id, str) and ctx.run_id


def test_each_call_gets_a_fresh_copy() -> None:
    spy = Spy()
    agent = make_agent(ScriptedModel(["a", "b"]), middlewares=[spy])
    caller = RuntimeContext(session_id="s")
    stream_events(agent, "1", caller)
    first = spy.contexts[0]
    spy.contexts.clear()
    stream_events(agent, "2", caller)
    assert spy.contexts[0] is not first


def test_caller_context_is_not_mutated_beyond_agent_state() -> None:
    caller = RuntimeContext(session_id="s", user_id="u", run_id="r")
    caller.put("keep", 1)
    _run_with(caller)
    assert (caller.session_id, caller.user_id, caller.run_id) == ("s", "u", "r")
    assert caller.get("keep") == 1
