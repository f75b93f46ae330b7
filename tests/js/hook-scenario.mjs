// Drive a ponder `Think` agent with the stock React hooks: `useAgent` (agents/react) and
// `useAgentChat` (@cloudflare/ai-chat/react), rendered under Node 20 with react-test-renderer and `ws`.
//
//   node hook-scenario.mjs <scenario> --host 127.0.0.1:PORT --name AGENT_NAME [--agent hook-chat]
//
// The served agent is tests/e2e/apps/chat_app.py's `HookChat`; it picks its scripted model replies from
// the agent name, so each scenario runs against its own name (e.g. "tools-1a2b3c").
//
// Scenarios:
//   basic     send a message; the reply streams in (status submitted -> streaming -> ready).
//   tools     a server tool call and its output, then the model's text, in one assistant message.
//   approval  an approval-gated tool: approved (it runs, the turn continues), then another call denied.
//             The hook's errors and whether it ends up agreeing with the server are recorded, not fatal.
//   regen     answer, then regenerate(): the hook keeps the new answer (the server keeps both).
//   cancel    stop() mid-stream; the partial reply is kept; the next message is answered normally.
//   live      two hooks on one agent: B sees A's turn stream live; then A clears and B is cleared too.
//   initial   mount on an agent that already has messages: the first render shows /get-messages.
//   client    a client tool: declared in `tools`, answered in `onToolCall` with addToolOutput.
//
// Output: one JSON object per line on stdout. Every frame a hook's socket receives is printed as
// {"event":"frame","client":..,"data":<parsed>} and every frame it sends as {"event":"sent",...}; hook
// state changes as {"event":"state",...}; scenario results as named events. The last line is
// {"event":"done"} on success. On a failed wait, an error or the overall timeout the script prints
// {"event":"error"|"timeout",...}, a message on stderr, and exits non-zero.
//
// React state has no event API, so waits are predicates over each hook's latest committed state,
// re-checked after every commit and every received frame (no polling), each with its own deadline.

import WS from "ws";
import React, { Suspense, useEffect } from "react";
import TestRenderer from "react-test-renderer";
import { useAgent } from "agents/react";
import { useAgentChat } from "@cloudflare/ai-chat/react";
import { Waitable, lastAssistant, shapeOf, summary, textOf } from "./hook-common.mjs";

const argv = process.argv.slice(2);
const scenario = argv[0];
function opt(name, fallback) {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : fallback;
}
const host = opt("host");
const room = opt("name", "default");
const agentName = opt("agent", "hook-chat");
const totalMs = Number(opt("timeout-ms", "25000"));
const waitMs = Number(opt("wait-ms", "10000"));
if (!scenario || !host) {
  console.error("usage: node hook-scenario.mjs <scenario> --host HOST:PORT --name AGENT_NAME");
  process.exit(64);
}

const t0 = Date.now();
let step = "start";
const hooks = new Map();

function emit(event, fields = {}) {
  process.stdout.write(`${JSON.stringify({ event, ms: Date.now() - t0, ...fields })}\n`);
}

function finish(code) {
  for (const h of hooks.values()) {
    try {
      h.renderer?.unmount();
    } catch {}
    try {
      h.agent?.close();
    } catch {}
  }
  // Let stdout drain before exiting.
  process.stdout.write("", () => process.exit(code));
}

function fail(message) {
  emit("error", { step, message });
  console.error(`hook-scenario ${scenario}: FAILED at step "${step}": ${message}`);
  finish(1);
}

const overall = setTimeout(() => {
  emit("timeout", { step, after_ms: totalMs });
  console.error(`hook-scenario ${scenario}: TIMEOUT after ${totalMs} ms at step "${step}"`);
  finish(2);
}, totalMs);
overall.unref?.();

process.on("unhandledRejection", (err) => fail(`unhandled rejection: ${err?.stack ?? err}`));

// --- the hook under test -------------------------------------------------------------------------

