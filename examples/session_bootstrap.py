"""The Java guide's ``SessionBootstrapMiddleware``: on a brand-new session, put the
user's profile in front of the first message (``on_agent_state_ready``).

Run: python examples/session_bootstrap.py
"""

from __future__ import annotations

from collections.abc import Collection

from rx_agent import (
    AgentState,
    ExtensionPoint,
    MiddlewareBase,
    Msg,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
)
from rx_agent.middleware import Agent

PROFILES = {"alice": "Alice prefers metric units and short answers."}


def load_user_profile_prompt(user_id: str | None) -> Msg:
    profile = PROFILES.get(user_id or "", "No profile on file.")
    return Msg(role="user", content=f"[user profile] {profile}", name="profile")


# --8<-- [start:middleware]
class SessionBootstrapMiddleware(MiddlewareBase):
    """Prepends a profile prompt on a brand-new session."""

    def active_points(self) -> Collection[ExtensionPoint]:
        return {ExtensionPoint.ON_AGENT_STATE_READY}

    def on_agent_state_ready(
        self, agent: Agent, ctx: RuntimeContext, state: AgentState, input_messages: list[Msg]
    ) -> None:
        if not state.context:  # cold start: brand-new session
            input_messages.insert(0, load_user_profile_prompt(ctx.user_id))
# --8<-- [end:middleware]


def main() -> None:
    model = ScriptedModel(["It is 24 C.", "About 75 F... sorry: 24 C."])
    agent = ReActAgent(name="assistant", model=model, middlewares=[SessionBootstrapMiddleware()])
    ctx = RuntimeContext(session_id="alice-1", user_id="alice")

    for question in ("How warm is it?", "And in Fahrenheit?"):
        agent.call_sync(question, ctx)

    for i, call in enumerate(model.calls, 1):
        print(f"model call {i} saw:")
        for msg in call.messages:
            print(f"  {msg.role.value}: {msg.text}")
    assert ctx.agent_state is not None
    profiles = [m for m in ctx.agent_state.context if m.name == "profile"]
    print(f"profile messages in the session: {len(profiles)}")


if __name__ == "__main__":
    main()
