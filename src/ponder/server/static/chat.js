// The chat protocol client: one WebSocket to a ponder Think agent, the visible transcript, and the
// AI SDK chunk -> message part rules. No DOM here; app.js renders what this module holds.
//
// Frames follow Cloudflare's agents chat protocol (docs/protocol.md): the page sends
// cf_agent_use_chat_request / cf_agent_chat_request_cancel / cf_agent_tool_approval / cf_agent_chat_clear
// and applies cf_agent_chat_messages, cf_agent_use_chat_response, cf_agent_message_updated and
// cf_agent_chat_clear. Branch switching and search are `rpc` frames to Think's @callable methods
// (set_active_branch, search_messages, get_context_blocks); `ponder_context_blocks` frames carry the agent's
// context blocks live after every write.

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** A random id from [0-9A-Za-z] (the stock clients use 16 characters for messages, 8 for requests). */
export function nanoid(size = 16) {
  const bytes = crypto.getRandomValues(new Uint8Array(size));
  let out = "";
  for (const b of bytes) out += ALPHABET[b % ALPHABET.length];
  return out;
}

function uuid() {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export const isToolPart = (part) =>
  !!part && typeof part.toolCallId === "string" &&
  (part.type === "dynamic-tool" || (typeof part.type === "string" && part.type.startsWith("tool-")));

export const toolName = (part) => part.toolName || (part.type || "").replace(/^tool-/, "");

const TERMINAL = new Set(["output-available", "output-error", "output-denied"]);
const ANSWERED = new Set([...TERMINAL, "approval-responded"]);

function normalizeInput(value) {
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      return {};
    }
  }
  return value && typeof value === "object" && !Array.isArray(value) ? value : {};
}

function mergeMetadata(message, value) {
  if (value == null) return;
  const current = message.metadata;
  message.metadata =
    current && typeof current === "object" && typeof value === "object" ? { ...current, ...value } : value;
}

/** Apply a tool result / approval chunk to a part that already exists. Returns false if it was stale. */
function applyToolChunk(part, chunk) {
  switch (chunk.type) {
    case "tool-approval-request":
      if (ANSWERED.has(part.state)) return false;
      part.state = "approval-requested";
      part.approval = { id: chunk.approvalId };
      if (chunk.approvalDescriptor != null) part.approval.descriptor = chunk.approvalDescriptor;
      return true;
    case "tool-output-available":
      if (TERMINAL.has(part.state)) return false;
      if (!("input" in part)) part.input = {};
      part.state = "output-available";
      part.output = chunk.output;
      if (chunk.preliminary != null) part.preliminary = chunk.preliminary;
      else delete part.preliminary;
      return true;
    case "tool-output-error":
      if (TERMINAL.has(part.state)) return false;
      if (!("input" in part)) part.input = {};
      part.state = "output-error";
      part.errorText = chunk.errorText ?? "Tool execution failed";
      delete part.output;
      delete part.preliminary;
      return true;
    case "tool-output-denied":
      if (ANSWERED.has(part.state)) return false;
      part.state = "output-denied";
      return true;
    default:
      return false;
  }
}

/** Builds one assistant message from a stream of UIMessageChunks (the AI SDK rules, as in chat/_accumulator.py). */
export class MessageBuilder {
  constructor(message, continuation = false) {
    this.message = message;
    this.continuation = continuation;
    this.active = { text: new Map(), reasoning: new Map() };
    this.lastOpen = { text: null, reasoning: null };
    this.tools = new Map();
    this.raw = new Map();
    this.finishReason = null;
    this.errorText = null;
    if (!Array.isArray(message.parts)) message.parts = [];
    for (const part of message.parts) {
      if (typeof part.toolCallId === "string") this.tools.set(part.toolCallId, part);
      if ((part.type === "text" || part.type === "reasoning") && part.state === "streaming") part.state = "done";
    }
  }

  open(kind, chunk, text = "") {
    const part = { type: kind, text, state: "streaming" };
    if (chunk.providerMetadata != null) part.providerMetadata = chunk.providerMetadata;
    this.message.parts.push(part);
    this.active[kind].set(chunk.id, part);
    this.lastOpen[kind] = part;
    return part;
  }

