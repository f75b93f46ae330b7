// Drive a ponder server with the stock `AgentClient` from the `agents` npm package (Node 20 + `ws`).
//
//   node agent-client-scenario.mjs <scenario> --host 127.0.0.1:PORT --name ROOM [options]
//
// Scenarios (the agent is examples/counter.py's `Counter`, or an App serving it):
//   core      two clients on one agent: identity, state, setState broadcast, a plain, a streaming and
//             an unknown rpc, then a third client that sees the persisted state.
//   rejected  connect without a valid token: expect close 1008, onConnectionError, and no further
//             connection attempt within --watch-ms; then connect with --token and get identity.
//
// Output: one JSON object per line on stdout, e.g. {"event":"identity","client":"A",...}. Every raw
// frame a client receives is printed as {"event":"frame","client":..,"data":<parsed frame>}. The last
// line is {"event":"done"} on success. On failure or timeout the script prints
// {"event":"error"|"timeout",...}, a message on stderr, and exits non-zero.

import WS from "ws";
import { AgentClient } from "agents/client";

const argv = process.argv.slice(2);
const scenario = argv[0];
function opt(name, fallback) {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : fallback;
}
const host = opt("host");
const room = opt("name", "default");
const agentClass = opt("agent", "Counter");
const token = opt("token", "letmein");
const watchMs = Number(opt("watch-ms", "3000"));
const totalMs = Number(opt("timeout-ms", "20000"));
if (!scenario || !host) {
  console.error("usage: node agent-client-scenario.mjs <core|rejected> --host HOST:PORT --name ROOM");
  process.exit(64);
}

const t0 = Date.now();
let step = "start";
const clients = [];

function emit(event, fields = {}) {
  process.stdout.write(`${JSON.stringify({ event, ms: Date.now() - t0, ...fields })}\n`);
}

function finish(code) {
  for (const c of clients) {
    try {
      c.close();
    } catch {}
  }
  // Let stdout drain before exiting.
  process.stdout.write("", () => process.exit(code));
}

function fail(message) {
  emit("error", { step, message });
  console.error(`agent-client-scenario ${scenario}: FAILED at step "${step}": ${message}`);
  finish(1);
}

const overall = setTimeout(() => {
  emit("timeout", { step, after_ms: totalMs });
  console.error(`agent-client-scenario ${scenario}: TIMEOUT after ${totalMs} ms at step "${step}"`);
  finish(2);
}, totalMs);
overall.unref?.();

process.on("unhandledRejection", (err) => fail(`unhandled rejection: ${err?.stack ?? err}`));

// --- helpers -----------------------------------------------------------------------------------

/** A `ws` WebSocket that reports every construction, i.e. every connection attempt PartySocket makes. */
let wsAttempts = 0;
class CountingWS extends WS {
  constructor(url, protocols) {
    super(url, protocols);
    wsAttempts += 1;
    emit("ws_attempt", { n: wsAttempts, url: String(url) });
  }
}

/** Per-client event log with promise-based waits (no polling, no sleeps). */
class Recorder {
  constructor(label) {
    this.label = label;
    this.events = [];
    this.waiters = [];
  }
  push(kind, data) {
    const ev = { kind, data, at: this.events.length };
    this.events.push(ev);
    for (const w of [...this.waiters]) {
      if (ev.at >= w.from && w.pred(ev)) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve(ev);
      }
    }
  }
  /** The first event at index >= from satisfying pred (already seen or future). */
  wait(pred, from = 0) {
    const seen = this.events.find((ev) => ev.at >= from && pred(ev));
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => this.waiters.push({ pred, from, resolve }));
  }
  get mark() {
    return this.events.length;
  }
}

function connect(label, extra = {}) {
  const rec = new Recorder(label);
  const client = new AgentClient({
    agent: agentClass,
    name: room,
    host,
    protocol: "ws",
    WebSocket: CountingWS,
    // Short delays so that, were the client going to reconnect, it would do so well inside the
    // observation window of the "rejected" scenario.
    minReconnectionDelay: 200,
    maxReconnectionDelay: 500,
    onIdentity: (name, agent) => {
      rec.push("identity", { name, agent });
      emit("identity", { client: label, name, agent });
    },
    onStateUpdate: (state, source) => {
      rec.push("state", { state, source });
      emit("state", { client: label, source, state });
    },
    onStateUpdateError: (error) => {
      rec.push("state_error", { error });
      emit("state_error", { client: label, error });
    },
    onConnectionError: (error) => {
      rec.push("connection_error", { message: error.message, code: error.code, reason: error.reason });
      emit("connection_error", { client: label, message: error.message, code: error.code, reason: error.reason });
    },
    ...extra,
  });
  client.addEventListener("open", () => {
    rec.push("open", {});
    emit("open", { client: label });
  });
  client.addEventListener("close", (e) => {
    rec.push("close", { code: e.code, reason: e.reason });
    emit("close", { client: label, code: e.code, reason: e.reason });
  });
  client.addEventListener("message", (e) => {
    let data = e.data;
    if (typeof data === "string") {
      try {
        data = JSON.parse(data);
      } catch {}
    } else {
      data = "<binary>";
    }
    rec.push("frame", data);
    emit("frame", { client: label, data });
  });
  clients.push(client);
  return { client, rec };
}

async function withStep(name, fn) {
  step = name;
  emit("step", { step: name });
  return await fn();
}

function settle(promise) {
  return promise.then(
    (value) => ({ ok: true, value }),
    (error) => ({ ok: false, error: error instanceof Error ? error.message : String(error) }),
  );
}

