"""TTSMiddleware: audio data blocks in the reply's stream, through a real agent loop."""

from __future__ import annotations

import asyncio
import base64
import io
import math
import shutil
import struct
import threading
import wave
from collections.abc import Collection
from typing import Any

import pytest
import reactivex.operators as ops
from _services import service_missing
from model.tts_server import TTSServer
from reactivex import Observable

from rx_agent import (
    AgentEvent,
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    EspeakTTSModel,
    ExtensionPoint,
    MiddlewareBase,
    OpenAITTSModel,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    ToolUseBlock,
    TTSMiddleware,
    TTSModel,
)
from rx_agent.builtin.tts import TTS_ERROR_EVENT, audio_block_id
from rx_agent.model.tts import parse_wav

from .conftest import TIMEOUT, call, events_of, make_agent

RATE = 8000


def tone(seconds: float) -> bytes:
    """A WAV of a 440 Hz tone (16-bit mono)."""
    frames = b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / RATE)))
                      for i in range(int(RATE * seconds)))
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(frames)
    return out.getvalue()


class ToneTTSModel(TTSModel):
    """A TTS model of its own kind: 20 ms of tone per character, recorded calls."""

    name = "tone"

    def __init__(self, fail_on: str | None = None) -> None:
        self.texts: list[str] = []
        self.fail_on = fail_on

    async def synthesize(self, text: str) -> bytes:
        self.texts.append(text)
        if self.fail_on is not None and self.fail_on in text:
            raise RuntimeError(f"cannot say {text!r}")
        return tone(0.02 * len(text))


def short(events: list[AgentEvent]) -> list[str]:
    """Event kinds, with text and audio told apart as the guide writes them."""
    names = {"TextBlockStartEvent": "TextStart", "TextBlockDeltaEvent": "TextDelta",
             "TextBlockEndEvent": "TextEnd", "DataBlockStartEvent": "DataStart",
             "DataBlockDeltaEvent": "DataDelta", "DataBlockEndEvent": "DataEnd"}
    return [names.get(type(e).__name__, type(e).__name__) for e in events]


def audio_of(events: list[AgentEvent], block_id: str = "audio") -> bytes:
    return b"".join(base64.b64decode(e.delta) for e in events
                    if isinstance(e, DataBlockDeltaEvent) and e.block_id == block_id)


def seconds(data: bytes) -> float:
    """Duration of a WAV (exact or streamed header), read with the wave module."""
    with wave.open(io.BytesIO(data)) as w:
        pcm = w.readframes(10**9)
        return len(pcm) / (w.getsampwidth() * w.getnchannels() * w.getframerate())


@pytest.fixture(scope="module")
def espeak() -> EspeakTTSModel:
    if shutil.which("espeak-ng") is None:
        service_missing("espeak-ng is not installed (apt-get install espeak-ng)")
    return EspeakTTSModel()


# -- construction ---------------------------------------------------------------------


def test_active_point_is_on_agent_only() -> None:
    assert set(TTSMiddleware(ToneTTSModel()).active_points()) == {ExtensionPoint.ON_AGENT}


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="tts_model must be a TTSModel"):
        TTSMiddleware("espeak")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode must be 'standard' or 'realtime'"):
        TTSMiddleware(ToneTTSModel(), "live")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        TTSMiddleware(ToneTTSModel(), chunk_size=0)


def test_audio_block_ids_follow_the_text_block_ids() -> None:
    assert [audio_block_id(b) for b in ("text", "text-2", "x")] == ["audio", "audio-2", "audio-x"]


# -- the guide's event orders ---------------------------------------------------------


