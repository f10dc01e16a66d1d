"""redact: secrets split over deltas are caught, and streaming stays streaming."""

from __future__ import annotations

import random
import re

import pytest
import reactivex
from reactivex.testing import TestScheduler

from rx_agent import (
    ExtensionPoint,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    ThinkingBlock,
    ThinkingBlockDeltaEvent,
)
from rx_agent import operators as aops
from rx_agent.operators._redact import Redactor

from .conftest import Tracked, block_ids_valid, collect, hook_agent, text_round, timed

SECRETS = ("bob.smith@example.com", "sk-proj-abcdefghijklmnop1234", "AKIAABCDEFGHIJKLMNOP",
           "ghp_" + "a1" * 18, "4111 1111 1111 1111", "5500-0000-0000-0004")
PROSE = ("Write to bob.smith@example.com, use key sk-proj-abcdefghijklmnop1234 or "
         "AKIAABCDEFGHIJKLMNOP; pay with 4111 1111 1111 1111. Order 1234 5678 9012 3456 "
         "(not a card: fails Luhn), the task-abcdefghijklmnopqrstu stays, call 555-0100.")


def _streamed(parts: list[str], op: object = None) -> tuple[list, str]:
    items, error = collect(reactivex.from_iterable(text_round(parts)).pipe(
        op or aops.redact()))  # type: ignore[arg-type]
    assert error is None
    return items, "".join(e.delta for e in items if type(e) is TextBlockDeltaEvent)


def test_the_default_patterns_catch_emails_keys_and_card_numbers() -> None:
    _, out = _streamed([PROSE])
    for secret in SECRETS[:3] + SECRETS[4:5]:
        assert secret not in PROSE.replace(secret, "") and secret not in out
    assert out.count("[REDACTED]") == 4
    assert "1234 5678 9012 3456" in out  # not a card number: Luhn's check fails
    assert "task-abcdefghijklmnopqrstu" in out and "555-0100" in out


@pytest.mark.parametrize("secret", SECRETS)
def test_a_secret_split_over_deltas_is_still_caught(secret: str) -> None:
    text = f"My secret is {secret} okay"
    for cut in range(14, 14 + len(secret)):
        _, out = _streamed([text[:cut], text[cut:]])
        assert out == "My secret is [REDACTED] okay", (cut, out)
    # One character per delta.
    _, out = _streamed(list(text))
    assert out == "My secret is [REDACTED] okay"


def test_streaming_gives_what_redacting_the_whole_text_gives() -> None:
    redactor = Redactor(None, "[REDACTED]")
    expected = redactor.redact_text(PROSE)
    rng = random.Random(7)
    for _ in range(300):
        cuts = sorted(rng.sample(range(1, len(PROSE)), rng.randint(1, 40)))
        parts = [PROSE[a:b] for a, b in zip([0, *cuts], [*cuts, len(PROSE)], strict=True)]
        _, out = _streamed(parts)
        assert out == expected, parts


def test_prose_streams_with_a_lag_of_about_a_word() -> None:
    parts = ["The quick ", "brown fox ", "jumps over ", "the lazy ", "dog."]
    items, out = _streamed(parts)
    deltas = [e.delta for e in items if type(e) is TextBlockDeltaEvent]
    # Each delta releases all but a trailing space (it could join digits into a
    # card number); the rest comes with the block's end.
    assert deltas == ["The quick", " brown fox", " jumps over", " the lazy", " ", "dog."]
    assert out == "".join(parts)


def test_the_hold_back_never_exceeds_the_longest_possible_match() -> None:
    # Digits and spaces could all be one card number: held, but never more than 38
    # characters (19 digits + 18 separators + the lookahead).
    scheduler = TestScheduler()
    parts = ["1 "] * 40
    xs = scheduler.create_cold_observable(timed(text_round(parts)))
    result = scheduler.start(lambda: xs.pipe(aops.redact()))
    fed = 0
    out = 0
    for message in result.messages:
        if message.value.kind != "N":
            continue
        event = message.value.value
        if type(event) is TextBlockDeltaEvent:
            out += len(event.delta)
            fed = (message.time - 220) // 10  # deltas that arrived by now (one per 10)
            assert fed * 2 - out <= 38
    assert out == 80


def test_held_text_is_released_at_the_block_end_before_the_end_event() -> None:
    items, out = _streamed(["ends with sk-abc"])
    assert out == "ends with sk-abc"
    kinds = [type(e).__name__ for e in items]
    assert kinds.index("TextBlockEndEvent") == kinds.index("TextBlockDeltaEvent") + 2
    assert block_ids_valid(items)


