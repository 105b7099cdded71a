// The jobs list: one page at a time through the API's cursors (nothing loads every job), with
// the API's filters (status, label, target type, queue, host, name, next-run range, failing), and each
// job's last run and result (what its newest runs say). The filters and the cursor ride in the
// hash, so Back returns a page.

import { get, query } from "../api.js";
import { h, link, notice, table, when } from "../dom.js";
import { scheduleText, targetText } from "../format.js";
import { TARGET_TYPES } from "../kinds.js";

const PAGE = 50;
const SEARCH_MS = 3000; // how long a filtered page keeps asking before it shows what it found
const STATUSES = ["", "active", "paused", "cancelled", "completed"];
const TARGETS = ["", ...TARGET_TYPES]; // kinds.js: made by the node from its target kinds
// The filters the API's GET /v1/jobs takes, as they ride in the hash.
const FILTERS = ["status", "label", "target_type", "queue", "host", "name", "next_run_after", "next_run_before", "failing"];
const RECENT_RUNS = 50; // the API reads a job's results from its newest 50 runs

export async function render(main, params) {
  const filters = Object.fromEntries(FILTERS.map((key) => [key, params[key] ?? ""]));
  const filtered = FILTERS.some((key) => key !== "status" && key !== "label" && filters[key]);
  const progress = h("p", { class: "hint", id: "search-progress", role: "status" });
  main.append(h("h1", {}, "Jobs"), filterForm(filters), progress);
  let found;
  try {
    found = await search(filters, filtered, params.cursor, progress);
  } catch (error) {
    main.append(notice(error.message));
    return;
  }
  const rows = found.jobs.map((job) =>
    h(
      "tr",
      { "data-job": job.job_id },
      h("td", {}, link(`#/jobs/${encodeURIComponent(job.job_id)}`, job.name || job.job_id, { class: "job-name" })),
      h("td", { class: `status ${job.status}` }, job.status),
      h("td", {}, scheduleText(job.schedule)),
      h("td", {}, targetText(job.target)),
      h("td", {}, when(job.next_run_at)),
      h("td", { class: "last-run" }, when(lastRun(job))),
      lastResult(job),
      h("td", { class: "mono" }, job.job_id),
    ),
  );
  let empty = params.cursor ? "No more jobs." : "No jobs.";
  if (found.next) empty = `No match in the ${found.asked} stretches searched so far: Next page searches on.`;
  else if (filtered) empty = params.cursor ? "No more matches." : "No job matches.";
  progress.textContent = filtered && found.next && rows.length ? `${rows.length} found in ${found.asked} stretches of jobs; Next page searches on.` : "";
  main.append(
    rows.length
      ? table(["Name", "Status", "Schedule", "Target", "Next run", "Last run", "Last result", "Job id"], rows, { id: "jobs" })
      : notice(empty, "info"),
    pager(filters, params.cursor, found.next),
  );
}

// When the job's newest run that succeeded or died ended (null: none among its newest runs).
function lastRun(job) {
  const times = [job.last_success_at, job.last_failure_at].filter(Boolean);
  return times.length ? times.reduce((a, b) => (new Date(a) >= new Date(b) ? a : b)) : null;
}

// "succeeded", or "failed" with the failures in a row since the last success.
function lastResult(job) {
  const failed = job.consecutive_failures ?? 0;
  if (failed > 0) {
    const count = failed >= RECENT_RUNS ? `${RECENT_RUNS}+` : String(failed);
    const title = `${count} run(s) died since the last success${job.last_success_at ? ` (${when(job.last_success_at)})` : ""}`;
    return h("td", { class: "status dead last-result", title }, `failed · ${count} in a row`);
  }
  if (job.last_success_at) return h("td", { class: "status succeeded last-result" }, "succeeded");
  return h("td", { class: "last-result" }, "—");
}

// A page of jobs. Filtered, the server answers the matches of one bounded stretch of jobs per
// request: ask stretch after stretch until a page is full, the jobs end, or SEARCH_MS passed.
async function search(filters, filtered, cursor, progress) {
  const started = performance.now();
  const jobs = [];
  let next = cursor;
  let asked = 0;
  do {
    const page = await get(`/v1/jobs${query({ ...filters, cursor: next, limit: PAGE - jobs.length })}`);
    jobs.push(...page.jobs);
    next = page.next_cursor;
    asked += 1;
    if (filtered && next && jobs.length < PAGE) progress.textContent = `Searching… ${jobs.length} found in ${asked} stretches of jobs`;
  } while (filtered && next && jobs.length < PAGE && performance.now() - started < SEARCH_MS);
  return { jobs, next, asked };
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
    h("label", { title: "NAME=VALUE: the jobs that have this label" }, "Label ", text("label", "Label", { size: 16, maxlength: 264, placeholder: "team=payments" })),
    h("label", {}, "Target ", choice("target_type", "Target type", TARGETS, "any target")),
    h("label", {}, "Queue ", text("queue", "Queue name", { size: 12, maxlength: 128 })),
    h("label", {}, "Host ", text("host", "HTTP host", { size: 16, maxlength: 253 })),
    h("label", {}, "Name ", text("name", "Name contains", { size: 14, maxlength: 200, type: "search" })),
    h("label", {}, "Next run from ", instant("next_run_after", "Next run after")),
    h("label", {}, "to ", instant("next_run_before", "Next run before")),
    h(
      "label",
      { title: "Jobs whose newest finished run died" },
      h("input", { type: "checkbox", name: "failing", id: "filter-failing", value: "true", checked: filters.failing === "true" }),
      " Failing",
    ),
    h("button", { type: "submit" }, "Filter"),
    h("a", { href: "#/jobs" }, "Clear"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const wanted = {};
    for (const key of FILTERS) {
      const field = form.elements[key];
      const value = field.type === "checkbox" ? (field.checked ? "true" : "") : field.value.trim();
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
