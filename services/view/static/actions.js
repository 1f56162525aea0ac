// What a signed-in user may do from the dashboard: cancel a job, cordon, drain or uncordon
// a node, and read the output of a job's every rank. The browser connects to NATS over its
// websocket as the user's own identity (an nkey signs the server's challenge), so the
// server holds it to exactly the rights it holds the CLI to (docs/adr/0022): the dashboard
// server acts for nobody. The identity stays in this tab (sessionStorage) and is never sent
// anywhere; the server sees only signatures.
import { connect, JSONCodec, nkeyAuthenticator } from "/static/nats.js";

const STORED = "allot.identity";
const OUTPUT_BYTES = 64 * 1024; // asked for at a time
const SHOWN_BYTES = 512 * 1024; // of a rank's output kept on the page: its end
const POLL_MS = 1000; // between asks while a running process prints nothing
const codec = JSONCodec();
const who = document.getElementById("who");

let config = { websocket: null };
let identity = null; // {name, role, seed}
let connection = null;

function said(text, kind) {
  const line = document.getElementById("act-said");
  if (!line) return;
  line.textContent = text;
  line.className = "said " + (kind || "");
}

function readIdentity(text) {
  const parsed = JSON.parse(text);
  const named = typeof parsed.name === "string" && /^[A-Za-z0-9_-]{1,64}$/.test(parsed.name);
  if (!named || typeof parsed.seed !== "string" || !parsed.seed.startsWith("SU")) {
    throw new Error("not an Allot identity file (from `allot users add`)");
  }
  return { name: parsed.name, role: String(parsed.role || "user"), seed: parsed.seed };
}

async function connected() {
  if (connection) return connection;
  connection = await connect({
    servers: config.websocket,
    authenticator: nkeyAuthenticator(new TextEncoder().encode(identity.seed)),
    inboxPrefix: "_INBOX_" + identity.name, // the server lets it read no other inbox
    name: "allot-dashboard",
    maxReconnectAttempts: 3,
  });
  connection.closed().then(() => { connection = null; });
  return connection;
}

// A request, and its JSON reply; a refusal by the server is a request nobody answers.
async function ask(subject, body) {
  const nc = await connected();
  try {
    const reply = await nc.request(subject, codec.encode(body), { timeout: 10000 });
    return codec.decode(reply.data);
  } catch (error) {
    throw new Error(`no answer on ${subject}: ${error.message}` +
      " (does this identity have the right to send it?)");
  }
}

function operator() {
  return identity.role === "operator";
}

// A command, as the CLI sends it: an operator's under admin.
async function command(name, body) {
  const sent = operator() && !name.startsWith("admin.") ? "admin." + name : name;
  const reply = await ask(`allot.cmd.${identity.name}.${sent}`, body);
  if (reply.errors && reply.errors.length) {
    throw new Error(reply.errors.map((e) => `${e.field}=${JSON.stringify(e.value)}: ${e.message}`).join("; "));
  }
  return reply;
}

function drawWho() {
  who.hidden = false;
  if (identity) {
    const out = el("button", { type: "button", id: "sign-out" }, "sign out");
    out.addEventListener("click", () => {
      sessionStorage.removeItem(STORED);
      location.reload();
    });
    replace(who, el("span", { id: "signed-in" }, `${identity.name} (${identity.role})`), " ", out);
    for (const me of document.querySelectorAll(".me")) me.textContent = identity.name;
    for (const panel of document.querySelectorAll("#act-panel")) panel.hidden = false;
    return;
  }
  const file = el("input", { type: "file", id: "identity-file", accept: ".json,application/json",
    "aria-label": "your identity file" });
  file.addEventListener("change", async () => {
    try {
      const chosen = readIdentity(await file.files[0].text());
      sessionStorage.setItem(STORED, JSON.stringify(chosen));
      location.reload();
    } catch (error) {
      replace(who, el("span", { class: "error" }, error.message));
    }
  });
  replace(who, el("label", null, "sign in: ", file));
}

// --- a job: cancel it, read each rank's output -------------------------------------------

const outputs = new Map(); // node -> {offset, text, ended, attempt, pre}
let job = null;
let processes = [];

