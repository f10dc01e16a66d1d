"""What building one model request costs as the conversation and the toolkit grow.

    python benchmarks/bench_request_growth.py            # full sizes, targets checked
    python benchmarks/bench_request_growth.py --smoke    # tiny sizes (tests keep it alive)

Three measurements, each printed with its "rebuilt every call" twin measured in the
same run, the two taking turns sample by sample:

1. request building (``OpenAIChatModel`` and ``AnthropicChatModel``, no network): the
   bytes a call sends, on a conversation of 200 and 2,000 messages (a turn: a
   question, an assistant message with a tool call, its result, the answer; 200
   characters each), two new messages per request as in a real call. *kept*: from
   the JSON of each message the model keeps (``model/_wire_cache.py``); *rebuilt*:
   ``request_body`` encoded, every message afresh (what every call did before);
2. the scripted model's usage estimate at turn 10 and turn 1,000 (the prompt's text
   length): *kept* per message, against summing every message's text again;
3. CPU per agent call (a model that answers without reading anything, so the
   figures are the runtime's) with 10, 100 and 500 tools: *kept*, the toolkit's
   schema view reused; *rebuilt*, the view invalidated before each call (what every
   call did before). The same with the OpenAI adapter's request bytes for 500 tools.

Medians of CPU time (``time.process_time``). Targets (not in ``--smoke``): a call
with 500 tools at most 1.2x a call with 10.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_session_growth import FixedModel

from rx_agent import Msg, ReActAgent, ScriptedModel, Toolkit
from rx_agent.message import TextBlock, ToolResultBlock, ToolUseBlock
from rx_agent.model.anthropic import AnthropicChatModel
from rx_agent.model.openai import OpenAIChatModel

TEXT = 200
TOOLS_TARGET = 1.2


def text(label: str, i: int) -> str:
    head = f"{label} {i}: "
    return head + "x" * (TEXT - len(head))


def conversation(n: int) -> list[Msg]:
    """A system prompt and ``n - 1`` messages of tool-using turns."""
    out = [Msg("system", "You are a helpful assistant.")]
    i = 0
    while len(out) < n:
        out.append(Msg("user", text("question", i)))
        out.append(Msg("assistant", [TextBlock(text=text("looking", i)),
                                     ToolUseBlock(id=f"c{i}", name="search",
                                                  input={"query": text("q", i), "limit": 5})]))
        out.append(Msg("tool", [ToolResultBlock(id=f"c{i}", name="search",
                                                output=text("result", i))]))
        out.append(Msg("assistant", text("answer", i)))
        i += 1
    return out[:n]


def cpu(fn: Callable[[], object]) -> float:
    c0 = time.process_time()
    fn()
    return time.process_time() - c0


def median_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1e3


def rebuilt_payload(model: Any) -> Callable[[Sequence[Msg], Sequence[Any]], bytes]:
    """The bytes of a request encoded afresh: what every call did before."""
    return lambda msgs, tools: json.dumps(model.request_body(msgs, tools),
                                          ensure_ascii=False).encode()


def sent_payload(model: Any) -> Callable[[Sequence[Msg], Sequence[Any]], bytes]:
    """The bytes one call of ``model`` sends (from what it keeps, where it does)."""
    call_payload = getattr(model, "_call_payload", None)
    if call_payload is None:  # a tree without the cache: every call encodes afresh
        return rebuilt_payload(model)
    return lambda msgs, tools: call_payload(msgs, tools, None)


def request_building(sizes: Sequence[int], samples: int
                     ) -> dict[str, dict[int, tuple[float, float]]]:
    """Per adapter and size: (rebuilt ms, kept ms) per request."""
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for name, model in (("OpenAI", OpenAIChatModel("m", base_url="http://127.0.0.1:9")),
                        ("Anthropic", AnthropicChatModel("m", base_url="http://127.0.0.1:9"))):
        send, rebuild = sent_payload(model), rebuilt_payload(model)
        out[name] = {}
        for n in sizes:
            base = conversation(n - 2)
            send(base, ())  # the calls before this one: the conversation so far
            rebuilt: list[float] = []
            kept: list[float] = []
            for i in range(samples):
                # Two new messages per call (the answer before it, the new question).
                msgs = [*base, Msg("assistant", text("ok", i)), Msg("user", text("more", i))]
                rebuilt.append(cpu(lambda msgs=msgs, rebuild=rebuild: rebuild(msgs, ())))
                kept.append(cpu(lambda msgs=msgs, send=send: send(msgs, ())))
            out[name][n] = (median_ms(rebuilt), median_ms(kept))
    return out


def usage_estimate(turns: Sequence[int], samples: int) -> dict[int, tuple[float, float]]:
    """Per length in turns: (rebuilt ms, kept ms) of the scripted model's estimate."""
    out = {}
    for t in turns:
        model = ScriptedModel([])
        msgs: list[Msg] = []
        for i in range(t):
            msgs += [Msg("user", text("question", i)), Msg("assistant", text("answer", i))]
        list(model._chunks(msgs, ["ok"]))  # the turns before
        rebuilt: list[float] = []
        kept: list[float] = []
        for i in range(samples):
            current = [*msgs, Msg("user", text("more", i))]
            rebuilt.append(cpu(lambda current=current: sum(
                len(m.text) + len(m.thinking) for m in current)))
            kept.append(cpu(lambda current=current, model=model: list(
                model._chunks(current, ["ok"]))))
        out[t] = (median_ms(rebuilt), median_ms(kept))
    return out


