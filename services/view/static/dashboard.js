// The dashboard's pages: each fetches its data from /api and draws it, again whenever the
// folded sequence moves (/api/events). Everything from the log is user input (names,
// reasons, commands): it goes into the page as text nodes only, never as markup.
"use strict";

const page = document.body.dataset.page;

// An element with text or elements inside; attributes set one by one, as attributes.
function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value !== null && value !== undefined) node.setAttribute(name, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function jobLink(jobId) {
  return el("a", { href: "/jobs/" + encodeURIComponent(jobId), class: "job" }, jobId);
}

// 5400 -> "1h30m": how long, as people say it.
function duration(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  const s = Math.max(0, Math.floor(seconds));
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60), r = s % 60;
  const two = (n) => String(n).padStart(2, "0");
  if (d) return `${d}d${two(h)}h`;
  if (h) return `${h}h${two(m)}m`;
  if (m) return `${m}m${two(r)}s`;
  return `${r}s`;
}

// Nanoseconds since the epoch -> a date and time in this browser's zone, the zone said.
function when(ns) {
  if (ns === null || ns === undefined) return "—";
  return new Date(ns / 1e6).toLocaleString(undefined, {
    year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short",
  });
}

function hours(value) {
  return value === null || value === undefined ? "—" : value.toFixed(2);
}

function percent(value) {
  return value === null || value === undefined ? "—" : (value * 100).toFixed(1) + "%";
}

class Refused extends Error {}

