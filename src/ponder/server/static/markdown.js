// A small, safe Markdown renderer: text in, DOM nodes out. Nothing is ever parsed as HTML — every piece
// of text becomes a text node — so model output cannot inject markup or script.
//
// Blocks: paragraphs (single newlines are line breaks), ATX headings, fenced code blocks (an unclosed
// fence while streaming is still a code block), block quotes, bullet and numbered lists, pipe tables and
// horizontal rules. Inline: `code`, **bold**, *italic*, ~~strike~~, [links](https://…) and bare URLs
// (http, https and mailto only).

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const BULLET = /^(\s*)[-*+]\s+(.*)$/;
const ORDERED = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text != null) node.textContent = text;
  return node;
}

function safeHref(url) {
  try {
    const parsed = new URL(url, location.href);
    return ["http:", "https:", "mailto:"].includes(parsed.protocol) ? parsed.href : null;
  } catch {
    return null;
  }
}

function link(href, children) {
  const a = el("a");
  a.href = href;
  a.target = "_blank";
  a.rel = "noopener noreferrer nofollow";
  for (const child of children) a.append(child);
  return a;
}

// The earliest inline construct wins; ties go to the order below.
const INLINE = [
  { re: /`+/, kind: "code" },
  { re: /\[([^\]\n]+)\]\(([^)\s]+)(?:\s+"[^"]*")?\)/, kind: "link" },
  { re: /\*\*(?=\S)([\s\S]*?\S)\*\*|__(?=\S)([\s\S]*?\S)__/, kind: "strong" },
  { re: /~~(?=\S)([\s\S]*?\S)~~/, kind: "del" },
  { re: /\*(?=[^\s*])([\s\S]*?[^\s*])\*|(?<![\w])_(?=[^\s_])([\s\S]*?[^\s_])_(?![\w])/, kind: "em" },
  { re: /\b(?:https?:\/\/|mailto:)[^\s<>()]+[^\s<>().,;:!?'"\]]/, kind: "url" },
];

/** Inline Markdown → an array of nodes. */
export function inline(text) {
  const out = [];
  let rest = text;
  while (rest) {
    let best = null;
    for (const rule of INLINE) {
      const match = rule.re.exec(rest);
      if (match && (best === null || match.index < best.match.index)) best = { rule, match };
    }
    if (!best) {
      out.push(document.createTextNode(rest));
      break;
    }
    const { rule, match } = best;
    if (match.index > 0) out.push(document.createTextNode(rest.slice(0, match.index)));
    let consumed = match[0].length;
    switch (rule.kind) {
      case "code": {
        const ticks = match[0];
        const after = rest.slice(match.index + ticks.length);
        const close = after.indexOf(ticks);
        if (close === -1) {
          out.push(document.createTextNode(ticks));
          break;
        }
        let code = after.slice(0, close);
        if (/^ .* $/.test(code)) code = code.slice(1, -1);
        out.push(el("code", null, code));
        consumed = ticks.length * 2 + close;
        break;
      }
      case "link": {
        const href = safeHref(match[2]);
        out.push(href ? link(href, inline(match[1])) : document.createTextNode(match[0]));
        break;
      }
      case "url": {
        const href = safeHref(match[0]);
        out.push(href ? link(href, [document.createTextNode(match[0])]) : document.createTextNode(match[0]));
        break;
      }
      default: {
        const node = el(rule.kind);
        for (const child of inline(match[1] ?? match[2] ?? "")) node.append(child);
        out.push(node);
      }
    }
    rest = rest.slice(match.index + consumed);
  }
  return out;
}

function paragraph(lines) {
  const p = el("p");
  lines.forEach((line, i) => {
    if (i) p.append(el("br"));
    for (const node of inline(line.trim())) p.append(node);
  });
  return p;
}

function codeBlock(lang, lines, open, onCopy) {
  const wrap = el("div", "code-block");
  const head = el("div", "code-head");
  head.append(el("span", "code-lang", lang || "code"));
  const copy = el("button", "code-copy", "Copy");
  copy.type = "button";
  copy.setAttribute("aria-label", `Copy ${lang || "code"} block`);
  const text = lines.join("\n");
  copy.addEventListener("click", () => onCopy && onCopy(text, copy));
  head.append(copy);
  const pre = el("pre");
  const code = el("code", lang ? `language-${lang}` : null, text);
  pre.append(code);
  wrap.append(head, pre);
  if (open) wrap.classList.add("streaming");
  return wrap;
}

function splitRow(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  return row.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, "|"));
}

function table(header, align, rows) {
  const wrap = el("div", "table-wrap");
  const t = el("table");
  const thead = el("thead");
  const tr = el("tr");
  header.forEach((cell, i) => {
    const th = el("th");
    if (align[i]) th.style.textAlign = align[i];
    for (const node of inline(cell)) th.append(node);
    tr.append(th);
  });
  thead.append(tr);
  const tbody = el("tbody");
  for (const row of rows) {
    const r = el("tr");
    header.forEach((_, i) => {
      const td = el("td");
      if (align[i]) td.style.textAlign = align[i];
      for (const node of inline(row[i] ?? "")) td.append(node);
      r.append(td);
    });
    tbody.append(r);
  }
  t.append(thead, tbody);
  wrap.append(t);
  return wrap;
}

/** Markdown → a DocumentFragment. `onCopy(text, button)` is called by code blocks' Copy buttons. */
export function renderMarkdown(source, { onCopy } = {}) {
  const frag = document.createDocumentFragment();
  const lines = String(source).replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  let para = [];
  const flush = () => {
    if (para.length) frag.append(paragraph(para));
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) {
      flush();
      i += 1;
      continue;
    }
    if ((m = FENCE.exec(line))) {
      flush();
      const fence = m[1];
      const body = [];
      i += 1;
      let closed = false;
      while (i < lines.length) {
        const l = lines[i];
        if (l.trim().startsWith(fence[0].repeat(fence.length)) && !l.trim().slice(fence.length).trim()) {
          closed = true;
          i += 1;
          break;
        }
        body.push(l);
        i += 1;
      }
      frag.append(codeBlock(m[2], body, !closed, onCopy));
      continue;
    }
    if ((m = HEADING.exec(line))) {
      flush();
      const h = el(`h${Math.min(6, m[1].length + 2)}`, "md-h");
      for (const node of inline(m[2])) h.append(node);
      frag.append(h);
      i += 1;
      continue;
    }
    if (RULE.test(line) && !para.length) {
      frag.append(el("hr"));
      i += 1;
      continue;
    }
    if (QUOTE.test(line)) {
      flush();
      const quoted = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        quoted.push(m[1]);
        i += 1;
      }
      const bq = el("blockquote");
      bq.append(renderMarkdown(quoted.join("\n"), { onCopy }));
      frag.append(bq);
      continue;
    }
    if (BULLET.test(line) || ORDERED.test(line)) {
      flush();
      const ordered = !BULLET.test(line);
      const list = el(ordered ? "ol" : "ul");
      if (ordered) {
        const start = Number(ORDERED.exec(line)[2]);
        if (start !== 1) list.start = start;
      }
      let item = null;
      let itemLines = [];
      const endItem = () => {
        if (item) {
          item.append(renderMarkdown(itemLines.join("\n"), { onCopy }));
          list.append(item);
        }
      };
      while (i < lines.length) {
        const l = lines[i];
        const b = BULLET.exec(l);
        const o = ORDERED.exec(l);
        const mm = ordered ? o : b;
        if (mm && mm[1].length < 2) {
          endItem();
          item = el("li");
          itemLines = [ordered ? mm[3] : mm[2]];
        } else if (l.trim() && (/^\s{2,}/.test(l) || (!b && !o && itemLines.length && !FENCE.test(l) && !HEADING.test(l)))) {
          itemLines.push(l.replace(/^\s{2,4}/, ""));
        } else if (!l.trim() && i + 1 < lines.length && /^\s{2,}\S/.test(lines[i + 1])) {
          itemLines.push("");
        } else break;
        i += 1;
      }
      endItem();
      frag.append(list);
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && !para.length) {
      const header = splitRow(line);
      const align = splitRow(lines[i + 1]).map((c) =>
        c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : "",
      );
      i += 2;
      const rows = [];
      while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
        rows.push(splitRow(lines[i]));
        i += 1;
      }
      frag.append(table(header, align, rows));
      continue;
    }
    para.push(line);
    i += 1;
  }
  flush();
  return frag;
}
