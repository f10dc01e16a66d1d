"""The web console in a real headless Chromium: plan, streamed reply, timeline, spans,
the runs table, and the traps (a second send while a call runs, a refused post, a token
from the address bar, the default of an approval, a narrow window, 404s)."""

from __future__ import annotations

import json
import math
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _services import service_missing
from opentelemetry.sdk.trace import TracerProvider

from rx_agent import (
    MiddlewareBase,
    OtelTracingMiddleware,
    ReActAgent,
    ScriptedModel,
    ThinkingBlock,
    Toolkit,
    ToolUseBlock,
    tool,
)
from rx_agent.serve import create_app
from rx_agent.session import SessionKey

from .conftest import SlowModel

TOKEN = "console-token-42"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
SCREENSHOT = os.environ.get("RX_AGENT_CONSOLE_SCREENSHOT")
"""A path to save the screenshot of the first test at (``docs/assets/console.png``)."""


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21 °C."


def console_agent(provider: TracerProvider, delay: float) -> ReActAgent:
    model = ScriptedModel([
        [ThinkingBlock("The user wants the weather."),
         ToolUseBlock(id="w1", name="get_weather", input={"city": "Paris"})],
        ["It is ", "sunny ", "in Paris. ", "Enjoy!"],
        "You are welcome.",
    ], delay=delay)
    return ReActAgent(name="weather", model=model, toolkit=Toolkit([get_weather]),
                      middlewares=[OtelTracingMiddleware(tracer_provider=provider)])


def _chromium() -> tuple[str, str]:
    browser = shutil.which("chromium") or "/usr/bin/chromium"
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not (Path(browser).exists() and Path(driver).exists()):
        service_missing("headless Chromium is missing: apt-get install chromium chromium-driver")
    return browser, driver


