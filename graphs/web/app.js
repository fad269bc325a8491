// The quorum page: a chat whose turns stream from the server, and a trace panel per turn.
"use strict";

const PREVIEW_CHARS = 600;
const CONVERSATION = /^#(chat-[A-Za-z0-9_-]+)$/;

const $ = (selector) => document.querySelector(selector);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) {
      node.append(child instanceof Node ? child : String(child));
    }
  }
  return node;
}

async function api(path, options = {}) {
  const response = await fetch(path, options);
  const body = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

// Each node's progress words, and whether the demo model answers (graphs/describe.py).
const graph = { labels: {}, demo_notice: null };
const graphLoaded = api("/api/graph").then((body) => {
  Object.assign(graph, body);
  if (graph.demo_notice) {
    $("#chat").prepend(el("p", { id: "demo-notice", class: "notice" }, `Note: ${graph.demo_notice}`));
  }
});

function label(node) {
  return graph.labels[node] || node;
}

// Server-sent events over fetch (EventSource cannot POST): blocks split by a blank line.
async function readEvents(response, handle) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      if (data) handle(event, JSON.parse(data));
    }
  }
}

function exactText(exact) {
  if (exact === null || exact === undefined) return null;
  if (Array.isArray(exact)) {
    const items = exact.map((item) => (Array.isArray(item) ? item[0] : item)).filter(Boolean);
    return items.length ? items.join("; ") : "(none)";
  }
  return String(exact);
}

// ---- chat -------------------------------------------------------------------------------

const chat = { conversation: null, running: false };

function setConversation(id) {
  chat.conversation = id;
  $("#conversation-id").textContent = id || "";
  history.replaceState(null, "", id ? `#${id}` : location.pathname);
}

function scrollDown() {
  const messages = $("#messages");
  messages.scrollTop = messages.scrollHeight;
}

class TurnView {
  constructor(asked) {
    $("#empty")?.remove();
    this.started = performance.now();
    this.user = el("div", { class: "bubble user" }, asked);
    this.steps = el("ol", { class: "progress" });
    this.status = el("p", { class: "status" }, "starting…");
    this.meter = el("progress", { class: "meter", max: "1", value: "0", hidden: "" });
    this.preview = el("pre", { class: "preview", hidden: "" });
    this.body = el("div", { class: "bubble assistant" }, this.status, this.meter, this.steps,
      this.preview);
    this.root = el("div", { class: "turn running" }, this.user, this.body);
    $("#messages").append(this.root);
    scrollDown();
    // The clock runs while a step runs, not only when the next one starts.
    this.doing = "starting";
    this.clock = setInterval(() => this.showStatus(), 500);
  }

  elapsed() {
    return `${((performance.now() - this.started) / 1000).toFixed(1)} s`;
  }

  showStatus() {
    this.status.textContent = `${this.doing}… (${this.elapsed()})`;
  }

  on(event, data) {
    if (event === "started") {
      this.root.dataset.conversation = data.conversation;
      this.doing = "starting";
      this.showStatus();
    } else if (event === "status") {
      this.doing = data.message;
      this.showStatus();
    } else if (event === "start") {
      // The server says which node runs now: the status never guesses the next one.
      this.doing = label(data.node);
      this.showStatus();
    } else if (event === "node") {
      this.steps.append(el("li", { "data-node": data.node },
        el("span", { class: "tick" }, `${data.mark || "✓"} `), data.line || label(data.node),
        data.summary ? el("span", { class: "muted" }, ` — ${data.summary}`) : null));
      this.meter.hidden = true;
      this.preview.hidden = true;
      this.preview.textContent = "";
    } else if (event === "progress") {
      if (data.total) {
        this.meter.hidden = false;
        this.meter.max = data.total;
        this.meter.value = data.done;
        this.doing = `${label(data.node)}: ${data.done} of ${data.total} done`;
        this.showStatus();
      }
    } else if (event === "token") {
      if (this.preview.dataset.node !== data.node) {
        this.preview.dataset.node = data.node;
        this.preview.textContent = "";
      }
      this.preview.hidden = false;
      this.preview.textContent = (this.preview.textContent + data.text).slice(-PREVIEW_CHARS);
    } else if (event === "answer") {
      this.finish();
      this.showAnswer(data);
    } else if (event === "error") {
      this.fail(data.message);
    }
    scrollDown();
  }

