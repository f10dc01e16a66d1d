// The rx_agent web console: plain JS, no build step, no CDN. Everything user- or
// model-supplied is written with textContent (never innerHTML).
"use strict";

const $ = (id) => document.getElementById(id);
const state = { session: null, running: null, runStart: 0 };

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

// -- the token: from #token=... (then dropped from the address bar) or typed ------------
(function takeToken() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    sessionStorage.setItem("rx-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  $("token").value = sessionStorage.getItem("rx-token") || "";
  $("token").addEventListener("change", () => {
    sessionStorage.setItem("rx-token", $("token").value.trim());
    refresh();
  });
})();

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const token = sessionStorage.getItem("rx-token");
  if (token) h["Authorization"] = "Bearer " + token;
  return h;
}

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = headers(opts.headers);
  const resp = await fetch(path, opts);
  if (!resp.ok) {
    let message = resp.status + " " + resp.statusText;
    try { message = (await resp.json()).error.message; } catch (e) { /* not JSON */ }
    throw new Error(message);
  }
  return resp.status === 204 ? null : resp.json();
}

function setStatus(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "muted";
}

// -- the plan ----------------------------------------------------------------------------
async function loadPlan() {
  const plan = await api("/v1/plan");
  $("agent-name").textContent = plan.agent + " · " + plan.model;
  $("plan-mermaid").textContent = plan.mermaid;
  const box = $("plan-diagram");
  box.replaceChildren();
  for (const point of plan.points) {
    const row = el("div", "plan-point");
    row.dataset.point = point.point;
    row.append(el("span", "name", point.point));
    for (const p of point.participants) {
      row.append(el("span", "plan-node", p.label + " (" + p.order + ")"));
      row.append(el("span", "plan-arrow", " → "));
    }
    if (point.kind === "onion") row.append(el("span", "plan-node core", "core"));
    else if (!point.participants.length) row.append(el("span", "muted", "–"));
    box.append(row);
  }
}

// -- sessions ----------------------------------------------------------------------------
async function loadSessions() {
  const data = await api("/v1/sessions");
  const list = $("sessions");
  list.replaceChildren();
  for (const id of data.sessions) {
    const li = el("li", id === state.session ? "active" : "", id);
    li.addEventListener("click", () => openSession(id));
    list.append(li);
  }
}

async function openSession(id) {
  state.session = id;
  $("current-session").textContent = id;
  $("messages").replaceChildren();
  $("pause").replaceChildren();
  try {
    const s = await api("/v1/sessions/" + encodeURIComponent(id));
    for (const m of s.messages) showMessage(m);
    if (s.pending) showPause(s.pending.kind, s.pending.reply_id, s.pending.tool_calls);
  } catch (e) { /* a new session: nothing stored yet */ }
  loadSessions().catch(() => {});
}

function showMessage(msg) {
  const box = el("div", "msg " + msg.role);
  box.append(el("span", "role", msg.role));
  const blocks = typeof msg.content === "string" ? [{ type: "text", text: msg.content }] : msg.content;
  for (const b of blocks) {
    if (b.type === "text") box.append(el("span", "text", b.text));
    else if (b.type === "thinking") box.append(el("div", "thinking", b.thinking));
    else if (b.type === "tool_use") box.append(el("div", "tool call", "→ " + b.name + " " + JSON.stringify(b.input)));
    else if (b.type === "tool_result") box.append(el("div", "tool result " + (b.state || ""), "← " + b.name + ": " + resultText(b.output)));
  }
  $("messages").append(box);
  box.scrollIntoView({ block: "end" });
  return box;
}

function resultText(output) {
  if (typeof output === "string") return output;
  return (output || []).map((b) => b.text || JSON.stringify(b)).join("");
}

// -- one streamed call -------------------------------------------------------------------
class Reply {
  constructor() {
    this.box = el("div", "msg assistant");
    this.box.dataset.live = "true";
    this.box.append(el("span", "role", "assistant"));
    this.blocks = {};
    this.tools = {};
    $("messages").append(this.box);
  }
  block(id, cls) {
    if (!this.blocks[id]) {
      this.blocks[id] = el(cls === "text" ? "span" : "div", cls);
      this.box.append(this.blocks[id]);
    }
    return this.blocks[id];
  }
  tool(id, cls, prefix) {
    const key = cls + id;
    if (!this.tools[key]) {
      this.tools[key] = el("div", "tool " + cls, prefix);
      this.box.append(this.tools[key]);
    }
    return this.tools[key];
  }
  event(e) {
    switch (e.type) {
      case "text_block_delta": this.block(e.reply_id + e.block_id, "text").textContent += e.delta; break;
      case "thinking_block_delta": this.block(e.reply_id + e.block_id, "thinking").textContent += e.delta; break;
      case "tool_call_start": this.tool(e.tool_call_id, "call", "→ " + e.tool_call_name + " "); break;
      case "tool_call_delta": this.tool(e.tool_call_id, "call", "").textContent += e.delta || ""; break;
      case "tool_result_start": this.tool(e.tool_call_id, "result", "← " + e.tool_call_name + ": "); break;
      case "tool_result_text_delta": this.tool(e.tool_call_id, "result", "").textContent += e.delta; break;
      case "tool_result_end": this.tool(e.tool_call_id, "result", "").classList.add(e.state); break;
      case "require_user_confirm": showPause("confirm", e.reply_id, e.tool_calls); break;
      case "require_external_execution": showPause("external", e.reply_id, e.tool_calls); break;
      case "agent_result": this.box.dataset.live = "false"; this.box.dataset.reason = e.result.generate_reason || ""; break;
      default: break;
    }
    this.box.scrollIntoView({ block: "end" });
  }
}

