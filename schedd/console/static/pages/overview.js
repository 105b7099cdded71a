// The cluster overview (admin): the nodes from /v1/cluster with each node's own figures, and
// charts of the whole cluster's last 15 minutes from /v1/stats?scope=cluster (the serving node
// asks the others: the page may talk only to its own origin), refreshed every 5 seconds; beside
// them the runs due in the next 24 hours from /v1/forecast, read again every minute.

import { enc, get } from "../api.js";
import { lineChart, legend } from "../chart.js";
import { clear, every, h, notice, table, when } from "../dom.js";

const REFRESH_MS = 5000;
const WINDOW_MS = 15 * 60 * 1000;
const AHEAD_MS = 24 * 60 * 60 * 1000;
const AHEAD_STEP = "15m";
const AHEAD_STEP_MS = 15 * 60 * 1000; // the steps start on the quarter hours
const FORECAST_EVERY_MS = 60 * 1000; // a forecast reads every active job: not every 5 s

export async function render(main) {
  const nodes = h("section", { id: "nodes" });
  const charts = h("section", { id: "charts", class: "charts" });
  main.append(h("h1", {}, "Overview"), nodes, charts);
  const ahead = { forecast: null, readMs: 0, error: null };
  return every(REFRESH_MS, () =>
    refresh(nodes, charts, ahead).catch((error) => {
      clear(nodes).append(notice(`Cannot show the cluster: ${error.message}`));
    }),
  );
}

// The cluster's runs due in the next 24 hours, read at most once a minute (kept between reads).
async function readAhead(ahead) {
  if (Date.now() - ahead.readMs < FORECAST_EVERY_MS) return;
  ahead.readMs = Date.now();
  try {
    const from = new Date(Math.floor(Date.now() / AHEAD_STEP_MS) * AHEAD_STEP_MS).toISOString();
    ahead.forecast = await get(`/v1/forecast?from=${enc(from)}&step=${AHEAD_STEP}`, { tenant: null });
    ahead.error = null;
  } catch (error) {
    ahead.error = error.message;
  }
}

async function refresh(nodes, charts, ahead) {
  let cluster;
  let stats;
  try {
    [cluster, stats] = await Promise.all([get("/v1/cluster", { tenant: null }), get("/v1/stats?scope=cluster", { tenant: null }), readAhead(ahead)]);
  } catch (error) {
    clear(nodes).append(notice(`Cannot read the cluster (${new Date().toISOString()}): ${error.message}. The charts below are from the last read.`));
    return;
  }
  const answered = stats.nodes.filter((n) => n.samples);
  const silent = stats.nodes.filter((n) => !n.samples).map((n) => n.node_id);
  clear(nodes).append(
    h("h2", {}, "Nodes ", h("span", { class: "hint", id: "updated" }, `read ${when(new Date().toISOString())}`)),
    nodesTable(cluster, stats.nodes),
    h(
      "p",
      { class: "hint" },
      "The charts add up every node's claims and deliveries; claim lag is the worst node's; the backlog is the whole cluster's as the leader counts it.",
      silent.length ? ` Not answering now: ${silent.join(", ")} (their share is missing).` : "",
    ),
  );
  clear(charts).append(...chartsOf(answered, cluster, stats.interval_s), aheadChart(ahead));
}

// The next 24 hours: one point per 15-minute step at its start, the peak named.
function aheadChart({ forecast, error }) {
  const title = "Runs due, next 24 hours";
  const points = forecast ? forecast.steps.map((s) => [Date.parse(s.at), s.runs]) : [];
  const fromMs = points.length ? points[0][0] : Date.now();
  const lines = [{ name: `runs due per ${AHEAD_STEP}`, points }];
  let caption = error ? `cannot read the forecast: ${error}` : "";
  if (forecast) {
    caption = `peak ${forecast.peak.runs} at ${when(forecast.peak.at)}`;
    if (forecast.partial) caption += ` (partial: ${forecast.jobs} jobs counted)`;
  }
  return h(
    "figure",
    { class: "panel", "data-chart": "forecast" },
    h("figcaption", {}, title, " ", h("span", { class: "latest" }, caption)),
    lineChart({ title, series: lines, fromMs, toMs: fromMs + AHEAD_MS, ends: ["now", "+24 h"] }),
    legend(lines),
  );
}

