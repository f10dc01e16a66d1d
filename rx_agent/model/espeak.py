"""``EspeakTTSModel``: offline text-to-speech through the ``espeak-ng`` program."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal

from .errors import ModelResponseError, ModelTimeoutError
from .tts import TTSModel, parse_wav

__all__ = ["EspeakTTSModel"]

_INSTALL_HINT = "install it (Debian/Ubuntu: apt-get install espeak-ng) or pass binary="


class EspeakTTSModel(TTSModel):
    """Speech from `eSpeak NG <https://github.com/espeak-ng/espeak-ng>`_, offline.

    Each :meth:`synthesize` runs ``espeak-ng --stdout`` as an asyncio subprocess (the
    event loop is never blocked; cancelling the call or its timeout kills the process
    and, on POSIX, every process it started: ``binary`` may be a wrapper script), gives
    it the text on stdin and returns its WAV output (16-bit mono PCM, 22050 Hz for the
    bundled voices) with the header's sizes made exact.

    Args:
        voice: an espeak-ng voice (``"en"``, ``"en-us"``, ``"de"``, ``"zh"``; see
            ``espeak-ng --voices``); ``None`` uses espeak-ng's default.
        speed: words per minute (80-450; espeak-ng's default is 175).
        pitch: 0-99 (default 50).
        amplitude: volume, 0-200 (default 100).
        binary: the program to run: a name looked up on ``PATH`` or a path.
        timeout: seconds one synthesis may take (``None``: no limit).

    Raises:
        FileNotFoundError: ``binary`` is not installed.
    """

    provider = "espeak-ng"

    def __init__(
        self,
        voice: str | None = None,
        *,
        speed: int | None = None,
        pitch: int | None = None,
        amplitude: int | None = None,
        binary: str = "espeak-ng",
        timeout: float | None = 60.0,
    ) -> None:
        for label, value, low, high in (("speed", speed, 80, 450), ("pitch", pitch, 0, 99),
                                        ("amplitude", amplitude, 0, 200)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{label} must be an int, not {type(value).__name__}")
            if not low <= value <= high:
                raise ValueError(f"{label} must be in {low}..{high}, got {value}")
        if voice is not None and (not isinstance(voice, str) or not voice.strip()
                                  or voice.startswith("-")):
            raise ValueError(f"voice must be an espeak-ng voice name, got {voice!r}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be > 0 or None, got {timeout}")
        found = shutil.which(binary) if os.sep not in binary else (
            binary if os.access(binary, os.X_OK) else None)
        if found is None:
            raise FileNotFoundError(f"EspeakTTSModel: {binary!r} was not found; {_INSTALL_HINT}")
        self.binary = found
        self.voice = voice
        self.speed = speed
        self.pitch = pitch
        self.amplitude = amplitude
        self.timeout = timeout
        self.name = voice or "espeak-ng"

    def command(self) -> list[str]:
        """The command line one synthesis runs (the text goes to stdin)."""
        cmd = [self.binary, "--stdout", "--stdin", "-b", "1"]
        for flag, value in (("-v", self.voice), ("-s", self.speed), ("-p", self.pitch),
                            ("-a", self.amplitude)):
            if value is not None:
                cmd += [flag, str(value)]
        return cmd

    async def synthesize(self, text: str) -> bytes:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("EspeakTTSModel.synthesize needs non-blank text")
        process = await asyncio.create_subprocess_exec(
            *self.command(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            # Its own process group: a wrapper script that runs the engine as a child
            # (no ``exec``) is killed with that child, whose open stdout would otherwise
            # keep the call waiting for the child's whole life.
            start_new_session=_POSIX,
        )
        try:
            async with asyncio.timeout(self.timeout):
                out, err = await process.communicate(text.encode("utf-8"))
        except BaseException as exc:
            # Cancelled or timed out: the process must not outlive the call.
            _kill(process)
            # Not wait(): it also waits for every pipe to close, and a stdout left
            # unread (paused by flow control) never would; communicate() drains it.
            await process.communicate()
            if isinstance(exc, TimeoutError):
                raise ModelTimeoutError(
                    f"espeak-ng did not finish within {self.timeout}s") from exc
            raise
        if process.returncode != 0:
            detail = err.decode("utf-8", errors="replace").strip() or "no message"
            raise ModelResponseError(f"espeak-ng exited with {process.returncode}: {detail}")
        return parse_wav(out, "espeak-ng").to_bytes()

    def __repr__(self) -> str:
        return f"EspeakTTSModel(voice={self.voice!r})"


_POSIX = os.name == "posix"


def _kill(process: asyncio.subprocess.Process) -> None:
    """Kill ``process`` and (POSIX) its process group, which its children share."""
    if _POSIX:
        # The group outlives its leader while a child lives: kill it even when the
        # wrapper itself already exited.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
