"""Record a model's calls to a JSONL cassette, and replay them offline.

One line per model call: the call's input (messages, tools, options) and its
SHA-256 digest, every chunk the model streamed (usage and finish reason included),
and how the call ended (completed, failed with which error, or disposed by the
caller). :class:`ReplayModel` answers a call with the first unused recorded call of
the same digest, so a conversation with a real model becomes an offline test; an
input that matches nothing fails with the differences against the next recorded
call.

Volatile parts of a message (``id``, ``created_at``, ``usage``) are left out of the
input, so the same conversation replayed gives the same digests.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.disposable import CompositeDisposable, Disposable

from .._rx import running_loop
from ..errors import RxAgentError
from ..message import ChatUsage, Msg
from ..model.base import (
    ChatModel,
    FinishChunk,
    ModelChunk,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageChunk,
)
from ..model.errors import ModelError
from ..options import GenerateOptions

__all__ = ["CassetteMismatchError", "RecordingModel", "ReplayModel", "ReplayedError",
           "call_input", "input_digest"]

FORMAT = 1
_MAX_DIFFS = 8


class CassetteMismatchError(RxAgentError, AssertionError):
    """A replayed model call matches no recorded call: the agent's input changed.

    Not retried by the runtime (``retryable = False``)."""

    retryable = False


class ReplayedError(RxAgentError, RuntimeError):
    """A recorded error whose class could not be rebuilt (its module is not imported,
    or its constructor needs more than a message); ``type_name`` names the original."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name


# -- what a call is --------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def call_input(
    messages: Sequence[Msg], tools: Sequence[dict[str, Any]], options: GenerateOptions | None
) -> dict[str, Any]:
    """The recorded form of one call's input (what the digest is taken of)."""
    opts = options or GenerateOptions()
    fields = {f.name: getattr(opts, f.name) for f in dataclasses.fields(opts) if f.name != "extra"}
    fields["extra"] = dict(opts.extra)
    return {
        "messages": [m.model_dump(mode="json", exclude={"id", "created_at", "usage"})
                     for m in messages],
        "tools": _jsonable([dict(t) for t in tools]),
        "options": _jsonable(fields),
    }


