"""``rx-agent chat``'s model (``--provider openai|anthropic``, or ``--offline``) and its
MCP servers (``--mcp "stdio:CMD ARGS"`` / ``--mcp http://...``), and ``/tools``."""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._base import DEFAULT_OPENAI_MODEL, EXIT_FAILURE, CLIError, one_line

if TYPE_CHECKING:
    from rich.console import Console

    from ..agent import ReActAgent
    from ..model import ChatModel

__all__ = ["DEFAULT_ANTHROPIC_MODEL", "PROVIDERS", "Provider", "chat_model", "close_sources",
           "mcp_sources", "show_tools"]

@dataclass(frozen=True, slots=True)
class Provider:
    """One ``--provider``: where its adapter lives and how the options and the
    environment name its endpoint. A new model provider is its adapter module (see
    ``rx_agent/model/_http_model.py``) and one row of :data:`_TABLE`."""

    module: str  # the adapter's module, imported only when the provider is picked
    cls: str  # the adapter class: ``cls(name, base_url=..., api_key=...)``
    env: str  # ``{env}_BASE_URL`` and ``{env}_API_KEY``
    default_model: str
    label: str  # after "NAME at URL" in the banner: "", or " (Anthropic)"
    missing: str  # the error when neither a URL nor a key is configured
    # A base URL of its own needs --model: another server's model names are not ours.
    model_for_base_url: bool = False


_TABLE: dict[str, Provider] = {
    "openai": Provider(
        "rx_agent.model.openai", "OpenAIChatModel", "OPENAI", DEFAULT_OPENAI_MODEL, "",
        "no model endpoint configured: set OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL "
        "(and RX_AGENT_MODEL) for another OpenAI-compatible server, or pass "
        "--base-url/--api-key/--model; `--provider anthropic` talks to Anthropic; "
        "`rx-agent chat --offline` uses the scripted demo model instead",
        model_for_base_url=True,
    ),
    "anthropic": Provider(
        "rx_agent.model.anthropic", "AnthropicChatModel", "ANTHROPIC", "claude-sonnet-4-5",
        " (Anthropic)",
        "no Anthropic endpoint configured: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL), "
        "or pass --api-key/--base-url",
    ),
}
PROVIDERS = tuple(_TABLE)
DEFAULT_ANTHROPIC_MODEL = _TABLE["anthropic"].default_model


def chat_model(args: argparse.Namespace) -> tuple[ChatModel, str]:
    """The model to chat with and a line describing it."""
    if args.offline:
        from .._demo import DEFAULT_DELAY
        from ._offline import OfflineChatModel

        delay = DEFAULT_DELAY if args.delay is None else args.delay
        return OfflineChatModel(delay), "the scripted demo model (offline)"
    return _open(_TABLE[getattr(args, "provider", "openai")], args)


def _open(provider: Provider, args: argparse.Namespace) -> tuple[ChatModel, str]:
    base_url = args.base_url or os.environ.get(f"{provider.env}_BASE_URL") or None
    api_key = args.api_key or os.environ.get(f"{provider.env}_API_KEY") or None
    if base_url is None and api_key is None:
        raise CLIError(provider.missing)
    name = args.model or os.environ.get("RX_AGENT_MODEL") or None
    if name is None:
        if base_url is not None and provider.model_for_base_url:
            raise CLIError(
                f"no model name for {base_url}: pass --model NAME or set RX_AGENT_MODEL"
            )
        name = provider.default_model
    factory = getattr(_import(provider.module), provider.cls)
    try:
        model = factory(name, base_url=base_url, api_key=api_key)
    except (TypeError, ValueError) as exc:
        raise CLIError(one_line(exc)) from exc
    return model, f"{name} at {model.base_url}{provider.label}"


def _import(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise CLIError(f"the chat command needs httpx ({one_line(exc)}): pip install httpx",
                       EXIT_FAILURE) from exc


# -- MCP -------------------------------------------------------------------------------


def mcp_sources(specs: list[str] | None) -> list[Any]:
    """One :class:`~rx_agent.McpToolSource` per ``--mcp`` (nothing starts yet)."""
    if not specs:
        return []
    try:
        from ..tool import _mcp_connection  # noqa: F401  (the SDK, or the extra to install)
        from ..tool.mcp import McpToolSource
    except ImportError as exc:
        raise CLIError(f"--mcp needs the MCP SDK: pip install -e '.[mcp]' (from a checkout) "
                       f"({one_line(exc)})", EXIT_FAILURE) from exc
    sources = []
    for spec in specs:
        if spec.startswith(("http://", "https://")):
            sources.append(McpToolSource.http(spec, name=spec))
            continue
        if not spec.startswith("stdio:"):
            raise CLIError(f"--mcp {spec!r}: use \"stdio:COMMAND ARGS...\" or an http(s) URL")
        try:
            words = shlex.split(spec.removeprefix("stdio:"))
        except ValueError as exc:
            raise CLIError(f"--mcp {spec!r}: {one_line(exc)}") from exc
        if not words:
            raise CLIError(f"--mcp {spec!r}: no command after 'stdio:'")
        sources.append(McpToolSource.stdio(words[0], words[1:], name=" ".join(words)))
    return sources


def close_sources(sources: list[Any]) -> None:
    for source in sources:
        source.close()


def show_tools(agent: ReActAgent, console: Console) -> None:
    """``/tools``: every tool the model is offered (MCP servers are listed first)."""
    toolkit = agent.toolkit
    if toolkit.has_sources:
        try:
            asyncio.run(toolkit.refresh())
        except Exception as exc:
            console.print(f"cannot list the MCP tools: {one_line(exc)}", style="red",
                          markup=False, soft_wrap=True)
    from rich.table import Table

    table = Table("tool", "from", "description", box=None, pad_edge=False)
    for tool in toolkit:
        table.add_row(tool.name, tool.source, (tool.description or "").split("\n")[0])
    console.print(table)