  finish() {
    clearInterval(this.clock);
    this.root.classList.remove("running");
    this.status.remove();
    this.meter.remove();
    this.preview.remove();
    const count = this.steps.children.length;
    if (count) {
      const details = el("details", { class: "steps" },
        el("summary", {}, `${count} steps in ${this.elapsed()}`));
      this.steps.replaceWith(details);
      details.append(this.steps);
    }
  }

  fail(message) {
    this.finish();
    this.body.append(el("p", { class: "error", role: "alert" }, `error: ${message}`));
  }

  showAnswer(answer) {
    this.root.dataset.thread = answer.thread_id;
    this.body.append(renderAnswer(answer));
  }
}

// The same words as `quorum ask` and chat (graphs/describe.py).
const WORDS = {
  exact: "Exact answer",
  ideal: "Ideal answer",
  confidence: "Confidence",
  evidence: "Cited evidence",
  noEvidence: "none: the answer cites no passage",
  retrieved: "Retrieved documents",
  order: "retrieval order",
  support: "Support",
};

function renderAnswer(answer) {
  const evidence = answer.evidence || [];
  const documents = answer.documents || [];
  const known = new Set([...evidence, ...documents].map((d) => d.pmid));
  const box = el("div", { class: answer.insufficient ? "answer insufficient" : "answer",
    "data-thread": answer.thread_id });
  if (answer.rewritten) {
    box.append(el("p", { class: "muted rewritten" }, "read as: ", el("i", {}, answer.question)));
  }
  const exact = answer.exact_text ?? exactText(answer.exact_answer);
  if (exact !== null) {
    box.append(el("p", { class: "exact" }, `${WORDS.exact}: `, el("b", {}, exact),
      el("span", { class: "muted" }, ` (${answer.type})`)));
  }
  if (answer.ideal_answer) {
    box.append(el("p", { class: "ideal-label muted" }, `${WORDS.ideal}:`),
      linkified(answer.ideal_answer, known));
  }
  box.append(el("p", { class: "confidence muted" },
    `${WORDS.confidence}: ${answer.confidence_text ?? Number(answer.confidence || 0).toFixed(2)}`));
  if (answer.support_text) {
    // A self-verified answer had no judge but its author: not muted, so it is not read past.
    const self = answer.verified === "self-verified";
    box.append(el("p", { class: self ? "support self-verified" : "support muted" },
      `${WORDS.support}: ${answer.support_text}`));
  }
  if (evidence.length) {
    const list = el("ol", { class: "evidence" });
    for (const e of evidence) list.append(evidenceItem(e));
    box.append(el("h4", {}, WORDS.evidence), list);
  } else if (answer.evidence_kept) {
    box.append(el("h4", {}, WORDS.evidence), el("p", { class: "muted" }, WORDS.noEvidence));
  }
  if (documents.length) {
    const list = el("ol", { class: "documents" });
    for (const d of documents) list.append(documentItem(d));
    box.append(el("h4", {}, WORDS.retrieved, el("span", { class: "muted" }, ` (${WORDS.order})`)),
      list);
  }
  box.append(el("button", { type: "button", class: "open-trace",
    onclick: () => openTrace(answer.thread_id) }, "Trace"));
  return box;
}

function linkified(text, known) {
  const p = el("p", { class: "ideal" });
  let last = 0;
  for (const match of text.matchAll(/\[(\d{1,12})\]/g)) {
    p.append(text.slice(last, match.index));
    p.append(known.has(match[1]) ? el("a", { href: `#pmid-${match[1]}`, class: "pmid-ref" },
      match[0]) : match[0]);
    last = match.index + match[0].length;
  }
  p.append(text.slice(last));
  return p;
}

