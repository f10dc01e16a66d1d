"""One error root with the old built-in bases kept, and short module paths on public
names (issue #11, item 6)."""

from __future__ import annotations

import pickle

import pytest

import rx_agent
from rx_agent import (
    Msg,
    NoResultError,
    PlanError,
    ResumeError,
    RxAgentError,
    ToolArgumentError,
)
from rx_agent.builtin.tasks import TodoListError
from rx_agent.model.errors import ModelError, ModelRateLimitError


@pytest.mark.parametrize(
    ("error", "builtin_base"),
    [
        (PlanError, TypeError),
        (ToolArgumentError, ValueError),
        (ResumeError, ValueError),
        (NoResultError, RuntimeError),
        (TodoListError, ValueError),
        (ModelRateLimitError, Exception),
    ],
)
def test_every_library_error_is_an_rx_agent_error_and_keeps_its_base(
    error: type[Exception], builtin_base: type[Exception]
) -> None:
    assert issubclass(error, RxAgentError)
    assert issubclass(error, builtin_base)


def test_model_errors_sit_under_the_root() -> None:
    assert issubclass(ModelError, RxAgentError)


def test_public_names_show_the_package_path() -> None:
    for name in rx_agent.__all__:
        if name.startswith("__"):
            continue
        value = getattr(rx_agent, name)
        if isinstance(value, type) or callable(value):
            assert value.__module__ == "rx_agent", name


def test_records_still_pickle_and_round_trip_after_the_rename() -> None:
    msg = Msg("user", "hi")
    assert pickle.loads(pickle.dumps(msg)).text == "hi"
    assert repr(type(msg)) == "<class 'rx_agent.Msg'>"
