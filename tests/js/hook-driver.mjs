// A long-lived driver for the stock React chat hooks, commanded line by line from a Python test.
//
//   node hook-driver.mjs --host 127.0.0.1:PORT --name AGENT_NAME --agent AGENT_NAMESPACE
//
// Unlike hook-scenario.mjs (one scripted scenario per run), this process keeps hooks mounted for as long
// as the test wants: `useAgent` (agents/react) + `useAgentChat` (@cloudflare/ai-chat/react), rendered
// under Node 20 with react-test-renderer and `ws`. The test can kill and restart the server underneath;
// the hook's PartySocket reconnects by itself (300 ms to 1 s backoff) and the hook resumes on its own.
//
// Commands: one JSON object per line on stdin, {"id": <any>, "cmd": <name>, ...args}. Every command is
// answered by one {"event":"reply","id":..,"ok":true,...} line ({"ok":false,"error":..} when it fails).
// Most take "client" (a hook label, default "A").
//
//   mount     {client}                mount a hook (hook "A" is mounted at start)
//   unmount   {client}                unmount it and close its socket
//   connected {client, timeout_ms}    wait for the connect greeting and the answer to the mount probe
//   send      {client, text}          sendMessage({text}); replies at once (the turn runs on)
//   approve   {client, toolCallId}    addToolApprovalResponse({approved: true}) for that call's approval
//   drop      {client, how}           drop the socket: "terminate" (no close handshake, as a network
//                                      failure) or "reconnect" (PartySocket's reconnect(): close + reopen)
//   idle      {client, statuses, text, contains, transcript, timeout_ms}
//                                      wait until the hook is not busy (status in `statuses`, default
//                                      ["ready"], no server stream observed, not recovering) and, when
//                                      given, its last assistant message's text equals `text` / contains
//                                      one of `contains`, and its messages equal `transcript` (toolName
//                                      dropped from static tool parts, as the AI SDK does)
//   state     {client}                the hook's status, error, flags and messages as last committed (a
//                                      frame just received may not be rendered yet: wait with `idle`)
//   quit                              unmount everything and exit 0
//
// Events (stdout, one JSON object per line): every frame a hook's socket receives ({"event":"frame",
// "client", "socket", "data"}; "socket" numbers the socket objects, as a render may make a new one) and
// sends ("sent"); socket "open"/"close" (with the close code); hook "state" changes
// (status, flags, error, last message); "reply" lines. Frames holding a transcript
// (cf_agent_chat_messages) are printed with their message count only, unless --full-frames is given.
//
// React state has no event API, so waits are predicates over a hook's latest committed state, re-checked
// after every commit and every received frame (no polling), each with its own deadline.

import readline from "node:readline";
import WS from "ws";
import React, { Suspense, useEffect } from "react";
import TestRenderer from "react-test-renderer";
import { useAgent } from "agents/react";
import { useAgentChat } from "@cloudflare/ai-chat/react";
import { Waitable, lastAssistant, shapeOf, summary, textOf } from "./hook-common.mjs";

const argv = process.argv.slice(2);
function opt(name, fallback) {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : fallback;
}
const host = opt("host");
const room = opt("name", "default");
const agentName = opt("agent", "hook-chat");
const fullFrames = argv.includes("--full-frames");
if (!host) {
  console.error("usage: node hook-driver.mjs --host HOST:PORT --name AGENT_NAME --agent NAMESPACE");
  process.exit(64);
}

const t0 = Date.now();
const hooks = new Map();

function emit(event, fields = {}) {
  process.stdout.write(`${JSON.stringify({ event, ms: Date.now() - t0, ...fields })}\n`);
}

process.on("unhandledRejection", (err) => {
  emit("error", { message: `unhandled rejection: ${err?.stack ?? err}` });
});

// --- one mounted hook ------------------------------------------------------------------------------

class HookRecord extends Waitable {
  constructor(label) {
    super(label);
    this.frames = [];
    this.sent = [];
    this.agent = null;
    this.renderer = null;
    this.lastSummary = "";
  }
}