function pmidButton(pmid, abstract) {
  return el("button", { type: "button", class: "pmid", title: "show the abstract",
    onclick: () => showAbstract(pmid, abstract) }, `[${pmid}]`);
}

function evidenceItem(e) {
  const abstract = el("div", { class: "abstract", hidden: "" });
  return el("li", { "data-pmid": e.pmid }, pmidButton(e.pmid, abstract), " ",
    e.title || "(no title)",
    e.relevance ? el("span", { class: "muted" }, ` ${e.relevance}`) : null,
    e.sentence ? el("blockquote", { class: "sentence" }, e.sentence) : null, abstract);
}

function documentItem(d) {
  const abstract = el("div", { class: "abstract", hidden: "" });
  return el("li", { "data-pmid": d.pmid }, pmidButton(d.pmid, abstract), " ",
    d.title || "(no title)", d.cited ? el("span", { class: "badge" }, "cited") : null,
    (d.relevance || "").startsWith("off") ? el("span", { class: "muted" }, " off the question")
      : null, abstract);
}

async function showAbstract(pmid, box) {
  if (!box.hidden) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  if (box.dataset.loaded) return;
  box.textContent = "loading…";
  try {
    const doc = await api(`/api/documents/${encodeURIComponent(pmid)}`);
    const where = [doc.journal, doc.year].filter(Boolean).join(", ");
    box.replaceChildren(
      where ? el("p", { class: "muted" }, where) : "",
      el("p", {}, doc.abstract || "(no abstract)"),
      el("a", { href: `https://pubmed.ncbi.nlm.nih.gov/${pmid}/`, target: "_blank",
        rel: "noopener noreferrer" }, "PubMed ↗"));
    box.dataset.loaded = "1";
  } catch (error) {
    box.textContent = `error: ${error.message}`;
  }
}

function setRunning(running) {
  chat.running = running;
  $("#ask").disabled = running;
  $("#ask").textContent = running ? "Answering…" : "Ask";
}

async function ask(question) {
  setRunning(true);
  const view = new TurnView(question);
  try {
    await graphLoaded;
    if (!chat.conversation) setConversation((await api("/api/conversations", { method: "POST" })).id);
    const response = await fetch(`/api/conversations/${chat.conversation}/turns`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ question }),
    });
    if (!response.ok) {
      const body = await response.json().catch(() => ({ error: response.statusText }));
      view.fail(body.error || `HTTP ${response.status}`);
      return;
    }
    let ended = false;
    await readEvents(response, (event, data) => {
      ended = ended || event === "answer" || event === "error";
      view.on(event, data);
    });
    if (!ended) view.fail("the connection closed before the answer");
  } catch (error) {
    view.fail(error.message);
  } finally {
    setRunning(false);
    $("#question").focus();
  }
}

async function restore(id) {
  try {
    const body = await api(`/api/conversations/${encodeURIComponent(id)}`);
    setConversation(id);
    for (const turn of body.turns) {
      const view = new TurnView(turn.asked);
      view.finish();
      view.showAnswer(turn);
    }
  } catch (error) {
    setConversation(null);
  }
}

// ---- trace ------------------------------------------------------------------------------

const trace = { steps: [], index: 0 };

async function openTrace(threadId) {
  $("#trace").hidden = false;
  $("#layout").classList.add("with-trace");
  $("#trace-thread").textContent = threadId;
  $("#trace-status").textContent = "loading…";
  $("#trace-nodes").replaceChildren();
  trace.steps = [];
  try {
    trace.steps = (await api(`/api/threads/${encodeURIComponent(threadId)}/steps`)).steps;
    $("#trace-status").textContent =
      `${trace.steps.length} node steps; ← → or the buttons step through them`;
  } catch (error) {
    $("#trace-status").textContent = `error: ${error.message}`;
  }
  trace.steps.forEach((step, i) => {
    $("#trace-nodes").append(el("li", { "data-node": step.node },
      el("button", { type: "button", onclick: () => showStep(i) }, step.node)));
  });
  showStep(0);
}

