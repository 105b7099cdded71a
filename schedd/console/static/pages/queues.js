// The tenant's built-in queues (GET /v1/queues), refreshed every 5 seconds: depths, the oldest
// message's age and the consumers every node saw receiving in the last minutes.

import { get } from "../api.js";
import { clear, every, h, notice, table, when } from "../dom.js";
import { age } from "../format.js";

const REFRESH_MS = 5000;

export async function render(main) {
  const section = h("section", { id: "queue-list" });
  main.append(h("h1", {}, "Queues"), section);
  return every(REFRESH_MS, () => show(section));
}

async function show(section) {
  let answer;
  try {
    answer = await get("/v1/queues");
  } catch (error) {
    clear(section).append(notice(`${error.message} (${when(new Date().toISOString())}; trying again)`));
    return;
  }
  const parts = [h("p", { class: "hint" }, `read ${when(new Date().toISOString())}, every 5 s`)];
  if (answer.partial) parts.push(notice("A node did not answer: the consumers it saw are missing.", "info"));
  if (!answer.queues.length) parts.push(notice("No queues hold messages.", "info"));
  else parts.push(table(["Queue", "Ready", "In flight", "Delayed", "Dead", "Oldest message", "Consumers seen (5 min)"], answer.queues.map(row), { id: "queues" }));
  clear(section).append(...parts);
}

function row(q) {
  return h(
    "tr",
    { "data-queue": q.name },
    h("td", { class: "mono" }, q.name),
    h("td", {}, q.ready),
    h("td", {}, q.in_flight),
    h("td", {}, q.delayed ?? "—"),
    h("td", {}, q.dead),
    h("td", { class: "oldest" }, age(q.oldest_age_s)),
    h("td", { class: "consumers" }, consumers(q.consumers ?? [])),
  );
}

function consumers(seen) {
  if (!seen.length) return "none";
  return h(
    "ul",
    { class: "consumers" },
    seen.map((c) => h("li", { title: `last seen ${when(c.last_seen)} on ${c.node}` }, h("span", { class: "mono" }, c.consumer), ` · ${when(c.last_seen)} · ${c.node}`)),
  );
}
