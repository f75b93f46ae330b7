// The ponder web chat page: renders what chat.js holds and turns clicks and keys into protocol frames.
// Every piece of text from the server is inserted as text (textContent / text nodes), never as HTML.

import { ChatClient, isToolPart, toolName } from "./chat.js";
import { renderMarkdown } from "./markdown.js";

// -- icons (constant, trusted SVG path data) ------------------------------------------------------

const ICONS = {
  trash: "M4 7h16M10 11v6M14 11v6M5.5 7l1 12.1A2 2 0 0 0 8.5 21h7a2 2 0 0 0 2-1.9l1-12.1M9 7V4.5A1.5 1.5 0 0 1 10.5 3h3A1.5 1.5 0 0 1 15 4.5V7",
  send: "M12 19V5M5.5 11.5 12 5l6.5 6.5",
  stop: "M8 8h8v8H8z",
  down: "M12 5v14M5.5 12.5 12 19l6.5-6.5",
  copy: "M9 9h10v10H9zM15 9V5H5v10h4",
  check: "M5 12.5l4.5 4.5L19 7.5",
  refresh: "M20 12a8 8 0 1 1-2.34-5.66M20 4v5h-5",
  left: "M14.5 6 8.5 12l6 6",
  right: "M9.5 6l6 6-6 6",
  tool: "M14.7 6.3a4 4 0 0 0-5.2 5.2L4 17l3 3 5.5-5.5a4 4 0 0 0 5.2-5.2l-2.6 2.6-2.5-.5-.5-2.5z",
  spark: "M12 3.5l1.8 4.9 4.9 1.8-4.9 1.8L12 16.9l-1.8-4.9-4.9-1.8 4.9-1.8zM18.5 15.5l.7 1.8 1.8.7-1.8.7-.7 1.8-.7-1.8-1.8-.7 1.8-.7z",
  bulb: "M9.5 18h5M10.5 21h3M12 3a6 6 0 0 0-3.6 10.8c.7.5 1.1 1.3 1.1 2.1V16h5v-.1c0-.8.4-1.6 1.1-2.1A6 6 0 0 0 12 3z",
  alert: "M12 9v4.5M12 17h.01M10.3 4 2.6 17.5A2 2 0 0 0 4.3 20.5h15.4a2 2 0 0 0 1.7-3L13.7 4a2 2 0 0 0-3.4 0z",
  chevron: "M6.5 9.5 12 15l5.5-5.5",
  shield: "M12 3 5 6v5.5c0 4.3 3 8.1 7 9.5 4-1.4 7-5.2 7-9.5V6z",
  link: "M10 14a4 4 0 0 0 5.7 0l3-3a4 4 0 0 0-5.7-5.7l-1 1M14 10a4 4 0 0 0-5.7 0l-3 3a4 4 0 0 0 5.7 5.7l1-1",
  file: "M14 3H7a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h10a2 2 0 0 0 2-2V8zM14 3v5h5",
  search: "M11 18a7 7 0 1 0 0-14 7 7 0 0 0 0 14zM20 20l-4-4",
  close: "M6 6l12 12M18 6 6 18",
  memory: "M4 6c0-1.7 3.6-3 8-3s8 1.3 8 3-3.6 3-8 3-8-1.3-8-3zM4 6v12c0 1.7 3.6 3 8 3s8-1.3 8-3V6M4 12c0 1.7 3.6 3 8 3s8-1.3 8-3",
  branch: "M7 4v10M7 14a3 3 0 1 0 0 6 3 3 0 0 0 0-6zM17 4a3 3 0 1 0 0 6 3 3 0 0 0 0-6zM17 10c0 4-10 2-10 6",
};

function icon(name, className = "icon") {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("class", className);
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  const path = document.createElementNS("http://www.w3.org/2000/svg", "path");
  path.setAttribute("d", ICONS[name] || "");
  if (name === "stop") path.setAttribute("class", "filled");
  svg.append(path);
  return svg;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text != null) node.textContent = text;
  return node;
}

