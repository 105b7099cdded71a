// Dead letters: a page at a time through the API's cursor (or one error group's: ?fingerprint=);
// redrive one or a selection, delete one; a dead letter's page shows its run's attempts and the
// job's payload. ?by=error shows them grouped by error (errorgroups.js).

import { ApiError, call, enc, get, post, query } from "../api.js";
import { clear, confirmAction, h, link, notice, pretty, table, when } from "../dom.js";
import { targetText } from "../format.js";
import * as errorgroups from "./errorgroups.js";

const PAGE = 50;
const SEARCH_MS = 3000; // how long one group's page keeps asking before it shows what it found

export async function render(main, params) {
  if (params.id) return detail(main, params.id);
  if (params.by === "error") return errorgroups.render(main, params);
  return list(main, params);
}

// A page of dead letters; of one group, the server answers the matches of one bounded stretch
// per request: ask on until the page is full, they end, or SEARCH_MS passed.
async function fetchPage(params) {
  const started = performance.now();
  const items = [];
  let next = params.cursor;
  do {
    const page = await get(`/v1/deadletters${query({ cursor: next, limit: PAGE - items.length, fingerprint: params.fingerprint })}`);
    items.push(...page.deadletters);
    next = page.next_cursor;
  } while (params.fingerprint && next && items.length < PAGE && performance.now() - started < SEARCH_MS);
  return { deadletters: items, next_cursor: next };
}

async function list(main, params) {
  main.append(h("h1", {}, "Dead letters"), errorgroups.views(params.fingerprint ? null : "all"));
  if (params.fingerprint) main.append(h("p", { class: "hint", id: "group-filter" }, `Only the dead letters with error fingerprint ${params.fingerprint}. `, link("#/deadletters?by=error", "Back to the groups")));
  const status = h("div", { class: "action-status", role: "status" });
  let page;
  try {
    page = await fetchPage(params);
  } catch (error) {
    main.append(notice(error.message));
    return;
  }
  if (!page.deadletters.length) {
    main.append(notice(params.cursor ? "No more dead letters." : "No dead letters.", "info"));
    return;
  }
  const boxes = [];
  const rows = page.deadletters.map((dl) => {
    const box = h("input", { type: "checkbox", value: dl.id, "aria-label": `select ${dl.id}` });
    boxes.push(box);
    return h(
      "tr",
      { "data-deadletter": dl.id },
      h("td", {}, box),
      h("td", {}, link(`#/deadletters/${enc(dl.id)}`, dl.job_id, { class: "mono" })),
      h("td", { class: "mono" }, when(dl.scheduled_at)),
      h("td", {}, dl.attempts),
      h("td", { class: "error" }, dl.error ?? "—"),
      h("td", {}, targetText(dl.target)),
      h("td", {}, when(dl.created_at)),
    );
  });
  const redrive = h("button", { type: "button", "data-action": "redrive-selected" }, "Redrive selected");
  redrive.addEventListener("click", async () => {
    const ids = boxes.filter((b) => b.checked).map((b) => b.value);
    if (!ids.length) return status.replaceChildren(notice("Select dead letters first.", "info"));
    if (!(await confirmAction(`Redrive ${ids.length} dead letter(s)?`, "Each gets one new delivery attempt."))) return;
    let done = 0;
    let failed = [];
    try {
      const { results } = await post("/v1/deadletters:redrive", { ids });
      failed = results.filter((r) => r.error).map((r) => `${r.id}: ${r.error.message}`);
      done = results.length - failed.length;
    } catch (error) {
      failed = [error.message];
    }
    status.replaceChildren(failed.length ? notice(`Redriven: ${done}. Not redriven: ${failed.join("; ")}`) : notice(`Redriven: ${done}.`, "ok"));
    setTimeout(() => render(clear(main), params), 500);
  });
  main.append(
    h("div", { class: "actions" }, redrive),
    status,
    table(["", "Job", "Scheduled", "Attempts", "Last error", "Target", "Dead since"], rows, { id: "deadletters" }),
    h(
      "nav",
      { class: "pager" },
      params.cursor ? link(`#/deadletters${query({ fingerprint: params.fingerprint })}`, "First page") : null,
      page.next_cursor ? link(`#/deadletters${query({ fingerprint: params.fingerprint, cursor: page.next_cursor })}`, "Next page") : null,
    ),
  );
}

async function detail(main, id) {
  const path = `/v1/deadletters/${enc(id)}`;
  main.append(h("p", {}, link("#/deadletters", "← Dead letters")), h("h1", {}, "Dead letter"));
  let dl;
  try {
    dl = await get(path);
  } catch (error) {
    main.append(notice(error instanceof ApiError && error.status === 404 ? "No such dead letter (redriven or deleted?)." : error.message));
    return;
  }
  const status = h("div", { class: "action-status", role: "status" });
  const act = (label, name, question, run) =>
    h(
      "button",
      {
        type: "button",
        "data-action": name,
        onclick: async () => {
          if (!(await confirmAction(question, dl.id))) return;
          try {
            await run();
            status.replaceChildren(notice(`${label}: done.`, "ok"));
          } catch (error) {
            status.replaceChildren(notice(`${label}: ${error.message}`));
          }
        },
      },
      label,
    );
  main.append(
    h(
      "dl",
      { class: "summary" },
      [
        ["Job", link(`#/jobs/${enc(dl.job_id)}`, dl.job_id, { class: "mono" })],
        ["Scheduled", when(dl.scheduled_at)],
        ["Attempts", dl.attempts],
        ["Last error", dl.error ?? "—"],
        ["Target", targetText(dl.target)],
        ["Dead since", when(dl.created_at)],
      ].map(([key, value]) => [h("dt", {}, key), h("dd", {}, value)]),
    ),
    h(
      "div",
      { class: "actions" },
      act("Redrive", "redrive", "Redrive this dead letter? Its run gets one new attempt.", () => post(`${path}/redrive`)),
      act("Delete", "delete", "Delete this dead letter? Its run stays dead.", () => call("DELETE", path)),
    ),
    status,
    await attemptsOf(dl),
  );
}

// The failed attempts are the run's (GET /v1/jobs/{id}/runs, newest first: the dead run is
// usually on the first pages); the payload is the job's.
async function attemptsOf(dl) {
  const section = h("section", { id: "dead-run" }, h("h2", {}, "Failed attempts"));
  try {
    const run = await findRun(dl.job_id, dl.scheduled_at);
    if (!run) section.append(notice("The run is no longer kept (retention).", "info"));
    else section.append(h("ol", { class: "attempts" }, (run.attempts ?? []).map((a) => h("li", {}, `${when(a.started_at)} ${a.outcome ?? ""}`, a.error ? h("span", { class: "error" }, ` — ${a.error}`) : null))));
    const job = await get(`/v1/jobs/${enc(dl.job_id)}`);
    section.append(h("h2", {}, "Payload"), pretty(job.payload));
  } catch (error) {
    section.append(notice(error.message));
  }
  return section;
}

async function findRun(jobId, scheduledAt) {
  let cursor;
  for (let pages = 0; pages < 5; pages += 1) {
    const page = await get(`/v1/jobs/${enc(jobId)}/runs${query({ cursor, limit: 100 })}`);
    const run = page.runs.find((r) => r.scheduled_at === scheduledAt);
    if (run || !page.next_cursor) return run;
    cursor = page.next_cursor;
  }
  return undefined;
}
