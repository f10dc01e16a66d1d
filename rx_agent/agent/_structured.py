"""Structured output (Java's ``agent.call(msgs, StructuredModel.class)``).

``call(..., structured_model=M)`` makes the reply end with a validated instance of the
pydantic model ``M``. By default the runtime offers the model a response tool,
``generate_response``, whose parameters are ``M``'s JSON schema (any tool-calling model
can answer that way); a model whose ``supports_response_schema`` is true is asked
for JSON text in that schema instead (the provider's native structured output). A
response that does not validate goes back to the model with the errors, as the tool's
ERROR result or a hint; after :data:`MAX_ATTEMPTS` bad answers the call fails with
:class:`StructuredOutputError`. A bad answer is a round whose response-tool call did
not validate or whose arguments were not a JSON object, or (tool mode) a text answer
without the call; one round counts once.

The final message keeps what the answering model call gave besides the data: its
thinking blocks and its ``ChatUsage``.

The response tool runs through ``on_acting`` like any tool (middlewares see it), but
no permission rule applies to it: it runs nothing, it only records the answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Any

from pydantic import BaseModel, ValidationError

from ..context import RuntimeContext
from ..errors import RxAgentError
from ..message import (
    ContentBlock,
    GenerateReason,
    Msg,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ..middleware.types import ModelLike
from ..options import GenerateOptions
from ..permissions import Permission
from ..tool._schema import strip_titles, validation_problems
from ..tool.toolkit import Tool, ToolArgumentError, Toolkit

__all__ = [
    "MAX_ATTEMPTS",
    "RESPONSE_TOOL",
    "ResponseTool",
    "StructuredOutput",
    "StructuredOutputError",
    "check_structured_model",
]

RESPONSE_TOOL = "generate_response"
"""The name of the response tool offered to the model."""

MAX_ATTEMPTS = 3
"""Answers the model may give before a valid one (bad arguments, text without a call)."""

STRUCTURED_KEY = "structured_output"
"""``Msg.metadata`` key of the final message: the validated data, as JSON values."""


class StructuredOutputError(RxAgentError, ValueError):
    """The model did not produce a valid structured response in its attempts."""


def check_structured_model(model: object) -> type[BaseModel] | None:
    """``model`` as a pydantic model class, or a ``TypeError`` saying what it is."""
    if model is None:
        return None
    if isinstance(model, type) and issubclass(model, BaseModel):
        return model
    what = f"an instance of {type(model).__name__}" if isinstance(model, BaseModel) else repr(model)
    raise TypeError(f"structured_model must be a pydantic BaseModel subclass, got {what}")


class ResponseTool(Tool):
    """``generate_response``: the model's final answer, validated against the model."""

    def __init__(self, output: StructuredOutput) -> None:
        # Not Tool.__init__: the parameters are the structured model's schema.
        self.output = output
        model = output.model
        self.fn = self._direct
        self.name = RESPONSE_TOOL
        doc = (model.__doc__ or "").strip()
        self.description = (
            "Give your final answer to the user as structured data. Call this exactly "
            "once, when you are done, with arguments that follow the schema"
            + (f" ({doc.splitlines()[0]})" if doc else "") + "."
        )
        self.parameters = strip_titles(model.model_json_schema())
        self.permission = Permission.ALLOW
        self.rules = ()
        self.external = False
        self.concurrency_safe = True
        self.timeout = None
        self.source = "structured output"
        self.context_params = ()
        self._positional = ()
        self.is_async_gen = False
        self.is_async = True

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            value = self.output.model.model_validate(arguments)
        except ValidationError as exc:
            self.output.bad_call = True  # counted once for the round (after_batch)
            raise ToolArgumentError(
                f"the response does not match the schema: {validation_problems(exc, '(value)')}. "
                f"Call "
                f"{RESPONSE_TOOL} again with corrected arguments."
            ) from None
        return {"value": value}

    def invoke(
        self, kwargs: dict[str, Any], ctx: RuntimeContext | None, executor: Executor | None = None
    ) -> Any:
        return self._direct(**kwargs)

    async def _direct(self, value: BaseModel) -> ToolResultBlock:
        self.output.result = value
        return ToolResultBlock(id="", name=RESPONSE_TOOL, output="Response recorded.")