function nodesTable(cluster, reports) {
  const byId = new Map(reports.map((r) => [r.node_id, r]));
  const rows = cluster.nodes.map((node) => {
    const report = byId.get(node.node_id);
    const own = report?.node ?? null;
    return h(
      "tr",
      { "data-node": node.node_id },
      h("td", {}, node.node_id),
      h("td", {}, own ? own.role : node.role),
      h("td", {}, own ? own.term : "—"),
      h("td", {}, own ? own.applied_index : node.applied_index ?? "—"),
      h("td", {}, own?.lag ?? "—"),
      h("td", {}, node.partitions.length),
      h("td", {}, own ? yesNo(own.clock_trusted) : "—"),
      h("td", { class: own ? null : "error" }, own ? yesNo(own.ready) : report?.error ?? (node.healthy ? "connected" : "unreachable")),
      h("td", { class: "mono" }, node.api ?? "—"),
    );
  });
  return table(["Node", "Role", "Term", "Applied", "Lag", "Partitions", "Clock trusted", "Ready", "API"], rows, { id: "nodes-table" });
}

function yesNo(value) {
  return value ? "yes" : "no";
}

// One series from every node's samples: the nodes sample at multiples of the interval, so
// samples are matched by tick (time / interval, rounded) and combined (added, or the worst).
// Ticks after the oldest of the nodes' latest are left out: a node that has not sampled
// that tick yet would be missing from the sum.
export function combined(reports, intervalS, pick, combine) {
  const tickOf = (sample) => Math.round(Date.parse(sample.at) / (intervalS * 1000));
  const sampled = reports.filter((r) => r.samples.length);
  const lastTick = Math.min(...sampled.map((r) => tickOf(r.samples[r.samples.length - 1])));
  const ticks = new Map();
  for (const report of sampled) {
    for (const sample of report.samples) {
      const tick = tickOf(sample);
      if (tick > lastTick) continue;
      if (!ticks.has(tick)) ticks.set(tick, new Map());
      ticks.get(tick).set(report.node_id, pick(sample));
    }
  }
  return [...ticks.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([tick, values]) => {
      const known = [...values.values()].filter((v) => v !== null && v !== undefined);
      return [tick * intervalS * 1000, known.length ? combine(known) : null];
    });
}

// The target kinds in the order they take the chart's colours, so a kind is always drawn in
// the same one whichever others have delivered; a kind not listed follows, by name.
const KINDS = ["queue", "http", "redis_stream", "rabbitmq", "nats"];

export function kindStyles(kinds) {
  const others = kinds.filter((k) => !KINDS.includes(k)).sort();
  const order = [...KINDS, ...others];
  return [...kinds].sort((a, b) => order.indexOf(a) - order.indexOf(b)).map((kind) => ({ kind, style: order.indexOf(kind) }));
}

const sum = (values) => values.reduce((a, b) => a + b, 0);
const worst = (values) => Math.max(...values);

function chartsOf(reports, cluster, intervalS) {
  const all = reports.flatMap((r) => r.samples);
  const latestMs = all.length ? Math.max(...all.map((s) => Date.parse(s.at))) : Date.now();
  const toMs = Math.max(latestMs, Math.round(latestMs / (intervalS * 1000)) * intervalS * 1000);
  const fromMs = toMs - WINDOW_MS;
  const series = (pick, combine) => combined(reports, intervalS, pick, combine);
  const kinds = [...new Set(all.flatMap((s) => Object.keys(s.deliveries_per_s ?? {})))];
  if (!kinds.length) kinds.push("queue", "http");
  const leader = reports.find((r) => r.node_id === cluster.leader) ?? reports[0];
  const panels = [
    ["Claims / s", "claims", [{ name: "claims/s, all nodes", points: series((s) => s.claims_per_s, sum) }], ""],
    ["Runs delivered / s by target kind", "deliveries", kindStyles(kinds).map(({ kind, style }) => ({ name: kind, style, points: series((s) => s.deliveries_per_s?.[kind] ?? 0, sum) })), ""],
    [
      "Claim lag (worst node)",
      "lag",
      [
        { name: "p50", points: series((s) => s.claim_lag_p50_s, worst) },
        { name: "p99", points: series((s) => s.claim_lag_p99_s, worst) },
      ],
      " s",
    ],
    ["Due backlog", "backlog", [{ name: "runs due, not claimed", points: leader ? leader.samples.map((s) => [Date.parse(s.at), s.backlog]) : [] }], ""],
  ];
  return panels.map(([title, id, lines, unit]) =>
    h(
      "figure",
      { class: "panel", "data-chart": id },
      h("figcaption", {}, title, " ", h("span", { class: "latest" }, latest(lines))),
      lineChart({ title, series: lines, fromMs, toMs, unit }),
      legend(lines),
    ),
  );
}

function latest(series) {
  return series.map((s) => {
    const last = s.points[s.points.length - 1];
    return last && last[1] !== null ? `${s.name} ${+last[1].toFixed(3)}` : "";
  }).filter(Boolean).join(" · ");
}
