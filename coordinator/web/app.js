// Bakeoff's page: the sweeps, one sweep live, the workers. It reads the coordinator's
// own JSON API (docs/cli.md, "HTTP API"; /api/v1/openapi.json) and polls it; nothing
// comes from elsewhere. Every value from a sweep or a worker reaches the page through
// textContent or an attribute, never as HTML; the finished report is the coordinator's
// own HTML, shown in a sandboxed frame that runs no script.
"use strict";

const POLL_MS = 2000;        // sweeps, trials and live figures while a sweep runs
const HEADLINE_MS = 10000;   // the report's headline while a sweep runs, at most this often

// A big sweep's trials list and report cost the coordinator more: poll it less often
// (2 s up to 250 trials, then 2 s more per 250, at most 10 s; docs/web.md, "Limits").
function pollMs(trials) { return Math.min(10000, POLL_MS * Math.max(1, Math.ceil(trials / 250))); }
const COLORS = ["#2f5bd3", "#d9480f", "#2b8a3e", "#ae3ec9", "#e67700", "#0b7285", "#c2255c", "#5c940d"];

let timer = null;            // the current view's poll
let generation = 0;          // bumped on every navigation: a late reply of an old view is dropped

// ------------------------------------------------------------------ API

function token() { return sessionStorage.getItem("bakeoff-token") || ""; }

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (token()) headers["Authorization"] = "Bearer " + token();
  const reply = await fetch(path, Object.assign({}, options, { headers, cache: "no-store" }));
  const type = reply.headers.get("Content-Type") || "";
  const body = type.startsWith("application/json") ? await reply.json() : await reply.text();
  if (!reply.ok) {
    const message = body && body.error ? body.error : reply.status + " " + reply.statusText;
    if (reply.status === 401) showTokenForm(message);
    throw new ApiError(reply.status, message);
  }
  return body;
}

function showTokenForm(why) {
  const form = document.getElementById("token-form");
  form.hidden = false;
  form.title = why || "";
  document.getElementById("forget-token").hidden = true;
}

// ------------------------------------------------------------------ DOM helpers

// el("td", {class: "num"}, "text", child...): text and nodes only, never HTML.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

function table(headings, rows) {
  return el("table", {},
    el("thead", {}, el("tr", {}, headings.map(h => el("th", { class: h.num ? "num" : null }, h.label || h)))),
    el("tbody", {}, rows));
}

function progressBar(done, total, title) {
  const share = total > 0 ? Math.min(1, done / total) : 0;
  const bar = el("span", { class: "bar", title: title || done + " of " + total }, el("span", {}));
  bar.firstChild.style.width = (100 * share).toFixed(1) + "%";
  return bar;
}

function fmtRate(x) { return x === null || x === undefined ? "–" : Math.round(x).toLocaleString("en-US"); }
function fmtBytes(b) {
  if (b === null || b === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) { b /= 1024; ++i; }
  return b.toFixed(i ? 1 : 0) + " " + units[i];
}
function fmtTime(unix) { return unix ? new Date(unix * 1000).toLocaleString() : "–"; }

function show(...nodes) {
  const view = document.getElementById("view");
  view.replaceChildren(...nodes);
}

function showError(e) {
  show(el("p", { class: "error", role: "alert" }, e.status === 401
    ? "This coordinator needs an API token (a read token is enough to look): enter it above."
    : "Error: " + e.message));
}

// ------------------------------------------------------------------ views

async function sweepsView(gen) {
  const sweeps = await api("/api/v1/sweeps");
  if (gen !== generation) return;
  const rows = sweeps.map(s => el("tr", {},
    el("td", { class: "num" }, s.id),
    el("td", {}, el("a", { href: "#/sweeps/" + encodeURIComponent(s.id) }, s.name)),
    el("td", {}, s.question || ""),
    el("td", { class: "state-" + s.state }, s.state),
    el("td", {}, progressBar(s.counts.finished, s.trial_count), " ", s.counts.finished + "/" + s.trial_count),
    el("td", {}, s.waiting || "")));
  show(el("h1", {}, "Sweeps"),
       sweeps.length ? table(["id", "name", "question", "state", "progress", "waiting"], rows)
                     : el("p", { class: "muted" }, "No sweeps yet: `bakeoff submit SWEEP.yaml` or `bakeoff local SWEEP.yaml`."));
  schedule(() => sweepsView(gen), POLL_MS * 2, gen);
}