/** What one mounted hook saw: its frames both ways, committed states, and pending waits. */
class HookRecord extends Waitable {
  constructor(label) {
    super(label);
    this.frames = []; // parsed frames received
    this.sent = []; // parsed frames sent
    this.states = []; // summaries of committed states, when they changed
    this.commits = 0;
    this.agent = null;
    this.renderer = null;
    this.firstCommit = null;
    this.lastSummary = "";
  }
  mark() {
    return { frames: this.frames.length, sent: this.sent.length, states: this.states.length };
  }
  framesSince(mark, pred = () => true) {
    return this.frames.slice(mark?.frames ?? 0).filter(pred);
  }
  sentSince(mark, pred = () => true) {
    return this.sent.slice(mark?.sent ?? 0).filter(pred);
  }
  until(what, pred, ms = waitMs) {
    return super.until(what, pred, ms);
  }
  lastTranscript() {
    for (let i = this.frames.length - 1; i >= 0; i--) {
      if (this.frames[i].type === "cf_agent_chat_messages") return this.frames[i].messages;
    }
    return null;
  }
}

/** Same ids, roles and part types/states: the hook's transcript agrees with the server's. */
function sameShape(messages, transcript) {
  if (!transcript || messages.length !== transcript.length) return false;
  return messages.every(
    (m, i) =>
      m.id === transcript[i].id &&
      m.role === transcript[i].role &&
      JSON.stringify(m.parts.map(shapeOf)) === JSON.stringify(transcript[i].parts.map(shapeOf)),
  );
}

function instrument(h, agent) {
  if (h.agent === agent) return;
  h.agent = agent;
  const realSend = agent.send.bind(agent);
  agent.send = (data) => {
    let parsed = data;
    try {
      parsed = JSON.parse(data);
    } catch {}
    h.sent.push(parsed);
    emit("sent", { client: h.label, data: parsed });
    return realSend(data);
  };
  agent.addEventListener("message", (e) => {
    let data = typeof e.data === "string" ? e.data : "<binary>";
    try {
      data = JSON.parse(data);
    } catch {}
    h.frames.push(data);
    emit("frame", { client: h.label, data });
    // Let React apply what the hook's own listener scheduled before re-checking the waits.
    setImmediate(() => h.check());
  });
}

function HookProbe({ h, chatOptions }) {
  const agent = useAgent({
    agent: agentName,
    name: room,
    host,
    protocol: "ws",
    WebSocket: WS,
    minReconnectionDelay: 300,
    maxReconnectionDelay: 1000,
  });
  instrument(h, agent);
  const chat = useAgentChat({ agent, ...chatOptions });
  useEffect(() => {
    h.commits += 1;
    h.chat = chat;
    if (h.firstCommit === null) {
      h.firstCommit = { messages: chat.messages, frames_before: h.frames.length, status: chat.status };
      emit("first_commit", { client: h.label, ...h.firstCommit });
    }
    const s = summary(chat);
    const key = JSON.stringify(s);
    if (key !== h.lastSummary) {
      h.lastSummary = key;
      h.states.push(s);
      emit("state", { client: h.label, ...s });
    }
    h.check();
  });
  return null;
}

function mount(label, chatOptions = {}) {
  const h = new HookRecord(label);
  hooks.set(label, h);
  h.renderer = TestRenderer.create(
    React.createElement(Suspense, { fallback: null }, React.createElement(HookProbe, { h, chatOptions })),
  );
  return h;
}

/** Mounted, identified, transcript received and the mount-time resume probe answered. */
async function connected(h) {
  await h.until("the connect greeting and the answer to the mount-time resume probe", (x) => {
    if (!x.chat || x.chat.status !== "ready") return false;
    const types = x.frames.map((f) => f.type);
    const probe = x.sent.find((f) => f.type === "cf_agent_stream_resume_request");
    return (
      types.includes("cf_agent_identity") &&
      x.frames.some((f) => f.type === "cf_agent_chat_messages" && f.connect === true) &&
      probe !== undefined &&
      x.frames.some((f) => f.type === "cf_agent_stream_resume_none" && f.probeId === probe.probeId)
    );
  });
  emit("connected", { client: h.label, identified: h.agent.identified, name: h.agent.name, agent: h.agent.agent });
}