def echo(value: int) -> str:
    """Echo a number."""
    return str(value)


def toolkit(n: int) -> Toolkit:
    kit = Toolkit()
    for i in range(n):
        kit.register_tool(echo, name=f"tool_{i}", description=f"Echo a number ({i}).")
    return kit


def _invalidate() -> Callable[[], None]:
    """What makes the next call rebuild its schemas (nothing to do where every call
    does already)."""
    try:
        from rx_agent.tool._views import schema_edited
    except ImportError:
        return lambda: None
    return schema_edited


async def tool_calls(counts: Sequence[int], calls: int, rounds: int
                     ) -> dict[int, tuple[float, float]]:
    """Per toolkit size: (rebuilt µs, kept µs) of CPU per agent call."""
    invalidate = _invalidate()
    agents = {n: ReActAgent(name="bench", model=FixedModel(text("answer", 0)),
                            toolkit=toolkit(n)) for n in counts}
    for agent in agents.values():
        await agent.acall("warm up")
    gc.collect()
    rebuilt: dict[int, list[float]] = {n: [] for n in counts}
    kept: dict[int, list[float]] = {n: [] for n in counts}
    for _ in range(rounds):  # the sizes and the two ways take turns in blocks
        for n, agent in agents.items():
            for i in range(calls):
                c0 = time.process_time()
                await agent.acall(text("question", i))
                kept[n].append(time.process_time() - c0)
            for i in range(calls):
                invalidate()
                c0 = time.process_time()
                await agent.acall(text("question", i))
                rebuilt[n].append(time.process_time() - c0)
    for agent in agents.values():
        await agent.aclose()
    return {n: (statistics.median(rebuilt[n]) * 1e6, statistics.median(kept[n]) * 1e6)
            for n in counts}


def tools_body(n: int, samples: int) -> tuple[float, float]:
    """(rebuilt µs, kept µs): the OpenAI body's tools for ``n`` tools, one message."""
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9")
    kit = toolkit(n)
    view = getattr(kit, "schema_view", None)
    schemas = tuple(view() if view is not None else kit.schemas())
    msgs = [Msg("user", "hi")]
    send, rebuild = sent_payload(model), rebuilt_payload(model)
    send(msgs, schemas)
    rebuilt = [cpu(lambda: rebuild(msgs, schemas)) for _ in range(samples)]
    kept = [cpu(lambda: send(msgs, schemas)) for _ in range(samples)]
    return statistics.median(rebuilt) * 1e6, statistics.median(kept) * 1e6


def ratio(a: float, b: float) -> str:
    return f"{a / b:5.2f}x" if b > 0 else "   inf"


