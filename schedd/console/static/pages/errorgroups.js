// Dead letters grouped by error (GET /v1/deadletters?group_by=error): the newest 10,000 of the
// tenant, alike errors together (numbers, ids and addresses masked), largest group first. A
// group's dead letters are listed (?fingerprint=) and redriven together: their ids are collected
// first, the count confirmed, then sent 500 at a time through POST /v1/deadletters:redrive.

import { get, post, query } from "../api.js";
import { clear, confirmAction, h, link, notice, table, when } from "../dom.js";

const GROUPS = 100;
const BATCH = 500; // ids per POST /v1/deadletters:redrive (the API's limit)
const MAX_IDS = 10_000; // a group's ids collected for one redrive (press again for more)

// "All" and "By error": the two views of the dead letters.
export function views(current) {
  return h(
    "nav",
    { class: "views", id: "deadletter-views" },
    current === "all" ? h("strong", {}, "All") : link("#/deadletters", "All", { "data-view": "all" }),
    current === "error" ? h("strong", {}, "By error") : link("#/deadletters?by=error", "By error", { "data-view": "by-error" }),
  );
}

export async function render(main, params) {
  main.append(h("h1", {}, "Dead letters"), views("error"));
  const status = h("div", { class: "action-status", role: "status", id: "group-status" });
  let answer;
  try {
    answer = await get(`/v1/deadletters${query({ group_by: "error", limit: GROUPS })}`);
  } catch (error) {
    main.append(notice(error.message));
    return;
  }
  if (!answer.groups.length) {
    main.append(notice("No dead letters.", "info"));
    return;
  }
  const refresh = () => render(clear(main), params);
  const rows = answer.groups.map((group) =>
    h(
      "tr",
      { "data-group": group.fingerprint },
      h("td", { class: "count" }, group.count),
      h("td", { class: "error example", title: "The newest one's error" }, group.example ?? "(no error text)"),
      h("td", {}, when(group.first_at)),
      h("td", {}, when(group.last_at)),
      h("td", {}, link(`#/deadletters${query({ fingerprint: group.fingerprint })}`, "Show", { class: "mono", title: group.fingerprint })),
      h("td", {}, redriveButton(group, status, refresh)),
    ),
  );
  main.append(h("p", { class: "hint" }, "Alike errors together: numbers, ids, URLs and addresses are masked (an HTTP status is kept). Largest group first."));
  if (answer.partial) main.append(notice("Only the newest 10,000 dead letters are grouped here.", "info"));
  main.append(status, table(["Count", "Error (newest)", "First seen", "Last seen", "Dead letters", ""], rows, { id: "groups" }));
}

function redriveButton(group, status, refresh) {
  const button = h("button", { type: "button", "data-action": "redrive-group" }, "Redrive group");
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await redriveGroup(group, status);
      setTimeout(refresh, 800);
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

async function redriveGroup(group, status) {
  status.replaceChildren(notice("Finding this group's dead letters…", "info"));
  let ids;
  try {
    ids = await groupIds(group.fingerprint, status);
  } catch (error) {
    status.replaceChildren(notice(error.message));
    return;
  }
  if (!ids.length) return status.replaceChildren(notice("This group has no dead letters left.", "info"));
  status.replaceChildren();
  const more = ids.length === MAX_IDS ? ` (the first ${MAX_IDS.toLocaleString("en")}: redrive again for the rest)` : "";
  const question = `Redrive ${ids.length} dead letter(s) with this error? Each gets one new delivery attempt, sent ${BATCH} at a time${more}.`;
  if (!(await confirmAction(question, group.example ?? ""))) return;
  status.replaceChildren(await redriveAll(ids, status));
}

// The group's ids, following the cursor of its bounded stretches (at most MAX_IDS).
async function groupIds(fingerprint, status) {
  const ids = [];
  let cursor;
  do {
    const page = await get(`/v1/deadletters${query({ fingerprint, cursor, limit: 1000 })}`);
    ids.push(...page.deadletters.map((d) => d.id));
    cursor = page.next_cursor;
    status.replaceChildren(notice(`Finding this group's dead letters… ${ids.length} so far`, "info"));
  } while (cursor && ids.length < MAX_IDS);
  return ids.slice(0, MAX_IDS);
}

// Send the ids BATCH at a time; a batch refused as a whole stops the rest.
async function redriveAll(ids, status) {
  let done = 0;
  const failed = [];
  for (let start = 0; start < ids.length; start += BATCH) {
    const batch = ids.slice(start, start + BATCH);
    try {
      const { results } = await post("/v1/deadletters:redrive", { ids: batch });
      for (const result of results) {
        if (result.error) failed.push(`${result.id}: ${result.error.message}`);
        else done += 1;
      }
    } catch (error) {
      const unsent = ids.length - start;
      return notice(`Redriven: ${done}. Stopped: ${error.message} (${unsent} not sent).`);
    }
    status.replaceChildren(notice(`Redriving… ${done} of ${ids.length}`, "info"));
  }
  if (failed.length) return notice(`Redriven: ${done}. Not redriven: ${failed.length} (${failed.slice(0, 3).join("; ")}${failed.length > 3 ? "; …" : ""})`);
  return notice(`Redriven: ${done}.`, "ok");
}
