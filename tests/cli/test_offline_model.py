"""``rx-agent chat --offline``: follow-ups are understood, tool call ids never repeat."""

from __future__ import annotations

import io
import sys
from collections import Counter
from pathlib import Path

import pytest

from rx_agent import AgentState, RuntimeContext, SessionKey, SqliteSessionStore
from rx_agent._demo import build_chat_agent
from rx_agent.cli import main
from rx_agent.cli._offline import OfflineChatModel
from rx_agent.message import Msg, ToolResultBlock, ToolUseBlock
from rx_agent.session import ANONYMOUS_USER
from rx_agent.testing import collect


def calls(state: AgentState) -> list[ToolUseBlock]:
    return [b for m in state.context for b in m.content if isinstance(b, ToolUseBlock)]


def chat(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, store: str,
         *lines: str) -> str:
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{line}\n" for line in lines)))
    code = main(["chat", "--offline", "--delay", "0", "--session", "trip", "--store", store])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    return out


def test_a_unit_follow_up_converts_the_last_city_and_ids_stay_unique_across_restarts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'chat.db'}"
    out = chat(capsys, monkeypatch, store, "What's the weather in Paris?", "And in Fahrenheit?")
    assert "Right now in Paris it's sunny with a light breeze, 21 °C (69.8 °F)." in out
    assert "In Paris that's 69.8 °F (21 °C)." in out
    # A second process continues the stored session.
    out = chat(capsys, monkeypatch, store, "And in London?", "And in Celsius?")
    assert "Right now in London it's overcast with drizzle, 14 °C (57.2 °F)." in out
    assert "In London it's 14 °C." in out

    with SqliteSessionStore(tmp_path / "chat.db") as opened:
        state = opened.load(SessionKey(ANONYMOUS_USER, "trip"))
    assert state is not None
    made = calls(state)
    cities = [c.input["city"] for c in made if c.name == "get_weather"]
    assert cities == ["Paris", "London"]  # never "Fahrenheit" or "Celsius"
    assert [c.input["expression"] for c in made if c.name == "calculate"] == [
        "21 * 9 / 5 + 32", "21 * 9 / 5 + 32", "14 * 9 / 5 + 32"]
    ids = [c.id for c in made]
    assert len(ids) == 5 and len(set(ids)) == len(ids), ids
    # Every result answers the one call with its id.
    results = Counter(b.id for m in state.context for b in m.content
                      if isinstance(b, ToolResultBlock))
    assert results == Counter(ids)


SCHEMAS = build_chat_agent(OfflineChatModel(0)).toolkit.schemas()


def converse(*questions: str) -> list[tuple[str, list[ToolUseBlock]]]:
    """Each answer to ``questions`` (one session) with the tool calls made for it."""
    agent = build_chat_agent(OfflineChatModel(0))
    ctx = RuntimeContext(session_id="s")
    turns, seen = [], 0
    for question in questions:
        answer = agent.call_sync(question, ctx).text
        state = agent.session_store.load(SessionKey(ANONYMOUS_USER, "s"))
        assert state is not None
        made = calls(state)
        turns.append((answer, made[seen:]))
        seen = len(made)
    return turns


@pytest.mark.parametrize(("questions", "last_answer", "last_calls"), [
    (["weather in Tokyo?", "and in kelvin?"], "In Tokyo that's 297.15 K (24 °C).",
     [("calculate", {"expression": "24 + 273.15"})]),
    (["weather in Tokyo?", "What about Fahrenheit?"], "In Tokyo that's 75.2 °F (24 °C).",
     [("calculate", {"expression": "24 * 9 / 5 + 32"})]),
    (["weather in Tokyo?", "And in Celsius?"], "In Tokyo it's 24 °C.", []),
    (["weather in Tokyo?", "And Berlin?"], "Right now in Berlin it's cloudy, 16 °C (60.8 °F).",
     [("get_weather", {"city": "Berlin"}), ("calculate", {"expression": "16 * 9 / 5 + 32"})]),
    (["weather in Tokyo?", "And in London, in Celsius?"],
     "Right now in London it's overcast with drizzle, 14 °C.",
     [("get_weather", {"city": "London"})]),
    (["how hot is it in san francisco today?"],
     "Right now in San Francisco it's cloudy, 11 °C (51.8 °F).",
     [("get_weather", {"city": "San Francisco"}),
      ("calculate", {"expression": "11 * 9 / 5 + 32"})]),
    (["And in Fahrenheit?"], "Which city?", []),
    (["what is 6 x 7?"], "6 * 7 = 42", [("calculate", {"expression": "6 * 7"})]),
    (["hello"], "I'm the offline demo model", []),
    (["I live in Berlin"], "I'm the offline demo model", []),
])
def test_follow_ups_and_other_questions(
    questions: list[str], last_answer: str, last_calls: list[tuple[str, dict[str, str]]]
) -> None:
    answer, made = converse(*questions)[-1]
    assert answer.startswith(last_answer), answer
    assert [(c.name, c.input) for c in made] == last_calls


def test_the_time() -> None:
    ((answer, made),) = converse("what time is it?")
    assert [c.name for c in made] == ["current_time"]
    assert answer.startswith("It's 20") and answer.endswith(" here.")


def test_ids_skip_ones_already_in_the_conversation() -> None:
    # A session begun with another model may hold any ids, ours included.
    history = [
        Msg("user", "weather in Paris?"),
        Msg("assistant", [ToolUseBlock("call_weather_2", "get_weather", {"city": "Paris"})]),
        Msg("tool", [ToolResultBlock("call_weather_2", "get_weather", "Paris: sunny, 21 °C")]),
        Msg("assistant", "Sunny."),
        Msg("user", "And in London?"),
    ]
    chunks = OfflineChatModel(0).stream(history, SCHEMAS)
    used = [getattr(c, "id", None) for c in collect(chunks)]
    assert "call_weather_2" not in used and "call_weather_3" in used, used
