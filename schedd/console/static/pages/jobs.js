// The jobs list: one page at a time through the API's cursors (nothing loads every job), with
// the API's filters (status, target type, queue, host, name, next-run range). The filters and
// the cursor ride in the hash, so Back returns a page.

import { get, query } from "../api.js";
import { h, link, notice, table, when } from "../dom.js";
import { scheduleText, targetText } from "../format.js";

const PAGE = 50;
const STATUSES = ["", "active", "paused", "cancelled", "completed"];
const TARGETS = ["", "queue", "http", "redis_stream", "rabbitmq", "nats"];
// The filters the API's GET /v1/jobs takes, as they ride in the hash.
const FILTERS = ["status", "target_type", "queue", "host", "name", "next_run_after", "next_run_before"];

export async function render(main, params) {
  const filters = Object.fromEntries(FILTERS.map((key) => [key, params[key] ?? ""]));
  main.append(h("h1", {}, "Jobs"), filterForm(filters));
  let page;
  try {
    page = await get(`/v1/jobs${query({ ...filters, cursor: params.cursor, limit: PAGE })}`);
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
  const filtered = FILTERS.some((key) => key !== "status" && filters[key]);
  let empty = params.cursor ? "No more jobs." : "No jobs.";
  if (page.next_cursor) empty = "No match in this stretch of jobs: Next page searches on.";
  else if (filtered) empty = params.cursor ? "No more matches." : "No job matches.";
  main.append(
    rows.length
      ? table(["Name", "Status", "Schedule", "Target", "Next run", "Job id"], rows, { id: "jobs" })
      : notice(empty, "info"),
    pager(filters, params.cursor, page.next_cursor),
  );
  if (filtered && page.next_cursor && rows.length < PAGE) {
    main.append(h("p", { class: "hint" }, "A filtered page holds the matches among the next jobs the server read; it may hold fewer than a page."));
  }
}

function filterForm(filters) {
  const choice = (key, label, options, empty) =>
    h(
      "select",
      { name: key, "aria-label": label, id: `filter-${key}` },
      options.map((value) => h("option", { value, selected: value === filters[key] }, value || empty)),
    );
  const text = (key, label, attrs = {}) => h("input", { name: key, "aria-label": label, id: `filter-${key}`, value: filters[key], ...attrs });
  const instant = (key, label) => text(key, label, { type: "datetime-local", value: localInput(filters[key]) });
  const form = h(
    "form",
    { class: "filters", id: "job-filters" },
    h("label", {}, "Status ", choice("status", "Status", STATUSES, "any status")),
    h("label", {}, "Target ", choice("target_type", "Target type", TARGETS, "any target")),
    h("label", {}, "Queue ", text("queue", "Queue name", { size: 12, maxlength: 128 })),
    h("label", {}, "Host ", text("host", "HTTP host", { size: 16, maxlength: 253 })),
    h("label", {}, "Name ", text("name", "Name contains", { size: 14, maxlength: 200, type: "search" })),
    h("label", {}, "Next run from ", instant("next_run_after", "Next run after")),
    h("label", {}, "to ", instant("next_run_before", "Next run before")),
    h("button", { type: "submit" }, "Filter"),
    h("a", { href: "#/jobs" }, "Clear"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const wanted = {};
    for (const key of FILTERS) {
      const value = form.elements[key].value.trim();
      wanted[key] = key.startsWith("next_run_") ? isoOf(value) : value;
    }
    location.hash = `#/jobs${query(wanted)}`;
  });
  return form;
}

// <input type=datetime-local> speaks local wall time without a zone; the API speaks RFC 3339.
function isoOf(local) {
  const date = local ? new Date(local) : null;
  return date && !Number.isNaN(date.getTime()) ? date.toISOString() : "";
}

function localInput(iso) {
  const date = iso ? new Date(iso) : null;
  if (!date || Number.isNaN(date.getTime())) return "";
  return new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

function pager(filters, cursor, next) {
  return h(
    "nav",
    { class: "pager" },
    cursor ? link(`#/jobs${query(filters)}`, "First page") : null,
    cursor ? h("button", { type: "button", class: "link", onclick: () => history.back() }, "Previous") : null,
    next ? link(`#/jobs${query({ ...filters, cursor: next })}`, "Next page", { "data-page": "next" }) : null,
  );
}
