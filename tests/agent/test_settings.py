"""Every agent setting is declared once (agent/_settings.py): the constructor's
signature, the builder's setters, the read-only properties and the Java spellings
all follow the table, and each value is checked exactly once."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from rx_agent import (
    ConflictPolicy,
    GenerateOptions,
    InMemorySessionStore,
    PermissionRule,
    ReActAgent,
    ReActAgentBuilder,
    RuntimeContext,
    ScriptedModel,
)
from rx_agent.agent import _settings
from rx_agent.agent._settings import SETTINGS

# A value for each setting that differs from its default, and what the agent's
# property reads back (the same value unless given).
MODEL = ScriptedModel(["hi"])
FALLBACK = ScriptedModel(["hi"])
STORE = InMemorySessionStore()
CTX = RuntimeContext(user_id="u")
RULE = PermissionRule(pattern="x*", decision="deny")


def _listener(model: Any, error: Any) -> None:
    return None


def _handler(call: Any, ctx: Any) -> bool:
    return True


SAMPLES: dict[str, tuple[Any, Any]] = {
    "name": ("bot", "bot"),
    "model": (MODEL, MODEL),
    "sys_prompt": ("Be brief.", "Be brief."),
    "max_iters": (4, 4),
    "max_retries": (2, 2),
    "fallback_model": (FALLBACK, FALLBACK),
    "failover_listener": (_listener, _listener),
    "tool_execution_context": (CTX, CTX),
    "session_store": (STORE, STORE),
    "generate_options": (GenerateOptions(temperature=0.5), GenerateOptions(temperature=0.5)),
    "retry_backoff": ((0.5, 2), (0.5, 2.0)),
    "permission_rules": ([RULE], (RULE,)),
    "session_wait": (3, 3.0),
    "session_lease_ttl": (9, 9.0),
    "conflict_policy": ("append_merge", ConflictPolicy.APPEND_MERGE),
    "tool_timeout": (5, 5.0),
    "permission_handler": (_handler, _handler),
    "loop_lag_threshold": (0.25, 0.25),
}
# Read back in another shape, tested elsewhere: the assembled toolkit and plan, plugins.
ELSEWHERE = {"toolkit", "middlewares", "plugins", "enable_task_list"}


def test_the_constructor_signature_is_the_table() -> None:
    params = list(inspect.signature(ReActAgent.__init__).parameters)[1:]
    assert params == [s.name for s in SETTINGS]


def test_every_setting_has_a_setter_and_every_kept_one_a_property() -> None:
    for s in SETTINGS:
        assert callable(vars(ReActAgentBuilder).get(s.name)), s.name
        assert isinstance(vars(ReActAgent).get(s.name), property) == s.prop, s.name
    assert set(SAMPLES) | ELSEWHERE == {s.name for s in SETTINGS}


def _build(how: str, values: dict[str, Any]) -> ReActAgent:
    if how == "keywords":
        return ReActAgent(**values)
    builder = ReActAgent.builder()
    for name, value in values.items():
        setter = getattr(builder, name)
        builder = setter(*value) if name == "retry_backoff" else setter(value)
    return builder.build()


@pytest.mark.parametrize("how", ["keywords", "builder"])
def test_each_property_reads_back_what_was_set(how: str) -> None:
    agent = _build(how, {name: given for name, (given, _) in SAMPLES.items()})
    for name, (_, kept) in SAMPLES.items():
        assert getattr(agent, name) == kept, name


@pytest.mark.parametrize("how", ["keywords", "builder"])
def test_each_value_is_checked_once(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    for s in SETTINGS:
        def counted(value: Any, check: Any = s.check, name: str = s.name) -> Any:
            calls.append(name)
            return check(value)

        monkeypatch.setitem(_settings.BY_NAME, s.name,  # type: ignore[index]
                            _settings.Setting(s.name, counted, s.doc, s.prop))
    _build(how, {"name": "bot", "model": MODEL, "max_iters": 4, "tool_timeout": 2})
    given = ["name", "model", "max_iters", "tool_timeout"]
    if how == "keywords":  # every keyword is checked (the defaults too), once
        assert sorted(calls) == sorted(s.name for s in SETTINGS)
    else:  # the setters check; build() checks nothing again
        assert calls == given


def test_setters_and_properties_without_their_own_docs_carry_the_tables() -> None:
    for s in SETTINGS:
        setter = vars(ReActAgentBuilder)[s.name]
        assert setter.__doc__, s.name
    assert vars(ReActAgentBuilder)["tool_timeout"].__doc__ == _settings.BY_NAME[
        "tool_timeout"].doc
    assert vars(ReActAgent)["session_wait"].__doc__ == _settings.BY_NAME["session_wait"].doc


@pytest.mark.parametrize("setting", [s.name for s in SETTINGS if s.prop and "_" in s.name])
def test_java_spellings_of_every_property_name_the_python_one(setting: str) -> None:
    agent = ReActAgent(name="bot", model=MODEL)
    head, *rest = setting.split("_")
    java = head + "".join(part.title() for part in rest)
    with pytest.raises(AttributeError, match=setting):
        getattr(agent, java)


def test_a_bad_value_fails_at_the_setter_with_the_same_message_as_the_keyword() -> None:
    with pytest.raises(ValueError, match="tool_timeout must be finite and > 0") as by_setter:
        ReActAgent.builder().tool_timeout(0)
    with pytest.raises(ValueError, match="tool_timeout must be finite and > 0") as by_keyword:
        ReActAgent(name="bot", model=MODEL, tool_timeout=0)
    assert str(by_setter.value) == str(by_keyword.value)