function isDone(f, continuation) {
  return (
    f.type === "cf_agent_use_chat_response" &&
    f.done === true &&
    (continuation === undefined || (f.continuation === true) === continuation)
  );
}

/**
 * After an action: a terminal frame arrived, the hook is ready again, and (unless shape is false) its
 * messages have the same ids and part states as the server's latest transcript. The hook's status
 * "error" fails the wait at once, unless allowError (then "error" counts as settled, like "ready").
 */
async function settled(h, mark, what, { continuation, shape = true, done = 1, allowError = false } = {}) {
  await h.until(what, (x) => {
    if (!x.chat) return false;
    if (x.chat.status === "error" && !allowError) {
      throw new Error(`hook ${x.label} went to status "error" (${x.chat.error?.message ?? x.chat.error}) while waiting for ${what}`);
    }
    if (x.framesSince(mark, (f) => isDone(f, continuation)).length < done) return false;
    if (!["ready", "error"].includes(x.chat.status) || x.chat.isServerStreaming) return false;
    return !shape || sameShape(x.chat.messages, x.lastTranscript());
  });
}

/** The distinct errors the hook reported (useChat's `error`) since mark. */
function errorsSince(h, mark) {
  return [...new Set(h.states.slice(mark.states).map((s) => s.error).filter((e) => e !== null))];
}

function settle(value) {
  // Some hook methods return a promise, others (addToolApprovalResponse, clearHistory) nothing.
  return Promise.resolve(value).then(
    (value) => ({ ok: true, value: value ?? null }),
    (error) => ({ ok: false, error: error instanceof Error ? error.message : String(error) }),
  );
}

async function withStep(name, fn) {
  step = name;
  emit("step", { step: name });
  return await fn();
}

function requestsSince(h, mark) {
  return h
    .sentSince(mark, (f) => f.type === "cf_agent_use_chat_request")
    .map((f) => ({ id: f.id, body: JSON.parse(f.init.body) }));
}

function statusesSince(h, mark) {
  const out = [];
  for (const s of h.states.slice(mark.states)) if (out[out.length - 1] !== s.status) out.push(s.status);
  return out;
}

/** The distinct texts of the last assistant message while the hook's status was "streaming". */
function partialsSince(h, mark, { status = "streaming" } = {}) {
  const texts = [];
  for (const s of h.states.slice(mark.states)) {
    if (status !== null && s.status !== status) continue;
    if (s.last?.role !== "assistant" || !s.last.text) continue;
    if (texts[texts.length - 1] !== s.last.text) texts.push(s.last.text);
  }
  return texts;
}

/** Send one message and wait until its turn is over; returns what happened, for the report. */
async function sendAndSettle(h, text, what, opts = {}) {
  const mark = h.mark();
  const sendResult = await settle(h.chat.sendMessage({ text }));
  await settled(h, mark, what, opts);
  return {
    send: sendResult,
    statuses: statusesSince(h, mark),
    partials: partialsSince(h, mark),
    requests: requestsSince(h, mark),
    messages: h.chat.messages,
  };
}

function findPart(messages, pred) {
  for (const m of messages) for (const p of m.parts) if (pred(p)) return p;
  return null;
}

// --- scenarios -------------------------------------------------------------------------------------

async function basic() {
  const A = mount("A");
  await withStep("connect", () => connected(A));
  await withStep("send", async () => {
    const r = await sendAndSettle(A, "Hi there", "the reply to finish");
    emit("result", { what: "send", ...r });
  });
}

async function tools() {
  const A = mount("A");
  await withStep("connect", () => connected(A));
  await withStep("send", async () => {
    const r = await sendAndSettle(A, "What is the weather in Lisbon?", "the tool call and the reply");
    emit("result", { what: "send", ...r });
  });
}

