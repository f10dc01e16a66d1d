"""The TTS models: espeak-ng for real, and OpenAITTSModel against a loopback server."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import subprocess
import wave
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from _services import service_missing

from rx_agent import EspeakTTSModel, OpenAITTSModel, TTSModel
from rx_agent.model import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelResponseError,
    ModelServerError,
    ModelTimeoutError,
)
from rx_agent.model.tts import SentenceTTSStream, parse_wav

from .tts_server import Failure, TTSServer

SENTENCE = "Hello world. This is a test of the speech engine."


@pytest.fixture(scope="module")
def espeak() -> str:
    found = shutil.which("espeak-ng")
    if found is None:
        service_missing("espeak-ng is not installed (apt-get install espeak-ng)")
    return found


def wav_duration(data: bytes) -> float:
    """Seconds of audio, read by the standard library; the header must be exact."""
    with wave.open(io.BytesIO(data)) as w:
        frames = w.readframes(w.getnframes())
        assert len(frames) == w.getnframes() * w.getsampwidth() * w.getnchannels()
        assert (w.getnchannels(), w.getsampwidth()) == (1, 2)
        return w.getnframes() / w.getframerate()


def espeak_children() -> list[int]:
    """Live espeak-ng processes started by this test process."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().split()
        except OSError:
            continue
        if fields[1] == "(espeak-ng)" and int(fields[3]) == os.getpid() and fields[2] != "Z":
            found.append(int(fields[0]))
    return found


# -- espeak-ng -------------------------------------------------------------------------


async def test_espeak_speaks_a_valid_wav_of_plausible_length(espeak: str) -> None:
    model = EspeakTTSModel()
    short = await model.synthesize("Hi.")
    long = await model.synthesize(SENTENCE)
    assert 0.2 < wav_duration(short) < 2.0
    assert 1.5 < wav_duration(long) < 8.0
    assert isinstance(model, TTSModel) and model.media_type == "audio/wav"


async def test_sox_reads_the_same_duration(espeak: str, tmp_path: Path) -> None:
    soxi = shutil.which("soxi")
    if soxi is None:
        service_missing("sox is not installed (apt-get install sox)")
    audio = await EspeakTTSModel().synthesize(SENTENCE)
    path = tmp_path / "speech.wav"
    path.write_bytes(audio)
    seconds = float(subprocess.run([soxi, "-D", str(path)], capture_output=True, text=True,
                                   check=True).stdout)
    assert seconds == pytest.approx(wav_duration(audio), abs=0.001)


async def test_espeak_options_reach_the_engine(espeak: str) -> None:
    slow = await EspeakTTSModel("en-us", speed=100).synthesize(SENTENCE)
    fast = await EspeakTTSModel("en-us", speed=400).synthesize(SENTENCE)
    assert wav_duration(slow) > 2 * wav_duration(fast)
    assert EspeakTTSModel("de", pitch=20, amplitude=150).command()[-6:] == [
        "-v", "de", "-p", "20", "-a", "150"]


async def test_text_goes_on_stdin_so_it_is_never_an_option(espeak: str) -> None:
    audio = await EspeakTTSModel().synthesize("-v xx --help")
    assert wav_duration(audio) > 0.3


async def test_concurrent_syntheses_do_not_block_the_loop(espeak: str) -> None:
    model = EspeakTTSModel()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        audios = await asyncio.gather(*(model.synthesize(f"Sentence number {i}.")
                                        for i in range(4)))
    finally:
        task.cancel()
    assert all(wav_duration(a) > 0.5 for a in audios)
    assert ticks > 0


async def test_a_timeout_kills_the_process(espeak: str) -> None:
    model = EspeakTTSModel(timeout=0.001)
    with pytest.raises(ModelTimeoutError, match=r"did not finish within 0\.001s"):
        await model.synthesize(SENTENCE * 200)
    assert espeak_children() == []


