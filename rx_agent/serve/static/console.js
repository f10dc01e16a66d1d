// The rx_agent web console: plain JS, no build step, no CDN. Everything user- or
// model-supplied is written with textContent (never innerHTML).
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
// busy: a call of this page is running (one at a time: Send waits, Stop works).
// known: the session ids the store has (a new one is not asked for: it would be a 404);
// null when the store cannot list its sessions.
const state = { session: null, busy: false, runStart: 0, known: new Set() };

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

// -- the token: from #token=... (at load or any time later; then dropped from the ---------
// -- address bar) or typed ------------------------------------------------------------------
function takeToken() {
  const m = location.hash.match(/token=([^&]+)/);
  if (!m) return false;
  let token = m[1];
  try { token = decodeURIComponent(token); } catch (e) { /* not %-encoded: as it is */ }
  sessionStorage.setItem("rx-token", token);
  history.replaceState(null, "", location.pathname + location.search);
  $("token").value = token;
  return true;
}
takeToken();
$("token").value = sessionStorage.getItem("rx-token") || "";
$("token").addEventListener("change", () => {
  sessionStorage.setItem("rx-token", $("token").value.trim());
  refresh();
});
window.addEventListener("hashchange", () => { if (takeToken()) refresh(); });

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const token = sessionStorage.getItem("rx-token");
  if (token) h["Authorization"] = "Bearer " + token;
  return h;
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// The server's error as a sentence for the person at the console (the server's own
// messages speak to API clients: headers, Retry-After).
async function failure(resp) {
  let code = "", message = resp.status + " " + resp.statusText;
  try {
    const error = (await resp.json()).error;
    code = error.code;
    message = error.message;
  } catch (e) { /* not JSON */ }
  if (resp.status === 401) {
    $("token").classList.add("wanted");
    message = sessionStorage.getItem("rx-token")
      ? "the token is not valid: enter another above" : "enter a token above";
  } else if (code === "session_busy") {
    message = "session " + state.session + " is running a call (from another tab or "
      + "client): nothing was sent; try again when that call ends";
  }
  return new ApiError(resp.status, code, message);
}

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = headers(opts.headers);
  const resp = await fetch(path, opts);
  if (!resp.ok) throw await failure(resp);
  return resp.status === 204 ? null : resp.json();
}

const sessionPath = (tail) => "/v1/sessions/" + encodeURIComponent(state.session) + (tail || "");

function setStatus(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "muted";
}

// -- the plan ----------------------------------------------------------------------------
async function loadPlan() {
  const plan = await api("/v1/plan");
  $("token").classList.remove("wanted");
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
  let data;
  try {
    data = await api("/v1/sessions");
  } catch (e) {
    if (e.code !== "not_supported") throw e;
    state.known = null;  // a store without list_sessions(): ask for each session
    return;
  }
  state.known = new Set(data.sessions);
  const list = $("sessions");
  list.replaceChildren();
  for (const id of data.sessions) {
    const li = el("li", id === state.session ? "active" : "", id);
    li.addEventListener("click", () => openSession(id));
    list.append(li);
  }
}

async function openSession(id) {
  if (state.busy) {
    setStatus("a call is running: Stop it or wait before you open another session");
    return;
  }
  state.session = id;
  $("current-session").textContent = id;
  $("messages").replaceChildren();
  $("pause").replaceChildren();
  $("timeline").replaceChildren();
  $("run-id").textContent = "";
  $("spans").replaceChildren(el("p", "muted", "after a call ends"));
  showRuns([]);
  await loadSessions();
  // A session nobody posted to is not stored yet: nothing to show, and asking for it
  // would only get the API's 404 for an unknown session.
  if (!isStored(id)) return;
  const s = await storedSession();
  if (s === null) return;
  if (state.session !== id || state.busy) return;  // the person moved on meanwhile
  for (const m of s.messages) showMessage(m);
  if (s.pending) showPause(s.pending.kind, s.pending.reply_id, s.pending.tool_calls);
  showRuns(s.runs);
}

const isStored = (id) => state.known === null || state.known.has(id);