async function approval() {
  const A = mount("A");
  await withStep("connect", () => connected(A));
  for (const [path, approved] of [
    ["a.txt", true],
    ["b.txt", false],
  ]) {
    const label = approved ? "approve" : "deny";
    const part = await withStep(`${label}:request`, async () => {
      const r = await sendAndSettle(A, `Please delete ${path}`, "the approval request");
      const waiting = findPart(
        A.chat.messages,
        (p) => p.type === "tool-delete_file" && p.state === "approval-requested" && p.input?.path === path,
      );
      emit("approval_requested", { label, part: waiting, messages: r.messages, requests: r.requests });
      if (!waiting) throw new Error(`no approval-requested delete_file part for ${path}`);
      return waiting;
    });
    await withStep(`${label}:respond`, async () => {
      const mark = A.mark();
      const answered = approved ? "output-available" : "output-denied";
      const response = await settle(A.chat.addToolApprovalResponse({ id: part.approval.id, approved }));
      emit("approval_response", { label, ...response });
      // The hook attaches to the continuation through the resume handshake. If it shows an error on
      // the way, that is recorded (and asserted in Python) instead of failing the run here, and so is
      // whether its messages came to agree with the server's transcript.
      await settled(A, mark, "the continuation after the approval response", {
        continuation: true,
        allowError: true,
        shape: false,
      });
      const agrees = await A.until(
        `the ${answered} part and the continuation text, as in the server's transcript`,
        (x) => {
          const p = findPart(x.chat.messages, (q) => q.toolCallId === part.toolCallId);
          return (
            p?.state === answered &&
            /tool (returned|failed)/.test(textOf(lastAssistant(x.chat.messages))) &&
            sameShape(x.chat.messages, x.lastTranscript())
          );
        },
        2000,
      ).then(
        () => true,
        () => false,
      );
      emit("result", {
        what: label,
        tool_call_id: part.toolCallId,
        approval_id: part.approval.id,
        statuses: statusesSince(A, mark),
        errors: errorsSince(A, mark),
        agrees_with_server: agrees,
        sent: A.sentSince(mark),
        messages: A.chat.messages,
        transcript: A.lastTranscript(),
      });
    });
  }
}

async function regen() {
  const A = mount("A");
  await withStep("connect", () => connected(A));
  await withStep("send", async () => {
    const r = await sendAndSettle(A, "Tell me a joke", "the first answer");
    emit("result", { what: "send", ...r });
  });
  await withStep("regenerate", async () => {
    const mark = A.mark();
    const result = await settle(A.chat.regenerate());
    await settled(A, mark, "the regenerated answer");
    emit("result", {
      what: "regenerate",
      regenerate: result,
      statuses: statusesSince(A, mark),
      requests: requestsSince(A, mark),
      messages: A.chat.messages,
    });
  });
}

async function cancel() {
  const A = mount("A");
  await withStep("connect", () => connected(A));
  await withStep("stop", async () => {
    const mark = A.mark();
    const sending = settle(A.chat.sendMessage({ text: "Count slowly for me" }));
    await A.until("a few streamed words", (x) => {
      const last = x.chat.messages[x.chat.messages.length - 1];
      return x.chat.status === "streaming" && last?.role === "assistant" && textOf(last).split(" ").length >= 6;
    });
    const before = textOf(lastAssistant(A.chat.messages));
    const stopResult = await settle(A.chat.stop());
    const send = await sending;
    await settled(A, mark, "the aborted turn to end", { shape: false });
    emit("result", {
      what: "stop",
      text_before_stop: before,
      stop: stopResult,
      send,
      statuses: statusesSince(A, mark),
      requests: requestsSince(A, mark),
      sent: A.sentSince(mark),
      messages: A.chat.messages,
    });
  });
  await withStep("send-after-cancel", async () => {
    const r = await sendAndSettle(A, "Are you still there?", "the next reply");
    emit("result", { what: "send-after-cancel", ...r });
  });
}