@pytest.fixture
def browser() -> Iterator[Any]:
    binary, driver_path = _chromium()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        service_missing("selenium is missing: pip install -e '.[test]'")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,900"):
        options.add_argument(arg)
    # The network log: every response's status (a 404 must not happen).
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(check: Any, timeout: float = 10.0, what: str = "the page") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_console_streams_a_reply_and_shows_plan_timeline_and_spans(
    live: Any, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    provider = TracerProvider()
    agent = console_agent(provider, delay=0.15)
    server = live(create_app(agent, auth={TOKEN: "tester"}, tracer_provider=provider))
    browser.get(f"{server.url}/console#token={TOKEN}")

    # The plan: a row per extension point, the tracing middleware where it participates.
    rows = plan_rows(browser)
    assert len(rows) == len(agent.plan.describe().splitlines())
    on_agent = browser.find_element(By.CSS_SELECTOR, '.plan-point[data-point="on_agent"]')
    assert "OtelTracingMiddleware" in on_agent.text
    assert browser.find_element(By.ID, "plan-mermaid").get_attribute("textContent") \
        == agent.plan.to_mermaid()
    assert "#token" not in browser.current_url  # the token left the address bar

    box = browser.find_element(By.ID, "input")
    box.send_keys("What is the weather in Paris?")
    browser.find_element(By.ID, "send-button").click()

    def live_reply() -> Any:
        found = browser.find_elements(By.CSS_SELECTOR, '.msg.assistant[data-live]')
        return found[-1] if found else None

    # Streamed: part of the answer shows while the call still runs.
    partial = wait_for(lambda: (r := live_reply()) is not None
                       and r.get_attribute("data-live") == "true"
                       and "It is" in r.text and r, what="the first words of the reply")
    assert "Enjoy!" not in partial.text
    reply = wait_for(lambda: (r := live_reply()) is not None
                     and r.get_attribute("data-live") == "false" and r, what="the reply's end")
    assert reply.get_attribute("data-reason") == "MODEL_STOP"
    text = reply.text
    assert "It is sunny in Paris. Enjoy!" in text
    assert "The user wants the weather." in text  # thinking
    assert "get_weather" in text and "Sunny in Paris" in text  # the tool call and result

    timeline = browser.find_element(By.ID, "timeline").text
    for kind in ("agent_start", "thinking_block_delta", "tool_call_start", "tool_result_end",
                 "text_block_delta", "agent_result", "agent_end"):
        assert kind in timeline, kind
    spans = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#spans .span-row"),
                     what="the spans")
    names = [s.text for s in spans]
    assert any(n.startswith("invoke_agent weather") for n in names), names
    assert sum(n.startswith("chat scripted") for n in names) == 2, names
    assert any(n.startswith("execute_tool get_weather") for n in names), names
    depths = {s.text.split(" ")[0] + str(i): s.get_attribute("data-depth")
              for i, s in enumerate(spans)}
    assert depths["invoke_agent0"] == "0"  # the root; model and tool spans below it
    assert all(d != "0" for k, d in depths.items() if not k.startswith("invoke_agent"))
    sessions = browser.find_element(By.ID, "sessions").text
    assert "console" in sessions

    runs = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr"),
                    what="the runs table")
    assert len(runs) == 1 and "completed" in runs[0].text

    # A second call, then the first run again from the runs table: its timeline and spans.
    box.send_keys("Thanks!")
    browser.find_element(By.ID, "send-button").click()
    wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr")) == 2
             and browser.find_element(By.ID, "send-button").is_enabled(), what="the second run")
    first = browser.find_element(By.CSS_SELECTOR, "#runs tbody tr")
    first.click()
    wait_for(lambda: browser.find_element(By.ID, "run-id").text == first.get_attribute("data-run")
             and any(s.text.startswith("execute_tool get_weather") for s in
                     browser.find_elements(By.CSS_SELECTOR, "#spans .span-row")),
             what="the first run's spans again")
    assert "tool_result_end get_weather" in browser.find_element(By.ID, "timeline").text

    browser.set_window_size(1400, 1100)  # tall enough for the spans
    shot = Path(SCREENSHOT) if SCREENSHOT else tmp_path / "console.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def test_console_answers_a_confirmation_and_the_reply_goes_on(live: Any, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    toolkit = Toolkit()

    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    toolkit.register_tool(refund, permission="ask")
    model = ScriptedModel([[ToolUseBlock(id="c1", name="refund", input={"order": "1234"})],
                           "Order 1234 is refunded."])
    provider = TracerProvider()
    agent = ReActAgent(name="ops", model=model, toolkit=toolkit)
    server = live(create_app(agent, auth={TOKEN: "tester"}, tracer_provider=provider))
    browser.get(f"{server.url}/console#token={TOKEN}")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#plan-diagram .plan-point"),
             what="the plan")
    browser.find_element(By.ID, "input").send_keys("Refund order 1234")
    browser.find_element(By.ID, "send-button").click()
    ask = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#pause .ask"),
                   what="the confirmation box")[0]
    assert "refund" in ask.text and "1234" in ask.text
    wait_for(lambda: browser.find_element(By.ID, "send-button").is_enabled(),
             what="the paused call to end")
    ask.find_element(By.CSS_SELECTOR, "input[type=checkbox]").click()  # allow
    ask.find_element(By.TAG_NAME, "button").click()
    wait_for(lambda: "Order 1234 is refunded." in browser.find_element(By.ID, "messages").text,
             what="the resumed reply")
    assert "refunded 1234" in browser.find_element(By.ID, "messages").text
    assert not browser.find_elements(By.CSS_SELECTOR, "#pause .ask")


# -- the traps ------------------------------------------------------------------------------


def not_found(driver: Any) -> list[str]:
    """The URLs the page got a 404 for, from Chromium's performance (network) log."""
    missing = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.responseReceived":
            response = message["params"]["response"]
            if response["status"] == 404:
                missing.append(response["url"])
    return missing


def plan_rows(browser: Any) -> Any:
    from selenium.webdriver.common.by import By

    return wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#plan-diagram .plan-point"),
                    what="the plan")


def slow_agent(model: Any) -> ReActAgent:
    return ReActAgent(name="slow", model=model)