class StructuredOutput:
    """One call's request for structured output, and what the model answered."""

    __slots__ = ("bad_call", "failures", "model", "native", "result", "tool")

    def __init__(self, model: type[BaseModel], llm: ModelLike) -> None:
        self.model = model
        self.native = bool(getattr(llm, "supports_response_schema", False))
        self.result: BaseModel | None = None
        self.failures = 0
        self.bad_call = False  # this round's response call did not validate
        self.tool = None if self.native else ResponseTool(self)

    def failed(self) -> None:
        self.failures += 1

    def after_batch(self, calls: Sequence[ToolUseBlock]) -> None:
        """After a round's tool calls ran without recording the answer: a response
        call that did not validate, or whose arguments were not a JSON object (the
        tool never ran), is one bad answer; too many fail the call."""
        if self.bad_call or any(c.name == RESPONSE_TOOL and c.raw_input is not None
                                for c in calls):
            self.failed()
        self.bad_call = False
        self.check_attempts()

    def check_attempts(self) -> None:
        if self.failures >= MAX_ATTEMPTS:
            raise StructuredOutputError(
                f"the model gave no valid {self.model.__name__} in {MAX_ATTEMPTS} attempts"
            )

    def toolkit(self, toolkit: Toolkit) -> Toolkit:
        """The call's toolkit: the agent's tools plus the response tool."""
        if self.tool is None:
            return toolkit
        if toolkit.get(RESPONSE_TOOL) is not None:
            raise ValueError(f"the agent has a tool named {RESPONSE_TOOL!r}, which structured "
                             "output needs for itself; rename that tool")
        overlay = toolkit.copy()
        overlay._put(self.tool)  # a runtime tool: no name check, no source
        return overlay

    def options(self, options: GenerateOptions) -> GenerateOptions:
        """The round's options: the native response schema when the model takes one."""
        if not self.native:
            return options
        schema = {"name": self.model.__name__, "schema": self.model.model_json_schema()}
        return options.with_(response_schema=schema)

    def from_text(self, msg: Msg) -> str | None:
        """Native mode: validate a text answer; the hint for the model when it fails."""
        text = msg.text.strip()
        if text.startswith("```"):  # a fenced answer: keep what is inside
            text = text.strip("`").removeprefix("json").strip()
        try:
            self.result = self.model.model_validate(json.loads(text))
        except (ValueError, ValidationError) as exc:
            self.failed()
            detail = (validation_problems(exc, "(value)") if isinstance(exc, ValidationError)
                      else f"not JSON ({exc})")
            return (f"Your answer is not a valid {self.model.__name__}: {detail}. Answer "
                    "again with only the JSON object.")
        return None

    def reminder(self) -> str:
        """Tool mode: what the model is told after a text answer without the call."""
        self.failed()
        return (f"Give your final answer by calling {RESPONSE_TOOL} with arguments that "
                "follow its schema; a plain text answer is not enough.")

    def final(self, name: str, context: Sequence[Msg], answer: Msg | None = None) -> Msg:
        """The reply's final message: the data as JSON text, in metadata, and as
        ``msg.structured``, after the answering call's thinking, with its usage.

        ``answer`` is the answering message (native mode: the text answer); else it is
        the latest assistant message of ``context`` that called the response tool."""
        assert self.result is not None
        if answer is None:
            answer = next((m for m in reversed(context) if m.role is Role.ASSISTANT
                           and any(c.name == RESPONSE_TOOL for c in m.tool_calls)), None)
        data = self.result.model_dump(mode="json")
        content: list[ContentBlock] = [
            b for b in (answer.content if answer is not None else ())
            if isinstance(b, ThinkingBlock)
        ]
        content.append(TextBlock(text=json.dumps(data, ensure_ascii=False)))
        msg = Msg.make(Role.ASSISTANT, content, name,
                       generate_reason=GenerateReason.STRUCTURED_OUTPUT,
                       usage=answer.usage if answer is not None else None,
                       metadata={STRUCTURED_KEY: data})
        msg.set_structured(self.result)
        return msg