async function live() {
  const A = mount("A");
  const B = mount("B");
  await withStep("connect", () => Promise.all([connected(A), connected(B)]));
  await withStep("turn", async () => {
    const markB = B.mark();
    const r = await sendAndSettle(A, "Hello from hook A", "A's turn to finish");
    await settled(B, markB, "B to see A's turn end");
    const bStates = B.states.slice(markB.states);
    emit("result", {
      what: "turn",
      a: r,
      b: {
        messages: B.chat.messages,
        statuses: statusesSince(B, markB),
        partials: partialsSince(B, markB, { status: null }),
        server_streaming_seen: bStates.some((s) => s.isServerStreaming),
        sent: B.sentSince(markB),
      },
    });
  });
  await withStep("clear", async () => {
    const markA = A.mark();
    const markB = B.mark();
    A.chat.clearHistory();
    await A.until("A's messages to be empty", (x) => x.chat.messages.length === 0);
    await B.until(
      "B to get cf_agent_chat_clear and empty its messages",
      (x) => x.framesSince(markB, (f) => f.type === "cf_agent_chat_clear").length === 1 && x.chat.messages.length === 0,
    );
    emit("result", {
      what: "clear",
      a_sent: A.sentSince(markA),
      a_frames: A.framesSince(markA),
      b_frames: B.framesSince(markB),
      a_messages: A.chat.messages,
      b_messages: B.chat.messages,
    });
  });
}

async function initial() {
  const fetches = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (url, init) => {
    const response = await realFetch(url, init);
    fetches.push({ url: String(url), method: init?.method ?? "GET", status: response.status });
    emit("fetch", fetches[fetches.length - 1]);
    return response;
  };
  const A = mount("A");
  await withStep("first-commit", () => A.until("the first commit", (x) => x.firstCommit !== null));
  await withStep("connect", () => connected(A));
  emit("result", { what: "initial", fetches, first_commit: A.firstCommit, messages: A.chat.messages });
}

async function client() {
  const executed = [];
  const clientTools = {
    getLocation: {
      description: "Where the user is, from the browser.",
      parameters: {
        type: "object",
        properties: { precise: { type: "boolean" } },
        required: ["precise"],
      },
      execute: async (input) => {
        executed.push(input);
        return { city: "Lisbon", precise: input?.precise === true };
      },
    },
  };
  const A = mount("A", {
    tools: clientTools,
    onToolCall: async ({ toolCall, addToolOutput }) => {
      emit("on_tool_call", { toolCall });
      const tool = clientTools[toolCall.toolName];
      if (!tool) return;
      addToolOutput({ toolCallId: toolCall.toolCallId, output: await tool.execute(toolCall.input) });
    },
  });
  await withStep("connect", () => connected(A));
  await withStep("send", async () => {
    const mark = A.mark();
    await settle(A.chat.sendMessage({ text: "Where am I?" }));
    // The first turn ends waiting for the browser; onToolCall answers it, the server continues.
    // Fail at once, with the reason, when the server refused the call instead of routing it to us.
    const refused = A.until("the server to route the getLocation call to the hook", (x) => {
      const p = findPart(x.chat.messages, (q) => q.type === "tool-getLocation");
      if (p?.state === "output-error") throw new Error(`the server answered getLocation itself: ${p.errorText}`);
      return p?.state === "output-available";
    });
    await refused;
    await settled(A, mark, "the client tool round trip and the continuation", { continuation: true });
    await A.until("the getLocation output and the continuation text", (x) => {
      const p = findPart(x.chat.messages, (q) => q.type === "tool-getLocation");
      return p?.state === "output-available" && /tool (returned|failed)/.test(textOf(lastAssistant(x.chat.messages)));
    });
    emit("result", {
      what: "client",
      executed,
      statuses: statusesSince(A, mark),
      requests: requestsSince(A, mark),
      sent: A.sentSince(mark),
      messages: A.chat.messages,
    });
  });
}

const scenarios = { basic, tools, approval, regen, cancel, live, initial, client };
if (!scenarios[scenario]) {
  fail(`unknown scenario ${JSON.stringify(scenario)}; expected one of ${Object.keys(scenarios).join(", ")}`);
} else {
  try {
    await scenarios[scenario]();
    clearTimeout(overall);
    emit("done");
    finish(0);
  } catch (err) {
    fail(err?.stack ?? String(err));
  }
}
