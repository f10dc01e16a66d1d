"""Text-to-speech models: the :class:`TTSModel` interface and WAV helpers.

A TTS model turns text into a complete WAV file (:meth:`TTSModel.synthesize`). For
realtime synthesis it opens a :class:`TTSStream` per text block: text is pushed as it
streams in and audio comes back as soon as it is ready, as one continuous WAV stream
(one header, then PCM). The default stream synthesizes each run of complete
sentences as soon as it has been pushed, so any model that can synthesize a string
can speak while the text still streams.

Adapters: :class:`~rx_agent.model.espeak.EspeakTTSModel` (offline, ``espeak-ng``) and
:class:`~rx_agent.model.openai_tts.OpenAITTSModel` (``/v1/audio/speech``).
"""

from __future__ import annotations

import abc
import re
import struct

from .errors import ModelResponseError

__all__ = [
    "SentenceTTSStream",
    "TTSModel",
    "TTSStream",
    "WavAudio",
    "parse_wav",
    "streaming_wav_header",
]

# A sentence ends at ., ! or ? (then closing quotes/brackets) before whitespace, or at
# CJK full stops and line breaks, which need no space after them.
_SENTENCE_END = re.compile(r"[.!?;:]+[\"')\]]*\s+|[\u3002\uff01\uff1f\uff1b\uff1a\n]+")
# "Length unknown" in a streamed WAV header (what ffmpeg and espeak-ng write to pipes).
_UNKNOWN = 0xFFFFFFFF


class WavAudio:
    """A WAV file split into its ``fmt`` chunk and its PCM data."""

    __slots__ = ("fmt", "pcm")

    def __init__(self, fmt: bytes, pcm: bytes) -> None:
        self.fmt = fmt  # the fmt chunk's body (16+ bytes)
        self.pcm = pcm

    @property
    def channels(self) -> int:
        return int(struct.unpack_from("<H", self.fmt, 2)[0])

    @property
    def sample_rate(self) -> int:
        return int(struct.unpack_from("<I", self.fmt, 4)[0])

    @property
    def block_align(self) -> int:
        return int(struct.unpack_from("<H", self.fmt, 12)[0]) or 1

    @property
    def duration(self) -> float:
        """Seconds of audio."""
        frames = len(self.pcm) // self.block_align
        return frames / self.sample_rate if self.sample_rate else 0.0

    def to_bytes(self) -> bytes:
        """A WAV file whose header states the exact sizes."""
        fmt_chunk = b"fmt " + struct.pack("<I", len(self.fmt)) + self.fmt
        body = b"WAVE" + fmt_chunk + b"data" + struct.pack("<I", len(self.pcm)) + self.pcm
        return b"RIFF" + struct.pack("<I", len(body)) + body


def parse_wav(data: bytes, source: str = "the TTS model") -> WavAudio:
    """Read a WAV file, also one streamed with "unknown" sizes (the data chunk then
    runs to the end). Anything else raises :class:`ModelResponseError`."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ModelResponseError(f"{source} did not answer with WAV audio "
                                 f"(starts with {data[:12]!r})")
    fmt: bytes | None = None
    pos = 12
    while pos + 8 <= len(data):
        chunk_id = data[pos:pos + 4]
        size = int(struct.unpack_from("<I", data, pos + 4)[0])
        start = pos + 8
        if chunk_id == b"data":
            if fmt is None:
                break
            end = len(data) if size in (0, _UNKNOWN) or start + size > len(data) else start + size
            return WavAudio(fmt, data[start:end])
        if chunk_id == b"fmt ":
            fmt = data[start:start + size]
            if len(fmt) < 16:
                break
        pos = start + size + (size & 1)  # chunks are word-aligned
    raise ModelResponseError(f"{source} answered with a WAV file without fmt and data chunks")


def streaming_wav_header(fmt: bytes) -> bytes:
    """The header of a WAV stream whose length is not known yet."""
    fmt_chunk = b"fmt " + struct.pack("<I", len(fmt)) + fmt
    return (b"RIFF" + struct.pack("<I", _UNKNOWN) + b"WAVE" + fmt_chunk
            + b"data" + struct.pack("<I", _UNKNOWN))


class TTSStream(abc.ABC):
    """Realtime synthesis of one text block (a fresh stream per block, used by one
    caller at a time): :meth:`push` each text delta, :meth:`flush` at the end.

    The audio chunks they return, concatenated, are one WAV stream: the first chunk
    starts with a header whose sizes say "unknown", the rest is PCM.
    """

    @abc.abstractmethod
    async def push(self, text: str) -> list[bytes]:
        """Take more text; the audio that is ready now (often none)."""

    @abc.abstractmethod
    async def flush(self) -> list[bytes]:
        """No more text: the rest of the audio."""


class TTSModel(abc.ABC):
    """A text-to-speech model.

    ``name`` and ``provider`` identify it; ``media_type`` is the type of the audio
    it returns (``"audio/wav"``). Instances hold no per-call state: one model may
    serve many agents and concurrent calls.
    """

    name: str = "tts"
    provider: str = "unknown"
    media_type: str = "audio/wav"

    @abc.abstractmethod
    async def synthesize(self, text: str) -> bytes:
        """``text`` spoken, as a complete WAV file (exact sizes in its header)."""

    def open_stream(self) -> TTSStream:
        """A realtime stream for one text block (default: :class:`SentenceTTSStream`)."""
        return SentenceTTSStream(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class SentenceTTSStream(TTSStream):
    """Realtime synthesis on top of :meth:`TTSModel.synthesize`.

    Pushed text is buffered; each time it holds complete sentences, they are
    synthesized at once and their PCM returned (after one streaming WAV header), so
    speech starts after the first sentence rather than after the whole block.
    """

    def __init__(self, model: TTSModel) -> None:
        self.model = model
        self._buffer = ""
        self._fmt: bytes | None = None

    async def push(self, text: str) -> list[bytes]:
        self._buffer += text
        cut = 0
        for match in _SENTENCE_END.finditer(self._buffer):
            cut = match.end()
        if cut == 0:
            return []
        ready, self._buffer = self._buffer[:cut], self._buffer[cut:]
        return await self._speak(ready)

    async def flush(self) -> list[bytes]:
        rest, self._buffer = self._buffer, ""
        return await self._speak(rest)

    async def _speak(self, text: str) -> list[bytes]:
        if not text.strip():
            return []
        audio = parse_wav(await self.model.synthesize(text), repr(self.model))
        if self._fmt is None:
            self._fmt = audio.fmt
            return [streaming_wav_header(audio.fmt) + audio.pcm]
        if audio.fmt != self._fmt:
            raise ModelResponseError(
                f"{self.model!r} changed its audio format within one stream"
            )
        return [audio.pcm]
