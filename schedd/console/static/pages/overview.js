// The cluster overview (admin): the nodes from /v1/cluster with this node's own figures from
// /v1/stats, and charts of this node's last 15 minutes, refreshed every 5 seconds.

import { get } from "../api.js";
import { lineChart, legend } from "../chart.js";
import { clear, h, notice, table } from "../dom.js";

const REFRESH_MS = 5000;
const WINDOW_MS = 15 * 60 * 1000;

export async function render(main) {
  const nodes = h("section", { id: "nodes" });
  const charts = h("section", { id: "charts", class: "charts" });
  main.append(h("h1", {}, "Overview"), nodes, charts);
  let timer = null;
  let stopped = false;
  const tick = async () => {
    await refresh(nodes, charts);
    if (!stopped) timer = setTimeout(tick, REFRESH_MS);
  };
  await tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

async function refresh(nodes, charts) {
  let cluster;
  let stats;
  try {
    [cluster, stats] = await Promise.all([get("/v1/cluster", { tenant: null }), get("/v1/stats", { tenant: null })]);
  } catch (error) {
    clear(nodes).append(notice(`Cannot read the cluster: ${error.message}`));
    return;
  }
  clear(nodes).append(
    h("h2", {}, "Nodes"),
    nodesTable(cluster, stats),
    h("p", { class: "hint" }, `The charts show node ${stats.node_id} (the node serving this page): its claims and deliveries; the backlog is the whole cluster's. Open another node's /ui/ for its share.`),
  );
  clear(charts).append(...chartsOf(stats));
}

function nodesTable(cluster, stats) {
  const leader = cluster.nodes.find((n) => n.role === "leader");
  const rows = cluster.nodes.map((node) => {
    const self = node.node_id === stats.node_id ? stats.node : null;
    const applied = self ? self.applied_index : node.applied_index;
    const lag = self ? self.lag : leader && applied !== null && applied !== undefined ? Math.max(leader.applied_index - applied, 0) : null;
    return h(
      "tr",
      { "data-node": node.node_id },
      h("td", {}, node.node_id, self ? " (this node)" : ""),
      h("td", {}, self ? self.role : node.role),
      h("td", {}, self ? self.term : "—"),
      h("td", {}, applied ?? "—"),
      h("td", {}, lag ?? "—"),
      h("td", {}, node.partitions.length),
      h("td", {}, self ? yesNo(self.clock_trusted) : "—"),
      h("td", {}, self ? yesNo(self.ready) : node.healthy ? "connected" : "unreachable"),
      h("td", { class: "mono" }, node.api ?? "—"),
    );
  });
  return table(["Node", "Role", "Term", "Applied", "Lag", "Partitions", "Clock trusted", "Ready", "API"], rows, { id: "nodes-table" });
}

function yesNo(value) {
  return value ? "yes" : "no";
}

function chartsOf(stats) {
  const samples = stats.samples;
  const toMs = samples.length ? Date.parse(samples[samples.length - 1].at) : Date.now();
  const fromMs = toMs - WINDOW_MS;
  const points = (pick) => samples.map((s) => [Date.parse(s.at), pick(s)]);
  const kinds = Object.keys(samples[samples.length - 1]?.deliveries_per_s ?? { queue: 0, http: 0 });
  const panels = [
    ["Claims / s", "claims", [{ name: "claims/s", points: points((s) => s.claims_per_s) }], ""],
    ["Runs delivered / s by target kind", "deliveries", kinds.map((k) => ({ name: k, points: points((s) => s.deliveries_per_s[k] ?? 0) })), ""],
    [
      "Claim lag",
      "lag",
      [
        { name: "p50", points: points((s) => s.claim_lag_p50_s) },
        { name: "p99", points: points((s) => s.claim_lag_p99_s) },
      ],
      " s",
    ],
    ["Due backlog", "backlog", [{ name: "runs due, not claimed", points: points((s) => s.backlog) }], ""],
  ];
  return panels.map(([title, id, series, unit]) =>
    h(
      "figure",
      { class: "panel", "data-chart": id },
      h("figcaption", {}, title, " ", h("span", { class: "latest" }, latest(series))),
      lineChart({ title, series, fromMs, toMs, unit }),
      legend(series),
    ),
  );
}

function latest(series) {
  return series.map((s) => {
    const last = s.points[s.points.length - 1];
    return last && last[1] !== null ? `${s.name} ${+last[1].toFixed(3)}` : "";
  }).filter(Boolean).join(" · ");
}
