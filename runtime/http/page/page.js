// The mqo service's page: polls /stats (every second), /explain and /queries (every
// three), follows /results/stream for results. Plain DOM, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
const MAX_RESULTS = 50;
const GRAPH_LISTS = 40;
const GRAPH_QUERIES = 60;
let failures = {};

function showError(what, err) {
  failures[what] = `${what}: ${err}`;
  const box = $("error");
  box.textContent = Object.values(failures).join("; ");
  box.hidden = false;
  $("status").textContent = "error";
  $("status").className = "pill bad";
}

function clearError(what) {
  delete failures[what];
  if (Object.keys(failures).length === 0) $("error").hidden = true;
}

async function getJson(path) {
  const response = await fetch(path, { cache: "no-store" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}

function fill(tableId, rows) {
  const body = $(tableId).querySelector("tbody");
  body.replaceChildren(...rows);
}

function fmt(n) {
  return n === null || n === undefined ? "-" : Number(n).toLocaleString("en");
}

// ------------------------------------------------------------------ plots

function plot(canvasId, series, colors) {
  const canvas = $(canvasId);
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 36;
  ctx.clearRect(0, 0, w, h);
  const values = series.flat().filter((v) => v !== null && isFinite(v));
  const top = Math.max(1e-9, ...values, 0) * 1.1;
  ctx.strokeStyle = "#ccc";
  ctx.strokeRect(pad, 4, w - pad - 4, h - 24);
  ctx.fillStyle = "#555";
  ctx.font = "11px sans-serif";
  ctx.fillText(top.toPrecision(3), 2, 14);
  ctx.fillText("0", 2, h - 20);
  series.forEach((points, k) => {
    ctx.strokeStyle = colors[k];
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    let started = false;
    points.forEach((v, i) => {
      if (v === null || !isFinite(v)) return;
      const x = pad + ((w - pad - 4) * i) / Math.max(1, points.length - 1);
      const y = 4 + (h - 24) * (1 - v / top);
      if (started) ctx.lineTo(x, y); else { ctx.moveTo(x, y); started = true; }
    });
    ctx.stroke();
  });
}

function rates(history, field) {
  const out = [];
  for (let i = 1; i < history.length; i++) {
    const dt = history[i].t - history[i - 1].t;
    out.push(dt > 0 ? (history[i][field] - history[i - 1][field]) / dt : null);
  }
  return out;
}

async function refreshStats() {
  try {
    const s = await getJson("/stats");
    $("n-queries").textContent = fmt(s.queries);
    $("n-tuples").textContent = fmt(s.counters.tuples);
    $("n-results").textContent = fmt(s.counters.results + s.counters.aggregate_rows);
    $("n-late").textContent = fmt(s.counters.late);
    $("n-rejected").textContent = fmt(s.counters.rejected);
    $("watermark").textContent = s.watermark === null ? "-" : s.watermark;
    const history = s.history.slice(-300);
    plot("plot-throughput", [rates(history, "tuples"), rates(history, "results")], ["#457b9d", "#f4a261"]);
    const ms = (v) => (v === null ? null : v * 1000);
    plot("plot-latency", [history.map((p) => ms(p.p50)), history.map((p) => ms(p.p99))], ["#457b9d", "#f4a261"]);
    if (!resultsSeen) s.recent.forEach((r) => addResult(null, r));
    resultsSeen = true;
    $("status").textContent = "live";
    $("status").className = "pill ok";
    clearError("stats");
  } catch (err) {
    showError("stats", err.message || err);
  }
}

// ------------------------------------------------------------------ the plan

function drawGraph(lists, queryIds) {
  const svg = $("graph");
  const NS = "http://www.w3.org/2000/svg";
  const shownLists = lists.slice(0, GRAPH_LISTS);
  const readers = new Set(shownLists.flatMap((l) => l.readers));
  const shownQueries = queryIds.filter((q) => readers.has(q)).slice(0, GRAPH_QUERIES);
  const rows = Math.max(shownLists.length, shownQueries.length, 1);
  const height = Math.max(80, rows * 18 + 20);
  svg.setAttribute("height", height);
  svg.replaceChildren();
  const y = (i, n) => 14 + (i * (height - 28)) / Math.max(1, n - 1);
  const listY = new Map(shownLists.map((l, i) => [l.kind + l.index, y(i, shownLists.length)]));
  const queryY = new Map(shownQueries.map((q, i) => [q, y(i, shownQueries.length)]));
  const line = (x1, y1, x2, y2) => {
    const el = document.createElementNS(NS, "line");
    Object.entries({ x1, y1, x2, y2, stroke: "#a8dadc", "stroke-width": 1 }).forEach(([k, v]) => el.setAttribute(k, v));
    svg.appendChild(el);
  };
  const label = (x, yy, text, anchor, color) => {
    const el = document.createElementNS(NS, "text");
    Object.entries({ x, y: yy + 4, "text-anchor": anchor, "font-size": 11, fill: color }).forEach(([k, v]) => el.setAttribute(k, v));
    el.textContent = text;
    svg.appendChild(el);
  };
  shownLists.forEach((l) => l.readers.forEach((q) => {
    if (queryY.has(q)) line(420, listY.get(l.kind + l.index), 760, queryY.get(q));
  }));
  shownLists.forEach((l) => label(414, listY.get(l.kind + l.index), `${l.kind}${l.index}: ${l.key} (${l.predicates.length})`, "end", "#1d3557"));
  shownQueries.forEach((q) => label(766, queryY.get(q), q, "start", "#e76f51"));
  if (lists.length > GRAPH_LISTS || readers.size > GRAPH_QUERIES) {
    label(1130, height - 10, `showing ${shownLists.length} of ${lists.length} lists, ${shownQueries.length} queries`, "end", "#666");
  }
}

async function refreshPlan() {
  try {
    const [plan, queries] = await Promise.all([getJson("/explain"), getJson("/queries")]);
    const o = plan.order;
    const sh = plan.sharing;
    $("sharing").textContent =
      `sharing ratio ${sh.ratio.toFixed(2)} (${fmt(sh.occurrences)} predicate occurrences / ${fmt(sh.distinct)} distinct), ` +
      `${plan.lists.length} list(s); evaluation order ${o.mode}; selectivity measured on ${fmt(plan.sample)} recent tuple(s)`;
    fill("lists", plan.lists.map((l) => {
      const tr = document.createElement("tr");
      cell(tr, `${l.kind}${l.index}`);
      cell(tr, `${l.key}  [${l.note}]`);
      cell(tr, fmt(l.predicates.length), "num");
      cell(tr, l.readers.slice(0, 12).join(", ") + (l.readers.length > 12 ? ` … (${l.readers.length})` : ""));
      const sel = cell(tr, l.selectivity === null || l.selectivity === undefined ? "-" : l.selectivity.toFixed(3), "num");
      if (typeof l.selectivity === "number") {
        const bar = document.createElement("span");
        bar.className = "bar";
        bar.style.width = `${Math.round(l.selectivity * 60)}px`;
        sel.prepend(bar);
      }
      return tr;
    }));
    fill("order", (o.streams.length ? o.streams : [{ stream: "(no tuples yet)", seen: 0, order: o.mode }]).map((s) => {
      const tr = document.createElement("tr");
      cell(tr, s.stream);
      cell(tr, fmt(s.seen), "num");
      cell(tr, s.order);
      const f = s.fanout || {};
      cell(tr, ["A", "J", "W"].map((k) => (f[k] === null || f[k] === undefined ? "-" : f[k])).join(" / "));
      return tr;
    }));
    fill("queries", queries.queries.slice(0, 500).map((q) => {
      const tr = document.createElement("tr");
      cell(tr, q.id);
      cell(tr, q.kind);
      const pre = document.createElement("pre");
      pre.textContent = q.text;
      cell(tr, "").appendChild(pre);
      return tr;
    }));
    drawGraph(plan.lists, queries.queries.map((q) => q.id));
    clearError("plan");
  } catch (err) {
    showError("plan", err.message || err);
  }
}

// ------------------------------------------------------------------ results

let resultsSeen = false;

function addResult(cursor, result) {
  const li = document.createElement("li");
  li.textContent = (cursor === null ? "" : `#${cursor} `) + JSON.stringify(result);
  const list = $("results");
  list.prepend(li);
  while (list.children.length > MAX_RESULTS) list.lastChild.remove();
}

function follow() {
  const source = new EventSource(`/results/stream?after=${window.startCursor || 0}`);
  source.onopen = () => { $("stream-state").textContent = "(live)"; clearError("results"); };
  source.onmessage = (event) => {
    resultsSeen = true;
    addResult(event.lastEventId, JSON.parse(event.data));
  };
  source.onerror = () => { $("stream-state").textContent = "(reconnecting…)"; };
}

async function start() {
  try {
    const health = await getJson("/health");
    // start the live results after what is there now; the stats bring the recent ones
    window.startCursor = health.cursor;
  } catch (err) {
    showError("health", err.message || err);
  }
  await refreshStats();
  await refreshPlan();
  follow();
  setInterval(refreshStats, 1000);
  setInterval(refreshPlan, 3000);
}

window.addEventListener("error", (event) => showError("page", event.message));
start();
