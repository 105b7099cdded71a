// The tenant's built-in queues (GET /v1/queues), refreshed every 5 seconds: depths, the oldest
// message's age, the consumers every node saw receiving in the last minutes, and whether the
// queue is paused (its receives hand out nothing), with Pause and Resume, confirmed first.

import { enc, get, post } from "../api.js";
import { clear, confirmAction, every, h, notice, table, when } from "../dom.js";
import { age } from "../format.js";

const REFRESH_MS = 5000;

export async function render(main) {
  const section = h("section", { id: "queue-list" });
  main.append(h("h1", {}, "Queues"), section);
  const status = h("div", { class: "action-status", role: "status" });
  main.append(status);
  return every(REFRESH_MS, () => show(section, status));
}

async function show(section, status) {
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
  else {
    const headers = ["Queue", "State", "Ready", "In flight", "Delayed", "Dead", "Oldest message", "Consumers seen (5 min)"];
    parts.push(table(headers, answer.queues.map((q) => row(q, section, status)), { id: "queues" }));
  }
  clear(section).append(...parts);
}

function row(q, section, status) {
  return h(
    "tr",
    { "data-queue": q.name },
    h("td", { class: "mono" }, q.name),
    h("td", { class: "state" }, state(q, section, status)),
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

// Paused (why) with Resume, or Pause with an optional reason; each confirmed, then the list is
// read again.
function state(q, section, status) {
  const path = `/v1/queues/${enc(q.name)}`;
  const act = (label, name, question, run, extra = null) =>
    h(
      "button",
      {
        type: "button",
        "data-action": name,
        onclick: async () => {
          if (!(await confirmAction(question, q.name, extra))) return;
          try {
            await run();
            status.replaceChildren(notice(`${label} ${q.name}: done.`, "ok"));
          } catch (error) {
            status.replaceChildren(notice(`${label} ${q.name}: ${error.message}`));
          }
          await show(section, status);
        },
      },
      label,
    );
  if (q.paused) {
    const why = q.paused_reason ? `paused: ${q.paused_reason}` : "paused";
    return [h("span", { class: "status paused" }, why), " ", act("Resume", "resume", "Resume this queue? Its messages are handed out at once.", () => post(`${path}/resume`))];
  }
  const reason = h("input", { type: "text", id: "pause-reason", maxlength: 500, placeholder: "reason (optional)", "aria-label": "Why" });
  const body = () => (reason.value.trim() ? { reason: reason.value.trim() } : undefined);
  const question = "Pause this queue? Receives hand out nothing until it is resumed; runs keep arriving.";
  return [h("span", { class: "status active" }, "active"), " ", act("Pause", "pause", question, () => post(`${path}/pause`, body()), reason)];
}