async function api(path) {
  const response = await fetch(path, { headers: { accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) {
    const said = (body.errors || []).map((e) => `${e.field}: ${e.message}`).join("; ");
    throw new Refused(said || `${response.status}`);
  }
  return body;
}

function replace(target, ...children) {
  target.replaceChildren(...children.filter((c) => c !== null && c !== undefined));
}

function badge(text, kind) {
  return el("span", { class: "badge " + (kind || text) }, text);
}

function definitions(target, pairs) {
  replace(target, ...pairs.filter(([, v]) => v !== undefined).flatMap(
    ([term, value]) => [el("dt", null, term), el("dd", null, value === null ? "—" : value)]));
}

// --- the queue ---------------------------------------------------------------------------

async function drawQueue() {
  const answer = await api("/api/queue");
  const data = answer.data;
  document.getElementById("summary").textContent =
    `${answer.total} waiting · sequence ${answer.seq}`;
  const hash = data.policy_hash ? ` (${data.policy_hash})` : " (no plan has named one yet)";
  document.getElementById("policy").textContent =
    `In the planner's order under policy ${data.policy}${hash}, as of sequence ${data.computed_at_seq}.`;
  const rows = data.rows.map((row) => el("tr", { "data-job": row.job_id },
    el("td", null, row.position),
    el("td", null, jobLink(row.job_id)),
    el("td", null, row.name || "—"),
    el("td", null, row.tier),
    el("td", null, row.account),
    el("td", { class: "number" }, row.gpus),
    el("td", { class: "number" }, duration(row.waiting_s)),
    el("td", { class: "reason" }, row.reason_text,
      row.max_wait_exceeded ? badge("past its max wait", "warn") : null),
    el("td", null, when(row.estimated_start)),
  ));
  replace(document.querySelector("#queue tbody"), ...rows);
  document.getElementById("more").textContent =
    answer.more ? `The first ${rows.length} of ${answer.total} are shown.` : "";
}

// --- the GPU map -------------------------------------------------------------------------

function nodeState(node) {
  if (node.lost) return "lost";
  if (node.draining) return node.drained ? "drained" : "draining";
  if (node.cordoned) return "cordoned";
  return node.healthy ? "healthy" : "unhealthy";
}

function nodeWhy(node) {
  const why = [];
  if (node.fault) why.push(node.fault.reason);
  if (node.cordoned) {
    const by = node.cordoned_by ? ` by ${node.cordoned_by}` : "";
    why.push(`${node.draining ? "drain" : "cordon"}${by}: ${node.cordon_reason || "no reason given"}`);
  }
  return why.join("; ");
}

function gpuCell(node, gpu) {
  const key = String(gpu.index);
  const holder = node.allocated[key];
  const fault = node.gpu_faults[key];
  const kind = fault ? "faulty" : holder ? "busy" : "free";
  return el("div", { class: "gpu " + kind, "data-gpu": gpu.index, title: gpu.uuid || null },
    el("div", { class: "index" }, `GPU ${gpu.index}`),
    holder ? jobLink(holder) : el("div", { class: "muted" }, fault ? "takes no work" : "free"),
    fault ? el("div", { class: "fault" }, `${fault.kind}: ${fault.reason}`) : null,
  );
}

async function drawNodes() {
  const answer = await api("/api/nodes");
  let total = 0, free = 0;
  const cards = answer.data.map((node) => {
    total += node.gpus.length;
    free += node.free_gpus.length;
    const state = nodeState(node);
    const why = nodeWhy(node);
    const labels = Object.entries(node.labels).map(([k, v]) => `${k}=${v}`).join(" ");
    return el("article", { class: "card " + state, "data-node": node.node_id },
      el("h2", null, node.node_id, " ", badge(state)),
      el("p", { class: "muted" },
        `${node.hostname} · ${node.gpus.length} GPUs · ${node.free_gpus.length} free`
        + (labels ? ` · ${labels}` : "")),
      why ? el("p", { class: "why" }, why) : null,
      el("div", { class: "gpus" }, ...node.gpus.map((gpu) => gpuCell(node, gpu))),
    );
  });
  replace(document.getElementById("nodes"), ...cards);
  document.getElementById("summary").textContent =
    `${answer.data.length} nodes · ${total} GPUs · ${free} free · sequence ${answer.seq}`;
  drawn(answer);
}

// --- the accounts ------------------------------------------------------------------------

async function drawAccounts() {
  const answer = await api("/api/accounts");
  const { accounts, budget, owed } = answer.data;
  const standing = Object.fromEntries(budget.map((row) => [row.account, row]));
  const delivered = Object.fromEntries(((owed && owed.rows) || []).map((row) => [row.account, row]));
  const paths = [...new Set([...Object.keys(accounts), ...Object.keys(standing)])].sort();
  const rows = paths.map((path) => {
    const s = standing[path] || {};
    const o = delivered[path] || {};
    const depth = path.split("/").length - 1;
    const name = el("td", { class: "tree", "data-depth": depth }, path.split("/").pop());
    name.style.paddingLeft = `${0.5 + depth * 1.5}em`;
    const weight = s.weight ?? (accounts[path] || {}).weight;
    return el("tr", { "data-account": path },
      name,
      el("td", { class: "number" }, weight ?? "—"),
      el("td", { class: "number" }, percent(s.share)),
      el("td", { class: "number" }, s.rank ?? "—"),
      el("td", { class: "number" }, hours(s.usage_gpu_hours_in_window)),
      el("td", { class: "number" }, s.level_factor === null || s.level_factor === undefined
        ? "new" : s.level_factor.toFixed(3)),
      el("td", { class: "number" }, hours(s.budget_promised_gpu_hours)),
      el("td", { class: "number" }, hours(s.budget_left_gpu_hours)),
      el("td", { class: "number" }, hours(o.owed_gpu_hours)),
      el("td", { class: "number" }, hours(o.delivered_gpu_hours)),
      el("td", { class: "number" }, percent(o.delivered_of_owed)),
    );
  });
  replace(document.querySelector("#accounts tbody"), ...rows);
  document.getElementById("summary").textContent =
    `${paths.length} accounts · sequence ${answer.seq}`;
  document.getElementById("owed-note").textContent = owed
    ? `Owed and delivered: ${when(owed.start)} to ${when(owed.end)}, from the log up to sequence ${owed.seq} (computed again as the log moves, every 10 s or less often).`
    : "Owed and delivered: not computed yet.";
}

// --- one job -----------------------------------------------------------------------------

function jobOfPath() {
  const last = location.pathname.split("/").pop();
  try {
    return decodeURIComponent(last);
  } catch {
    return last; // not a valid escape: asked as it is, and the server says there is none
  }
}

const jobId = page === "job" ? jobOfPath() : null;
let tracedAt = null; // what the trace was last read for: the job's trail length and status

function shape(spec) {
  if (spec.max_gpus !== null && spec.max_gpus !== undefined) return `${spec.gpus}..${spec.max_gpus}`;
  return spec.workers > 1 ? `${spec.workers}x${spec.gpus}` : String(spec.gpus);
}

function placements(job) {
  return Object.entries(job.placements).map(([node, gpus]) => `${node}[${gpus.join(",")}]`).join(" ");
}

async function drawJob() {
  document.getElementById("job-id").textContent = jobId;
  let answer;
  try {
    answer = await api("/api/jobs/" + encodeURIComponent(jobId));
  } catch (error) {
    const said = document.getElementById("job-error");
    said.textContent = error.message;
    said.hidden = false;
    return;
  }
  const { job, explain } = answer;
  const spec = job.spec;
  document.getElementById("job-name").textContent = spec.name || "";
  const status = document.getElementById("job-status");
  status.textContent = job.status;
  status.className = "badge " + job.status;
  definitions(document.getElementById("detail"), [
    ["account", spec.account],
    ["tier", spec.tier],
    ["submitted by", job.submitted_by || null],
    ["GPUs", `${shape(spec)} (${spec.topology})`],
    ["placed on", placements(job) || null],
    ["command", spec.command.join(" ")],
    ["submitted", when(job.submitted_at)],
    ["admitted", when(job.admitted_at)],
    ["started", when(job.started_at)],
    ["ended", when(job.ended_at)],
    ["exit code", job.exit_code],
    ["ended because", job.end_reason || null],
    ["attempts", job.attempts],
    ["preemptions", job.preemptions ? `${job.preemptions}, ${(job.lost_gpu_ms / 1000).toFixed(1)} GPU-s lost` : 0],
    ["checkpoint", job.checkpoint_step ? `${job.checkpoint_step} at ${when(job.last_checkpoint_at)}` : null],
  ]);
  const standing = explain.account_standing;
  definitions(document.getElementById("explain"), [
    ["position", explain.position !== undefined ? `${explain.position} of ${explain.queue_length}` : undefined],
    ["waiting because", explain.reason],
    ["recorded reason", explain.recorded_reason],
    ["estimated start (UTC)", explain.estimated_start],
    ["placed", explain.placements],
    ["funded", explain.funded === undefined ? undefined : explain.funded ? "yes" : "no (runs on idle GPUs)"],
    ["ended", explain.ended],
    ["account rank", standing ? `${standing.rank} (share ${percent(standing.share)}, `
      + `${hours(standing.decayed_usage_gpu_hours)} GPU-h decayed usage)` : undefined],
  ]);
  const steps = explain.trail.map((step) => el("tr", { "data-step": step.what },
    el("td", null, when(step.at)),
    el("td", null, step.what),
    el("td", null, step.text),
    el("td", null, step.until ? when(step.until) : ""),
  ));
  replace(document.querySelector("#trail tbody"), ...steps);
  const now = `${explain.trail.length} ${job.status} ${job.checkpoint_step}`;
  if (answer.traced && now !== tracedAt) {
    tracedAt = now;
    await drawTrace();
  }
  drawn(answer);
}

// What a page drew, for the signed-in user's actions (actions.js) to act on.
function drawn(answer) {
  window.dispatchEvent(new CustomEvent("allot:drawn", { detail: answer }));
}

async function drawTrace() {
  const note = document.getElementById("trace-note");
  let answer;
  try {
    answer = await api("/api/jobs/" + encodeURIComponent(jobId) + "/trace");
  } catch (error) {
    tracedAt = null; // read it again next time
    note.textContent = `The trace could not be read: ${error.message}`;
    return;
  }
  const trace = answer.trace;
  const job = trace.spans[0];
  const origin = job.start;
  const finish = job.end ?? trace.now;
  const width = Math.max(finish - origin, 1);
  note.textContent = `Trace ${trace.trace_id}: ${trace.status}, ${duration((finish - origin) / 1e9)}.`;
  const rows = [];
  for (const span of trace.spans) {
    const end = span.end ?? trace.now;
    const bar = el("div", { class: "bar" + (span.end === null ? " open" : "") });
    bar.style.left = `${((span.start - origin) / width) * 100}%`;
    bar.style.width = `${Math.max(0.5, ((end - span.start) / width) * 100)}%`;
    const node = span.attributes["allot.node"] ? ` on ${span.attributes["allot.node"]}` : "";
    const label = el("div", { class: "label" }, span.name + node);
    label.style.paddingLeft = `${span.depth * 1.2}em`;
    rows.push(el("div", { class: "span", "data-span": span.name },
      label,
      el("div", { class: "took" }, duration((end - span.start) / 1e9) + (span.end === null ? "…" : "")),
      el("div", { class: "track" }, bar),
    ));
    for (const point of span.points) {
      const mark = el("div", { class: "point" }, `+${duration((point.at - origin) / 1e9)} · ${point.name}`);
      mark.style.paddingLeft = `${(span.depth + 1) * 1.2}em`;
      rows.push(mark);
    }
  }
  replace(document.getElementById("trace"), ...rows);
}

// --- keeping the page current ------------------------------------------------------------

const draw = { queue: drawQueue, nodes: drawNodes, accounts: drawAccounts, job: drawJob }[page];
let drawing = false;
let again = false;
let wanted = 0; // the sequence the latest event said

function live(text, kind) {
  const said = document.getElementById("live");
  said.textContent = text;
  said.className = "live " + kind;
}

async function refresh() {
  if (drawing) {
    again = true;
    return;
  }
  drawing = true;
  const at = wanted;
  try {
    await draw();
    document.body.dataset.seq = String(at);
    live(`live · sequence ${at}`, "ok");
  } catch (error) {
    live(error instanceof Refused ? error.message : "cannot reach the server", "down");
  } finally {
    drawing = false;
    if (again) {
      again = false;
      refresh();
    }
  }
}

function follow() {
  const events = new EventSource("/api/events");
  events.addEventListener("seq", (event) => {
    const said = JSON.parse(event.data);
    if (!said.ready) {
      live(`reading the log · sequence ${said.seq}`, "down");
      return;
    }
    wanted = said.seq;
    refresh();
  });
  events.addEventListener("error", () => live("disconnected · retrying", "down"));
}

document.getElementById("find-job").addEventListener("submit", (event) => {
  event.preventDefault();
  const id = new FormData(event.target).get("job").trim();
  if (id) location.href = "/jobs/" + encodeURIComponent(id);
});
for (const link of document.querySelectorAll("nav a")) {
  if (link.dataset.nav === page) link.setAttribute("aria-current", "page");
}
follow();
// Waits and estimated starts move with time alone: drawn again now and then, too.
setInterval(() => { if (page !== "job") refresh(); }, 15000);