async def test_standard_mode_speaks_after_the_text_block_ends() -> None:
    tts = ToneTTSModel()
    model = ScriptedModel([["Hello there, ", "how are you?"]])
    agent = make_agent(model, middlewares=[TTSMiddleware(tts, chunk_size=4096)])

    events = await events_of(agent)

    assert short(events) == [
        "AgentStartEvent", "ModelCallStartEvent",
        "TextStart", "TextDelta", "TextDelta", "TextEnd",
        "DataStart", "DataDelta", "DataDelta", "DataEnd",
        "ModelCallEndEvent", "AgentResultEvent", "AgentEndEvent",
    ]
    assert tts.texts == ["Hello there, how are you?"]  # one synthesis per block
    text_end = next(e for e in events if isinstance(e, TextBlockEndEvent))
    start = next(e for e in events if isinstance(e, DataBlockStartEvent))
    assert (start.reply_id, start.block_id, start.media_type) == (
        text_end.reply_id, "audio", "audio/wav")
    assert all(e.reply_id == text_end.reply_id for e in events
               if isinstance(e, (DataBlockDeltaEvent, DataBlockEndEvent)))
    assert audio_of(events) == tone(0.02 * 25)


async def test_realtime_mode_interleaves_audio_with_the_text_and_flushes_at_the_end() -> None:
    tts = ToneTTSModel()
    model = ScriptedModel([["One. ", "Two. Three"]], delay=0.05)
    agent = make_agent(model, middlewares=[TTSMiddleware(tts, "realtime")])

    events = await events_of(agent)

    assert short(events)[2:-3] == [
        "TextStart", "TextDelta", "DataStart", "DataDelta", "TextDelta", "DataDelta",
        "TextEnd", "DataDelta", "DataEnd",
    ]
    assert tts.texts == ["One. ", "Two. ", "Three"]  # sentence by sentence, then the flush
    audio = audio_of(events)
    assert audio[:4] == b"RIFF" and audio.count(b"RIFF") == 1  # one continuous stream
    assert parse_wav(audio).pcm == b"".join(parse_wav(tone(0.02 * len(t))).pcm
                                            for t in tts.texts)


async def test_each_text_block_of_the_reply_gets_its_own_audio_block() -> None:
    tts = ToneTTSModel()
    model = ScriptedModel([["Let me add.", ToolUseBlock("c1", "add", {"a": 1, "b": 2})],
                           "It is 3."])
    agent = make_agent(model, middlewares=[TTSMiddleware(tts)])
    events = await events_of(agent)
    ends = [e for e in events if isinstance(e, TextBlockEndEvent)]
    starts = [e for e in events if isinstance(e, DataBlockStartEvent)]
    assert [(s.reply_id, s.block_id) for s in starts] == [(e.reply_id, "audio") for e in ends]
    assert len({e.reply_id for e in ends}) == 2  # two model calls
    assert tts.texts == ["Let me add.", "It is 3."]
    for end, start in zip(ends, starts, strict=True):
        assert events.index(start) == events.index(end) + 1


# -- espeak-ng, for real --------------------------------------------------------------


async def test_espeak_standard_audio_is_a_valid_wav_of_plausible_length(
    espeak: EspeakTTSModel,
) -> None:
    model = ScriptedModel([["The weather is sunny ", "and warm today."]])
    agent = make_agent(model, middlewares=[TTSMiddleware(espeak)])
    events = await events_of(agent)
    audio = audio_of(events)
    with wave.open(io.BytesIO(audio)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 22050)
        assert len(w.readframes(w.getnframes())) == w.getnframes() * 2  # exact header
    assert 1.0 < seconds(audio) < 6.0


async def test_espeak_realtime_starts_speaking_before_the_text_ends(
    espeak: EspeakTTSModel,
) -> None:
    model = ScriptedModel([["Good morning. ", "It will rain ", "later today. ", "Bye"]],
                          delay=0.3)
    agent = make_agent(model, middlewares=[TTSMiddleware(espeak, "realtime")])
    events = await events_of(agent)
    kinds = short(events)
    assert kinds.index("DataStart") < kinds.index("TextEnd")
    after = kinds[kinds.index("TextEnd") + 1:kinds.index("DataEnd")]
    assert after and set(after) == {"DataDelta"}  # the flush, before anything else
    assert kinds[kinds.index("DataEnd") + 1] == "ModelCallEndEvent"
    assert 1.5 < seconds(audio_of(events)) < 8.0