def input_digest(record: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of :func:`call_input`'s record."""
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _encode_chunk(chunk: Any) -> dict[str, Any]:
    kind = type(chunk)
    if kind is TextChunk:
        return {"text": chunk.text}
    if kind is ThinkingChunk:
        return {"thinking": chunk.thinking}
    if kind is ToolCallChunk:
        return {"tool_call": {"index": chunk.index, "id": chunk.id, "name": chunk.name,
                              "arguments": chunk.arguments, "done": chunk.done}}
    if kind is UsageChunk:
        return {"usage": chunk.usage.model_dump(mode="json")}
    if kind is FinishChunk:
        return {"finish": chunk.reason}
    return {"unknown": f"{kind.__module__}.{kind.__qualname__}", "repr": repr(chunk)}


def _decode_chunk(data: dict[str, Any], where: str) -> ModelChunk:
    if "text" in data:
        return TextChunk(data["text"])
    if "thinking" in data:
        return ThinkingChunk(data["thinking"])
    if "tool_call" in data:
        return ToolCallChunk(**data["tool_call"])
    if "usage" in data:
        return UsageChunk(ChatUsage.model_validate(data["usage"]))
    if "finish" in data:
        return FinishChunk(data["finish"])
    raise ValueError(f"{where}: the model streamed a {data.get('unknown', '?')} there, which "
                     "is not a ModelChunk and cannot be replayed")


def _encode_error(exc: BaseException) -> dict[str, Any]:
    cls = type(exc)
    return {
        "module": cls.__module__,
        "type": cls.__qualname__,
        "message": str(exc),
        "status_code": getattr(exc, "status_code", None),
        "retry_after": getattr(exc, "retry_after", None),
        "retryable": getattr(exc, "retryable", None),
    }


def _decode_error(data: dict[str, Any]) -> Exception:
    """The recorded error, rebuilt as its own class when that class is importable
    (only modules already imported are looked at: a cassette never imports code)."""
    name, message = f"{data.get('module')}.{data.get('type')}", str(data.get("message", ""))
    found: Any = sys.modules.get(str(data.get("module")))
    for part in str(data.get("type", "")).split("."):
        found = getattr(found, part, None)
    if not (isinstance(found, type) and issubclass(found, Exception)):
        return ReplayedError(name, message)
    try:
        if issubclass(found, ModelError):
            return found(message, status_code=data.get("status_code"),
                         retry_after=data.get("retry_after"), retryable=data.get("retryable"))
        return found(message)
    except Exception:
        return ReplayedError(name, message)


# -- recording -------------------------------------------------------------------------

_writer: ThreadPoolExecutor | None = None
_writer_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    # One thread: the lines of a cassette are written in the order the calls ended.
    global _writer
    with _writer_lock:
        if _writer is None:
            _writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rx-agent-cassette")
        return _writer


class RecordingModel(ChatModel):
    """Wraps ``model`` and writes each call it makes to the JSONL cassette at ``path``.

    The cassette is replaced at the first recorded call (``append=True`` adds to it).
    A line is written when its call ends, off the event loop; the call's terminal
    signal reaches the caller once the line is written, so a finished agent call has
    its cassette complete. Chunks pass through as they come.
    """

    def __init__(self, model: ChatModel, path: str | os.PathLike[str], *,
                 append: bool = False) -> None:
        if not isinstance(model, ChatModel):
            raise TypeError(f"RecordingModel wraps a ChatModel, got {type(model).__name__}")
        self.model = model
        self.path = Path(path)
        self.name = model.name
        self.provider = model.provider
        self._fresh = not append
        self._lock = threading.Lock()
        self._seq = 0

    def _append(self, line: str) -> None:
        with self._lock:
            mode = "w" if self._fresh else "a"
            self._fresh = False
            with self.path.open(mode, encoding="utf-8") as f:
                f.write(line)

    def _write(self, record: dict[str, Any], then: Callable[[BaseException | None], None]) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        loop = running_loop()
        if loop is None:
            try:
                self._append(line)
            except OSError as exc:
                then(exc)
                return
            then(None)
            return
        future = loop.run_in_executor(_executor(), self._append, line)
        future.add_done_callback(lambda f: then(None if f.cancelled() else f.exception()))

    def stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> Observable[ModelChunk]:
        opts = options or GenerateOptions()

        def subscribe(observer: rxabc.ObserverBase[ModelChunk],
                      scheduler: rxabc.SchedulerBase | None = None) -> rxabc.DisposableBase:
            inp = call_input(messages, tools, opts)  # as the model is called
            with self._lock:
                seq = self._seq
                self._seq += 1
            record: dict[str, Any] = {
                "v": FORMAT, "seq": seq, "model": self.model.name,
                "provider": self.model.provider, "digest": input_digest(inp), "input": inp,
                "chunks": [], "end": None,
            }
            chunks: list[dict[str, Any]] = record["chunks"]
            ended = False

            def end(how: str, exc: BaseException | None,
                    signal: Callable[[], None] | None) -> None:
                nonlocal ended
                if ended:
                    return
                ended = True
                record["end"] = how
                if exc is not None:
                    record["error"] = _encode_error(exc)

                def then(failure: BaseException | None) -> None:
                    if signal is None:
                        return
                    if failure is not None:
                        observer.on_error(OSError(f"RecordingModel could not write "
                                                  f"{self.path}: {failure}"))
                    else:
                        signal()

                self._write(record, then)

            def on_next(chunk: ModelChunk) -> None:
                chunks.append(_encode_chunk(chunk))
                observer.on_next(chunk)

            def on_error(exc: Exception) -> None:
                end("error", exc, lambda: observer.on_error(exc))

            def on_completed() -> None:
                end("completed", None, observer.on_completed)

            try:
                inner = self.model.stream(messages, tools, opts).subscribe(
                    on_next, on_error, on_completed, scheduler=scheduler)
            except Exception as exc:
                on_error(exc)
                return Disposable()

            def dispose() -> None:
                end("disposed", None, None)  # nobody listens any more
                inner.dispose()

            return Disposable(dispose)

        return Observable(subscribe)


# -- replaying -------------------------------------------------------------------------


def _diff(recorded: Any, actual: Any, path: str, out: list[str]) -> None:
    if len(out) >= _MAX_DIFFS:
        return
    if isinstance(recorded, dict) and isinstance(actual, dict):
        for key in [*recorded, *(k for k in actual if k not in recorded)]:
            where = f"{path}.{key}" if path else str(key)
            if key not in actual:
                out.append(f"{where}: recorded {_short(recorded[key])}, now missing")
            elif key not in recorded:
                out.append(f"{where}: not recorded, now {_short(actual[key])}")
            else:
                _diff(recorded[key], actual[key], where, out)
        return
    if isinstance(recorded, list) and isinstance(actual, list):
        for i, (r, a) in enumerate(zip(recorded, actual, strict=False)):
            _diff(r, a, f"{path}[{i}]", out)
        if len(recorded) != len(actual) and len(out) < _MAX_DIFFS:
            out.append(f"{path}: recorded {len(recorded)} items, now {len(actual)}")
        return
    if recorded != actual:
        out.append(f"{path}: recorded {_short(recorded)}, now {_short(actual)}")


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 1] + "…"