def test_thinking_is_redacted_too_and_blocks_stay_apart() -> None:
    from rx_agent import ThinkingBlockEndEvent, ThinkingBlockStartEvent

    events = text_round(["mail a@b.co", "m"])
    thinking = [ThinkingBlockStartEvent(reply_id="r1", block_id="thinking"),
                ThinkingBlockDeltaEvent(reply_id="r1", block_id="thinking", delta="c@d.o"),
                ThinkingBlockDeltaEvent(reply_id="r1", block_id="thinking", delta="rg x"),
                ThinkingBlockEndEvent(reply_id="r1", block_id="thinking")]
    events[1:1] = thinking
    items, _ = collect(reactivex.from_iterable(events).pipe(aops.redact()))
    think = "".join(e.delta for e in items if type(e) is ThinkingBlockDeltaEvent)
    text = "".join(e.delta for e in items if type(e) is TextBlockDeltaEvent)
    assert think == "[REDACTED] x" and text == "mail [REDACTED]"
    assert block_ids_valid(items)


def test_custom_patterns_and_replacement() -> None:
    op = aops.redact([r"secret-\d{4}", re.compile(r"PIN:\s?\d{4}", re.IGNORECASE)], "***")
    _, out = _streamed(["a secr", "et-1234 and pin: 99", "99."], op)
    assert out == "a *** and ***."


@pytest.mark.parametrize(("patterns", "message"), [
    ([r"a*"], "empty text"),
    ([r"^secret"], "anchor"),
    ([r"password.*"], "any length"),
    ([r"(unclosed"], "not a valid regular expression"),
    ([], "empty"),
])
def test_patterns_that_cannot_stream_are_refused(patterns: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        aops.redact(patterns)


def test_bad_argument_types_are_refused() -> None:
    with pytest.raises(TypeError, match="pattern"):
        aops.redact([42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="replacement"):
        aops.redact(replacement=None)  # type: ignore[arg-type]


def test_an_unbounded_pattern_over_few_characters_holds_only_its_run() -> None:
    _, out = _streamed(["token=", "abcdef", "ghij! and more"], aops.redact([r"token=\w+"]))
    assert out == "[REDACTED]! and more"


def test_on_error_the_held_text_is_dropped_not_leaked() -> None:
    boom = RuntimeError("cut")
    source = Tracked(text_round(["my key sk-proj-abcd"])[:3], error=boom)
    items, error = collect(source.observable().pipe(aops.redact()))
    out = "".join(e.delta for e in items if type(e) is TextBlockDeltaEvent)
    assert error is boom and "sk-" not in out


def test_completion_flushes_held_text_redacted() -> None:
    open_block = text_round(["key sk-proj-abcdefghijklmnop1234"])[:3]
    items, error = collect(reactivex.from_iterable(open_block).pipe(aops.redact()))
    out = "".join(e.delta for e in items if type(e) is TextBlockDeltaEvent)
    assert error is None and out == "key [REDACTED]"


def test_disposal_reaches_the_source() -> None:
    scheduler = TestScheduler()
    xs = scheduler.create_cold_observable(timed(text_round(["a", "b", "c"])))
    scheduler.start(lambda: xs.pipe(aops.redact()), disposed=235)
    assert [(s.subscribe, s.unsubscribe) for s in xs.subscriptions] == [(200, 235)]


def test_redact_in_on_model_call_is_what_the_caller_sees_and_the_context_stores() -> None:
    ctx = RuntimeContext(session_id="s")
    model = ScriptedModel([[ThinkingBlock("user is bob@example.com"), "Your card 4111 11",
                            "11 1111 1111 is saved; mail bob@exam", "ple.com."]])
    agent = hook_agent(ExtensionPoint.ON_MODEL_CALL,
                       lambda inp, next: next(inp).pipe(aops.redact()), model)
    items, error = collect(agent.stream("hi", ctx))
    assert error is None
    stored = ctx.agent_state.context[-1]
    assert stored.text == "Your card [REDACTED] is saved; mail [REDACTED]."
    assert "bob@" not in stored.content[0].thinking  # type: ignore[union-attr]
    streamed = "".join(e.delta for e in items if type(e) is TextBlockDeltaEvent)
    assert streamed == stored.text
    assert block_ids_valid(items)