// GET /v1/sessions/{id}; null when it is not stored (only asked when the list is unknown).
async function storedSession() {
  try {
    return await api(sessionPath());
  } catch (e) {
    if (e.code === "no_session" && state.known === null) return null;
    throw e;
  }
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

function timeline(ms, type, detail) {
  const li = el("li");
  li.append(el("span", "t", "+" + Math.round(ms) + " ms"), el("span", "", type + (detail ? " " + detail : "")));
  $("timeline").append(li);
}

function startTimeline(runId) {
  $("timeline").replaceChildren();
  $("run-id").textContent = runId;
  for (const row of $("runs").querySelectorAll("tbody tr")) row.classList.toggle("active", row.dataset.run === runId);
}

// Server-Sent Events over fetch: a POST with a body and a bearer header, which
// EventSource cannot send. Frames end with a blank line. `accepted` is called once the
// server took the call (before it, a failure means nothing was sent).
async function streamCall(path, body, accepted) {
  state.runStart = performance.now();
  const resp = await fetch(path, {
    method: "POST", body: JSON.stringify(body),
    headers: headers({ "Content-Type": "application/json", "Accept": "text/event-stream" }),
  });
  if (!resp.ok) throw await failure(resp);
  if (accepted) accepted();
  const runId = resp.headers.get("X-Run-Id");
  startTimeline(runId);
  $("spans").replaceChildren(el("p", "muted", "after the call ends"));
  const reply = new Reply();
  try {
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
        const ms = performance.now() - state.runStart;
        if (name === "error") {
          reply.box.append(el("div", "error", payload.error.message));
          timeline(ms, "error", payload.error.code);
          continue;
        }
        timeline(ms, name, payload.tool_call_name || payload.block_id || "");
        reply.event(payload);
      }
    }
  } finally {
    loadSpans(runId).catch(() => {});
    loadRuns().catch(() => {});
  }
}

async function loadSpans(runId) {
  const run = await api(sessionPath("/runs/" + runId + "?after=999999999"));
  showSpans(run.spans);
}

