// The tenant's built-in queues (GET /v1/queues): depths, the oldest message's age and the
// consumers every node saw receiving in the last minutes.

import { get } from "../api.js";
import { h, notice, table, when } from "../dom.js";
import { age } from "../format.js";

export async function render(main) {
  main.append(h("h1", {}, "Queues"));
  try {
    const answer = await get("/v1/queues");
    if (answer.partial) main.append(notice("A node did not answer: the consumers it saw are missing.", "info"));
    if (!answer.queues.length) return main.append(notice("No queues hold messages.", "info"));
    const rows = answer.queues.map((q) =>
      h(
        "tr",
        { "data-queue": q.name },
        h("td", { class: "mono" }, q.name),
        h("td", {}, q.ready),
        h("td", {}, q.in_flight),
        h("td", {}, q.delayed ?? "—"),
        h("td", {}, q.dead),
        h("td", { class: "oldest" }, age(q.oldest_age_s)),
        h("td", { class: "consumers" }, consumers(q.consumers ?? [])),
      ),
    );
    main.append(table(["Queue", "Ready", "In flight", "Delayed", "Dead", "Oldest message", "Consumers seen (5 min)"], rows, { id: "queues" }));
  } catch (error) {
    main.append(notice(error.message));
  }
  return undefined;
}

function consumers(seen) {
  if (!seen.length) return "none";
  return h(
    "ul",
    { class: "consumers" },
    seen.map((c) => h("li", { title: `last seen ${when(c.last_seen)} on ${c.node}` }, h("span", { class: "mono" }, c.consumer), ` · ${when(c.last_seen)} · ${c.node}`)),
  );
}
