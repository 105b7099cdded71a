// The jobs list: one page at a time through the API's cursors (nothing loads every job), with
// the filter the API has (status). The cursor rides in the hash, so Back returns a page.

import { get, query } from "../api.js";
import { h, link, notice, table, when } from "../dom.js";
import { scheduleText, targetText } from "../format.js";

const PAGE = 50;
const STATUSES = ["", "active", "paused", "cancelled", "completed"];

export async function render(main, params) {
  const status = STATUSES.includes(params.status ?? "") ? params.status ?? "" : "";
  const picker = h(
    "select",
    { id: "status-filter", "aria-label": "Status" },
    STATUSES.map((s) => h("option", { value: s, selected: s === status }, s || "any status")),
  );
  picker.addEventListener("change", () => {
    location.hash = `#/jobs${query({ status: picker.value })}`;
  });
  main.append(
    h("h1", {}, "Jobs"),
    h("div", { class: "filters" }, h("label", {}, "Status ", picker)),
  );
  let page;
  try {
    page = await get(`/v1/jobs${query({ status, cursor: params.cursor, limit: PAGE })}`);
  } catch (error) {
    main.append(notice(error.message));
    return;
  }
  const rows = page.jobs.map((job) =>
    h(
      "tr",
      { "data-job": job.job_id },
      h("td", {}, link(`#/jobs/${encodeURIComponent(job.job_id)}`, job.name || job.job_id, { class: "job-name" })),
      h("td", { class: `status ${job.status}` }, job.status),
      h("td", {}, scheduleText(job.schedule)),
      h("td", {}, targetText(job.target)),
      h("td", {}, when(job.next_run_at)),
      h("td", { class: "mono" }, job.job_id),
    ),
  );
  main.append(
    rows.length
      ? table(["Name", "Status", "Schedule", "Target", "Next run", "Job id"], rows, { id: "jobs" })
      : notice(params.cursor ? "No more jobs." : "No jobs.", "info"),
    pager(status, params.cursor, page.next_cursor),
  );
}

function pager(status, cursor, next) {
  return h(
    "nav",
    { class: "pager" },
    cursor ? link(`#/jobs${query({ status })}`, "First page") : null,
    cursor ? h("button", { type: "button", class: "link", onclick: () => history.back() }, "Previous") : null,
    next ? link(`#/jobs${query({ status, cursor: next })}`, "Next page", { "data-page": "next" }) : null,
  );
}