/** A message as the AI SDK keeps it: the server also stores toolName on static tool-* parts. */
function canonical(messages) {
  return JSON.parse(JSON.stringify(messages ?? [])).map((m) => {
    for (const p of m.parts ?? []) if (typeof p.type === "string" && p.type.startsWith("tool-")) delete p.toolName;
    return m;
  });
}

/** Key-order independent JSON, for comparing messages built by different code. */
function stable(value) {
  if (Array.isArray(value)) return `[${value.map(stable).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value)
      .filter((k) => value[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stable(value[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value);
}

function printable(frame) {
  if (fullFrames || frame?.type !== "cf_agent_chat_messages") return frame;
  return { ...frame, messages: undefined, message_count: frame.messages?.length ?? null };
}

let socketSerial = 0;
const instrumented = new WeakSet();

function instrument(h, agent) {
  h.agent = agent; // the socket of the latest render
  if (instrumented.has(agent)) return;
  instrumented.add(agent);
  const socket = ++socketSerial; // which socket object a frame came through (a render may make a new one)
  const realSend = agent.send.bind(agent);
  agent.send = (data) => {
    let parsed = data;
    try {
      parsed = JSON.parse(data);
    } catch {}
    h.sent.push(parsed);
    emit("sent", { client: h.label, socket, data: parsed });
    return realSend(data);
  };
  agent.addEventListener("message", (e) => {
    let data = typeof e.data === "string" ? e.data : "<binary>";
    try {
      data = JSON.parse(data);
    } catch {}
    h.frames.push(data);
    emit("frame", { client: h.label, socket, data: printable(data) });
    // Let React apply what the hook's own listener scheduled before re-checking the waits.
    setImmediate(() => h.check());
  });
  agent.addEventListener("open", () => emit("open", { client: h.label, socket, pk: agent._pk }));
  agent.addEventListener("close", (e) => emit("close", { client: h.label, socket, pk: agent._pk, code: e.code }));
}

function HookProbe({ h }) {
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
  const chat = useAgentChat({ agent });
  useEffect(() => {
    h.chat = chat;
    const s = summary(chat);
    const key = JSON.stringify(s);
    if (key !== h.lastSummary) {
      h.lastSummary = key;
      emit("state", { client: h.label, ...s });
    }
    h.check();
  });
  return null;
}

function mount(label) {
  if (hooks.has(label)) throw new Error(`hook ${label} is already mounted`);
  const h = new HookRecord(label);
  hooks.set(label, h);
  h.renderer = TestRenderer.create(React.createElement(Suspense, { fallback: null }, React.createElement(HookProbe, { h })));
  return h;
}

function unmount(label) {
  const h = hookOf(label);
  hooks.delete(label);
  try {
    h.renderer?.unmount();
  } catch {}
  try {
    h.agent?.close();
  } catch {}
}

function hookOf(label = "A") {
  const h = hooks.get(label);
  if (!h) throw new Error(`no hook ${JSON.stringify(label)} is mounted`);
  return h;
}

function state(h) {
  return {
    client: h.label,
    ...summary(h.chat),
    messages: h.chat?.messages ?? null,
  };
}

// --- commands --------------------------------------------------------------------------------------

const commands = {
  mount: ({ client = "A" }) => {
    mount(client);
    return {};
  },
  unmount: ({ client = "A" }) => {
    unmount(client);
    return {};
  },
  connected: async ({ client = "A", timeout_ms = 10000 }) => {
    const h = hookOf(client);
    await h.until(
      "the connect greeting and the answer to the mount-time resume probe",
      (x) => {
        if (!x.chat || x.chat.status !== "ready") return false;
        const probe = x.sent.find((f) => f.type === "cf_agent_stream_resume_request");
        return (
          x.frames.some((f) => f.type === "cf_agent_identity") &&
          probe !== undefined &&
          x.frames.some((f) => f.type?.startsWith("cf_agent_stream_") && f.probeId === probe.probeId)
        );
      },
      timeout_ms,
    );
    return state(h);
  },
  send: ({ client = "A", text }) => {
    const h = hookOf(client);
    // Not awaited: the turn runs on while the test kills servers or drops sockets underneath it.
    Promise.resolve(h.chat.sendMessage({ text })).then(
      () => emit("send_settled", { client, text, ok: true }),
      (err) => emit("send_settled", { client, text, ok: false, error: String(err?.message ?? err) }),
    );
    return {};
  },
  approve: async ({ client = "A", toolCallId, timeout_ms = 10000 }) => {
    const h = hookOf(client);
    let part = null;
    await h.until(
      `an approval-requested part for ${toolCallId}`,
      (x) => {
        for (const m of x.chat?.messages ?? []) {
          for (const p of m.parts) if (p.toolCallId === toolCallId && p.state === "approval-requested") part = p;
        }
        return part !== null && x.chat.status !== "submitted" && x.chat.status !== "streaming";
      },
      timeout_ms,
    );
    h.chat.addToolApprovalResponse({ id: part.approval.id, approved: true });
    return { part };
  },
  drop: ({ client = "A", how = "terminate" }) => {
    const h = hookOf(client);
    if (how === "terminate") {
      if (!h.agent._ws) throw new Error("the hook has no open socket to drop");
      h.agent._ws.terminate();
    } else if (how === "reconnect") {
      h.agent.reconnect();
    } else {
      throw new Error(`unknown drop ${JSON.stringify(how)}`);
    }
    return {};
  },
  idle: async ({ client = "A", statuses = ["ready"], text, contains, transcript, timeout_ms = 15000 }) => {
    const h = hookOf(client);
    const want = transcript === undefined ? null : stable(canonical(transcript));
    await h.until(
      `the hook to be idle (status in ${statuses.join("/")})` +
        (text !== undefined ? ` with the reply ${JSON.stringify(text)}` : "") +
        (contains !== undefined ? ` with a reply containing one of ${JSON.stringify(contains)}` : "") +
        (want !== null ? " with messages equal to the given transcript" : ""),
      (x) => {
        const c = x.chat;
        if (!c || !statuses.includes(c.status) || c.isServerStreaming || c.isRecovering) return false;
        const reply = textOf(lastAssistant(c.messages));
        if (text !== undefined && reply !== text) return false;
        if (contains !== undefined && !contains.some((s) => reply.includes(s))) return false;
        return want === null || stable(canonical(c.messages)) === want;
      },
      timeout_ms,
    ).catch((err) => {
      if (want === null) throw err;
      // Say how the hook's messages differ from the transcript it was expected to show.
      const outline = (messages) => (messages ?? []).map((m) => `${m.role}:${m.id}[${m.parts.map(shapeOf).join(",")}]`);
      const mine = outline(h.chat?.messages);
      const theirs = outline(transcript);
      const first = mine.findIndex((line, i) => line !== theirs[i]);
      const at = first >= 0 ? first : Math.min(mine.length, theirs.length);
      throw new Error(
        `${err.message}; the hook's messages differ from the transcript at index ${at}: ` +
          `hook ${JSON.stringify(mine.slice(at, at + 3))} vs transcript ${JSON.stringify(theirs.slice(at, at + 3))} ` +
          `(${mine.length} vs ${theirs.length} messages)`,
      );
    });
    return state(h);
  },
  state: ({ client = "A" }) => state(hookOf(client)),
  quit: () => {
    for (const label of [...hooks.keys()]) unmount(label);
    return {};
  },
};

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", async (line) => {
  if (!line.trim()) return;
  let command;
  try {
    command = JSON.parse(line);
  } catch (err) {
    emit("reply", { id: null, ok: false, error: `not JSON: ${line}` });
    return;
  }
  const { id = null, cmd, ...args } = command;
  try {
    if (!commands[cmd]) throw new Error(`unknown command ${JSON.stringify(cmd)}`);
    const result = await commands[cmd](args);
    emit("reply", { id, cmd, ok: true, ...result });
    if (cmd === "quit") process.stdout.write("", () => process.exit(0));
  } catch (err) {
    emit("reply", { id, cmd, ok: false, error: err instanceof Error ? err.message : String(err) });
  }
});
lines.on("close", () => {
  // The test went away: do not outlive it.
  for (const label of [...hooks.keys()]) unmount(label);
  process.exit(0);
});

mount("A");
emit("ready", { host, room, agent: agentName });