function button(className, label, iconName, text) {
  const b = el("button", className);
  b.type = "button";
  b.setAttribute("aria-label", label);
  b.title = label;
  if (iconName) b.append(icon(iconName));
  if (text) b.append(el("span", "btn-label", text));
  return b;
}

for (const slot of document.querySelectorAll("[data-icon]")) slot.replaceWith(icon(slot.dataset.icon));

// -- setup ----------------------------------------------------------------------------------------

const config = JSON.parse(document.querySelector('meta[name="ponder-config"]').content);
const forwarded = new URLSearchParams(location.search);
forwarded.delete("name");
const client = new ChatClient({
  agentPath: config.agentPath,
  uiPath: `${config.agentPath}/ui`,
  query: forwarded.toString(),
});

const $ = (id) => document.getElementById(id);
const scroller = $("scroller");
const thread = $("thread");
const empty = $("empty");
const input = $("input");
const sendButton = $("send");
const stopButton = $("stop");
const clearButton = $("clear");
const toBottom = $("to-bottom");
const connText = $("conn-text");
const conn = $("conn");

$("title").textContent = config.title || config.className || "Chat";
$("subtitle").textContent = `${config.agent} · ${config.name}`;
$("empty-title").textContent = "How can I help?";

const views = new Map(); // message id -> {node, sig}
const openState = new Map(); // "<message id>:<part index>" -> bool (user toggled)
let stick = true;
let foundId = null; // the message a search result pointed at (highlighted for a moment)
let reveal = null; // a message id to scroll into view on the next render

// -- copy -----------------------------------------------------------------------------------------

