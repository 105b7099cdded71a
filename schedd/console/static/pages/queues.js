// The tenant's built-in queues and their depths (GET /v1/queues).

import { get } from "../api.js";
import { h, notice, table } from "../dom.js";

export async function render(main) {
  main.append(h("h1", {}, "Queues"));
  try {
    const { queues } = await get("/v1/queues");
    if (!queues.length) return main.append(notice("No queues hold messages.", "info"));
    const rows = queues.map((q) =>
      h("tr", { "data-queue": q.name }, h("td", { class: "mono" }, q.name), h("td", {}, q.ready), h("td", {}, q.in_flight), h("td", {}, q.delayed ?? "—"), h("td", {}, q.dead)),
    );
    main.append(table(["Queue", "Ready", "In flight", "Delayed", "Dead"], rows, { id: "queues" }));
  } catch (error) {
    main.append(notice(error.message));
  }
  return undefined;
}