function timeline(type, detail) {
  const li = el("li");
  const ms = Math.round(performance.now() - state.runStart);
  li.append(el("span", "t", "+" + ms + " ms"), el("span", "", type + (detail ? " " + detail : "")));
  $("timeline").append(li);
}

// Server-Sent Events over fetch: a POST with a body and a bearer header, which
// EventSource cannot send. Frames end with a blank line.
async function streamCall(path, body) {
  $("timeline").replaceChildren();
  $("spans").replaceChildren(el("p", "muted", "after the call ends"));
  state.runStart = performance.now();
  const resp = await fetch(path, {
    method: "POST", body: JSON.stringify(body),
    headers: headers({ "Content-Type": "application/json", "Accept": "text/event-stream" }),
  });
  if (!resp.ok) {
    let message = resp.status + "";
    try { message = (await resp.json()).error.message; } catch (e) { /* not JSON */ }
    throw new Error(message);
  }
  const runId = resp.headers.get("X-Run-Id");
  state.running = runId;
  $("run-id").textContent = runId;
  const reply = new Reply();
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message", data = "";
      for (const line of frame.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (!data) continue;
      const payload = JSON.parse(data);
      if (name === "error") {
        reply.box.append(el("div", "error", payload.error.message));
        timeline("error", payload.error.code);
        continue;
      }
      timeline(name, payload.tool_call_name || payload.block_id || "");
      reply.event(payload);
    }
  }
  state.running = null;
  loadSpans(runId).catch(() => {});
  loadSessions().catch(() => {});
}

async function loadSpans(runId) {
  const run = await api("/v1/sessions/" + encodeURIComponent(state.session) + "/runs/" + runId + "?after=999999999");
  const box = $("spans");
  box.replaceChildren();
  if (run.spans === null || !run.spans.length) {
    box.append(el("p", "muted", "no spans: add OtelTracingMiddleware to the agent (with the OpenTelemetry SDK installed)"));
    return;
  }
  const t0 = Math.min(...run.spans.map((s) => s.start));
  const t1 = Math.max(...run.spans.map((s) => s.end || s.start));
  const width = Math.max(t1 - t0, 1e-6);
  const parents = {};
  for (const s of run.spans) parents[s.span_id] = s.parent_id;
  const depth = (id) => { let d = 0; while (parents[id] && d < 10) { id = parents[id]; d++; } return d; };
  for (const s of run.spans) {
    const row = el("div", "span-row");
    row.dataset.depth = depth(s.span_id);
    const label = el("span", "", s.name + " " + Math.round(((s.end || s.start) - s.start) * 1000) + " ms");
    label.style.paddingLeft = (0.8 * depth(s.span_id)) + "rem";
    const track = el("div", "span-track");
    const bar = el("div", "span-bar " + s.status);
    bar.style.position = "absolute";
    bar.style.left = (100 * (s.start - t0) / width) + "%";
    bar.style.width = Math.max(0.5, 100 * ((s.end || s.start) - s.start) / width) + "%";
    bar.title = JSON.stringify(s.attributes);
    track.append(bar);
    row.append(label, track);
    box.append(row);
  }
}

// -- human in the loop -------------------------------------------------------------------
function showPause(kind, replyId, calls) {
  const pane = $("pause");
  pane.replaceChildren();
  const box = el("div", "ask");
  box.append(el("strong", "", kind === "confirm" ? "The agent asks before running:" : "Waiting for external results:"));
  const inputs = [];
  for (const call of calls) {
    const row = el("div", "tool", call.name + " " + JSON.stringify(call.input) + " ");
    if (kind === "confirm") {
      const box2 = el("input"); box2.type = "checkbox"; box2.checked = true;
      row.append(box2, el("span", "", " allow"));
      inputs.push([call, box2]);
    } else {
      const text = el("input"); text.placeholder = "result";
      row.append(text);
      inputs.push([call, text]);
    }
    box.append(row);
  }
  const go = el("button", "", kind === "confirm" ? "Answer" : "Send results");
  go.addEventListener("click", () => {
    pane.replaceChildren();
    const path = "/v1/sessions/" + encodeURIComponent(state.session) + (kind === "confirm" ? "/confirm" : "/external-results");
    const body = kind === "confirm"
      ? { reply_id: replyId, confirm_results: inputs.map(([c, i]) => ({ tool_call: c, confirmed: i.checked, reason: i.checked ? null : "denied in the console" })) }
      : { reply_id: replyId, tool_results: inputs.map(([c, i]) => ({ type: "tool_result", id: c.id, name: c.name, output: i.value })) };
    run(() => streamCall(path, body));
  });
  box.append(go);
  pane.append(box);
}

// -- wiring ------------------------------------------------------------------------------
async function run(work) {
  $("send-button").disabled = true;
  $("stop-button").disabled = false;
  setStatus("running…");
  try {
    await work();
    setStatus("");
  } catch (e) {
    setStatus(e.message, true);
  } finally {
    $("send-button").disabled = false;
    $("stop-button").disabled = true;
  }
}

$("send").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("input").value.trim();
  if (!text || !state.session) return;
  $("input").value = "";
  showMessage({ role: "user", content: text });
  run(() => streamCall("/v1/sessions/" + encodeURIComponent(state.session) + "/messages", { message: text }));
});
$("input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("send").requestSubmit(); }
});
$("stop-button").addEventListener("click", () => {
  api("/v1/sessions/" + encodeURIComponent(state.session) + "/interrupt", { method: "POST" }).catch((e) => setStatus(e.message, true));
});
$("new-session").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const id = $("session-id").value.trim();
  if (id) openSession(id);
});

async function refresh() {
  try {
    await loadPlan();
    await openSession($("session-id").value.trim() || "console");
    setStatus("");
  } catch (e) {
    setStatus(e.message, true);
  }
}
refresh();