function onJobPage() {
  document.getElementById("cancel-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const reason = new FormData(event.target).get("reason") || "";
    said("asking…");
    try {
      // The job of the page's address (dashboard.js's jobId): known before the page has
      // drawn it, so a cancel asked early is not lost.
      await command("cancel", { job_id: jobId, reason: String(reason) });
      said(`cancel of ${jobId} requested, as ${identity.name}`, "ok");
    } catch (error) {
      said(error.message, "error");
    }
  });
  window.addEventListener("allot:drawn", (event) => {
    job = event.detail.job;
    processes = event.detail.processes.filter((p) => p.started);
    showOutput();
  });
  setInterval(readOutputs, POLL_MS);
}

function showOutput() {
  const panel = document.getElementById("output-panel");
  panel.hidden = false;
  for (const p of processes) {
    const known = outputs.get(p.node_id);
    if (known && known.attempt === job.attempts) continue;
    const pre = el("pre", { "data-node": p.node_id, "data-ranks": p.ranks });
    outputs.set(p.node_id, { offset: 0, text: "", ended: false, attempt: job.attempts, pre,
      decoder: new TextDecoder() });
  }
  const sections = [...outputs.entries()].map(([node, out]) => el("section", { class: "rank" },
    el("h3", null, `rank ${processes.find((p) => p.node_id === node)?.ranks ?? "?"} on ${node}`),
    out.pre));
  replace(document.getElementById("output"), ...sections);
  document.getElementById("output-note").textContent =
    processes.length ? "" : "no process of this job has started (yet)";
}

let reading = false;
async function readOutputs() {
  if (reading || !job) return;
  reading = true;
  try {
    for (const [node, out] of outputs) {
      while (!out.ended) {
        const subject = `allot.output.${node}.${identity.name}` + (operator() ? ".admin" : "");
        const reply = await ask(subject, { job_id: job.job_id, attempt: out.attempt,
          offset: out.offset, max_bytes: OUTPUT_BYTES });
        if (reply.errors && reply.errors.length) {
          out.pre.textContent = reply.errors.map((e) => e.message).join("; ");
          out.ended = true;
          break;
        }
        const bytes = Uint8Array.from(atob(reply.data), (c) => c.charCodeAt(0));
        out.text = (out.text + out.decoder.decode(bytes, { stream: true })).slice(-SHOWN_BYTES);
        out.pre.textContent = out.text;
        out.offset = reply.next_offset;
        if (reply.next_offset >= reply.size) {
          out.ended = reply.ended;
          break; // all there is for now: asked again on the next tick
        }
      }
    }
  } catch (error) {
    document.getElementById("output-note").textContent = error.message;
  } finally {
    reading = false;
  }
}

// --- nodes: cordon, drain, uncordon ------------------------------------------------------

function onNodesPage() {
  const form = document.getElementById("node-form");
  window.addEventListener("allot:drawn", (event) => {
    const select = form.elements.node;
    const chosen = select.value;
    replace(select, ...event.detail.data.map((n) => el("option", { value: n.node_id }, n.node_id)));
    if (chosen) select.value = chosen;
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const act = event.submitter.value;
    const node = form.elements.node.value;
    const reason = String(form.elements.reason.value || "");
    if (act === "drain-now" && !confirm(`Drain ${node} now: every job there is stopped once ` +
        "past its minimum runtime; the work of those that cannot resume is lost. Go on?")) {
      return;
    }
    const request = act === "uncordon"
      ? { node_id: node, action: "uncordon" }
      : { node_id: node, action: "cordon", drain: act !== "cordon", now: act === "drain-now", reason };
    said("asking…");
    try {
      await command("admin.node", request);
      said(`${node}: ${act} done, as ${identity.name}`, "ok");
    } catch (error) {
      said(error.message, "error");
    }
  });
}

async function start() {
  config = await api("/api/config");
  if (!config.websocket) return; // this installation's pages only read
  const stored = sessionStorage.getItem(STORED);
  identity = stored ? readIdentity(stored) : null;
  drawWho();
  if (!identity) return;
  if (page === "job") onJobPage();
  if (page === "nodes") onNodesPage();
  refresh(); // drawn again, now that the panels listen
}

start();