def test_enter_while_a_call_runs_does_not_send_and_stop_stays_usable(
    live: Any, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    model = SlowModel([f"w{i} " for i in range(200)], delay=0.05)
    app = create_app(slow_agent(model), auth={TOKEN: "tester"})
    server = live(app)
    browser.get(f"{server.url}/console#token={TOKEN}")
    plan_rows(browser)
    box = browser.find_element(By.ID, "input")
    box.send_keys("first", Keys.ENTER)
    wait_for(lambda: "w3" in browser.find_element(By.ID, "messages").text,
             what="the first call's words")
    stop = browser.find_element(By.ID, "stop-button")
    assert stop.is_enabled()
    assert not browser.find_element(By.ID, "send-button").is_enabled()

    box.send_keys("second", Keys.ENTER)  # while the first call runs
    time.sleep(0.5)  # time for a (wrong) post and its 409 to come back
    users = browser.find_elements(By.CSS_SELECTOR, "#messages .msg.user")
    assert [u.text for u in users] == ["user\nfirst"]
    assert box.get_attribute("value") == "second"  # kept for later, not lost
    assert stop.is_enabled(), "Stop must stay usable while the first call runs"
    assert len(app.state.service.runs.of_session(SessionKey("tester", "console"))) == 1

    stop.click()
    reply = wait_for(lambda: (r := browser.find_elements(
        By.CSS_SELECTOR, '.msg.assistant[data-live="false"]')) and r[-1], what="the stop")
    assert reply.get_attribute("data-reason") == "INTERRUPTED"
    wait_for(lambda: browser.find_element(By.ID, "send-button").is_enabled(),
             what="Send to come back")
    assert not stop.is_enabled()
    assert model.sent < 200  # the model's stream stopped early


def test_a_post_the_server_rejects_leaves_no_message_behind(live: Any, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    gate = threading.Event()
    model = SlowModel(["held ", "then done"], delay=0.0, gate=gate)
    server = live(create_app(slow_agent(model), auth={TOKEN: "tester"}))
    browser.get(f"{server.url}/console#token={TOKEN}")
    plan_rows(browser)

    def other_client() -> None:  # another tab on the same session, holding it
        with httpx.stream("POST", f"{server.url}/v1/sessions/console/messages",
                          json={"message": "elsewhere"}, headers=BEARER, timeout=30) as r:
            for _ in r.iter_bytes():
                pass

    thread = threading.Thread(target=other_client)
    thread.start()
    try:
        assert model.started.wait(10)
        browser.find_element(By.ID, "input").send_keys("hello")
        browser.find_element(By.ID, "send-button").click()
        status = wait_for(lambda: browser.find_element(By.ID, "status").text,
                          what="the refusal")
        assert "running a call" in status
        assert not browser.find_elements(By.CSS_SELECTOR, "#messages .msg.user")
        assert browser.find_element(By.ID, "input").get_attribute("value") == "hello"
        assert browser.find_element(By.ID, "send-button").is_enabled()
        assert not browser.find_element(By.ID, "stop-button").is_enabled()
    finally:
        gate.set()
        thread.join(10)


def test_without_a_token_the_console_asks_for_one_and_takes_a_new_hash(
    live: Any, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    server = live(create_app(console_agent(TracerProvider(), 0.0), auth={TOKEN: "tester"}))
    browser.get(f"{server.url}/console")
    status = wait_for(lambda: browser.find_element(By.ID, "status").text, what="an error")
    assert status == "enter a token above"
    assert not browser.find_elements(By.CSS_SELECTOR, "#plan-diagram .plan-point")

    browser.execute_script("window.sameDocument = true; location.hash = '#token=' + "
                           "encodeURIComponent(arguments[0]);", TOKEN)
    plan_rows(browser)  # read on hashchange, no reload
    assert browser.execute_script("return window.sameDocument") is True
    assert "#token" not in browser.current_url
    assert browser.find_element(By.ID, "status").text == ""

    browser.execute_script("location.hash = '#token=not-the-token'")
    status = wait_for(lambda: browser.find_element(By.ID, "status").text, what="an error")
    assert status == "the token is not valid: enter another above"


def refund_agent(refunds: list[str]) -> ReActAgent:
    toolkit = Toolkit()

    def refund(order: str) -> str:
        """Refund an order."""
        refunds.append(order)
        return f"refunded {order}"

    toolkit.register_tool(refund, permission="ask")
    model = ScriptedModel([[ToolUseBlock(id="c1", name="refund", input={"order": "1234"})],
                           "Done."])
    return ReActAgent(name="ops", model=model, toolkit=toolkit)


def test_an_approval_starts_unchecked_so_one_click_does_not_refund(
    live: Any, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    refunds: list[str] = []
    server = live(create_app(refund_agent(refunds), auth={TOKEN: "tester"}))
    browser.get(f"{server.url}/console#token={TOKEN}")
    plan_rows(browser)
    browser.find_element(By.ID, "input").send_keys("Refund order 1234")
    browser.find_element(By.ID, "send-button").click()
    ask = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#pause .ask"),
                   what="the confirmation box")[0]
    assert not ask.find_element(By.CSS_SELECTOR, "input[type=checkbox]").is_selected()
    wait_for(lambda: browser.find_element(By.ID, "send-button").is_enabled(),
             what="the paused call to end")
    ask.find_element(By.TAG_NAME, "button").click()  # one click: the default answer
    wait_for(lambda: "Done." in browser.find_element(By.ID, "messages").text,
             what="the resumed reply")
    assert refunds == []
    denied = browser.find_elements(By.CSS_SELECTOR, "#messages .tool.result.DENIED")
    assert denied and "refund" in denied[0].text


def test_the_layout_works_at_420_px(live: Any, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    browser.set_window_size(420, 900)
    provider = TracerProvider()
    server = live(create_app(console_agent(provider, 0.0), auth={TOKEN: "tester"},
                             tracer_provider=provider))
    browser.get(f"{server.url}/console#token={TOKEN}")
    plan_rows(browser)
    assert browser.execute_script("return innerWidth") == 420

    def fits() -> None:
        wide = browser.execute_script(
            "return [document.documentElement.scrollWidth, innerWidth,"
            " [...document.querySelectorAll('body *')].filter(e => {"
            "   const r = e.getBoundingClientRect();"
            "   return r.width > 0 && (r.right > innerWidth + 0.5 || r.left < -0.5); })"
            "   .map(e => e.id || e.className || e.tagName).slice(0, 5)]")
        assert wide[0] <= wide[1] and not wide[2], wide

    fits()
    for name in ("input", "send-button", "stop-button"):
        element = browser.find_element(By.ID, name)
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
        assert element.is_displayed(), name
        # Nothing covers it: the element at its centre is itself.
        on_top = browser.execute_script(
            "const r = arguments[0].getBoundingClientRect();"
            "return document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2)"
            " === arguments[0]", element)
        assert on_top, name
        assert element.size["width"] >= 40 and element.size["height"] >= 24, name
    browser.find_element(By.ID, "input").send_keys("What is the weather in Paris?")
    browser.find_element(By.ID, "send-button").click()
    wait_for(lambda: "Enjoy!" in browser.find_element(By.ID, "messages").text,
             what="the reply")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#spans .span-row"),
             what="the spans")
    fits()  # a reply with tool calls, the timeline and the spans still fit


def test_a_new_session_and_the_page_load_get_no_404(live: Any, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    server = live(create_app(console_agent(TracerProvider(), 0.0), auth={TOKEN: "tester"}))
    browser.get(f"{server.url}/console#token={TOKEN}")
    plan_rows(browser)
    browser.find_element(By.ID, "input").send_keys("What is the weather in Paris?")
    browser.find_element(By.ID, "send-button").click()
    wait_for(lambda: "Enjoy!" in browser.find_element(By.ID, "messages").text, what="the reply")
    browser.find_element(By.ID, "session-id").clear()
    browser.find_element(By.ID, "session-id").send_keys("another")
    browser.find_element(By.CSS_SELECTOR, "#new-session button").click()
    wait_for(lambda: browser.find_element(By.ID, "current-session").text == "another",
             what="the new session")
    time.sleep(0.5)  # the favicon is fetched after the load
    assert not_found(browser) == []
    assert browser.execute_script("return document.querySelector('link[rel~=icon]') !== null")
    icon = httpx.get(server.url + "/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    # The API's contract is unchanged: an unknown session is 404 for an API client.
    assert httpx.get(server.url + "/v1/sessions/another", headers=BEARER).status_code == 404


class Compressor(MiddlewareBase):
    def on_compress_context(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return next(input)


@pytest.mark.parametrize("compressing", [False, True])
def test_the_plan_shows_on_compress_context_only_when_someone_takes_part(
    live: Any, browser: Any, compressing: bool
) -> None:
    middlewares = [Compressor()] if compressing else []
    agent = ReActAgent(name="plain", model=ScriptedModel(["hi"]), middlewares=middlewares)
    server = live(create_app(agent, auth={TOKEN: "tester"}))
    browser.get(f"{server.url}/console#token={TOKEN}")
    shown = [r.get_attribute("data-point") for r in plan_rows(browser)]
    expected = [line.split()[0] for line in agent.plan.describe().splitlines()]
    assert shown == expected
    assert ("on_compress_context" in shown) is compressing
    points = httpx.get(server.url + "/v1/plan", headers=BEARER).json()["points"]
    assert [p["point"] for p in points] == expected


def test_each_run_shows_its_duration_tokens_and_tool_calls(live: Any, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    provider = TracerProvider()
    model = ScriptedModel([
        [ToolUseBlock(id="w1", name="get_weather", input={"city": "Paris"}),
         ToolUseBlock(id="w2", name="get_weather", input={"city": "Rome"})],
        "Sunny in both.", "You are welcome.",
    ], delay=0.05)
    agent = ReActAgent(name="weather", model=model, toolkit=Toolkit([get_weather]))
    server = live(create_app(agent, auth={TOKEN: "tester"}, tracer_provider=provider))
    browser.get(f"{server.url}/console#token={TOKEN}")
    plan_rows(browser)
    for n, text in enumerate(("Weather in Paris and Rome?", "Thanks!"), 1):
        browser.find_element(By.ID, "input").send_keys(text)
        browser.find_element(By.ID, "send-button").click()
        wait_for(lambda n=n: len(browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr")) == n
                 and browser.find_element(By.ID, "send-button").is_enabled(),
                 what=f"run {n} in the runs table")

    runs = httpx.get(server.url + "/v1/sessions/console", headers=BEARER).json()["runs"]
    assert len(runs) == 2
    for run in runs:  # the summary's figures are the run's own events, added up
        events = httpx.get(f"{server.url}/v1/sessions/console/runs/{run['run_id']}",
                           headers=BEARER).json()["events_after"]
        ends = [e["event"] for e in events if e["type"] == "model_call_end"]
        assert run["tokens"] == {"input": sum(e["usage"]["input_tokens"] for e in ends),
                                 "output": sum(e["usage"]["output_tokens"] for e in ends)}
        assert run["model_calls"] == len(ends)
        assert run["tool_calls"] == sum(e["type"] == "tool_result_end" for e in events)
        assert run["duration"] == pytest.approx(run["ended"] - run["started"])
        assert run["duration"] > 0.05
    assert [r["tool_calls"] for r in runs] == [2, 0]
    assert [r["model_calls"] for r in runs] == [2, 1]

    rows = browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
    for row, run in zip(rows, runs, strict=True):
        assert row.get_attribute("data-run") == run["run_id"]
        cells = {c.get_attribute("data-figure"): c for c in
                 row.find_elements(By.CSS_SELECTOR, "td[data-figure]")}
        assert cells["duration"].text == f"{math.floor(run['duration'] * 1000 + 0.5)} ms"
        assert cells["tokens"].text == f"{run['tokens']['input']} / {run['tokens']['output']}"
        assert cells["tool_calls"].text == str(run["tool_calls"])
        assert cells["model_calls"].text == str(run["model_calls"])
    # The bars: the longest run fills its track, the other in proportion.
    widths = [float(row.find_element(By.CSS_SELECTOR, "td[data-figure=duration] rect.bar")
                    .get_attribute("width")) for row in rows]
    longest = max(r["duration"] for r in runs)
    assert widths == [pytest.approx(100 * r["duration"] / longest, abs=0.5) for r in runs]

    # A click on a run shows its timeline again.
    rows[0].click()
    wait_for(lambda: "tool_result_end get_weather" in browser.find_element(By.ID, "timeline").text
             and browser.find_element(By.ID, "run-id").text == runs[0]["run_id"],
             what="the first run's timeline")


class PlainStore:
    """A session store with only ``load`` and ``save``: it cannot list its sessions."""

    def __init__(self) -> None:
        self.states: dict[SessionKey, Any] = {}

    def load(self, key: SessionKey) -> Any:
        return self.states.get(key)

    def save(self, key: SessionKey, state: Any) -> None:
        self.states[key] = state


def test_a_store_that_cannot_list_still_shows_a_stored_session(live: Any, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    agent = ReActAgent(name="plain", model=ScriptedModel(["Hello there."]),
                       session_store=PlainStore())
    server = live(create_app(agent, auth={TOKEN: "tester"}))
    assert httpx.get(server.url + "/v1/sessions", headers=BEARER).status_code == 501
    browser.get(f"{server.url}/console#token={TOKEN}")
    plan_rows(browser)
    browser.find_element(By.ID, "input").send_keys("Hi")
    browser.find_element(By.ID, "send-button").click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr"),
             what="the run in the runs table")
    assert browser.find_element(By.ID, "status").text == ""

    browser.refresh()  # the session comes back from the store, though it is not listed
    wait_for(lambda: "Hello there." in browser.find_element(By.ID, "messages").text,
             what="the stored session")
    assert browser.find_element(By.ID, "status").text == ""
    assert len(browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr")) == 1