async function workersView(gen) {
  const workers = await api("/api/v1/workers");
  if (gen !== generation) return;
  const rows = workers.map(w => el("tr", {},
    el("td", {}, w.id), el("td", {}, w.host), el("td", {}, w.state),
    el("td", { class: "num" }, w.cpu_slots_used + "/" + w.cpu_slots),
    el("td", {}, w.cuda_devices.length ? w.cuda_devices_used.length + "/" + w.cuda_devices.length + " " + (w.gpu_model || "") : "–"),
    el("td", {}, w.running.map(a => "trial " + a.trial_id + " (attempt " + a.attempt + ")").join(", ")),
    el("td", {}, w.slurm_job_id || "–"),
    el("td", { class: "num" }, w.last_heartbeat_s_ago.toFixed(1) + " s ago")));
  show(el("h1", {}, "Workers"),
       workers.length ? table(["name", "host", "state", { label: "CPU slots", num: true }, "GPUs", "running",
                               "Slurm job", { label: "last heartbeat", num: true }], rows)
                      : el("p", { class: "muted" }, "No worker has registered."));
  schedule(() => workersView(gen), POLL_MS * 2, gen);
}

// One tokens/s per trial, the report's (docs/web.md): a trial that wrote its summary has
// the summary's figure (global tokens per step / median step time, as the API's trial and
// the report give it); one still running, its live figure (tokens / seconds of the
// measured steps so far), until its summary comes.
function trialRate(t, f) {
  if (t && t.tokens_per_s !== null && t.tokens_per_s !== undefined) return t.tokens_per_s;
  return f && f.tokens_per_s !== null && f.tokens_per_s !== undefined ? f.tokens_per_s : null;
}

// A variant's tokens/s as the report gives it: the geometric mean over its trials.
function geometricMean(values) {
  if (!values.length) return null;
  return Math.exp(values.reduce((sum, v) => sum + Math.log(v), 0) / values.length);
}

// The chart: tokens/s of every trial with measured steps, by its place in the run order,
// one color per variant; it grows as trials run.
function liveChart(trials, live, colorOf) {
  const byId = new Map(trials.map(t => [t.id, t]));
  const points = live.trials.filter(f => byId.has(f.trial_id) && trialRate(byId.get(f.trial_id), f) !== null)
    .map(f => ({ t: byId.get(f.trial_id), y: trialRate(byId.get(f.trial_id), f) }));
  const W = 900, H = 260, L = 64, R = 12, T = 12, B = 30;
  const maxX = Math.max(1, ...trials.map(t => t.order_index));
  const maxY = Math.max(1, ...points.map(p => p.y)) * 1.1;
  const x = i => L + (W - L - R) * i / maxX;
  const y = v => H - B - (H - T - B) * v / maxY;
  const chart = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img",
                             "aria-label": "tokens per second of each trial so far" });
  chart.append(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#d9dee7" }));
  chart.append(svg("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#d9dee7" }));
  for (let k = 0; k <= 4; ++k) {
    const v = maxY * k / 4;
    chart.append(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, fmtRate(v)));
  }
  chart.append(svg("text", { x: (L + W) / 2, y: H - 6, "text-anchor": "middle" }, "trials in run order"));
  for (const p of points) {
    const dot = svg("circle", { cx: x(p.t.order_index), cy: y(p.y), r: p.t.state === "finished" ? 5 : 4,
                                fill: colorOf(p.t.variant_key), "fill-opacity": p.t.state === "finished" ? 0.9 : 0.45 });
    dot.append(svg("title", {}, `trial ${p.t.id} ${p.t.variant_key}: ${fmtRate(p.y)} tokens/s`));
    chart.append(dot);
  }
  chart.dataset.points = String(points.length);
  return chart;
}