class ReplayModel(ChatModel):
    """Replays the calls recorded by :class:`RecordingModel` at ``path``, offline.

    A call gets the first unused recorded call whose input digest matches: its
    chunks, then its end (completion, the recorded error rebuilt as its class, or,
    for a call the caller disposed, nothing). An input that matches no unused call
    fails the call with :class:`CassetteMismatchError` listing the fields that differ
    from the next unused recorded call. ``name`` and ``provider`` are the recorded
    model's, so events and traces look the same. The cassette is read here, once.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no cassette at {self.path} (record one with RecordingModel)")
        records = []
        for n, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{self.path}:{n} is not a JSON line: {exc}") from None
            if not isinstance(record, dict) or record.get("v") != FORMAT:
                raise ValueError(f"{self.path}:{n} is not a cassette record of format {FORMAT}")
            record["line"] = n
            records.append(record)
        records.sort(key=lambda r: r["seq"])
        self.records: list[dict[str, Any]] = records
        self._used = [False] * len(records)
        self._lock = threading.Lock()
        self._calls = 0
        self.name = records[0]["model"] if records else "replay"
        self.provider = records[0]["provider"] if records else "replay"

    @property
    def remaining(self) -> int:
        """How many recorded calls have not been replayed."""
        with self._lock:
            return self._used.count(False)

    def _pick(self, inp: dict[str, Any]) -> dict[str, Any] | CassetteMismatchError:
        digest = input_digest(inp)
        with self._lock:
            self._calls += 1
            number = self._calls
            for i, record in enumerate(self.records):
                if not self._used[i] and record["digest"] == digest:
                    self._used[i] = True
                    return record
            unused = [r for i, r in enumerate(self.records) if not self._used[i]]
        head = f"ReplayModel: model call #{number} matches no unused call in {self.path}"
        if not unused:
            return CassetteMismatchError(
                f"{head}: all {len(self.records)} recorded calls were replayed already")
        nearest = unused[0]
        diffs: list[str] = []
        _diff(nearest["input"], inp, "", diffs)
        listed = "\n".join(f"  {d}" for d in diffs)
        return CassetteMismatchError(
            f"{head}.\nIt differs from the next recorded call (line {nearest['line']}):\n"
            f"{listed}\nRecord the cassette again if the change is intended."
        )

    def stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> Observable[ModelChunk]:
        def subscribe(observer: rxabc.ObserverBase[ModelChunk],
                      scheduler: rxabc.SchedulerBase | None = None) -> rxabc.DisposableBase:
            picked = self._pick(call_input(messages, tools, options))
            if isinstance(picked, CassetteMismatchError):
                observer.on_error(picked)
                return Disposable()
            record = picked
            where = f"{self.path}:{record['line']}"
            disposed = False

            def emit(*_: Any) -> None:
                for data in record["chunks"]:
                    if disposed:
                        return
                    try:
                        chunk = _decode_chunk(data, where)
                    except ValueError as exc:
                        observer.on_error(exc)
                        return
                    observer.on_next(chunk)
                if disposed:
                    return
                if record["end"] == "completed":
                    observer.on_completed()
                elif record["end"] == "error":
                    observer.on_error(_decode_error(record.get("error") or {}))
                # "disposed": the caller went away; stay open as the call was then

            def dispose() -> None:
                nonlocal disposed
                disposed = True

            # Like a network model, emit from a callback rather than inside subscribe.
            if scheduler is not None:
                return CompositeDisposable(Disposable(dispose), scheduler.schedule(emit))
            loop = running_loop()
            if loop is not None:
                loop.call_soon(emit)  # ``disposed`` stops it if the caller leaves first
            else:
                emit()
            return Disposable(dispose)

        return Observable(subscribe)
