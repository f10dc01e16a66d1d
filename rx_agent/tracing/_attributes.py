"""Attribute names: the OpenTelemetry GenAI semantic conventions, plus ``rx_agent.*``.

Spelled out here rather than imported from ``opentelemetry-semantic-conventions``:
that package is not a dependency, and the GenAI names moved out of it.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ERROR_TYPE",
    "GEN_AI_AGENT_ID",
    "GEN_AI_AGENT_NAME",
    "GEN_AI_CONVERSATION_ID",
    "GEN_AI_INPUT_MESSAGES",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_OUTPUT_MESSAGES",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REQUEST_FREQUENCY_PENALTY",
    "GEN_AI_REQUEST_MAX_TOKENS",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_REQUEST_PRESENCE_PENALTY",
    "GEN_AI_REQUEST_SEED",
    "GEN_AI_REQUEST_STOP_SEQUENCES",
    "GEN_AI_REQUEST_STREAM",
    "GEN_AI_REQUEST_TEMPERATURE",
    "GEN_AI_REQUEST_TOP_K",
    "GEN_AI_REQUEST_TOP_P",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK",
    "GEN_AI_SYSTEM_INSTRUCTIONS",
    "GEN_AI_TOOL_CALL_ARGUMENTS",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_CALL_RESULT",
    "GEN_AI_TOOL_DESCRIPTION",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_TOOL_TYPE",
    "GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "GEN_AI_USAGE_REASONING_OUTPUT_TOKENS",
    "RX_AGENT_GENERATE_REASON",
    "RX_AGENT_PENDING_KIND",
    "RX_AGENT_PENDING_REPLY_ID",
    "RX_AGENT_PENDING_TOOL_CALL_IDS",
    "RX_AGENT_PENDING_TOOL_NAMES",
    "RX_AGENT_REPLY_ID",
    "RX_AGENT_REQUEST_TOOL_CHOICE",
    "RX_AGENT_RESUME_KIND",
    "RX_AGENT_RESUME_REPLY_ID",
    "RX_AGENT_RUN_ID",
    "RX_AGENT_TOOL_CALL_IDS",
    "RX_AGENT_TOOL_EXTERNAL",
    "RX_AGENT_TOOL_NAMES",
    "RX_AGENT_TOOL_STATE",
    "RX_AGENT_TOOL_STATES",
    "USER_ID",
]

GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"

GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_AGENT_ID: Final = "gen_ai.agent.id"

GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
GEN_AI_REQUEST_TOP_K: Final = "gen_ai.request.top_k"
GEN_AI_REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
GEN_AI_REQUEST_SEED: Final = "gen_ai.request.seed"
GEN_AI_REQUEST_FREQUENCY_PENALTY: Final = "gen_ai.request.frequency_penalty"
GEN_AI_REQUEST_PRESENCE_PENALTY: Final = "gen_ai.request.presence_penalty"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"

GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"

GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"

GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"

# Content (recorded only with record_content=True).
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"

ERROR_TYPE: Final = "error.type"
USER_ID: Final = "user.id"

# rx_agent specifics with no GenAI equivalent.
RX_AGENT_RUN_ID: Final = "rx_agent.run_id"
RX_AGENT_REPLY_ID: Final = "rx_agent.reply_id"
RX_AGENT_GENERATE_REASON: Final = "rx_agent.generate_reason"
RX_AGENT_REQUEST_TOOL_CHOICE: Final = "rx_agent.request.tool_choice"
RX_AGENT_TOOL_NAMES: Final = "rx_agent.tool.names"
RX_AGENT_TOOL_CALL_IDS: Final = "rx_agent.tool.call.ids"
RX_AGENT_TOOL_STATE: Final = "rx_agent.tool.state"
RX_AGENT_TOOL_STATES: Final = "rx_agent.tool.states"
RX_AGENT_TOOL_EXTERNAL: Final = "rx_agent.tool.external"

# A reply that pauses (AgentScope Python: agentscope.agent.hitl_pending_tools and
# external_execution_pending_tools) and the call that resumes it (incoming_event_type).
# Kinds are PendingToolCalls.kind: "confirm" or "external".
RX_AGENT_PENDING_KIND: Final = "rx_agent.pending.kind"
RX_AGENT_PENDING_REPLY_ID: Final = "rx_agent.pending.reply_id"
RX_AGENT_PENDING_TOOL_NAMES: Final = "rx_agent.pending.tool.names"
RX_AGENT_PENDING_TOOL_CALL_IDS: Final = "rx_agent.pending.tool.call.ids"
RX_AGENT_RESUME_KIND: Final = "rx_agent.resume.kind"
RX_AGENT_RESUME_REPLY_ID: Final = "rx_agent.resume.reply_id"
