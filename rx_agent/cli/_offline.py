"""The model of ``rx-agent chat --offline``: a small rule-based stand-in for a real one.

It reads the conversation the way a model would and takes one ReAct step per call:

* a question about the weather in a city calls ``get_weather``, converts with
  ``calculate`` when Fahrenheit (or Kelvin) is wanted, and answers from the results;
* a follow-up that only names a unit ("And in Fahrenheit?") converts the temperature
  of the last city the conversation looked up, never treating the unit as a city;
  Celsius is answered from the earlier result without a tool;
* "and in London?" is a weather question about London;
* arithmetic goes to ``calculate``, "what time is it" to ``current_time``, anything
  else gets a short answer saying what the offline model understands.

Each step is derived from the messages alone (the question, the earlier turns, this
turn's tool results), so a retried or interrupted step is played again the same way,
and a chat continued from a stored session picks up where it was. Tool call ids are
numbered across the whole conversation (``call_weather_3``), skipping any id already
in it: they never repeat within a session, after a restart included.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reactivex import Observable

from .._demo import _WEATHER, DEFAULT_DELAY, _pieces, _thinking, calculate
from ..message import Msg, Role, ToolResultBlock, ToolResultState, ToolUseBlock
from ..model import ChatModel, ModelChunk, ScriptedModel
from ..options import GenerateOptions

__all__ = ["OfflineChatModel"]

HELP_ANSWER = (
    "I'm the offline demo model, so I understand only a few things: the weather in a "
    "city (\"What's the weather in Paris?\", then \"And in Fahrenheit?\" or \"And in "
    "London?\"), arithmetic (\"what is 6 * 7?\") and the time (\"what time is it?\").")

_UNITS = {
    "F": re.compile(r"fahrenheit|°\s*f\b|\bimperial\b", re.IGNORECASE),
    "K": re.compile(r"kelvin", re.IGNORECASE),
    "C": re.compile(r"celsius|centigrade|°\s*c\b|\bmetric\b", re.IGNORECASE),
}
_WEATHER_WORDS = re.compile(
    r"\b(weather|temperature|forecast|rain\w*|sunny|snow\w*|wind\w*|hot|cold|warm|"
    r"degrees|umbrella)\b", re.IGNORECASE)
_TIME_WORDS = re.compile(r"\b(time|date|what day|clock)\b", re.IGNORECASE)
# Words after "in"/"for"/"about" that do not start a city name.
_NOT_CITY = frozenset({
    "a", "an", "the", "this", "that", "it", "its", "my", "your", "our", "me", "us",
    "there", "here", "now", "right", "today", "tonight", "tomorrow", "yesterday",
    "morning", "evening", "afternoon", "night", "week", "weekend", "please", "and", "then",
    "too", "also", "instead", "again", "with", "give", "tell", "show", "what", "whats",
    "what's", "how", "is", "are", "was", "weather", "like", "in", "for", "at", "about",
    "of", "on", "to", "celsius", "centigrade", "fahrenheit", "kelvin", "degrees", "degree",
    "units", "unit", "metric", "imperial", "general", "case", "fact", "total",
})
_CITY_AFTER = re.compile(r"\b(?:in|for|at|about|and)\s+", re.IGNORECASE)
_WORD = re.compile("[A-Za-z\u00c0-\u00ff][\\w'\u2019-]*")
_REPORT = re.compile(r"^(?P<city>.+?): (?P<sky>.*), (?P<celsius>-?\d+(?:\.\d+)?) °C$")
_TIMES, _DIVIDED = "\u00d7", "\u00f7"  # the multiplication and division signs
_EXPRESSION = re.compile(rf"[\d.\s()+\-*/%^{_TIMES}{_DIVIDED}x]+")


@dataclass(frozen=True, slots=True)
class _Report:
    """A ``get_weather`` result: ``Paris: sunny with a light breeze, 21 °C``."""

    city: str
    sky: str
    celsius: str

    @classmethod
    def parse(cls, text: str) -> _Report | None:
        match = _REPORT.match(text.strip())
        if match is None:
            return None
        return cls(match["city"], match["sky"], match["celsius"])


def _unit(text: str) -> str | None:
    for unit, pattern in _UNITS.items():
        if pattern.search(text):
            return unit
    return None


def _city(text: str, *, loose: bool) -> str | None:
    """The city ``text`` asks about: a known one anywhere, else the capitalised words
    after "in"/"for"/"about"/"and" (any words when ``loose``: the talk is of weather)."""
    lowered = text.lower()
    known = [(m.start(), name) for name in _WEATHER
             if (m := re.search(rf"\b{re.escape(name)}\b", lowered)) is not None]
    if known:
        return min(known)[1].title()
    for found in _CITY_AFTER.finditer(text):
        words: list[re.Match[str]] = []
        for word in _WORD.finditer(text, found.end()):
            gap = text[found.end() if not words else words[-1].end():word.start()]
            if gap.strip() or len(words) == 3:
                break
            if word[0].lower() in _NOT_CITY or not (loose or word[0][0].isupper()):
                break
            words.append(word)
        if words:
            name = " ".join(w[0] for w in words)
            return name if any(c.isupper() for c in name) else name.title()
    return None


def _expression(text: str) -> str | None:
    """An arithmetic expression in ``text`` that ``calculate`` accepts, if any."""
    for candidate in sorted(_EXPRESSION.findall(text), key=len, reverse=True):
        expression: str = (candidate.strip().replace(_TIMES, "*")
                           .replace(_DIVIDED, "/").replace("^", "**").replace("x", "*"))
        if not re.search(r"\d\s*(\*\*|[-+*/%])\s*[\d(]", expression):
            continue
        try:
            calculate(expression)
        except Exception:
            continue
        return expression
    return None


def _fahrenheit(celsius: str) -> str:
    return f"{celsius} * 9 / 5 + 32"


def _kelvin(celsius: str) -> str:
    return f"{celsius} + 273.15"


class _Step:
    """One model call: the question, what the conversation knows, this turn's results."""

    def __init__(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]]) -> None:
        last_user = max((i for i, m in enumerate(messages)
                         if m.role is Role.USER and m.text), default=-1)
        self.question = messages[last_user].text if last_user >= 0 else ""
        self.history = list(messages[:max(last_user, 0)])
        self.turn = list(messages[last_user + 1:])
        self.tools = {t.get("name") for t in tools}
        self.used_ids = {b.id for m in messages for b in m.content
                         if isinstance(b, ToolUseBlock)}
        self.next_number = len(self.used_ids) + 1
        # This turn's tool results, by tool name, in order.
        self.results: dict[str, list[ToolResultBlock]] = {}
        for message in self.turn:
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    self.results.setdefault(block.name, []).append(block)

    def call(self, name: str, kind: str, **arguments: Any) -> ToolUseBlock:
        while f"call_{kind}_{self.next_number}" in self.used_ids:
            self.next_number += 1
        return ToolUseBlock(id=f"call_{kind}_{self.next_number}", name=name, input=arguments)

    def result(self, name: str) -> ToolResultBlock | None:
        found = self.results.get(name)
        return found[-1] if found else None

    def earlier_report(self) -> tuple[str | None, _Report | None]:
        """The last city the conversation looked up, and its report if one came back."""
        asked: dict[str, str] = {}  # get_weather call id -> city
        city: str | None = None
        report: _Report | None = None
        for message in self.history:
            for block in message.content:
                if isinstance(block, ToolUseBlock) and block.name == "get_weather":
                    asked[block.id] = str(block.input.get("city", "")).strip()
                    city, report = asked[block.id] or city, None
                elif (isinstance(block, ToolResultBlock) and block.id in asked
                      and block.state is ToolResultState.SUCCESS):
                    report = _Report.parse(block.text)
        return city, report

    # -- the next response ---------------------------------------------------------------

    def respond(self) -> list[Any]:
        question = self.question
        unit = _unit(question)
        earlier_city, earlier = self.earlier_report()
        about_weather = bool(_WEATHER_WORDS.search(question))
        weather_talk = about_weather or earlier_city is not None
        if _TIME_WORDS.search(question) and not about_weather:
            return self._time()
        city = _city(question, loose=about_weather)
        if city is not None and (weather_talk or unit is not None
                                 or city.lower() in _WEATHER):
            return self._weather(city, unit)
        if unit is not None and earlier_city is not None:
            return self._convert(earlier_city, earlier, unit)
        if unit is not None:
            return _pieces("Which city? Ask about the weather somewhere first, for example "
                           "\"What's the weather in Paris?\", and I'll convert it.")
        expression = _expression(question)
        if expression is not None:
            return self._arithmetic(expression)
        if _WEATHER_WORDS.search(question):
            return _pieces("Which city would you like the weather for?")
        return _pieces(HELP_ANSWER)

    def _failed(self, block: ToolResultBlock) -> list[Any] | None:
        if block.state is ToolResultState.SUCCESS:
            return None
        return _pieces(f"The {block.name} tool failed: {block.text}")

    def _weather(self, city: str, unit: str | None) -> list[Any]:
        fetched = self.result("get_weather")
        if fetched is None:
            if "get_weather" not in self.tools:
                return _pieces(f"I have no weather tool to look up {city} with.")
            wanted = {"F": "in Fahrenheit", "K": "in Kelvin", "C": "in Celsius"}.get(
                unit or "", "in Celsius and Fahrenheit")
            return [*_thinking(f"The user wants the current weather in {city}, {wanted}. "
                               "I'll look it up first."),
                    self.call("get_weather", "weather", city=city)]
        failed = self._failed(fetched)
        if failed is not None:
            return failed
        report = _Report.parse(fetched.text)
        if report is None:
            return _pieces(f"The weather tool says: {fetched.text}")
        return self._answer(report, unit, f"Right now in {report.city} it's {report.sky}, ",
                            "Enjoy your day!", celsius_first=True)

    def _convert(self, city: str, report: _Report | None, unit: str) -> list[Any]:
        if report is None:  # looked up, but no result came back (an interrupted turn)
            return self._weather(city, unit)
        if unit == "C":
            return _pieces(f"In {report.city} it's {report.celsius} °C.")
        return self._answer(report, unit, f"In {report.city} that's ", "",
                            celsius_first=False)

    def _answer(self, report: _Report, unit: str | None, opening: str, closing: str, *,
                celsius_first: bool) -> list[Any]:
        """The temperature in ``unit`` (°F when none is named) beside °C, converting with
        ``calculate`` first when it is offered."""
        celsius = f"{report.celsius} °C"
        if unit == "C":
            return _pieces(f"{opening}{celsius}. {closing}".strip())
        expression = _kelvin(report.celsius) if unit == "K" else _fahrenheit(report.celsius)
        symbol = "K" if unit == "K" else "°F"
        converted = self.result("calculate")
        if converted is None:
            if "calculate" not in self.tools:
                return _pieces(f"{opening}{celsius}. {closing}".strip())
            return [*_thinking(f"{report.city} is at {celsius}. Let the calculator do the "
                               f"conversion: {expression}."),
                    self.call("calculate", "calc", expression=expression)]
        failed = self._failed(converted)
        if failed is not None:
            return failed
        value = f"{converted.text} {symbol}"
        shown = f"{celsius} ({value})" if celsius_first else f"{value} ({celsius})"
        return _pieces(f"{opening}{shown}. {closing}".strip())

    def _arithmetic(self, expression: str) -> list[Any]:
        done = self.result("calculate")
        if done is None:
            if "calculate" not in self.tools:
                return _pieces(f"{expression} = {calculate(expression)}")
            return [self.call("calculate", "calc", expression=expression)]
        return self._failed(done) or _pieces(f"{expression} = {done.text}")

    def _time(self) -> list[Any]:
        done = self.result("current_time")
        if done is None:
            if "current_time" not in self.tools:
                return _pieces("I have no clock to read.")
            return [self.call("current_time", "time")]
        return self._failed(done) or _pieces(f"It's {done.text} here.")


class OfflineChatModel(ChatModel):
    """``rx-agent chat --offline``: one rule-based ReAct step per call (module docstring);
    ``delay`` seconds pass before each chunk, as with :class:`~rx_agent.ScriptedModel`."""

    provider = "scripted"

    def __init__(self, delay: float = DEFAULT_DELAY) -> None:
        self.name = "scripted-demo"
        self.delay = delay

    def stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> Observable[ModelChunk]:
        entry = _Step(messages, tools).respond()
        return ScriptedModel([entry], name=self.name, delay=self.delay).stream(
            messages, tools, options)