  findOpen(kind, chunk) {
    let part = this.active[kind].get(chunk.id);
    if (!part && this.lastOpen[kind] && this.lastOpen[kind].state === "streaming") part = this.lastOpen[kind];
    return part;
  }

  newTool(chunk, state) {
    const part = {
      type: chunk.dynamic === true ? "dynamic-tool" : `tool-${chunk.toolName}`,
      toolCallId: chunk.toolCallId,
      toolName: chunk.toolName,
      state,
    };
    if (chunk.title != null) part.title = chunk.title;
    if (chunk.providerExecuted != null) part.providerExecuted = chunk.providerExecuted;
    this.message.parts.push(part);
    this.tools.set(chunk.toolCallId, part);
    return part;
  }

  /** Apply one chunk: "applied", "ignored", or "cross" (a tool chunk for a call in an earlier message). */
  apply(chunk) {
    const parts = this.message.parts;
    const type = chunk && chunk.type;
    switch (type) {
      case "start":
        if (!this.continuation && typeof chunk.messageId === "string" && chunk.messageId) {
          this.message.id = chunk.messageId;
        }
        mergeMetadata(this.message, chunk.messageMetadata);
        return "applied";
      case "start-step":
      case "step-start":
        parts.push({ type: "step-start" });
        return "applied";
      case "finish-step":
        this.active.text.clear();
        this.active.reasoning.clear();
        return "applied";
      case "finish":
        if (chunk.finishReason != null) this.finishReason = chunk.finishReason;
        mergeMetadata(this.message, chunk.messageMetadata);
        return "applied";
      case "message-metadata":
        mergeMetadata(this.message, chunk.messageMetadata);
        return "applied";
      case "error":
        this.errorText = typeof chunk.errorText === "string" ? chunk.errorText : "The model reported an error.";
        return "applied";
      case "abort":
        return "applied";
      case "text-start":
      case "reasoning-start":
        this.open(type.split("-")[0], chunk);
        return "applied";
      case "text-delta":
      case "reasoning-delta": {
        const kind = type.split("-")[0];
        const delta = typeof chunk.delta === "string" ? chunk.delta : "";
        const part = this.findOpen(kind, chunk);
        if (!part) this.open(kind, chunk, delta);
        else part.text += delta;
        return "applied";
      }
      case "text-end":
      case "reasoning-end": {
        const kind = type.split("-")[0];
        const part = this.findOpen(kind, chunk);
        if (part) {
          part.state = "done";
          this.active[kind].delete(chunk.id);
          if (chunk.providerMetadata != null) part.providerMetadata = chunk.providerMetadata;
        }
        return "applied";
      }
      case "file":
        parts.push({ type: "file", mediaType: chunk.mediaType, url: chunk.url });
        return "applied";
      case "source-url":
        parts.push({ type: "source-url", sourceId: chunk.sourceId, url: chunk.url, title: chunk.title });
        return "applied";
      case "source-document":
        parts.push({
          type: "source-document", sourceId: chunk.sourceId, mediaType: chunk.mediaType,
          title: chunk.title, filename: chunk.filename,
        });
        return "applied";
      case "tool-input-start":
        if (typeof chunk.toolCallId !== "string" || this.tools.has(chunk.toolCallId)) return "ignored";
        this.newTool(chunk, "input-streaming");
        return "applied";
      case "tool-input-delta": {
        const part = this.tools.get(chunk.toolCallId);
        if (!part || part.state !== "input-streaming") return "ignored";
        if (typeof chunk.inputTextDelta === "string") {
          this.raw.set(chunk.toolCallId, (this.raw.get(chunk.toolCallId) || "") + chunk.inputTextDelta);
        }
        return "applied";
      }
      case "tool-input-available": {
        let part = this.tools.get(chunk.toolCallId);
        if (!part) part = this.newTool(chunk, "input-available");
        else if (part.state === "input-streaming") part.state = "input-available";
        else {
          if (!("input" in part)) part.input = normalizeInput(chunk.input);
          return "ignored";
        }
        part.input = normalizeInput(chunk.input);
        this.raw.delete(chunk.toolCallId);
        return "applied";
      }
      case "tool-input-error": {
        let part = this.tools.get(chunk.toolCallId);
        if (!part) part = this.newTool(chunk, "output-error");
        else if (TERMINAL.has(part.state)) return "ignored";
        part.state = "output-error";
        part.input = normalizeInput("input" in chunk ? chunk.input : part.input);
        part.errorText = chunk.errorText;
        return "applied";
      }
      case "tool-approval-request":
      case "tool-output-available":
      case "tool-output-error":
      case "tool-output-denied": {
        const part = this.tools.get(chunk.toolCallId);
        if (!part) return "cross";
        if (!("input" in part) && this.raw.has(chunk.toolCallId)) {
          part.input = normalizeInput(this.raw.get(chunk.toolCallId));
          this.raw.delete(chunk.toolCallId);
        }
        return applyToolChunk(part, chunk) ? "applied" : "ignored";
      }
      default:
        if (typeof type === "string" && type.startsWith("data-")) {
          if (chunk.transient) return "applied";
          const existing = chunk.id != null && parts.find((p) => p.type === type && p.id === chunk.id);
          if (existing) existing.data = chunk.data;
          else parts.push(chunk.id != null ? { type, id: chunk.id, data: chunk.data } : { type, data: chunk.data });
          return "applied";
        }
        return "ignored";
    }
  }
}