function headlineBox(report) {
  if (!report || !Array.isArray(report.headline) || !report.headline.length) return null;
  return el("div", { class: "headline", id: "headline" }, report.headline.map(line => el("p", {}, String(line))));
}

async function sweepView(gen, id, state) {
  const base = "/api/v1/sweeps/" + encodeURIComponent(id);
  const [sweep, trials, live] = await Promise.all([api(base), api(base + "/trials"), api(base + "/live")]);
  if (gen !== generation) return;
  const running = sweep.state !== "finished";
  const now = Date.now();
  // The headline again when trials finished since the last one (a report is the
  // costliest read), at most every HEADLINE_MS or five polls, and once at the end.
  const stale = sweep.counts.finished !== state.reportFinished &&
                now - (state.reportAt || 0) > Math.max(HEADLINE_MS, 5 * pollMs(sweep.trial_count));
  if (!state.report || (running && stale) || (!running && !state.final)) {
    state.reportFinished = sweep.counts.finished;
    try {
      state.report = await api(base + "/report?format=json");
      state.reportAt = now;
      state.final = !running;
    } catch (e) {
      state.reportError = e.message;
    }
    if (gen !== generation) return;
  }
  const variants = [];
  for (const t of trials) if (!variants.includes(t.variant_key)) variants.push(t.variant_key);
  const colorOf = key => COLORS[variants.indexOf(key) % COLORS.length];
  const liveBy = new Map(live.trials.map(f => [f.trial_id, f]));

  // Peak memory per variant, drawn as a bar against the largest, as it is reported.
  const peakOf = key => Math.max(-1, ...trials.filter(t => t.variant_key === key).map(t => liveBy.get(t.id))
    .filter(f => f && f.peak_mem_bytes !== null).map(f => f.peak_mem_bytes));
  const largestPeak = Math.max(1, ...variants.map(peakOf));
  const perVariant = variants.map(key => {
    const mine = trials.filter(t => t.variant_key === key);
    const rates = mine.filter(t => !t.outcome || t.outcome === "succeeded").map(t => trialRate(t, liveBy.get(t.id)))
      .filter(r => r !== null && r > 0);
    const peaks = mine.map(t => liveBy.get(t.id)).filter(f => f && f.peak_mem_bytes !== null).map(f => f.peak_mem_bytes);
    return el("tr", {},
      el("td", {}, el("span", { class: "swatch" }), key),
      el("td", {}, progressBar(mine.filter(t => t.state === "finished").length, mine.length), " ",
         mine.filter(t => t.state === "finished").length + "/" + mine.length),
      el("td", { class: "num" }, rates.length ? fmtRate(geometricMean(rates)) : "–"),
      el("td", { class: "num" }, peaks.length ? fmtBytes(Math.max(...peaks)) : "–"),
      el("td", {}, peaks.length ? progressBar(Math.max(...peaks), largestPeak,
                                              (100 * Math.max(...peaks) / largestPeak).toFixed(0) + "% of the largest") : ""));
  });
  perVariant.forEach((row, i) => { row.querySelector(".swatch").style.background = colorOf(variants[i]); });

  const trialRows = trials.map(t => el("tr", {},
    el("td", { class: "num" }, t.id), el("td", {}, t.variant_key), el("td", { class: "num" }, t.repeat),
    el("td", {}, t.state), el("td", {}, t.worker_id || "–"),
    el("td", { class: t.outcome ? "outcome-" + t.outcome : null }, t.outcome || "–"),
    el("td", { class: "num" }, fmtRate(trialRate(t, liveBy.get(t.id)))),
    el("td", {}, t.reason || "")));

  const cancel = el("button", { type: "button", hidden: !running }, "Cancel sweep");
  cancel.addEventListener("click", async () => {
    if (!confirm("Cancel sweep " + sweep.name + "? Its queued and running trials stop.")) return;
    try { await api(base + "/cancel", { method: "POST" }); } catch (e) { alert("Not cancelled: " + e.message); }
  });

  const parts = [
    el("h1", {}, sweep.name, " ", el("span", { class: "muted" }, "#" + sweep.id)),
    sweep.question ? el("p", {}, sweep.question) : null,
    el("p", {}, el("span", { class: "state-" + sweep.state, id: "sweep-state" }, sweep.state), " · ",
       progressBar(sweep.counts.finished, sweep.trial_count), " ", sweep.counts.finished + "/" + sweep.trial_count,
       " trials · running " + sweep.counts.running + " · queued " + sweep.counts.queued,
       sweep.waiting ? el("span", { class: "error" }, " · waiting: " + sweep.waiting) : null, " ", cancel),
    el("h2", {}, running ? "The answer so far" : "The answer"),
    headlineBox(state.report) || el("p", { class: "muted" }, state.reportError || "No comparison yet."),
    el("h2", {}, running ? "Live: tokens/s of each trial" : "Tokens/s of each trial"),
    el("div", { class: "legend" }, variants.map(key => {
      const s = el("span", {}, el("span", { class: "swatch" }), key);
      s.firstChild.style.background = colorOf(key);
      return s;
    })),
    liveChart(trials, live, colorOf),
    el("h2", {}, running ? "Variants: throughput and peak memory so far" : "Variants: throughput and peak memory"),
    table(["variant", "progress", { label: "tokens/s (geometric mean)", num: true }, { label: "peak memory", num: true }, ""],
          perVariant),
    el("h2", {}, "Trials"),
    table([{ label: "id", num: true }, "variant", { label: "repeat", num: true }, "state", "worker", "outcome",
           { label: "tokens/s", num: true }, "reason"], trialRows),
  ];
  if (!running) {
    parts.push(el("h2", {}, "Report"));
    if (!state.html) {
      try { state.html = await api(base + "/report?format=html"); } catch (e) { state.html = null; parts.push(el("p", { class: "error" }, e.message)); }
      if (gen !== generation) return;
    }
    if (state.html) {
      // The coordinator's own report, in a frame that runs no script and reaches nothing.
      const frame = el("iframe", { class: "report", sandbox: "", title: "report of " + sweep.name });
      frame.srcdoc = state.html;
      parts.push(frame);
    }
  }
  // Keep the report frame across polls of a finished sweep: it is set once.
  show(...parts.filter(Boolean));
  if (running) schedule(() => sweepView(gen, id, state), pollMs(sweep.trial_count), gen);
}