function showSpans(spans) {
  const box = $("spans");
  box.replaceChildren();
  if (spans === null || !spans.length) {
    box.append(el("p", "muted", "no spans: add OtelTracingMiddleware to the agent (with the OpenTelemetry SDK installed)"));
    return;
  }
  const t0 = Math.min(...spans.map((s) => s.start));
  const t1 = Math.max(...spans.map((s) => s.end || s.start));
  const width = Math.max(t1 - t0, 1e-6);
  const parents = {};
  for (const s of spans) parents[s.span_id] = s.parent_id;
  const depth = (id) => { let d = 0; while (parents[id] && d < 10) { id = parents[id]; d++; } return d; };
  for (const s of spans) {
    const row = el("div", "span-row");
    row.dataset.depth = depth(s.span_id);
    const label = el("span", "", s.name + " " + Math.round(((s.end || s.start) - s.start) * 1000) + " ms");
    label.style.paddingLeft = (0.8 * depth(s.span_id)) + "rem";
    label.title = label.textContent;
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

// -- the runs of the session: duration, tokens and tool calls side by side ----------------
async function loadRuns() {
  const id = state.session;
  await loadSessions();
  if (!isStored(id)) return;
  const s = await storedSession();
  if (s !== null && state.session === id) showRuns(s.runs);
}

// A cell with its figure and, for `bars`, a bar of [value, scale, class] parts laid end
// to end on a track of 100 units (the largest figure of the column fills it).
function figure(name, text, bars) {
  const td = el("td", "figure");
  td.dataset.figure = name;
  td.append(el("span", "", text));
  if (bars) {
    const chart = svg("svg", { viewBox: "0 0 100 6", preserveAspectRatio: "none", "aria-hidden": "true" });
    chart.append(svg("rect", { class: "track", x: 0, y: 0, width: 100, height: 6 }));
    let x = 0;
    for (const [value, scale, cls] of bars) {
      const w = scale > 0 ? 100 * value / scale : 0;
      chart.append(svg("rect", { class: cls, x: x, y: 0, width: w, height: 6 }));
      x += w;
    }
    td.append(chart);
  }
  return td;
}

function showRuns(runs) {
  const body = $("runs").tBodies[0];
  body.replaceChildren();
  $("runs").hidden = !runs.length;
  $("runs-none").hidden = runs.length > 0;
  const longest = Math.max(0, ...runs.map((r) => r.duration || 0));
  const most = Math.max(0, ...runs.map((r) => r.tokens.input + r.tokens.output));
  runs.forEach((r, i) => {
    const row = el("tr", r.run_id === $("run-id").textContent ? "active" : "");
    row.dataset.run = r.run_id;
    row.title = "run " + r.run_id + (r.error ? " · " + r.error : "") + " · click for its timeline";
    const what = el("td", "run");
    what.append(el("span", "", r.kind), el("span", "status " + r.status, r.status));
    row.append(el("td", "", String(i + 1)), what);
    row.append(
      figure("duration", r.duration === null ? "running" : Math.round(r.duration * 1000) + " ms",
        [[r.duration || 0, longest, "bar"]]),
      figure("tokens", r.tokens.input + " / " + r.tokens.output,
        [[r.tokens.input, most, "bar in"], [r.tokens.output, most, "bar out"]]),
      figure("tool_calls", String(r.tool_calls)),
      figure("model_calls", String(r.model_calls)));
    row.addEventListener("click", () => showRun(r.run_id).catch((e) => setStatus(e.message, true)));
    body.append(row);
  });
}

// A past run's timeline and spans, from the events this worker kept.
async function showRun(runId) {
  const run = await api(sessionPath("/runs/" + runId));
  startTimeline(runId);
  for (const e of run.events_after) {
    timeline(1000 * (e.time - run.started), e.type, e.event.tool_call_name || e.event.block_id || "");
  }
  showSpans(run.spans);
}

// -- human in the loop -------------------------------------------------------------------
function showPause(kind, replyId, calls) {
  const pane = $("pause");
  pane.replaceChildren();
  const box = el("div", "ask");
  box.append(el("strong", "", kind === "confirm" ? "The agent asks before running (tick what you allow):" : "Waiting for external results:"));
  const inputs = [];
  for (const call of calls) {
    const row = el("div", "tool", call.name + " " + JSON.stringify(call.input) + " ");
    if (kind === "confirm") {
      // Unchecked: allowing a tool takes a deliberate click, Answer alone denies.
      const allow = el("label", "allow");
      const check = el("input"); check.type = "checkbox"; check.checked = false;
      allow.append(check, " allow");
      row.append(allow);
      inputs.push([call, check]);
    } else {
      const text = el("input"); text.placeholder = "result";
      row.append(text);
      inputs.push([call, text]);
    }
    box.append(row);
  }
  const go = el("button", "", kind === "confirm" ? "Answer" : "Send results");
  go.disabled = state.busy;  // the paused call's stream is still ending
  go.addEventListener("click", () => {
    const path = sessionPath(kind === "confirm" ? "/confirm" : "/external-results");
    const body = kind === "confirm"
      ? { reply_id: replyId, confirm_results: inputs.map(([c, i]) => ({ tool_call: c, confirmed: i.checked, reason: i.checked ? null : "denied in the console" })) }
      : { reply_id: replyId, tool_results: inputs.map(([c, i]) => ({ type: "tool_result", id: c.id, name: c.name, output: i.value })) };
    run(() => streamCall(path, body, () => { if (pane.contains(box)) pane.replaceChildren(); }));
  });
  box.append(go);
  pane.append(box);
}

// -- wiring ------------------------------------------------------------------------------
function setBusy(busy) {
  state.busy = busy;
  $("send-button").disabled = busy;
  $("stop-button").disabled = !busy;
  for (const button of $("pause").querySelectorAll("button")) button.disabled = busy;
}

async function run(work) {
  if (state.busy) return;
  setBusy(true);
  setStatus("running…");
  try {
    await work();
    setStatus("");
  } catch (e) {
    setStatus(e.message, true);
  } finally {
    setBusy(false);
  }
}

$("send").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("input").value.trim();
  if (!text || !state.session) return;
  if (state.busy) {  // Enter while a call runs: the text waits in the box
    setStatus("a call is running: your message waits here; Stop the call or send when it ends");
    return;
  }
  $("input").value = "";
  const sent = showMessage({ role: "user", content: text });
  let accepted = false;
  run(() => streamCall(sessionPath("/messages"), { message: text }, () => { accepted = true; })
    .catch((e) => {
      if (!accepted) {  // refused: it was not sent, so it is not in the chat
        sent.remove();
        if (!$("input").value) $("input").value = text;
      }
      throw e;
    }));
});
$("input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); $("send").requestSubmit(); }
});
$("stop-button").addEventListener("click", () => {
  if (!state.busy) return;
  setStatus("stopping…");
  api(sessionPath("/interrupt"), { method: "POST" }).catch((e) => setStatus(e.message, true));
});
$("new-session").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const id = $("session-id").value.trim();
  if (id) openSession(id).catch((e) => setStatus(e.message, true));
});

async function refresh() {
  try {
    await loadPlan();
    if (state.busy) return;  // a new token mid-call: the chat stays as it is
    await openSession(state.session || $("session-id").value.trim() || "console");
    setStatus("");
  } catch (e) {
    setStatus(e.message, true);
  }
}
refresh();