async function copyText(text, btn) {
  try {
    if (navigator.clipboard && window.isSecureContext) await navigator.clipboard.writeText(text);
    else {
      const area = el("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.className = "sr-only";
      document.body.append(area);
      area.select();
      document.execCommand("copy");
      area.remove();
    }
    if (btn) {
      btn.classList.add("copied");
      const label = btn.querySelector(".btn-label");
      const before = label ? label.textContent : null;
      if (label) label.textContent = "Copied";
      setTimeout(() => {
        btn.classList.remove("copied");
        if (label) label.textContent = before;
      }, 1400);
    }
  } catch {
    /* clipboard refused; nothing to do */
  }
}

// -- parts ----------------------------------------------------------------------------------------

function details(key, defaultOpen, className) {
  const d = el("details", className);
  d.open = openState.has(key) ? openState.get(key) : defaultOpen;
  d.addEventListener("toggle", () => openState.set(key, d.open));
  return d;
}

function renderText(part, live) {
  const box = el("div", "md");
  box.append(renderMarkdown(part.text || "", { onCopy: copyText }));
  if (live && part.state === "streaming") box.classList.add("typing");
  return box;
}

function renderReasoning(part, key) {
  const streaming = part.state === "streaming";
  const d = details(key, false, "reasoning");
  if (streaming) d.classList.add("streaming");
  const summary = el("summary");
  summary.append(icon("bulb"), el("span", "reasoning-label", streaming ? "Thinking…" : "Reasoning"), icon("chevron", "icon chev"));
  const body = el("div", "reasoning-body md");
  body.append(renderMarkdown(part.text || "", { onCopy: copyText }));
  d.append(summary, body);
  return d;
}

const BADGES = {
  "input-streaming": ["Preparing", "run"],
  "input-available": ["Running", "run"],
  "approval-requested": ["Needs approval", "warn"],
  "approval-responded": ["Approved", "info"],
  "output-available": ["Done", "ok"],
  "output-error": ["Error", "bad"],
  "output-denied": ["Denied", "muted"],
};

function pretty(value) {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}

function preview(input) {
  if (!input || typeof input !== "object") return "";
  const entries = Object.entries(input);
  if (!entries.length) return "";
  const text = entries
    .slice(0, 3)
    .map(([k, v]) => `${k}: ${typeof v === "string" ? JSON.stringify(v) : pretty(v).replace(/\s+/g, " ")}`)
    .join(", ");
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

function section(label, value, className = "") {
  const s = el("div", `tool-section ${className}`.trim());
  s.append(el("div", "tool-label", label));
  const pre = el("pre", "tool-pre");
  pre.append(el("code", null, value));
  s.append(pre);
  return s;
}

function renderTool(part, key, busy) {
  const name = toolName(part);
  const card = el("div", "tool");
  card.dataset.state = part.state || "";
  card.dataset.tool = name;
  let [label, tone] = BADGES[part.state] || [part.state || "Unknown", "muted"];
  if (part.state === "input-available" && !busy) [label, tone] = ["Pending", "muted"];
  if (part.state === "approval-responded" && busy) label = "Approved · running";
  if (part.state === "output-available" && part.preliminary) [label, tone] = ["Working", "run"];
  const wasAsked = part.approval != null || part.state === "approval-requested";
  const d = details(key, wasAsked || part.state === "output-error", "tool-details");
  const summary = el("summary", "tool-head");
  const badge = el("span", `badge badge-${tone}`, label);
  if (tone === "run") badge.prepend(el("span", "spinner"));
  summary.append(
    el("span", "tool-icon"),
    el("span", "tool-name", part.title || name),
    el("span", "tool-preview", preview(part.input)),
    badge,
    icon("chevron", "icon chev"),
  );
  summary.querySelector(".tool-icon").append(icon("tool"));
  const body = el("div", "tool-body");
  if (part.input !== undefined && part.state !== "input-streaming") body.append(section("Input", pretty(part.input)));
  if (part.state === "output-available") body.append(section(part.preliminary ? "Progress" : "Output", pretty(part.output), "ok"));
  if (part.state === "output-error") body.append(section("Error", part.errorText || "The tool failed.", "bad"));
  if (part.state === "output-denied") body.append(el("p", "tool-note", "You denied this call; the tool did not run."));
  if (!body.childNodes.length) body.append(el("p", "tool-note", "Waiting for the input…"));
  d.append(summary, body);
  card.append(d);
  if (part.state === "approval-requested") {
    const bar = el("div", "approval");
    const text = el("div", "approval-text");
    text.append(icon("shield"), el("span", null, "This tool needs your approval to run."));
    const actions = el("div", "approval-actions");
    const deny = button("btn btn-outline", `Deny ${name}`, null, "Deny");
    const approve = button("btn btn-primary", `Approve ${name}`, "check", "Approve");
    if (client.connection !== "open") {
      deny.disabled = approve.disabled = true;
      text.lastChild.textContent = "This tool needs your approval to run (reconnecting…).";
    }
    deny.addEventListener("click", () => client.answerApproval(part.toolCallId, false));
    approve.addEventListener("click", () => client.answerApproval(part.toolCallId, true));
    actions.append(deny, approve);
    bar.append(text, actions);
    card.append(bar);
  }
  return card;
}

function renderFile(part) {
  const url = typeof part.url === "string" ? part.url : "";
  if ((part.mediaType || "").startsWith("image/") && (url.startsWith("data:image/") || url.startsWith("/"))) {
    const img = el("img", "file-image");
    img.src = url;
    img.alt = part.filename || "Image";
    return img;
  }
  const chip = el("span", "chip");
  chip.append(icon("file"), el("span", null, part.filename || part.mediaType || "File"));
  return chip;
}

function renderSources(parts) {
  const row = el("div", "sources");
  row.append(el("span", "sources-label", "Sources"));
  for (const part of parts) {
    const chip = el(part.url ? "a" : "span", "chip");
    if (part.url) {
      try {
        const url = new URL(part.url);
        if (url.protocol === "http:" || url.protocol === "https:") {
          chip.href = url.href;
          chip.target = "_blank";
          chip.rel = "noopener noreferrer nofollow";
        }
      } catch {
        /* not a URL: shown as text */
      }
    }
    chip.append(icon("link"), el("span", null, part.title || part.filename || part.url || "source"));
    row.append(chip);
  }
  return row;
}

function messageText(message) {
  return (message.parts || [])
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("\n\n");
}

// -- messages -------------------------------------------------------------------------------------

function branchControl(index, info) {
  const box = el("div", "branch");
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", "Answer versions");
  const prev = button("icon-btn", "Previous answer", "left");
  const next = button("icon-btn", "Next answer", "right");
  prev.disabled = info.position === 0 || client.busy || client.switching;
  next.disabled = info.position === info.total - 1 || client.busy || client.switching;
  prev.addEventListener("click", () => client.switchBranch(index, -1));
  next.addEventListener("click", () => client.switchBranch(index, 1));
  const label = el("span", "branch-label", `${info.position + 1} / ${info.total}`);
  label.setAttribute("aria-live", "polite");
  box.append(prev, label, next);
  if (client.switching) box.classList.add("busy");
  return box;
}

/** Why the last switch at this message failed (a turn is running, the connection dropped…). */
function branchNotice(message) {
  const notice = client.branchNotice;
  if (!notice || notice.id !== message.id) return null;
  const p = el("p", "branch-notice");
  p.setAttribute("role", "alert");
  p.append(icon("alert"), el("span", null, notice.text));
  return p;
}

function renderMessage(message, index, ctx) {
  const role = message.role === "user" ? "user" : message.role === "assistant" ? "assistant" : "system";
  const node = el("article", `msg msg-${role}`);
  node.dataset.id = message.id;
  node.dataset.role = role;
  const info = client.siblingsAt(index);
  if (role === "user") {
    node.setAttribute("aria-label", "You");
    const bubble = el("div", "bubble");
    for (const part of message.parts || []) {
      if (part.type === "text") bubble.append(el("div", "user-text", part.text || ""));
      else if (part.type === "file") bubble.append(renderFile(part));
    }
    node.append(bubble);
    if (info) {
      const actions = el("div", "msg-actions");
      actions.append(branchControl(index, info));
      node.append(actions);
    }
    const notice = branchNotice(message);
    if (notice) node.append(notice);
    return node;
  }
  node.setAttribute("aria-label", role === "assistant" ? "Assistant" : "System");
  const avatar = el("div", "avatar");
  avatar.append(icon("spark"));
  const body = el("div", "msg-body");
  const parts = message.parts || [];
  const sources = [];
  parts.forEach((part, i) => {
    const key = `${message.id}:${i}`;
    if (part.type === "text") {
      if (part.text || part.state === "streaming") body.append(renderText(part, ctx.live));
    } else if (part.type === "reasoning") {
      if (part.text || part.state === "streaming") body.append(renderReasoning(part, key));
    } else if (isToolPart(part)) body.append(renderTool(part, key, client.busy));
    else if (part.type === "file") body.append(renderFile(part));
    else if (part.type === "source-url" || part.type === "source-document") sources.push(part);
  });
  if (sources.length) body.append(renderSources(sources));
  if (ctx.live && !parts.some((p) => p.type !== "step-start")) body.append(typingDots());
  if (client.notes.get(message.id) === "stopped") body.append(el("p", "note", "Stopped"));
  if (!ctx.live) {
    const actions = el("div", "msg-actions");
    const text = messageText(message);
    if (text) {
      const copy = button("icon-btn", "Copy answer", "copy");
      copy.addEventListener("click", () => copyText(text, copy));
      actions.append(copy);
    }
    if (ctx.lastAssistant) {
      const regen = button("icon-btn", "Regenerate response", "refresh");
      regen.disabled = client.busy || client.connection !== "open" || client.switching;
      regen.addEventListener("click", () => {
        stick = true;
        client.regenerate();
      });
      actions.append(regen);
    }
    if (info) actions.append(branchControl(index, info));
    if (actions.childNodes.length) body.append(actions);
  }
  const notice = branchNotice(message);
  if (notice) body.append(notice);
  node.append(avatar, body);
  return node;
}

function typingDots() {
  const dots = el("div", "dots");
  dots.setAttribute("role", "status");
  dots.setAttribute("aria-label", "Assistant is thinking");
  dots.append(el("span"), el("span"), el("span"));
  return dots;
}

function liveIds() {
  const ids = new Set();
  for (const stream of client.streams.values()) if (stream.builder) ids.add(stream.builder.message.id);
  return ids;
}

// -- render ---------------------------------------------------------------------------------------

let frame = 0;
let rendered = false;
function scheduleRender() {
  if (!frame) frame = requestAnimationFrame(render);
}

function render() {
  frame = 0;
  const nearBottom = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120;
  const follow = stick || nearBottom;
  const messages = client.messages;
  const live = liveIds();
  const busy = client.busy;
  let lastAssistant = -1;
  if (messages.length && messages[messages.length - 1].role === "assistant") lastAssistant = messages.length - 1;

  for (const extra of thread.querySelectorAll(":scope > .extra")) extra.remove();
  const seen = new Set();
  let cursor = thread.firstChild;
  messages.forEach((message, index) => {
    const info = client.siblingsAt(index);
    const ctx = { live: live.has(message.id), lastAssistant: index === lastAssistant };
    // Only messages with controls or tool badges depend on the page being busy or connected.
    const interactive = ctx.lastAssistant || info || (message.parts || []).some(isToolPart);
    const sig = [
      client.revision(message.id), ctx.live, ctx.lastAssistant,
      interactive ? `${busy}|${client.connection}|${client.switching}` : "",
      info ? `${info.position}/${info.total}` : "", client.notes.get(message.id) || "",
      client.branchNotice && client.branchNotice.id === message.id ? client.branchNotice.text : "",
    ].join("|");
    let view = views.get(message.id);
    if (!view || view.sig !== sig) {
      const node = renderMessage(message, index, ctx);
      if (view) {
        if (cursor === view.node) cursor = node;
        view.node.replaceWith(node);
      } else if (rendered) node.classList.add("enter"); // animate arrivals, not re-renders or the first paint
      view = { node, sig };
      views.set(message.id, view);
    }
    seen.add(message.id);
    view.node.classList.toggle("found", message.id === foundId);
    if (view.node !== cursor) thread.insertBefore(view.node, cursor);
    cursor = view.node.nextSibling;
  });
  for (const [id, view] of views) {
    if (!seen.has(id)) {
      view.node.remove();
      views.delete(id);
    }
  }
  // Trailing extras: the "thinking" dots while a request waits, and the error alert.
  const liveHasContent = [...client.streams.values()].some(
    (s) => s.builder && s.builder.message.parts.some((p) => p.type !== "step-start"),
  );
  if (busy && !liveHasContent && !messages.some((m) => live.has(m.id))) {
    const row = el("div", "msg msg-assistant extra");
    const avatar = el("div", "avatar");
    avatar.append(icon("spark"));
    const body = el("div", "msg-body");
    body.append(typingDots());
    row.append(avatar, body);
    thread.append(row);
  }
  if (client.error) {
    const alert = el("div", "alert extra");
    alert.setAttribute("role", "alert");
    alert.append(icon("alert"), el("span", "alert-text", client.error.text));
    if (!busy && messages.length && client.connection === "open") {
      const retry = button("btn btn-outline btn-small", "Retry", "refresh", "Retry");
      retry.addEventListener("click", () => {
        stick = true;
        client.regenerate();
      });
      alert.append(retry);
    }
    thread.append(alert);
  }

  empty.hidden = messages.length > 0 || busy || !!client.error;
  document.body.dataset.status = client.status;
  document.body.dataset.connection = client.connection;
  conn.dataset.state = client.connection;
  connText.textContent = {
    open: "Connected",
    connecting: "Connecting…",
    reconnecting: "Reconnecting…",
    denied: "Not authorized",
  }[client.connection] || client.connection;
  conn.title = client.connection === "denied" ? client.closeReason : "";
  const open = client.connection === "open";
  stopButton.hidden = !busy;
  sendButton.hidden = busy;
  sendButton.disabled = !open || !input.value.trim();
  input.disabled = client.connection === "denied";
  input.placeholder = open ? "Send a message…" : client.connection === "denied" ? "Not authorized" : "Connecting…";
  clearButton.disabled = !open || (!messages.length && !client.error);

  if (reveal && views.has(reveal)) {
    const node = views.get(reveal).node;
    const tall = node.offsetHeight > scroller.clientHeight * 0.7;
    node.scrollIntoView({ block: tall ? "start" : "center", behavior: rendered ? "smooth" : "auto" });
    reveal = null;
  } else if (follow) scroller.scrollTop = scroller.scrollHeight;
  stick = false;
  rendered = true;
  updateToBottom();
}

function updateToBottom() {
  toBottom.hidden = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 160;
}

// -- events ---------------------------------------------------------------------------------------

client.addEventListener("change", (event) => {
  if (event.detail && event.detail.blocks) {
    renderMemory();
    return;
  }
  if (event.detail && (event.detail.sent || event.detail.cleared)) stick = true;
  if (event.detail && event.detail.cleared) openState.clear();
  scheduleRender();
});

function autosize() {
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight, 220)}px`;
}

function submit() {
  if (client.busy) return;
  if (client.submit(input.value)) {
    input.value = "";
    autosize();
    stick = true;
  }
  scheduleRender();
}

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  submit();
});
input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
    event.preventDefault();
    submit();
  }
});
input.addEventListener("input", () => {
  autosize();
  sendButton.disabled = client.connection !== "open" || !input.value.trim();
});
stopButton.addEventListener("click", () => client.stop());
document.addEventListener("keydown", (event) => {
  if (event.defaultPrevented) return;
  if (!memoryBox.hidden) {
    if (event.key === "Escape") {
      event.preventDefault();
      closeMemory();
    }
    return;
  }
  if (!searchBox.hidden) {
    if (event.key === "Escape") {
      event.preventDefault();
      closeSearch();
    }
    return;
  }
  const typing = event.target instanceof HTMLElement && event.target.closest("input, textarea, [contenteditable]");
  if ((event.key === "k" && (event.ctrlKey || event.metaKey)) || (event.key === "/" && !typing && !event.ctrlKey && !event.metaKey && !event.altKey)) {
    event.preventDefault();
    openSearch();
  } else if (event.key === "Escape" && client.busy) client.stop();
});

let clearTimer = 0;
clearButton.addEventListener("click", () => {
  if (!clearButton.classList.contains("confirm")) {
    clearButton.classList.add("confirm");
    clearButton.querySelector(".btn-label").textContent = "Confirm clear";
    clearButton.setAttribute("aria-label", "Confirm: clear the whole conversation");
    clearTimeout(clearTimer);
    clearTimer = setTimeout(resetClear, 4000);
    return;
  }
  resetClear();
  client.clear();
  input.focus();
});
function resetClear() {
  clearTimeout(clearTimer);
  clearButton.classList.remove("confirm");
  clearButton.querySelector(".btn-label").textContent = "Clear";
  clearButton.setAttribute("aria-label", "Clear conversation");
}

scroller.addEventListener("scroll", updateToBottom, { passive: true });
toBottom.addEventListener("click", () => {
  scroller.scrollTo({ top: scroller.scrollHeight, behavior: "smooth" });
});
window.addEventListener("online", () => client.nudge());
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") client.nudge();
});
window.addEventListener("resize", updateToBottom);

// -- search (Think's search_messages over rpc; every stored message, on every branch) --------------

const searchBox = $("search");
const searchInput = $("search-input");
const searchStatus = $("search-status");
const searchResults = $("search-results");
const appRoot = document.querySelector(".app");
let searchSeq = 0;
let searchTimer = 0;
let searchReturn = null;
let foundTimer = 0;

function openSearch() {
  if (!searchBox.hidden) return;
  searchReturn = document.activeElement;
  searchBox.hidden = false;
  $("search-open").setAttribute("aria-expanded", "true");
  appRoot.inert = true;
  document.body.classList.add("searching");
  searchInput.focus();
  searchInput.select();
  if (!searchInput.value.trim()) showSearchHint();
}

function closeSearch() {
  if (searchBox.hidden) return;
  searchBox.hidden = true;
  $("search-open").setAttribute("aria-expanded", "false");
  appRoot.inert = false;
  document.body.classList.remove("searching");
  if (searchReturn && searchReturn.isConnected && searchReturn !== document.body) searchReturn.focus();
  else if (matchMedia("(pointer: fine)").matches) input.focus();
  searchReturn = null;
}

function showSearchHint() {
  searchResults.replaceChildren();
  searchStatus.textContent = "Type a word or phrase to search every message, on every branch.";
}

/** `content` around the first hit of `query` (or of one of its words), hits wrapped in <mark> as text nodes. */
function snippet(content, query) {
  const text = String(content || "").replace(/\s+/g, " ").trim();
  const lower = text.toLowerCase();
  const needles = [query.trim().replace(/\s+/g, " "), ...query.split(/\s+/)].map((n) => n.toLowerCase()).filter(Boolean);
  let at = -1;
  let needle = "";
  for (const n of needles) {
    at = lower.indexOf(n);
    if (at !== -1) {
      needle = n;
      break;
    }
  }
  let start = 0;
  let end = Math.min(text.length, 160);
  if (at !== -1) {
    start = Math.max(0, at - 50);
    if (start > 0) {
      const space = text.indexOf(" ", start);
      if (space !== -1 && space < at) start = space + 1;
    }
    end = Math.min(text.length, Math.max(at + needle.length + 110, start + 160));
  }
  const out = el("span", "hit-text");
  if (start > 0) out.append("…");
  const part = text.slice(start, end);
  const partLower = lower.slice(start, end);
  let i = 0;
  while (needle) {
    const j = partLower.indexOf(needle, i);
    if (j === -1) break;
    out.append(part.slice(i, j), el("mark", null, part.slice(j, j + needle.length)));
    i = j + needle.length;
  }
  out.append(part.slice(i));
  if (end < text.length) out.append("…");
  return out;
}

const ROLE_NAMES = { user: "You", assistant: "Assistant", system: "System" };

function renderResults(results, query) {
  searchResults.replaceChildren();
  const shown = new Set(client.messages.map((m) => m.id));
  for (const result of results) {
    const onPath = shown.has(result.id);
    const item = el("li");
    const hit = el("button", "hit");
    hit.type = "button";
    hit.dataset.id = result.id;
    hit.dataset.role = result.role;
    const head = el("span", "hit-head");
    head.append(el("span", `hit-role hit-role-${ROLE_NAMES[result.role] ? result.role : "system"}`, ROLE_NAMES[result.role] || String(result.role || "message")));
    if (!onPath) {
      const where = el("span", "hit-where");
      where.append(icon("branch"), el("span", null, "Other branch"));
      head.append(where);
      hit.title = "Show the branch with this message";
    } else hit.title = "Scroll to this message";
    hit.append(head, snippet(result.content, query));
    hit.addEventListener("click", () => pick(result.id, hit));
    item.append(hit);
    searchResults.append(item);
  }
  const n = results.length;
  searchStatus.textContent = n ? `${n} ${n === 1 ? "message" : "messages"} ${n >= 20 ? "(the best 20)" : ""}`.trim() : `No messages match “${query}”.`;
}

async function runSearch() {
  clearTimeout(searchTimer);
  searchTimer = 0;
  const query = searchInput.value.trim();
  const seq = ++searchSeq;
  if (!query) {
    showSearchHint();
    return;
  }
  searchStatus.textContent = "Searching…";
  try {
    const results = await client.search(query, 20);
    if (seq !== searchSeq) return;
    renderResults(Array.isArray(results) ? results : [], query);
  } catch (err) {
    if (seq !== searchSeq) return;
    searchResults.replaceChildren();
    searchStatus.textContent = `Search failed: ${err.message}`;
  }
}

async function pick(id, hit) {
  if (!client.messages.some((m) => m.id === id)) {
    if (client.busy) {
      searchStatus.textContent = "Wait for the answer to finish before switching branches.";
      return;
    }
    hit.disabled = true;
    searchStatus.textContent = "Opening that branch…";
    try {
      await client.showBranch(id);
    } catch (err) {
      searchStatus.textContent = `Could not open that branch: ${err.message}`;
      hit.disabled = false;
      return;
    }
  }
  closeSearch();
  foundId = reveal = id;
  clearTimeout(foundTimer);
  foundTimer = setTimeout(() => {
    foundId = null;
    scheduleRender();
  }, 2400);
  scheduleRender();
}

$("search-open").addEventListener("click", openSearch);
$("search-close").addEventListener("click", closeSearch);
$("search-scrim").addEventListener("click", closeSearch);
searchInput.addEventListener("input", () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(runSearch, 180);
});
searchInput.addEventListener("keydown", (event) => {
  if (event.key === "Enter") {
    event.preventDefault();
    const first = searchResults.querySelector(".hit");
    if (first && !searchTimer) first.click();
    else runSearch();
  } else if (event.key === "ArrowDown") {
    event.preventDefault();
    const first = searchResults.querySelector(".hit");
    if (first) first.focus();
  }
});
searchResults.addEventListener("keydown", (event) => {
  if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
  event.preventDefault();
  const hits = [...searchResults.querySelectorAll(".hit")];
  const at = hits.indexOf(document.activeElement);
  const next = at + (event.key === "ArrowDown" ? 1 : -1);
  if (next < 0) searchInput.focus();
  else if (hits[next]) hits[next].focus();
});

// -- memory (the agent's context blocks: get_context_blocks over rpc, live ponder_context_blocks frames) ---

const memoryBox = $("memory");
const memoryOpen = $("memory-open");
const memoryList = $("memory-blocks");
let memoryReturn = null;

function openMemory() {
  if (!memoryBox.hidden || !client.blocks.length) return;
  memoryReturn = document.activeElement;
  memoryBox.hidden = false;
  memoryOpen.setAttribute("aria-expanded", "true");
  document.body.classList.add("searching");
  renderMemory();
  client.loadBlocks();
  $("memory-close").focus();
}

function closeMemory() {
  if (memoryBox.hidden) return;
  memoryBox.hidden = true;
  memoryOpen.setAttribute("aria-expanded", "false");
  document.body.classList.remove("searching");
  if (memoryReturn && memoryReturn.isConnected && memoryReturn !== document.body) memoryReturn.focus();
  memoryReturn = null;
}

function memoryBlock(block) {
  const item = el("li", "mem-block");
  item.dataset.label = block.label;
  const head = el("div", "mem-head");
  head.append(el("span", "mem-label", block.label));
  const writable = block.writable === true;
  const kind = typeof block.kind === "string" ? block.kind : writable ? "writable" : "readonly";
  const badge = el("span", `mem-badge mem-badge-${writable ? "writable" : "readonly"}`, writable ? "writable" : kind === "readonly" ? "read-only" : kind);
  head.append(badge);
  item.append(head);
  if (block.description) item.append(el("p", "mem-desc", String(block.description)));
  const tokens = Number(block.tokens) || 0;
  const max = Number(block.max_tokens) || 0;
  const usage = el("div", "mem-usage");
  if (max > 0) {
    const pct = Math.round((tokens / max) * 100);
    const bar = el("div", "mem-bar");
    bar.setAttribute("role", "meter");
    bar.setAttribute("aria-label", `${block.label} usage`);
    bar.setAttribute("aria-valuemin", "0");
    bar.setAttribute("aria-valuemax", String(max));
    bar.setAttribute("aria-valuenow", String(Math.min(tokens, max)));
    const fill = el("div", "mem-fill");
    fill.style.width = `${Math.min(100, pct)}%`;
    if (pct >= 90) bar.classList.add("mem-bar-high");
    bar.append(fill);
    usage.append(bar, el("span", "mem-count", `${tokens} / ${max} tokens · ${pct}%`));
  } else {
    usage.append(el("span", "mem-count", `${tokens} tokens`));
  }
  item.append(usage);
  const content = String(block.content || "");
  item.append(content ? el("div", "mem-content", content) : el("div", "mem-content mem-empty", "Empty"));
  return item;
}

function renderMemory() {
  const blocks = client.blocks;
  memoryOpen.hidden = blocks.length === 0;
  if (!blocks.length) {
    closeMemory();
    memoryList.replaceChildren();
    return;
  }
  memoryList.replaceChildren(...blocks.map(memoryBlock));
}

memoryOpen.addEventListener("click", openMemory);
$("memory-close").addEventListener("click", closeMemory);
$("memory-scrim").addEventListener("click", closeMemory);

client.connect();
render();
if (matchMedia("(pointer: fine)").matches) input.focus();
