// Drive a ponder Think agent over HTTP with the plain AI SDK chat client (no Cloudflare packages):
// `AbstractChat` + `DefaultChatTransport`, the same code `useChat` runs in a browser.
//
//   node http-chat-client.mjs --api http://127.0.0.1:PORT/agents/<class>/<name>/chat [--body JSON] TEXT...
//
// Sends each TEXT as one user message, waiting for the reply before the next. Options:
//   --body JSON     extra body fields sent with every request (DefaultChatTransport's `body` option)
//   --regenerate    after the messages, regenerate the last answer once
//   --resume        send nothing: load the stored transcript (GET …/get-messages) as the chat's initial
//                   messages, then `chat.resumeStream()` — the AI SDK's resume probe (GET …/chat/<id>/stream)
//                   — and report what the client shows once the resumed stream ends (or got a 204)
//
// Output: one JSON object per line on stdout: {"event":"sent",...} per message, {"event":"finish",...}
// with the assistant message the client assembled (AI SDK onFinish), {"event":"status",...} after each
// exchange, {"event":"response",...} with the HTTP status and headers the transport saw, and finally
// {"event":"final","messages":[...]} and {"event":"done"}. Errors print {"event":"error",...} and exit 1.

import { AbstractChat, DefaultChatTransport } from "ai";

const argv = process.argv.slice(2);
function opt(name, fallback) {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : fallback;
}
const valued = new Set(["--api", "--body", "--timeout-ms"]);
const texts = argv.filter((a, i) => !a.startsWith("--") && !valued.has(argv[i - 1]));
const api = opt("api");
const extraBody = JSON.parse(opt("body", "{}"));
const totalMs = Number(opt("timeout-ms", "20000"));
const resume = argv.includes("--resume");
if (!api || (texts.length === 0 && !resume)) {
  console.error("usage: node http-chat-client.mjs --api URL TEXT...");
  process.exit(64);
}

const t0 = Date.now();
function emit(event, fields = {}) {
  process.stdout.write(`${JSON.stringify({ event, ms: Date.now() - t0, ...fields })}\n`);
}
function finish(code) {
  process.stdout.write("", () => process.exit(code));
}
const overall = setTimeout(() => {
  emit("timeout", { ms: totalMs });
  console.error(`http-chat-client: timed out after ${totalMs}ms`);
  finish(1);
}, totalMs);

// Record what the transport's fetch saw (status and headers), without changing it.
const realFetch = globalThis.fetch;
async function recordingFetch(url, init) {
  const response = await realFetch(url, init);
  emit("response", {
    url: String(url),
    status: response.status,
    headers: Object.fromEntries(response.headers.entries()),
  });
  return response;
}

class NodeChatState {
  constructor(messages = []) {
    this.messages = messages;
    this.status = "ready";
    this.error = undefined;
  }
  pushMessage = (m) => (this.messages = this.messages.concat(m));
  popMessage = () => (this.messages = this.messages.slice(0, -1));
  replaceMessage = (i, m) =>
    (this.messages = [...this.messages.slice(0, i), this.snapshot(m), ...this.messages.slice(i + 1)]);
  snapshot = (v) => structuredClone(v);
}
class NodeChat extends AbstractChat {
  constructor({ messages, ...init }) {
    super({ ...init, state: new NodeChatState(messages) });
  }
}

let initialMessages = [];
if (resume) {
  const stored = await realFetch(api.replace(/\/chat$/, "/get-messages"));
  initialMessages = await stored.json();
  emit("initial", { messages: initialMessages });
}

const chat = new NodeChat({
  id: "node-http-chat",
  messages: initialMessages,
  transport: new DefaultChatTransport({ api, body: extraBody, fetch: recordingFetch }),
  onError: (err) => emit("chat-error", { message: err.message }),
  onFinish: ({ message }) => emit("finish", { message }),
});

try {
  if (resume) {
    emit("sent", { resume: true });
    await chat.resumeStream();
    emit("status", { status: chat.status, error: chat.error?.message ?? null });
  }
  for (const text of texts) {
    emit("sent", { text });
    await chat.sendMessage({ text });
    emit("status", { status: chat.status, error: chat.error?.message ?? null });
  }
  if (argv.includes("--regenerate")) {
    emit("sent", { regenerate: true });
    await chat.regenerate();
    emit("status", { status: chat.status, error: chat.error?.message ?? null });
  }
  emit("final", { messages: chat.messages });
  emit("done");
  clearTimeout(overall);
  finish(0);
} catch (err) {
  emit("error", { message: String(err?.stack ?? err) });
  console.error(`http-chat-client: ${err?.stack ?? err}`);
  clearTimeout(overall);
  finish(1);
}