function sameJSON(a, b) {
  try {
    return JSON.stringify(a) === JSON.stringify(b);
  } catch {
    return false;
  }
}

/**
 * The page's connection to one agent. Listen to "change" events; read `messages`, `status`,
 * `connection`, `error`, `branches`, `revision(id)`.
 */
export class ChatClient extends EventTarget {
  constructor({ agentPath, uiPath, query = "" }) {
    super();
    this.agentPath = agentPath;
    this.uiPath = uiPath;
    this.query = query; // forwarded to every request (e.g. an auth token)
    this.pk = uuid(); // one connection id for the page's life, reused on reconnect
    this.messages = [];
    this.revs = new Map();
    this.streams = new Map(); // request id -> {builder|null, messageId}
    this.pending = new Set(); // our requests that have not streamed yet
    this.notes = new Map(); // message id -> "stopped"
    this.branches = {}; // parent id -> [child ids] (only parents with several children)
    this.error = null;
    this.connection = "connecting";
    this.closeReason = "";
    this.identity = null;
    this.ws = null;
    this.attempt = 0;
    this.timer = null;
    this.branchSeq = 0;
    this.switching = false;
    this.parked = null; // a turn the server accepted (or offered) that has not streamed to us yet
    this.acked = new Set(); // streams this socket asked to replay
    this.snapshots = 0; // transcripts received over the socket
    this.calls = new Map(); // rpc id -> {resolve, reject, timer}
    this.branchNotice = null; // {id, text}: why the last branch switch at message `id` failed
    this.blocks = []; // the agent's context blocks (Think's get_context_blocks / ponder_context_blocks)
  }

  // -- state -------------------------------------------------------------------------------------

  get busy() {
    return this.pending.size > 0 || this.streams.size > 0 || this.parked !== null;
  }

  get status() {
    if (this.streams.size > 0) return "streaming";
    if (this.pending.size > 0 || this.parked !== null) return "submitted";
    return "idle";
  }

  revision(id) {
    return this.revs.get(id) || 0;
  }

  touch(message) {
    if (message && message.id != null) this.revs.set(message.id, this.revision(message.id) + 1);
  }

  emit(detail = {}) {
    this.dispatchEvent(new CustomEvent("change", { detail }));
  }

  // -- connection --------------------------------------------------------------------------------

  socketURL() {
    const params = new URLSearchParams(this.query);
    params.set("_pk", this.pk);
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    return `${scheme}://${location.host}${this.agentPath}?${params}`;
  }