async def run(smoke: bool, samples: int | None = None
              ) -> tuple[list[tuple[str, str, str]], bool]:
    """Measure and print; the summary rows (what, value, target) and whether a target
    was missed (``benchmarks/run.py`` runs it as one of its sections)."""
    sizes = (20, 200) if smoke else (200, 2_000)
    turns = (5, 50) if smoke else (10, 1_000)
    counts = (10, 50) if smoke else (10, 100, 500)
    n = samples or (3 if smoke else 30)
    rows: list[tuple[str, str, str]] = []
    failed = False

    print(f"\n[request building] ms per request (median of {n}), rebuilt every call "
          "vs wire forms kept, by conversation length")
    built = request_building(sizes, n)
    small, big = sizes
    for name, r in built.items():
        cells = "   ".join(f"{s:>5,}: {r[s][0]:6.3f} / {r[s][1]:6.3f}" for s in sizes)
        print(f"  {name:<9} {cells}   rebuilt {big:,}/{small:,} "
              f"{ratio(r[big][0], r[small][0])}   kept {big:,}/{small:,} "
              f"{ratio(r[big][1], r[small][1])}   rebuilt/kept at {big:,} "
              f"{ratio(r[big][0], r[big][1])}")
        rows.append((f"{name} request at {big:,} messages: rebuilt -> kept (ms)",
                     f"{r[big][0]:.2f} -> {r[big][1]:.2f}", ""))
        rows.append((f"{name} request {big:,}/{small:,} messages, kept",
                     ratio(r[big][1], r[small][1]).strip(), ""))

    print(f"\n[usage estimate] the scripted model's prompt length, ms per call (median of "
          f"{n}), rebuilt vs kept")
    usage = usage_estimate(turns, n)
    t0, t1 = turns
    cells = "   ".join(f"turn {t:>5,}: {usage[t][0]:6.3f} / {usage[t][1]:6.3f}" for t in turns)
    print(f"  scripted  {cells}   rebuilt {t1:,}/{t0:,} {ratio(usage[t1][0], usage[t0][0])}"
          f"   kept {t1:,}/{t0:,} {ratio(usage[t1][1], usage[t0][1])}")
    rows.append((f"usage estimate at turn {t1:,}: rebuilt -> kept (ms)",
                 f"{usage[t1][0]:.2f} -> {usage[t1][1]:.2f}", ""))

    calls = 3 if smoke else 40
    print(f"\n[tools] CPU per agent call (us, median of {calls * (1 if smoke else 5)}), "
          "schemas rebuilt every call vs kept, by toolkit size")
    per_call = await tool_calls(counts, calls, 1 if smoke else 5)
    base = counts[0]
    cells = "   ".join(f"{c:>3} tools: {per_call[c][0]:6.1f} / {per_call[c][1]:6.1f}"
                       for c in counts)
    top = counts[-1]
    over = per_call[top][1] / per_call[base][1]
    verdict = ""
    if not smoke and over > TOOLS_TARGET:
        failed = True
        verdict = " OVER"
    print(f"  agent     {cells}")
    print(f"  {top}/{base} tools: rebuilt {ratio(per_call[top][0], per_call[base][0])}   "
          f"kept {ratio(per_call[top][1], per_call[base][1])}{verdict}   (target kept <= "
          f"{TOOLS_TARGET}x)")
    rows.append((f"CPU per call, {top} tools: rebuilt -> kept (us)",
                 f"{per_call[top][0]:.0f} -> {per_call[top][1]:.0f}", ""))
    rows.append((f"CPU per call, {top}/{base} tools, kept", f"{over:.2f}x",
                 f"<= {TOOLS_TARGET}x"))
    body = tools_body(top, n)
    print(f"  OpenAI body with {top} tools (us): rebuilt {body[0]:.1f}   kept {body[1]:.1f}   "
          f"rebuilt/kept {ratio(body[0], body[1])}")
    rows.append((f"OpenAI body, {top} tools: rebuilt -> kept (us)",
                 f"{body[0]:.0f} -> {body[1]:.0f}", ""))
    return rows, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, no targets")
    parser.add_argument("--samples", type=int, help="samples per figure")
    args = parser.parse_args(argv)
    gc.collect()
    gc.freeze()  # the setup's objects never land in a timed sample's collection
    rows, failed = asyncio.run(run(args.smoke, args.samples))
    print("\nSummary")
    for what, value, target in rows:
        print(f"  {what:<58} {value:>16}  {target}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