function showStep(index) {
  const count = trace.steps.length;
  trace.index = Math.max(0, Math.min(index, count - 1));
  $("#trace-prev").disabled = trace.index <= 0;
  $("#trace-next").disabled = trace.index >= count - 1;
  $("#trace-position").textContent = count ? `${trace.index + 1} / ${count}` : "";
  [...$("#trace-nodes").children].forEach((li, i) => {
    li.classList.toggle("current", i === trace.index);
    if (i === trace.index) li.setAttribute("aria-current", "step");
    else li.removeAttribute("aria-current");
  });
  const step = trace.steps[trace.index];
  $("#trace-node").textContent = step ? step.node : "";
  $("#trace-meta").textContent = step ? stepMeta(step) : "";
  const lines = $("#trace-lines");
  lines.hidden = !step || !step.lines.length;
  lines.textContent = step ? step.lines.join("\n") : "";
  const update = $("#trace-update");
  update.replaceChildren();
  if (!step) return;
  const described = new Set(step.described);
  for (const [key, value] of Object.entries(step.update)) {
    const text = JSON.stringify(value, null, 2) ?? "null";
    const short = text.length <= 80 && !text.includes("\n");
    const details = el("details", { class: "key" },
      el("summary", {}, el("code", {}, key),
        short ? el("span", { class: "muted" }, ` ${text}`) : el("span", { class: "muted" },
          ` (${text.length.toLocaleString()} chars${described.has(key) ? ", described above" : ""})`)),
      el("pre", {}, text));
    if (!short && !described.has(key) && text.length <= 2000) details.open = true;
    update.append(details);
  }
  const raw = JSON.stringify(step.update, null, 2);
  update.append(el("details", { class: "raw" }, el("summary", {}, "the whole update (JSON)"),
    el("pre", {}, raw)));
}

function stepMeta(step) {
  const parts = [`graph step ${step.step}`];
  if (step.seconds !== null && step.seconds !== undefined) parts.push(`${step.seconds.toFixed(3)} s`);
  if (step.started) parts.push(`started ${step.started}`);
  return parts.join(" · ");
}

function closeTrace() {
  $("#trace").hidden = true;
  $("#layout").classList.remove("with-trace");
}

// ---- wiring -----------------------------------------------------------------------------

function submit(event) {
  event?.preventDefault();
  const box = $("#question");
  const question = box.value.trim();
  if (!question || chat.running) return;
  box.value = "";
  updateCounter();
  ask(question);
}

function updateCounter() {
  $("#counter").textContent = `${$("#question").value.length} / 4000`;
}

document.addEventListener("DOMContentLoaded", () => {
  $("#ask-form").addEventListener("submit", submit);
  $("#question").addEventListener("input", updateCounter);
  $("#question").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) submit(event);
  });
  $("#new-conversation").addEventListener("click", () => {
    if (chat.running) return;
    setConversation(null);
    $("#messages").replaceChildren();
    closeTrace();
    $("#question").focus();
  });
  $("#trace-prev").addEventListener("click", () => showStep(trace.index - 1));
  $("#trace-next").addEventListener("click", () => showStep(trace.index + 1));
  $("#trace-close").addEventListener("click", closeTrace);
  document.addEventListener("keydown", (event) => {
    if ($("#trace").hidden || event.target.closest("textarea, input")) return;
    if (event.key === "ArrowLeft") showStep(trace.index - 1);
    if (event.key === "ArrowRight") showStep(trace.index + 1);
  });
  $("#messages").addEventListener("click", (event) => {
    const ref = event.target.closest("a.pmid-ref");
    if (!ref) return;
    event.preventDefault();
    const item = ref.closest(".answer").querySelector(`li[data-pmid="${ref.textContent.slice(1, -1)}"]`);
    item?.scrollIntoView({ block: "center" });
    item?.classList.add("flash");
    setTimeout(() => item?.classList.remove("flash"), 1200);
  });
  const match = CONVERSATION.exec(location.hash);
  if (match) restore(match[1]);
  $("#question").focus();
});
