// The dashboard's few interactions, in plain JavaScript: each button calls the daemon's
// JSON API (the cookie carries the token) and shows what it answered.
"use strict";

async function api(method, path, body) {
  const reply = await fetch(path, {
    method,
    headers: body === undefined ? {} : {"Content-Type": "application/json"},
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  let data;
  try { data = await reply.json(); } catch (e) { data = {error: {message: `HTTP ${reply.status}`}}; }
  return {ok: reply.ok, status: reply.status, data};
}

function show(id, text) {
  const el = document.getElementById(id);
  el.hidden = false;
  el.textContent = text;
}

function errorText(data) {
  return data && data.error ? `error: ${data.error.message}` : JSON.stringify(data, null, 1);
}

function undoText(data) {
  if (data.error) return errorText(data);
  if (data.status === "nothing") return data.message;
  const lines = [`${data.dry_run ? "preview" : "result"}: ${data.status}`];
  for (const a of data.actions || []) lines.push(`  ${data.dry_run ? "would " : ""}${a.action}  ${a.path}  (step ${a.step}, ${a.executor})`);
  if (!(data.actions || []).length) lines.push("  no file to put back");
  for (const n of data.not_undoable || []) lines.push(`  cannot be undone: step ${n.step} ${n.executor}: ${n.reason}`);
  for (const c of data.conflicts || []) lines.push(`  changed since the turn: ${c.path}`);
  return lines.join("\n");
}

// A turn's outcome as every way in tells it (metnos/runtime/turn/telling.py): an unverified answer is
// marked, with the parts found in no step's result; a quarantined executor the request missed is named.
function outcomeText(data) {
  const lines = [];
  if (data.status === "unverified") {
    lines.push(`unverified: ${(data.message || "").replace(/^\s*unverified\s*[:,.\-–—]\s*/i, "")}`);
    const parts = (data.failure && data.failure.unmatched) || [];
    if (parts.length) lines.push(`not found in anything the steps returned: ${parts.map((p) => JSON.stringify(p)).join(", ")}`);
    lines.push("the answer as the model wrote it, unchecked:", data.answer || "");
  } else {
    lines.push(`${data.status}: ${data.answer || data.message || ""}`);
  }
  for (const q of data.quarantined || []) lines.push(q.notice);
  return lines.join("\n");
}

function wireAsk() {
  const form = document.getElementById("ask-form");
  if (!form) return;
  const fresh = document.getElementById("new-conversation");
  fresh.addEventListener("click", () => {
    sessionStorage.setItem("metnos-new-conversation", "1");
    show("ask-result", "your next ask starts a new conversation");
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = document.getElementById("ask-text").value;
    show("ask-result", "thinking…");
    // The dashboard's asks are one conversation; "New conversation" starts the next with the next ask.
    const fresh = sessionStorage.getItem("metnos-new-conversation") === "1";
    sessionStorage.removeItem("metnos-new-conversation");
    const {data} = await api("POST", "/api/ask", {text, approve: "ask", conversation: "dashboard", new_conversation: fresh});
    show("ask-result", data.error ? errorText(data) : outcomeText(data));
    if (!data.error) setTimeout(() => window.location.reload(), 1500);
  });
}

function wireTurn() {
  const replay = document.getElementById("replay");
  if (!replay) return;
  const turn = replay.dataset.turn;
  replay.addEventListener("click", async () => {
    show("replay-result", "replaying…");
    const {data} = await api("POST", `/api/turns/${turn}/replay`);
    if (data.error) return show("replay-result", errorText(data));
    show("replay-result", data.same_path ? `same path: ${data.events} events replayed, no divergence` : `diverged\n${data.diff}`);
    // A divergence side by side: the event the log holds, and the one the replay made in its place.
    const d = data.divergence;
    document.getElementById("replay-diff").hidden = !d;
    if (d) {
      document.getElementById("replay-recorded").textContent = d.expected ? JSON.stringify(d.expected, null, 1) : "(nothing: the recorded turn ended here)";
      document.getElementById("replay-replayed").textContent = d.found ? JSON.stringify(d.found, null, 1) : "(nothing: the replay ended here)";
    }
  });
  const undo = document.getElementById("undo");
  document.getElementById("undo-preview").addEventListener("click", async () => {
    const {data} = await api("GET", `/api/undo?turn=${turn}`);
    show("undo-result", undoText(data));
    undo.hidden = !(data.status === "dry-run");
  });
  undo.addEventListener("click", async () => {
    const {data} = await api("POST", "/api/undo", {turn_id: turn});
    show("undo-result", undoText(data));
    undo.hidden = true;
  });
}

// A running turn's page: its events as the daemon records them (GET /api/turns/ID/live), and its Stop.
// Once it has ended the page is loaded again, from the turn's record in the log.
function liveLine(e) {
  const f = e.fields;
  const said = Object.entries(f).filter(([k]) => !["round", "turn_id"].includes(k)).map(([k, v]) => `${k}: ${v}`).join(" · ");
  return `${e.at}  ${e.type}${f.step !== undefined ? ` (step ${f.step})` : ""}  ${said}`.slice(0, 400);
}

function wireLive() {
  const box = document.getElementById("live");
  if (!box) return;
  const turn = box.dataset.turn;
  const list = document.getElementById("live-events");
  const stop = document.getElementById("stop");
  stop.addEventListener("click", async () => {
    stop.disabled = true;
    const {data} = await api("POST", `/api/turns/${turn}/stop`);
    show("stop-result", data.error ? errorText(data) : "stopping at the next safe point…");
  });
  let after = 0;
  const poll = async () => {
    const {ok, data} = await api("GET", `/api/turns/${turn}/live?after=${after}`);
    if (ok) {
      for (const e of data.events) {
        const li = document.createElement("li");
        li.className = `live-event ${e.type}`;
        li.textContent = liveLine(e);
        list.append(li);
      }
      after = data.next;
      if (!data.running) {
        document.getElementById("live-state").textContent = "ended: loading its record…";
        setTimeout(() => window.location.reload(), 500);
        return;
      }
    }
    setTimeout(poll, 400);
  };
  poll();
}

function approvalSection(a) {
  const section = document.createElement("section");
  section.className = "approval";
  section.id = `approval-${a.id}`;
  const h = document.createElement("h3");
  h.textContent = `Step ${a.step}: ${a.executor} (via ${a.channel}, ${a.seconds_left} s left)`;
  const asked = document.createElement("p");
  asked.className = "request";
  asked.textContent = a.request ? `“${a.request}”` : "";
  const p = document.createElement("p");
  p.textContent = a.reason;
  const pre = document.createElement("pre");
  pre.className = "args";
  pre.textContent = JSON.stringify(a.args, null, 1);
  section.append(h, asked, p, pre);
  for (const [label, cls, approve] of [["Approve", "approve", "true"], ["Deny", "deny", "false"]]) {
    const b = document.createElement("button");
    b.className = cls;
    b.textContent = label;
    b.dataset.id = a.id;
    b.dataset.approve = approve;
    section.append(b);
  }
  return section;
}

function wireApprovals() {
  const box = document.getElementById("approvals");
  if (!box) return;
  box.addEventListener("click", async (event) => {
    const b = event.target.closest("button[data-id]");
    if (!b) return;
    const {data} = await api("POST", `/api/approvals/${b.dataset.id}`, {approve: b.dataset.approve === "true"});
    const section = document.getElementById(`approval-${b.dataset.id}`);
    section.replaceChildren(document.createTextNode(data.error ? errorText(data) : (data.approved ? "approved" : "denied")));
    section.className = "approval answered";
  });
  setInterval(async () => {
    const {ok, data} = await api("GET", box.dataset.refresh);
    if (!ok) return;
    const shown = new Set([...box.querySelectorAll("section.approval:not(.answered)")].map((s) => s.id));
    const wanted = new Set(data.map((a) => `approval-${a.id}`));
    for (const id of shown) if (!wanted.has(id)) document.getElementById(id).remove();
    for (const a of data) if (!document.getElementById(`approval-${a.id}`)) box.append(approvalSection(a));
    const none = document.getElementById("no-approvals");
    if (none) none.hidden = data.length > 0;
  }, 1000);
}

function dialogSection(q) {
  const section = document.createElement("section");
  section.className = "dialog";
  section.id = `dialog-${q.id}`;
  const h = document.createElement("h3");
  h.textContent = `Step ${q.step}${q.executor ? `: ${q.executor}` : ""} (via ${q.channel}, ${q.seconds_left} s left)`;
  const p = document.createElement("p");
  p.className = "question";
  p.textContent = q.question;
  const form = document.createElement("form");
  form.className = "reply";
  form.dataset.id = q.id;
  const input = document.createElement("input");
  input.type = "text";
  input.name = "answer";
  input.required = true;
  input.autocomplete = "off";
  const b = document.createElement("button");
  b.type = "submit";
  b.textContent = "Answer";
  form.append(input, " ", b);
  section.append(h, p, form);
  return section;
}

// A turn's question: the text box's words are the answer (POST /api/dialogs/ID).
function wireDialogs() {
  const box = document.getElementById("dialogs");
  if (!box) return;
  box.addEventListener("submit", async (event) => {
    const form = event.target.closest("form.reply");
    if (!form) return;
    event.preventDefault();
    const {data} = await api("POST", `/api/dialogs/${form.dataset.id}`, {answer: form.elements.answer.value});
    const section = document.getElementById(`dialog-${form.dataset.id}`);
    section.replaceChildren(document.createTextNode(data.error ? errorText(data) : "answered"));
    section.className = "dialog answered";
  });
  setInterval(async () => {
    const {ok, data} = await api("GET", box.dataset.refresh);
    if (!ok) return;
    const shown = new Set([...box.querySelectorAll("section.dialog:not(.answered)")].map((s) => s.id));
    const wanted = new Set(data.map((q) => `dialog-${q.id}`));
    for (const id of shown) if (!wanted.has(id)) document.getElementById(id).remove();
    for (const q of data) if (!document.getElementById(`dialog-${q.id}`)) box.append(dialogSection(q));
    const none = document.getElementById("no-dialogs");
    if (none) none.hidden = data.length > 0;
  }, 1000);
}

function undeliveredSection(m) {
  const section = document.createElement("section");
  section.className = "undelivered";
  section.id = `undelivered-${m.id}`;
  const h = document.createElement("h3");
  h.textContent = `The ${m.message_kind} to ${m.channel} ${m.address} (given up after ${m.attempts} attempt(s))`;
  const cause = document.createElement("p");
  cause.className = "cause";
  cause.textContent = `last cause: ${m.cause}`;
  const pre = document.createElement("pre");
  pre.className = "undelivered-text";
  pre.textContent = m.text;
  section.append(h, cause, pre);
  for (const [label, action] of [["Retry", "retry"], ["Dismiss", "dismiss"]]) {
    const b = document.createElement("button");
    b.className = action;
    b.textContent = label;
    b.dataset.id = m.id;
    b.dataset.action = action;
    section.append(b);
  }
  return section;
}

// A message the outbox gave up on: Retry queues it again, Dismiss lets it go (POST /api/inbox/ID).
function wireUndelivered() {
  const box = document.getElementById("undelivered");
  if (!box || !box.dataset.refresh) return;
  box.addEventListener("click", async (event) => {
    const b = event.target.closest("button[data-action]");
    if (!b) return;
    const {data} = await api("POST", `/api/inbox/${b.dataset.id}`, {action: b.dataset.action});
    const section = document.getElementById(`undelivered-${b.dataset.id}`);
    section.replaceChildren(document.createTextNode(data.error ? errorText(data) : (data.action === "retry" ? "queued again" : "dismissed")));
    section.className = "undelivered answered";
  });
  setInterval(async () => {
    const {ok, data} = await api("GET", box.dataset.refresh);
    if (!ok) return;
    const messages = data.filter((m) => m.kind === "undelivered");
    const shown = new Set([...box.querySelectorAll("section.undelivered:not(.answered)")].map((s) => s.id));
    const wanted = new Set(messages.map((m) => `undelivered-${m.id}`));
    for (const id of shown) if (!wanted.has(id)) document.getElementById(id).remove();
    for (const m of messages) if (!document.getElementById(`undelivered-${m.id}`)) box.append(undeliveredSection(m));
    const none = document.getElementById("no-undelivered");
    if (none) none.hidden = messages.length > 0;
  }, 1000);
}

// A schedule in words: the daemon reads it into a cron and the next three firings; it is created only
// when the user, having seen them, presses "Create it".
function wireNewSchedule() {
  const form = document.getElementById("schedule-new");
  if (!form) return;
  const create = document.getElementById("schedule-create");
  const request = (confirm) => {
    let args;
    try { args = JSON.parse(form.elements.args.value || "{}"); } catch (e) { show("schedule-reading", `error: the arguments are not JSON: ${e.message}`); return null; }
    return api("POST", "/api/schedules", {when: form.elements.when.value, executor: form.elements.executor.value, args,
                                          timezone: form.elements.timezone.value, channel: form.elements.channel.value, confirm});
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const sent = request(false);
    if (!sent) return;
    const {data} = await sent;
    create.hidden = Boolean(data.error);
    if (data.error) return show("schedule-reading", errorText(data));
    show("schedule-reading", [`reads as cron ${data.cron} in ${data.timezone}${data.count === 1 ? " (once)" : ""}; next firings:`,
                              ...data.next_fires.map((t) => `  ${t.slice(0, 16).replace("T", " ")} UTC`)].join("\n"));
  });
  create.addEventListener("click", async () => {
    const sent = request(true);
    if (!sent) return;
    const {data} = await sent;
    if (data.error) return show("schedule-reading", errorText(data));
    window.location.reload();
  });
}

function wireSchedules() {
  wireNewSchedule();
  for (const b of document.querySelectorAll("button.schedule")) {
    b.addEventListener("click", async () => {
      const {data} = await api("POST", `/api/schedules/${b.dataset.id}/${b.dataset.command}`);
      if (data.error) return alert(data.error.message);
      window.location.reload();
    });
  }
}

function wireEvents() {
  const table = document.getElementById("events");
  if (!table) return;
  const state = document.getElementById("stream-state");
  const source = new EventSource(table.dataset.stream);
  source.onopen = () => { state.textContent = "live"; };
  source.onerror = () => { state.textContent = "reconnecting"; };
  // The stream was asked for with names=0: every event arrives as a plain message.
  source.onmessage = (event) => {
    const e = JSON.parse(event.data);
    const row = table.insertRow(1);
    row.className = "event";
    for (const text of [e.id, (e.timestamp || "").slice(11, 23), e.topic.split(".").pop(), e.aggregate_id.slice(0, 8), JSON.stringify(e.state).slice(0, 200)]) {
      row.insertCell().textContent = text;
    }
    while (table.rows.length > 500) table.deleteRow(-1);
  };
}

document.addEventListener("DOMContentLoaded", () => {
  wireAsk();
  wireTurn();
  wireLive();
  wireApprovals();
  wireDialogs();
  wireUndelivered();
  wireSchedules();
  wireEvents();
});