// ------------------------------------------------------------------ routing

function schedule(fn, ms, gen) {
  clearTimeout(timer);
  timer = setTimeout(() => { if (gen === generation) run(fn, gen); }, ms);
}

// Runs a view; on an error it says so and tries again in 5 s (a coordinator restarting,
// a 503 under load), except when the token is the problem.
function run(fn, gen) {
  fn().catch(e => {
    if (gen !== generation) return;
    showError(e);
    if (e.status !== 401 && e.status !== 403) schedule(fn, 5000, gen);
  });
}

function route() {
  clearTimeout(timer);
  const gen = ++generation;
  const hash = location.hash.replace(/^#/, "") || "/";
  const sweep = hash.match(/^\/sweeps\/([^/]+)$/);
  const state = {};
  if (sweep) run(() => sweepView(gen, decodeURIComponent(sweep[1]), state), gen);
  else if (hash === "/workers") run(() => workersView(gen), gen);
  else run(() => sweepsView(gen), gen);
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("token-form").addEventListener("submit", event => {
    event.preventDefault();
    const input = document.getElementById("token");
    sessionStorage.setItem("bakeoff-token", input.value.trim());
    input.value = "";
    document.getElementById("token-form").hidden = true;
    document.getElementById("forget-token").hidden = false;
    route();
  });
  document.getElementById("forget-token").addEventListener("click", () => {
    sessionStorage.removeItem("bakeoff-token");
    showTokenForm("");
    route();
  });
  if (token()) document.getElementById("forget-token").hidden = false;
  window.addEventListener("hashchange", route);
  route();
});