async def test_cancelling_kills_the_process(espeak: str) -> None:
    task = asyncio.create_task(EspeakTTSModel().synthesize(SENTENCE * 400))
    try:
        for _ in range(500):  # until the process runs
            await asyncio.sleep(0.01)
            if espeak_children():
                break
        assert espeak_children() != []
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert espeak_children() == []


def _wrapper_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ``espeak-ng`` on PATH that is a wrapper script running a long-lived child
    (no ``exec``): the child inherits stdout. Returns the file the child's pid goes to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pid_file = tmp_path / "child.pid"
    script = bin_dir / "espeak-ng"
    script.write_text(f"#!/bin/sh\nsleep 10 &\necho $! > {pid_file}\nwait\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return pid_file


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def _child_of(pid_file: Path) -> int:
    for _ in range(500):
        if pid_file.exists() and pid_file.read_text().strip():
            return int(pid_file.read_text())
        await asyncio.sleep(0.01)
    raise AssertionError("the wrapper never started its child")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("ending", ["timeout", "cancel"])
async def test_a_wrapper_scripts_children_die_with_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ending: str
) -> None:
    pid_file = _wrapper_on_path(tmp_path, monkeypatch)
    model = EspeakTTSModel(timeout=1.0 if ending == "timeout" else None)
    assert model.binary == str(tmp_path / "bin" / "espeak-ng")
    started = asyncio.get_running_loop().time()
    task = asyncio.create_task(model.synthesize(SENTENCE))
    child = await _child_of(pid_file)
    assert _alive(child)
    if ending == "timeout":
        with pytest.raises(ModelTimeoutError, match=r"did not finish within 1\.0s"):
            await asyncio.wait_for(task, 30)
    else:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 30)
    # Not the child's 10 s: the call ends at its timeout (or cancellation) ...
    assert asyncio.get_running_loop().time() - started < 6
    # ... and the child went with the wrapper.
    for _ in range(200):
        if not _alive(child):
            break
        await asyncio.sleep(0.01)
    assert not _alive(child)


async def test_an_unknown_voice_is_a_clear_error(espeak: str) -> None:
    with pytest.raises(ModelResponseError, match=r"exited with 1: .*voice does not exist"):
        await EspeakTTSModel("qqq").synthesize("hello")