async def test_one_instance_serves_concurrent_replies(espeak: EspeakTTSModel) -> None:
    shared = TTSMiddleware(espeak)
    texts = ["Hi.", "This sentence is a good deal longer than the first one."]
    agents = [make_agent(ScriptedModel([t]), name=f"a{i}", middlewares=[shared])
              for i, t in enumerate(texts)]
    results = await asyncio.gather(*(events_of(a, "go", RuntimeContext(session_id=f"s{i}"))
                                     for i, a in enumerate(agents)))
    short_audio, long_audio = (seconds(audio_of(events)) for events in results)
    assert 0.2 < short_audio < 1.5 < long_audio


async def test_openai_tts_over_http_in_realtime_mode(espeak: EspeakTTSModel) -> None:
    server = TTSServer(espeak.binary).start()
    try:
        async with OpenAITTSModel("tts-1", "nova", base_url=server.url, api_key="k") as tts:
            model = ScriptedModel([["Hello from the server. ", "Goodbye."]], delay=0.3)
            agent = make_agent(model, middlewares=[TTSMiddleware(tts, "realtime")])
            events = await events_of(agent)
    finally:
        server.stop()
    assert [body["input"] for _, _, body in server.requests] == [
        "Hello from the server. ", "Goodbye."]
    assert 1.0 < seconds(audio_of(events)) < 6.0


# -- errors, blanks, storage, threads -------------------------------------------------


async def test_a_failed_synthesis_is_reported_and_the_reply_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = make_agent(ScriptedModel(["Say the secret."]),
                       middlewares=[TTSMiddleware(ToneTTSModel(fail_on="secret"))])
    events = await events_of(agent)
    assert events[-2].result.text == "Say the secret."  # type: ignore[attr-defined]
    assert not any(isinstance(e, DataBlockStartEvent) for e in events)
    [error] = [e for e in events if isinstance(e, CustomEvent)]
    assert error.name == TTS_ERROR_EVENT
    assert error.value["block_id"] == "audio"
    assert error.value["error"] == "RuntimeError: cannot say 'Say the secret.'"
    assert "speech synthesis failed" in caplog.text


async def test_a_realtime_failure_mid_block_ends_the_started_audio_block() -> None:
    tts = ToneTTSModel(fail_on="Two")
    agent = make_agent(ScriptedModel([["One. ", "Two. ", "three"]], delay=0.05),
                       middlewares=[TTSMiddleware(tts, "realtime")])
    events = await events_of(agent)
    kinds = short(events)
    assert kinds.count("DataStart") == kinds.count("DataEnd") == 1
    assert kinds.index("DataEnd") < kinds.index("CustomEvent")
    assert events[-2].result.text == "One. Two. three"  # type: ignore[attr-defined]


async def test_blank_text_is_not_spoken_and_audio_is_not_stored() -> None:
    tts = ToneTTSModel()
    agent = make_agent(ScriptedModel([["  ", "Done."]]), middlewares=[TTSMiddleware(tts)])
    ctx = RuntimeContext(session_id="store")
    events = await events_of(agent, "go", ctx)
    assert tts.texts == ["  Done."]
    assert sum(isinstance(e, DataBlockStartEvent) for e in events) == 1
    assert ctx.agent_state is not None
    stored = [type(b).__name__ for m in ctx.agent_state.context for b in m.content]
    assert "DataBlock" not in stored


async def test_events_held_behind_a_synthesis_keep_their_order() -> None:
    class Slow(ToneTTSModel):
        async def synthesize(self, text: str) -> bytes:
            await asyncio.sleep(0.1)
            return await super().synthesize(text)

    agent = make_agent(ScriptedModel([["First.", ToolUseBlock("c1", "add", {"a": 1, "b": 1})],
                                      "Second."]),
                       middlewares=[TTSMiddleware(Slow())])
    plain = make_agent(ScriptedModel([["First.", ToolUseBlock("c1", "add", {"a": 1, "b": 1})],
                                      "Second."]))
    with_audio = [k for k in short(await events_of(agent)) if not k.startswith("Data")]
    assert with_audio == short(await events_of(plain))