/** Resolve after `ms` with the list of given recorders' events of `kind` that happened meanwhile. */
function observe(ms, recs, kind) {
  const marks = recs.map((r) => r.mark);
  return new Promise((resolve) =>
    setTimeout(
      () => resolve(recs.map((r, i) => r.events.filter((ev) => ev.at >= marks[i] && ev.kind === kind).length)),
      ms,
    ),
  );
}

// --- scenarios ---------------------------------------------------------------------------------

async function core() {
  const A = connect("A");
  const B = connect("B");

  await withStep("ready", async () => {
    await Promise.all([A.client.ready, B.client.ready]);
    for (const [label, c] of [
      ["A", A.client],
      ["B", B.client],
    ]) {
      emit("ready", { client: label, name: c.name, agent: c.agent, identified: c.identified, state: c.state });
    }
  });

  const newState = { count: 10, by: "A" };
  await withStep("set_state", async () => {
    const fromA = A.rec.mark;
    const fromB = B.rec.mark;
    A.client.setState(newState);
    const ev = await B.rec.wait((e) => e.kind === "state" && e.data.source === "server", fromB);
    emit("broadcast_seen", { client: "B", state: ev.data.state, source: ev.data.source });
    // Everything A received from the server between its setState and the increment result goes
    // into "a_server_states_after_set" below: the server must not echo A's own update to A.
    A.fromSet = fromA;
  });

  await withStep("increment", async () => {
    const fromB = B.rec.mark;
    const result = await settle(A.client.call("increment", [5]));
    emit("rpc_result", { method: "increment", ...result });
    const a = await A.rec.wait((e) => e.kind === "state" && e.data.source === "server" && e.data.state?.count === 15, A.fromSet);
    const b = await B.rec.wait((e) => e.kind === "state" && e.data.source === "server" && e.data.state?.count === 15, fromB);
    emit("increment_broadcast", { client: "A", state: a.data.state });
    emit("increment_broadcast", { client: "B", state: b.data.state });
    const aServerStates = A.rec.events
      .filter((e) => e.at >= A.fromSet && e.kind === "state" && e.data.source === "server")
      .map((e) => e.data.state);
    emit("a_server_states_after_set", { states: aServerStates });
  });

  await withStep("greet", async () => {
    const result = await settle(A.client.call("greet", ["Ada"]));
    emit("rpc_result", { method: "greet", ...result });
  });

  await withStep("stream", async () => {
    const chunks = [];
    let doneValue = "<not called>";
    let streamError = null;
    const result = await settle(
      B.client.call("count_to", [5], {
        stream: {
          onChunk: (chunk) => chunks.push(chunk),
          onDone: (final) => (doneValue = final === undefined ? null : final),
          onError: (err) => (streamError = err),
        },
      }),
    );
    emit("stream_result", { method: "count_to", chunks, done: doneValue, error: streamError, ...result });
  });

  await withStep("unknown_method", async () => {
    const result = await settle(A.client.call("nope", []));
    emit("rpc_result", { method: "nope", ...result });
  });

  await withStep("persisted_state", async () => {
    const C = connect("C");
    await C.client.ready;
    emit("ready", { client: "C", name: C.client.name, agent: C.client.agent, identified: C.client.identified, state: C.client.state });
  });

  emit("ws_attempts", { count: wsAttempts });
}

async function rejected() {
  let OK_ = null;
  const R = connect("R", { query: { token: "wrong" } });
  await withStep("rejected_close", async () => {
    const ev = await R.rec.wait((e) => e.kind === "close");
    emit("rejected_close", {
      code: ev.data.code,
      reason: ev.data.reason,
      identified: R.client.identified,
      should_reconnect: R.client.shouldReconnect,
      connection_error: R.client.connectionError ? R.client.connectionError.message : null,
    });
  });

  await withStep("no_reconnect", async () => {
    const attemptsBefore = wsAttempts;
    const [opens] = await observe(watchMs, [R.rec], "open");
    emit("no_reconnect_window", {
      watch_ms: watchMs,
      attempts_during: wsAttempts - attemptsBefore,
      opens_during: opens,
      ready_state: R.client.readyState,
      connection_errors: R.rec.events.filter((e) => e.kind === "connection_error").length,
    });
    // On a terminally closed client a call rejects at once; the timeout only bounds a broken case
    // (a client still reconnecting would queue the call until it times out).
    const call = await settle(R.client.call("greet", ["x"], { timeout: 2000 }));
    emit("rpc_after_reject", call);
  });

  await withStep("authorized", async () => {
    const OK = connect("OK", { query: { token } });
    await OK.client.ready;
    const greet = await settle(OK.client.call("greet", ["Ada"]));
    emit("authorized", { name: OK.client.name, agent: OK.client.agent, state: OK.client.state, greet });
    OK_ = OK;
  });

  // Control: the same client options do reconnect, well inside the window above, after a
  // non-terminal close (the auth app's /_test/kick closes the agent's sockets with 1001).
  await withStep("control_reconnect", async () => {
    const from = OK_.rec.mark;
    const res = await fetch(`http://${host}/_test/kick?name=${encodeURIComponent(room)}`, { method: "POST" });
    if (!res.ok) throw new Error(`POST /_test/kick answered ${res.status}`);
    const closed = await OK_.rec.wait((e) => e.kind === "close", from);
    const closedAt = Date.now();
    await OK_.rec.wait((e) => e.kind === "identity", closed.at);
    emit("control_reconnect", {
      close_code: closed.data.code,
      reconnect_after_ms: Date.now() - closedAt,
      connection_errors: OK_.rec.events.filter((e) => e.kind === "connection_error").length,
    });
  });

  emit("ws_attempts", { count: wsAttempts });
}

const scenarios = { core, rejected };
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