def test_a_missing_binary_says_what_to_install() -> None:
    with pytest.raises(FileNotFoundError, match=r"apt-get install espeak-ng"):
        EspeakTTSModel(binary="espeak-ng-not-installed")
    with pytest.raises(FileNotFoundError, match="not found"):
        EspeakTTSModel(binary="/nonexistent/espeak-ng")


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"speed": 10}, "speed must be in 80..450"),
    ({"pitch": 100}, "pitch must be in 0..99"),
    ({"amplitude": 1.5}, "amplitude must be an int"),
    ({"voice": "-x"}, "voice must be an espeak-ng voice name"),
    ({"timeout": 0}, "timeout must be > 0"),
])
def test_bad_espeak_settings_are_refused(espeak: str, kwargs: dict[str, object],
                                         match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        EspeakTTSModel(**kwargs)  # type: ignore[arg-type]


async def test_blank_text_is_refused(espeak: str) -> None:
    with pytest.raises(ValueError, match="non-blank text"):
        await EspeakTTSModel().synthesize("  ")


async def test_the_sentence_stream_is_one_wav_stream(espeak: str) -> None:
    stream = EspeakTTSModel().open_stream()
    assert isinstance(stream, SentenceTTSStream)
    assert await stream.push("Hello the") == []  # no sentence is complete yet
    first = await stream.push("re. How are")
    rest = await stream.push(" you? Fine")
    tail = await stream.flush()
    assert len(first) == len(rest) == len(tail) == 1
    assert first[0][:4] == b"RIFF" and rest[0][:4] != b"RIFF"  # one header only
    joined = b"".join(first + rest + tail)
    audio = parse_wav(joined)
    assert audio.sample_rate == 22050 and 1.0 < audio.duration < 6.0
    with wave.open(io.BytesIO(joined)) as w:  # the stdlib reads the streamed header too
        assert len(w.readframes(10**9)) == len(audio.pcm)


def test_parse_wav_refuses_what_is_not_wav() -> None:
    with pytest.raises(ModelResponseError, match="did not answer with WAV"):
        parse_wav(b"ID3\x03mp3 data here")
    with pytest.raises(ModelResponseError, match="without fmt and data"):
        parse_wav(b"RIFF\x04\x00\x00\x00WAVE")


# -- OpenAI-compatible ------------------------------------------------------------------


@pytest.fixture
def tts_server(espeak: str) -> Iterator[TTSServer]:
    server = TTSServer(espeak).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def openai_tts(tts_server: TTSServer) -> AsyncIterator[OpenAITTSModel]:
    model = OpenAITTSModel("tts-1", "nova", base_url=tts_server.url, api_key="sk-test")
    try:
        yield model
    finally:
        await model.aclose()


async def test_openai_tts_posts_the_speech_request_and_returns_exact_wav(
    tts_server: TTSServer,
) -> None:
    async with OpenAITTSModel("gpt-4o-mini-tts", "coral", base_url=tts_server.url,
                              api_key="sk-test", instructions="Speak calmly.", speed=1.5,
                              seed=3) as model:
        audio = await model.synthesize(SENTENCE)
    assert 1.0 < wav_duration(audio) < 8.0  # the streamed "unknown" sizes were made exact
    [(line, headers, body)] = tts_server.requests
    assert line == "POST /v1/audio/speech"
    assert headers["authorization"] == "Bearer sk-test"
    assert body == {"seed": 3, "model": "gpt-4o-mini-tts", "input": SENTENCE, "voice": "coral",
                    "response_format": "wav", "instructions": "Speak calmly.", "speed": 1.5}


async def test_openai_tts_reuses_its_connection(openai_tts: OpenAITTSModel,
                                                tts_server: TTSServer) -> None:
    for text in ("One.", "Two."):
        assert wav_duration(await openai_tts.synthesize(text)) > 0.2
    assert len(tts_server.requests) == 2
    [pool] = openai_tts._pools.values()
    assert pool is not None


@pytest.mark.parametrize(("failure", "error", "match"), [
    (Failure(401, {"error": {"message": "bad key"}}), ModelAuthenticationError,
     r"answered 401 Unauthorized: bad key \(check the API key: OPENAI_API_KEY or api_key=\)"),
    (Failure(500, {"error": {"message": "engine down"}}), ModelServerError, "engine down"),
    (Failure(200, {"error": {"message": "quota", "code": "429"}}), Exception, "quota"),
    (Failure(200, {"ok": True}), ModelResponseError, "JSON instead of audio"),
])
async def test_openai_tts_errors_are_typed(
    openai_tts: OpenAITTSModel, tts_server: TTSServer, failure: Failure,
    error: type[Exception], match: str,
) -> None:
    tts_server.failures.append(failure)
    with pytest.raises(error, match=match):
        await openai_tts.synthesize("hello")


async def test_openai_tts_without_a_server_is_a_connection_error() -> None:
    async with OpenAITTSModel(base_url="http://127.0.0.1:9/v1", api_key="k") as model:
        with pytest.raises(ModelConnectionError, match="cannot connect"):
            await model.synthesize("hello")


def test_openai_tts_settings_are_checked() -> None:
    with pytest.raises(ValueError, match=r"speed must be in 0\.25\.\.4\.0"):
        OpenAITTSModel(speed=9, api_key="k")
    with pytest.raises(ValueError, match="base_url must start with http"):
        OpenAITTSModel(base_url="ftp://x", api_key="k")
    with pytest.raises(TypeError, match="JSON values"):
        OpenAITTSModel(api_key="k", extra=object())
    assert repr(OpenAITTSModel("tts-1", "nova", base_url="http://h/v1/", api_key="k")) == (
        "OpenAITTSModel(name='tts-1', voice='nova', base_url='http://h/v1')")
