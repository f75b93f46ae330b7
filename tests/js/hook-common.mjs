// Helpers shared by the scripts that drive the stock React chat hooks (hook-scenario.mjs, hook-driver.mjs):
// waiting on a hook's committed state, and summarising messages and hook state for the printed events.

/** Waits on a predicate over `this` (a hook record), re-checked whenever `check()` is called. */
export class Waitable {
  constructor(label) {
    this.label = label;
    this.chat = null; // the useAgentChat result of the latest commit
    this.waiters = [];
  }
  check() {
    for (const w of [...this.waiters]) {
      let ok = false;
      try {
        ok = w.pred(this);
      } catch (err) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        clearTimeout(w.timer);
        w.reject(err);
        continue;
      }
      if (ok) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        clearTimeout(w.timer);
        w.resolve(this);
      }
    }
  }
  /** Resolve once pred(this) holds (checked now, after every commit and every frame); reject after ms. */
  until(what, pred, ms) {
    return new Promise((resolve, reject) => {
      const w = { pred, resolve, reject };
      w.timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        reject(
          new Error(
            `hook ${this.label}: gave up after ${ms} ms waiting for ${what}; ` +
              `latest state ${JSON.stringify(summary(this.chat))}`,
          ),
        );
      }, ms);
      this.waiters.push(w);
      this.check();
    });
  }
}

export function textOf(message) {
  return (message?.parts ?? [])
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("");
}

export function lastAssistant(messages) {
  for (let i = (messages?.length ?? 0) - 1; i >= 0; i--) if (messages[i].role === "assistant") return messages[i];
  return null;
}

export function shapeOf(part) {
  return part.state ? `${part.type}:${part.state}` : part.type;
}

/** What a state event prints about a hook: its status, flags, error and last message. */
export function summary(chat) {
  if (!chat) return null;
  const last = chat.messages[chat.messages.length - 1];
  return {
    status: chat.status,
    isServerStreaming: chat.isServerStreaming,
    isRecovering: chat.isRecovering,
    isToolContinuation: chat.isToolContinuation,
    error: chat.error ? String(chat.error.message ?? chat.error) : null,
    count: chat.messages.length,
    last: last ? { id: last.id, role: last.role, text: textOf(last), parts: last.parts.map(shapeOf) } : null,
  };
}