  connect() {
    clearTimeout(this.timer);
    this.timer = null;
    if (this.ws && (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING)) return;
    this.connection = this.attempt ? "reconnecting" : "connecting";
    this.emit();
    let ws;
    try {
      ws = new WebSocket(this.socketURL());
    } catch (err) {
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    this.acked = new Set();
    ws.addEventListener("open", () => {
      if (this.ws !== ws) return;
      this.attempt = 0;
      this.connection = "open";
      this.emit();
      this.loadBlocks();
    });
    ws.addEventListener("message", (event) => {
      if (this.ws !== ws || typeof event.data !== "string") return;
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return;
      }
      if (frame && typeof frame === "object") this.onFrame(frame);
    });
    ws.addEventListener("close", (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      // Whatever was streaming is lost to this socket; the next connect snapshot tells the truth.
      this.streams.clear();
      this.pending.clear();
      this.parked = null;
      this.failCalls("the connection closed");
      if (event.code === 1008) {
        this.connection = "denied";
        this.closeReason = event.reason || "Not authorized";
        this.error = { text: `The server refused the connection: ${this.closeReason}` };
        this.emit();
        return;
      }
      this.scheduleReconnect();
    });
  }

  scheduleReconnect() {
    const base = Math.min(10000, 400 * 2 ** this.attempt);
    this.attempt += 1;
    this.connection = "reconnecting";
    this.emit();
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), base * (0.75 + Math.random() * 0.5));
  }

  /** Reconnect now (when the browser comes back online or the tab becomes visible). */
  nudge() {
    if (this.connection === "reconnecting") {
      this.attempt = Math.max(0, this.attempt - 1);
      this.connect();
    }
  }

  send(frame) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }

  // -- frames from the server --------------------------------------------------------------------

  onFrame(frame) {
    switch (frame.type) {
      case "cf_agent_identity":
        this.identity = frame;
        this.emit();
        break;
      case "cf_agent_chat_messages":
        this.snapshots += 1;
        if (Array.isArray(frame.messages)) this.replaceMessages(frame.messages, frame.connect === true);
        break;
      case "cf_agent_use_chat_response":
        this.onResponse(frame);
        break;
      case "cf_agent_message_updated":
        if (frame.message && typeof frame.message === "object") this.onMessageUpdated(frame.message);
        break;
      case "cf_agent_chat_clear":
        this.resetLocal();
        this.emit({ cleared: true });
        break;
      case "cf_agent_stream_resuming":
        if (typeof frame.id === "string") this.resume(frame.id);
        break;
      case "cf_agent_stream_pending":
        this.parked = typeof frame.id === "string" ? frame.id : "";
        this.emit();
        break;
      case "cf_agent_stream_resume_none":
        this.parked = null;
        this.emit();
        if (!this.busy) this.refreshBranches();
        break;
      case "cf_agent_error":
        this.error = { text: String(frame.error || "The server rejected a message.") };
        this.emit();
        break;
      case "rpc":
        this.onRPC(frame);
        break;
      case "ponder_context_blocks":
        if (Array.isArray(frame.blocks)) this.setBlocks(frame.blocks);
        break;
      default:
        break;
    }
  }

  /**
   * A turn is streaming (we connected in the middle of it, or it started while we were parked). The server
   * sends its chunks only after an ACK, replaying them from the start; load the stored transcript first so
   * the replay lands on it (a continuation extends the last stored assistant message).
   */
  async resume(id) {
    this.parked = id;
    this.emit();
    if (this.acked.has(id)) return;
    this.acked.add(id);
    const ws = this.ws;
    const snapshots = this.snapshots;
    try {
      const query = this.query ? `?${this.query}` : "";
      const response = await fetch(`${this.agentPath}/get-messages${query}`, {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      if (response.ok && this.ws === ws && !this.streams.has(id)) {
        const messages = await response.json();
        // A transcript that arrived over the socket meanwhile is newer than this response.
        if (Array.isArray(messages) && this.ws === ws && this.snapshots === snapshots) {
          this.replaceMessages(messages, false);
        }
      }
    } catch {
      /* replay onto what the page already shows */
    }
    if (this.ws === ws) this.send({ type: "cf_agent_stream_resume_ack", id });
  }

  replaceMessages(incoming, connect) {
    if (connect) {
      this.streams.clear();
      this.pending.clear();
    }
    const previous = new Map(this.messages.map((m) => [m.id, m]));
    const next = incoming.filter((m) => m && typeof m === "object" && typeof m.id === "string");
    for (const message of next) {
      const old = previous.get(message.id);
      if (!old || !sameJSON(old, message)) this.touch(message);
    }
    // Keep an assistant message still streaming that the snapshot does not hold yet.
    for (const stream of this.streams.values()) {
      if (!stream.builder) continue;
      const live = stream.builder.message;
      const index = next.findIndex((m) => m.id === live.id);
      if (index === -1) next.push(live);
      else {
        // The server's copy (older mid-stream, final just before `done`) replaces ours when the stream ends.
        stream.serverCopy = next[index];
        next[index] = live;
      }
    }
    this.messages = next;
    this.emit();
    if (!this.busy) this.refreshBranches();
  }

  onMessageUpdated(message) {
    let index = this.messages.findIndex((m) => m.id === message.id);
    if (index === -1) {
      const calls = new Set((message.parts || []).filter((p) => typeof p.toolCallId === "string").map((p) => p.toolCallId));
      index = this.messages.findIndex((m) => (m.parts || []).some((p) => calls.has(p.toolCallId)));
    }
    if (index === -1) return; // never append: it is not on the path this page shows
    const old = this.messages[index];
    this.messages[index] = message;
    for (const stream of this.streams.values()) {
      if (stream.builder && stream.builder.message === old) stream.builder = new MessageBuilder(message, true);
    }
    this.touch(message);
    this.emit();
  }

  onResponse(frame) {
    const id = frame.id;
    if (typeof id !== "string") return;
    if (this.parked === id) this.parked = null;
    if (frame.done) {
      const stream = this.streams.get(id);
      this.streams.delete(id);
      this.pending.delete(id);
      if (frame.error) this.error = { text: frame.body || "The request failed.", requestId: id };
      if (frame.outcome === "aborted" && stream && stream.messageId) {
        this.notes.set(stream.messageId, "stopped");
        const msg = this.messages.find((m) => m.id === stream.messageId);
        if (msg) this.touch(msg);
      }
      if (stream && stream.builder) {
        const live = stream.builder.message;
        const index = this.messages.indexOf(live);
        if (stream.serverCopy && index !== -1) this.messages[index] = stream.serverCopy;
        else {
          for (const part of live.parts) {
            if ((part.type === "text" || part.type === "reasoning") && part.state === "streaming") part.state = "done";
          }
        }
        this.touch(live);
      }
      this.emit({ done: id });
      if (!this.busy) this.refreshBranches();
      return;
    }
    this.pending.delete(id);
    if (frame.error) {
      this.error = { text: frame.body || "The request failed.", requestId: id };
      this.emit();
      return;
    }
    if (!frame.body) return;
    let chunk;
    try {
      chunk = JSON.parse(frame.body);
    } catch {
      return;
    }
    let stream = this.streams.get(id);
    if (!stream) {
      stream = { builder: null, messageId: null };
      this.streams.set(id, stream);
      if (chunk.type === "start") stream.builder = this.builderFor(frame, chunk);
      // Otherwise the page joined in the middle of a turn: it waits for the transcript instead.
      if (stream.builder) stream.messageId = stream.builder.message.id;
    }
    if (stream.builder) {
      const before = stream.builder.message.id;
      const outcome = stream.builder.apply(chunk);
      if (outcome === "cross") this.applyCross(chunk);
      if (stream.builder.errorText) this.error = { text: stream.builder.errorText, requestId: id };
      const message = stream.builder.message;
      if (message.id !== before) stream.messageId = message.id;
      this.touch(message);
    }
    this.emit({ chunk: id });
  }

  builderFor(frame, chunk) {
    if (frame.continuation) {
      for (let i = this.messages.length - 1; i >= 0; i--) {
        if (this.messages[i].role === "assistant") return new MessageBuilder(this.messages[i], true);
      }
    }
    const messageId = typeof chunk.messageId === "string" && chunk.messageId ? chunk.messageId : nanoid();
    let message = this.messages.find((m) => m.id === messageId);
    if (message) message.parts = []; // a replay of a stream this page already shows starts over
    else {
      message = { id: messageId, role: "assistant", parts: [] };
      this.messages.push(message);
    }
    return new MessageBuilder(message, false);
  }

  applyCross(chunk) {
    for (let i = this.messages.length - 1; i >= 0; i--) {
      const parts = this.messages[i].parts || [];
      for (let j = parts.length - 1; j >= 0; j--) {
        if (parts[j].toolCallId === chunk.toolCallId) {
          if (applyToolChunk(parts[j], chunk)) this.touch(this.messages[i]);
          return;
        }
      }
    }
  }

  resetLocal() {
    this.messages = [];
    this.streams.clear();
    this.pending.clear();
    this.parked = null;
    this.notes.clear();
    this.branches = {};
    this.error = null;
  }

  // -- actions -----------------------------------------------------------------------------------

  request(messages, trigger) {
    const id = nanoid(8);
    const body = JSON.stringify({ messages, trigger });
    if (!this.send({ type: "cf_agent_use_chat_request", id, init: { method: "POST", body } })) return null;
    this.pending.add(id);
    return id;
  }

  submit(text) {
    const value = text.trim();
    if (!value || this.connection !== "open") return false;
    const message = { id: nanoid(16), role: "user", parts: [{ type: "text", text: value }] };
    const history = [...this.messages, message];
    this.error = null;
    if (this.request(history, "submit-message") == null) return false;
    this.messages = history;
    this.touch(message);
    this.emit({ sent: message.id });
    return true;
  }

  /** Ask for another answer to the last user message; the old answer stays as a sibling branch. */
  regenerate() {
    if (this.busy || this.connection !== "open") return false;
    let end = this.messages.length;
    while (end > 0 && this.messages[end - 1].role === "assistant") end -= 1;
    if (end === 0) return false;
    const history = this.messages.slice(0, end);
    this.error = null;
    if (this.request(history, "regenerate-message") == null) return false;
    this.messages = history;
    this.emit();
    return true;
  }

  stop() {
    const ids = new Set([...this.pending, ...this.streams.keys()]);
    if (this.parked) ids.add(this.parked);
    for (const id of ids) {
      this.send({ type: "cf_agent_chat_request_cancel", id });
    }
  }

  answerApproval(toolCallId, approved) {
    for (const message of this.messages) {
      const part = (message.parts || []).find((p) => p.toolCallId === toolCallId);
      if (!part) continue;
      if (part.state !== "approval-requested") return false;
      if (!this.send({ type: "cf_agent_tool_approval", toolCallId, approved, autoContinue: true })) return false;
      part.state = approved ? "approval-responded" : "output-denied";
      part.approval = { ...(part.approval || {}), approved };
      this.touch(message);
      this.emit();
      return true;
    }
    return false;
  }

  clear() {
    if (!this.send({ type: "cf_agent_chat_clear" })) return false;
    this.resetLocal();
    this.emit({ cleared: true });
    return true;
  }

  // -- branches (regenerated answers are siblings in the server's message tree) ------------------

  httpURL(sub, params) {
    const query = new URLSearchParams(this.query);
    for (const [key, value] of params) query.append(key, value);
    return `${this.uiPath}/${sub}?${query}`;
  }

  async refreshBranches() {
    const ids = this.messages.slice(-500, -1).map((m) => m.id);
    const seq = ++this.branchSeq;
    if (ids.length === 0) {
      this.branches = {};
      this.emit({ branches: true });
      return;
    }
    try {
      const response = await fetch(this.httpURL("branches", ids.map((id) => ["id", id])), {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      if (!response.ok) return;
      const data = await response.json();
      if (seq !== this.branchSeq) return;
      this.branches = data && typeof data.branches === "object" ? data.branches : {};
      this.emit({ branches: true });
    } catch {
      /* the page works without branch controls */
    }
  }

  /** Sibling info for the message at `index`: {position, total, siblings, parentId} or null. */
  siblingsAt(index) {
    if (index <= 0) return null;
    const parentId = this.messages[index - 1].id;
    const siblings = this.branches[parentId];
    if (!Array.isArray(siblings) || siblings.length < 2) return null;
    const position = siblings.indexOf(this.messages[index].id);
    if (position === -1) return null;
    return { position, total: siblings.length, siblings, parentId };
  }

  /**
   * Make the sibling `delta` steps away from the message at `index` the server's active branch. The server
   * stores the choice and broadcasts the new path (cf_agent_chat_messages) to every tab, this one included.
   */
  async switchBranch(index, delta) {
    const info = this.siblingsAt(index);
    if (!info || this.busy || this.switching) return false;
    const target = info.siblings[info.position + delta];
    if (!target) return false;
    const anchor = this.messages[index].id;
    this.switching = true;
    this.branchNotice = null;
    this.emit();
    try {
      await this.showBranch(target);
      return true;
    } catch (err) {
      const text = `Could not switch answers: ${err.message}`;
      const shown = this.messages.find((m) => m.id === anchor || m.id === target);
      if (!shown) this.error = { text };
      else {
        const notice = { id: shown.id, text };
        this.branchNotice = notice;
        setTimeout(() => {
          if (this.branchNotice !== notice) return;
          this.branchNotice = null;
          this.emit();
        }, 8000);
      }
      return false;
    } finally {
      this.switching = false;
      this.emit({ switched: true });
    }
  }

  /** Ask the server to show the path through `messageId` (and its newest continuation). Throws on refusal. */
  async showBranch(messageId) {
    const snapshots = this.snapshots;
    const path = await this.call("set_active_branch", [messageId]);
    // The broadcast normally arrives first; the reply carries the same path in case it did not.
    if (this.snapshots === snapshots && Array.isArray(path)) this.replaceMessages(path, false);
  }

  /** Full-text search over every stored message (all branches): [{id, role, content}], best first. */
  search(query, limit = 20) {
    return this.call("search_messages", [query, limit]);
  }

  /** The agent's context blocks (label, description, content, tokens, max_tokens, writable, ...), once. */
  async loadBlocks() {
    try {
      const blocks = await this.call("get_context_blocks", []);
      if (Array.isArray(blocks)) this.setBlocks(blocks);
    } catch {
      // Not a Think agent, or the socket closed: the panel keeps what it had (a frame may still come).
    }
  }

  setBlocks(blocks) {
    this.blocks = blocks.filter((b) => b && typeof b === "object" && typeof b.label === "string");
    this.emit({ blocks: true });
  }

  // -- rpc (Think's @callable methods) -------------------------------------------------------------

  /** Call a @callable method over the socket; resolves with its result, rejects with its error text. */
  call(method, args = [], timeout = 15000) {
    return new Promise((resolve, reject) => {
      const id = uuid();
      if (!this.send({ type: "rpc", id, method, args })) {
        reject(new Error("not connected"));
        return;
      }
      const timer = setTimeout(() => {
        this.calls.delete(id);
        reject(new Error("the server did not answer"));
      }, timeout);
      this.calls.set(id, { resolve, reject, timer });
    });
  }

  onRPC(frame) {
    const call = this.calls.get(frame.id);
    if (!call) return;
    if (frame.success && frame.done === false) return; // a streaming callable's chunk: none used here
    this.calls.delete(frame.id);
    clearTimeout(call.timer);
    if (frame.success) call.resolve(frame.result);
    else call.reject(new Error(String(frame.error || "the call failed")));
  }

  failCalls(reason) {
    for (const call of this.calls.values()) {
      clearTimeout(call.timer);
      call.reject(new Error(reason));
    }
    this.calls.clear();
  }
}
