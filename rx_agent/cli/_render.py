"""Draws an agent's event stream on a rich console (plain text without colours)."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from ..event import (
    AgentEndEvent,
    AgentEvent,
    AgentResultEvent,
    AgentStartEvent,
    AllToolsDeniedEvent,
    CustomEvent,
    DataBlockStartEvent,
    ExceedMaxItersEvent,
    HintBlockEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    RequestStopEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
)
from ..message import ChatUsage, Msg, ToolResultState

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

__all__ = ["Renderer", "clip"]

_MAX_RESULT_LINES = 12
_MAX_RESULT_CHARS = 1500


def clip(text: str) -> str:
    """A tool result short enough for a panel, saying how much was left out."""
    lines = text.splitlines() or [""]
    clipped = "\n".join(lines[:_MAX_RESULT_LINES])
    if len(clipped) > _MAX_RESULT_CHARS:
        clipped = clipped[:_MAX_RESULT_CHARS]
    hidden = len(text) - len(clipped)
    if hidden > 0:
        clipped += f"\n… ({hidden} more characters)"
    return clipped


class Renderer:
    """Draws an agent's event stream on a rich console as it arrives.

    Text and thinking are written delta by delta on the current line (thinking
    dimmed); tool calls and tool results become panels once complete; each model
    call ends with a dim line (tokens and the latency ``TimingMiddleware`` stamps);
    the reply ends with a summary of its token usage.
    """

    def __init__(self, console: Console, shown_prompts: set[str] | None = None) -> None:
        self.console = console
        # System prompts already shown: a chat passes one set to every turn's
        # renderer so that an unchanged prompt is not repeated each time.
        self._shown_prompts = shown_prompts if shown_prompts is not None else set()
        self.total = ChatUsage()
        self.model_calls = 0
        self.result: Msg | None = None
        self._agent = "agent"
        self._open_line = False
        self._started = time.perf_counter()
        self._models: dict[str, str | None] = {}
        self._calls: dict[str, tuple[str, list[str]]] = {}
        self._results: dict[str, tuple[str, list[str]]] = {}

    # helpers

    def _write(self, text: str, style: str = "") -> None:
        from rich.text import Text

        if text:
            self.console.print(Text(text, style=style), end="", soft_wrap=True)
            self._open_line = not text.endswith("\n")

    def _line(self, renderable: RenderableType | str, style: str = "") -> None:
        from rich.text import Text

        self._close_line()
        if isinstance(renderable, str):
            # Notes are not hard-wrapped: the terminal wraps them, and a pipe gets
            # whole lines that grep and friends can use.
            self.console.print(Text(renderable, style=style), soft_wrap=True)
        else:
            self.console.print(renderable)

    def _close_line(self) -> None:
        if self._open_line:
            self.console.print()
            self._open_line = False

    def note(self, text: str, style: str = "dim") -> None:
        self._line(text, style)

    # events

    def handle(self, event: AgentEvent) -> None:
        if isinstance(event, TextBlockDeltaEvent):
            self._write(event.delta)
        elif isinstance(event, ThinkingBlockDeltaEvent):
            self._write(event.delta, "dim italic")
        elif isinstance(event, TextBlockStartEvent):
            self._close_line()
            self._write(f"{self._agent} > ", "bold cyan")
        elif isinstance(event, ThinkingBlockStartEvent):
            self._close_line()
            self._write("thinking > ", "dim italic")
        elif isinstance(event, (TextBlockEndEvent, ThinkingBlockEndEvent)):
            self._close_line()
        elif isinstance(event, ToolCallStartEvent):
            self._calls[event.tool_call_id] = (event.tool_call_name, [])
        elif isinstance(event, ToolCallDeltaEvent):
            self._calls.setdefault(event.tool_call_id, (event.tool_call_name, []))[1].append(
                event.delta
            )
        elif isinstance(event, ToolCallEndEvent):
            self._tool_call(event.tool_call_id, event.tool_call_name)
        elif isinstance(event, ToolResultStartEvent):
            self._results[event.tool_call_id] = (event.tool_call_name, [])
        elif isinstance(event, ToolResultTextDeltaEvent):
            self._results.setdefault(event.tool_call_id, (event.tool_call_name, []))[1].append(
                event.delta
            )
        elif isinstance(event, ToolResultEndEvent):
            self._tool_result(event)
        elif isinstance(event, ModelCallStartEvent):
            self._models[event.reply_id] = event.model_name
        elif isinstance(event, ModelCallEndEvent):
            self._model_call_end(event)
        elif isinstance(event, CustomEvent):
            self._custom(event)
        elif isinstance(event, AgentStartEvent):
            self._agent = event.name
            self._started = time.perf_counter()
        elif isinstance(event, AgentResultEvent):
            self.result = event.result
        elif isinstance(event, AgentEndEvent):
            self._summary()
        else:
            self._notice(event)

    def _tool_call(self, call_id: str, name: str) -> None:
        from rich.panel import Panel
        from rich.text import Text

        _, parts = self._calls.pop(call_id, (name, []))
        raw = "".join(parts)
        try:
            shown = json.dumps(json.loads(raw or "{}"), ensure_ascii=False)
        except ValueError:
            shown = raw  # the model sent broken JSON: show exactly what it sent
        self._line(
            Panel(
                Text(shown),
                title=f"tool call · {name}",
                title_align="left",
                border_style="yellow",
                expand=False,
            )
        )

    def _tool_result(self, event: ToolResultEndEvent) -> None:
        from rich.panel import Panel
        from rich.text import Text

        name, parts = self._results.pop(event.tool_call_id, (event.tool_call_name, []))
        ok = event.state is ToolResultState.SUCCESS
        self._line(
            Panel(
                Text(clip("".join(parts))),
                title=f"tool result · {name} · {event.state.value}",
                title_align="left",
                border_style="green" if ok else "red",
                expand=False,
            )
        )

    def _model_call_end(self, event: ModelCallEndEvent) -> None:
        self.model_calls += 1
        model = self._models.pop(event.reply_id, None) or "model"
        parts = [f"model call {self.model_calls} · {model}"]
        if event.usage is not None:
            self.total = self.total + event.usage
            parts.append(f"{event.usage.input_tokens} → {event.usage.output_tokens} tokens")
        timing = event.metadata.get("timing")
        if isinstance(timing, dict):
            parts.append(
                f"first chunk {timing.get('first_chunk_ms')} ms, "
                f"total {timing.get('total_ms')} ms"
            )
        elif event.usage is not None and event.usage.time is not None:
            parts.append(f"{event.usage.time * 1000:.0f} ms")
        self.note("  " + " · ".join(parts))

    def _custom(self, event: CustomEvent) -> None:
        value = event.value
        if isinstance(value, dict) and isinstance(value.get("text"), str):
            self.note(f"· {value['text']}")
            prompt = value.get("system_prompt")
            if isinstance(prompt, str) and prompt and prompt not in self._shown_prompts:
                self._shown_prompts.add(prompt)
                self.note("  system prompt: " + " ⏎ ".join(prompt.splitlines()))
        else:
            self.note(f"· {event.name}: {json.dumps(value, ensure_ascii=False, default=str)}")

    def _notice(self, event: AgentEvent) -> None:
        if isinstance(event, ExceedMaxItersEvent):
            self.note(
                f"! reached max_iters ({event.max_iters}): asking for a summary", "yellow"
            )
        elif isinstance(event, RequestStopEvent):
            reason = f": {event.reason}" if event.reason else ""
            self.note(f"! stop requested ({event.generate_reason.value}){reason}", "yellow")
        elif isinstance(event, AllToolsDeniedEvent):
            names = ", ".join(c.name for c in event.denied_tool_calls)
            self.note(f"! every tool call was denied: {names}", "yellow")
        elif isinstance(event, RequireUserConfirmEvent):
            names = ", ".join(c.name for c in event.tool_calls)
            self.note(f"! paused: waiting for the user to confirm {names}", "yellow")
        elif isinstance(event, RequireExternalExecutionEvent):
            names = ", ".join(c.name for c in event.tool_calls)
            self.note(f"! paused: {names} must be run outside the agent", "yellow")
        elif isinstance(event, HintBlockEvent):
            self.note(f"hint: {event.hint}")
        elif isinstance(event, DataBlockStartEvent):
            self.note(f"[data block: {event.media_type}]")
        # Deltas of data blocks and tool-result data are not drawable in a terminal.

    def _summary(self) -> None:
        elapsed = time.perf_counter() - self._started
        reason = self.result.generate_reason if self.result is not None else None
        total = self.total
        style = "bold green" if reason is not None and reason.value == "MODEL_STOP" else "yellow"
        self._line(
            f"done · {reason.value if reason else 'no result'} · {self.model_calls} model "
            f"call(s) · tokens: {total.input_tokens} in + {total.output_tokens} out = "
            f"{total.total_tokens} · {elapsed:.2f} s",
            style,
        )

