"""The web console in a real headless Chromium: plan, streamed reply, timeline, spans."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _services import service_missing
from opentelemetry.sdk.trace import TracerProvider

from rx_agent import (
    ExtensionPoint,
    OtelTracingMiddleware,
    ReActAgent,
    ScriptedModel,
    ThinkingBlock,
    Toolkit,
    ToolUseBlock,
    tool,
)
from rx_agent.serve import create_app

TOKEN = "console-token-42"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21 °C."


def console_agent(provider: TracerProvider, delay: float) -> ReActAgent:
    model = ScriptedModel([
        [ThinkingBlock("The user wants the weather."),
         ToolUseBlock(id="w1", name="get_weather", input={"city": "Paris"})],
        ["It is ", "sunny ", "in Paris. ", "Enjoy!"],
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
    rows = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#plan-diagram .plan-point"),
                    what="the plan")
    assert len(rows) == len(ExtensionPoint)
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

    shot = tmp_path / "console.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def test_console_without_a_token_says_so(live: Any, browser: Any) -> None:
    provider = TracerProvider()
    server = live(create_app(console_agent(provider, 0.0), auth={TOKEN: "tester"},
                             tracer_provider=provider))
    from selenium.webdriver.common.by import By

    browser.get(f"{server.url}/console")
    status = wait_for(lambda: browser.find_element(By.ID, "status").text, what="an error")
    assert "bearer token" in status


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
    ask.find_element(By.TAG_NAME, "button").click()
    wait_for(lambda: "Order 1234 is refunded." in browser.find_element(By.ID, "messages").text,
             what="the resumed reply")
    assert "refunded 1234" in browser.find_element(By.ID, "messages").text
    assert not browser.find_elements(By.CSS_SELECTOR, "#pause .ask")