async def test_disposing_cancels_a_running_synthesis() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    class Hanging(TTSModel):
        async def synthesize(self, text: str) -> bytes:
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return b""

    agent = make_agent(ScriptedModel(["hello"]), middlewares=[TTSMiddleware(Hanging())])
    seen: list[AgentEvent] = []
    subscription = agent.stream("go").subscribe(seen.append, lambda e: None)
    await asyncio.wait_for(started.wait(), TIMEOUT)
    subscription.dispose()
    await asyncio.wait_for(cancelled.wait(), TIMEOUT)
    assert "AgentResultEvent" not in short(seen)  # held back behind the block's audio


def test_works_from_plain_synchronous_code() -> None:
    agent = make_agent(ScriptedModel(["Sync works."]), middlewares=[TTSMiddleware(ToneTTSModel())])
    seen: list[AgentEvent] = []
    done = threading.Event()
    agent.stream("go").subscribe(seen.append, lambda e: done.set(), done.set)
    assert done.wait(TIMEOUT)
    assert short(seen)[-6:] == ["DataStart", "DataDelta", "DataEnd", "ModelCallEndEvent",
                                "AgentResultEvent", "AgentEndEvent"]


async def test_an_upstream_error_still_delivers_what_came_before() -> None:
    model = ScriptedModel([["Partial text", RuntimeError("stream broke")]])
    agent = make_agent(model, max_retries=1, middlewares=[TTSMiddleware(ToneTTSModel())])
    seen: list[Any] = []
    with pytest.raises(RuntimeError, match="stream broke"):
        async for event in agent.astream("go"):
            seen.append(event)
    assert "TextDelta" in short(seen)


@pytest.mark.parametrize("mode", ["standard", "realtime"])
async def test_an_interrupted_reply_says_nothing_more(mode: str) -> None:
    tts = ToneTTSModel()
    agent = make_agent(ScriptedModel([["One. ", "two ", "three"]], delay=0.1),
                       middlewares=[TTSMiddleware(tts, mode)])  # type: ignore[arg-type]
    ctx = RuntimeContext(session_id="stop")
    seen: list[AgentEvent] = []
    async for event in agent.astream("go", ctx):
        seen.append(event)
        if isinstance(event, TextBlockDeltaEvent) and event.delta == "two ":
            agent.interrupt(ctx)
    kinds = short(seen)
    assert kinds[-2:] == ["AgentResultEvent", "AgentEndEvent"]  # no audio after the end
    assert kinds.count("DataStart") == kinds.count("DataEnd")
    assert tts.texts == ([] if mode == "standard" else ["One. "])


class DropTextEnds(MiddlewareBase):
    """An inner on_agent middleware that hides every TextBlockEndEvent."""

    def order(self) -> int:
        return 0

    def active_points(self) -> Collection[ExtensionPoint]:
        return {ExtensionPoint.ON_AGENT}

    def on_agent(self, agent: Any, ctx: Any, input: Any, next: Any) -> Observable[AgentEvent]:
        return next(input).pipe(ops.filter(lambda e: not isinstance(e, TextBlockEndEvent)))


async def test_a_block_never_ended_is_spoken_before_the_result() -> None:
    tts = ToneTTSModel()
    agent = make_agent(ScriptedModel(["Unended."]),
                       middlewares=[TTSMiddleware(tts), DropTextEnds()])
    assert short(await events_of(agent)) == [
        "AgentStartEvent", "ModelCallStartEvent", "TextStart", "TextDelta",
        "ModelCallEndEvent", "DataStart", "DataDelta", "DataEnd", "AgentResultEvent",
        "AgentEndEvent",
    ]
    assert tts.texts == ["Unended."]


_ = call
